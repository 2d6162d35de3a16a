"""The ``linalg`` extension's decompositions: ``cholesky``, ``qr``, ``eigh``,
``eigvalsh``, ``svd`` and ``svdvals`` (conventions: :mod:`agnograd.functions._linalg`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import Spec, is_complex, raw_xp_device, real_dtype
from agnograd.functions._linalg import (
    check_matrix,
    diag_embed,
    mh,
    off_diagonal_inverse,
    raw_zeros,
)
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


class EighResult(NamedTuple):
    """Result of :func:`eigh`: ascending eigenvalues and the eigenvectors as columns."""

    eigenvalues: Variable
    eigenvectors: Variable


class QRResult(NamedTuple):
    """Result of :func:`qr`."""

    Q: Variable  # the standard's field name
    R: Variable


class SVDResult(NamedTuple):
    """Result of :func:`svd`: ``x = U @ (S[..., None] * Vh)``, ``S`` descending."""

    U: Variable  # the standard's field name
    S: Variable
    Vh: Variable


# -- decompositions ----------------------------------------------------------------------


def _tril_half(xp: Any, x: Any) -> Any:
    """The lower triangle of ``x`` with its diagonal halved (a mask, so differentiable)."""
    n = x.shape[-1]
    rxp, device = raw_xp_device(x)
    rows = rxp.expand_dims(rxp.arange(n, device=device), axis=1)
    cols = rxp.expand_dims(rxp.arange(n, device=device), axis=0)
    dtype = real_dtype(rxp, x.dtype)
    mask = rxp.astype(rows > cols, dtype) + rxp.astype(rows == cols, dtype) * 0.5
    return x * mask


class Cholesky(FunctionNode):
    _retain_out = (0,)

    def __init__(self, upper: bool) -> None:
        self.upper = upper

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.cholesky(inputs[0], upper=self.upper),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        return ((inputs[0].shape, inputs[0].dtype),)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (factor,), (t,) = outputs, tangents
        if self.upper:  # U = L^H
            factor = mh(xp, factor)
        # dL = L Phi(L^-1 dA L^-H), of the Hermitian part of dA (as backward's gradient).
        linv = xp.linalg.inv(factor)
        dl = factor @ _tril_half(xp, linv @ ((t + mh(xp, t)) * 0.5) @ mh(xp, linv))
        return (mh(xp, dl) if self.upper else dl,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (factor,) = self.get_retained_outputs()
        (g,) = grad_outputs
        xp = namespace_of(g)
        if self.upper:  # U = L^H
            factor, g = mh(xp, factor), mh(xp, g)
        # dL = L Phi(L^-1 dA L^-H) with Phi = lower triangle, half diagonal; its
        # adjoint on Hermitian dA is L^-H herm(Phi(L^H gL)) L^-1.
        phi = _tril_half(xp, mh(xp, factor) @ g)
        middle = (phi + mh(xp, phi)) * 0.5
        linv = xp.linalg.inv(factor)
        return (mh(xp, linv) @ middle @ linv,)


@ROWS.declare("linalg.cholesky")
def cholesky(x: Any, /, *, upper: bool = False) -> Variable:
    """Cholesky factor of Hermitian positive-definite matrices: lower ``L`` with
    ``x = L @ L^H`` (or upper ``U = L^H`` with ``upper=True``).

    Only the lower triangle of ``x`` is read; the gradient is the Hermitian one
    (PyTorch's).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[4.0, 2.0], [2.0, 5.0]]))
    >>> y = xp.linalg.cholesky(a)
    >>> y
    variable([[2., 0.],
              [1., 2.]])
    >>> xp.sum(y).backward(); a.grad
    array([[0.1875, 0.125 ],
           [0.125 , 0.25  ]])
    """
    check_matrix("linalg.cholesky", x, square=True)
    return Cholesky(bool(upper)).apply((x,))[0]


def _qr_backward(xp: Any, q: Any, r: Any, gq: Any, gr: Any) -> Any:
    """Gradient of ``x = Q R`` with ``x`` square or tall and of full rank.

    With M = gR R^H - Q^H gQ, the gradient is [gQ + Q (M - tril(M - M^H)/half
    diagonal)] R^-H: the term in parentheses keeps M's upper triangle and mirrors it
    to a Hermitian matrix.
    """
    terms = []
    if gr is not None:
        terms.append(gr @ mh(xp, r))
    if gq is not None:
        qhgq = mh(xp, q) @ gq
        terms.append(-qhgq)
    m = terms[0] if len(terms) == 1 else terms[0] + terms[1]
    b = q @ (m - _tril_half(xp, m - mh(xp, m)))
    if gq is not None:
        b = b + gq
    # b R^-H, as the solution of R Z = b^H transposed back.
    return mh(xp, xp.linalg.solve(r, mh(xp, b)))


def _qr_jvp(xp: Any, q: Any, r: Any, t: Any) -> tuple[Any, Any]:
    """Tangents of ``x = Q R`` with ``x`` square or tall and of full rank: with
    ``C = Q^H dA R^-1``, ``dR = triu(C + C^H)/half diagonal R`` and ``dQ = dA R^-1 -
    Q (dR R^-1)``."""
    dar = mh(xp, xp.linalg.solve(mh(xp, r), mh(xp, t)))  # dA R^-1
    c = mh(xp, q) @ dar
    upper = mh(xp, _tril_half(xp, c + mh(xp, c)))  # the upper triangle, as dR R^-1 is
    return dar - q @ upper, upper @ r


class QR(FunctionNode):
    _retain_out = (0, 1)

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.xp.linalg.qr(inputs[0], mode=self.mode))

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        *batch, m, n = x.shape
        k = m if self.mode == "complete" else min(m, n)
        return (((*batch, m, k), x.dtype), ((*batch, k, n), x.dtype))

    def _check(self, m: int, n: int) -> None:
        if self.mode == "complete" and m > n:
            raise NotImplementedError(
                "linalg.qr: no derivative for mode='complete' with more rows than columns: "
                "the extra columns of Q are not determined by x; use mode='reduced'"
            )

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (q, r), (t,) = outputs, tangents
        m, n = q.shape[-2], r.shape[-1]
        self._check(m, n)
        if m >= n:
            return _qr_jvp(xp, q, r, t)
        # Wide x = [X | Y]: X = Q R1 is a square QR and R2 = Q^H Y.
        dq, dr1 = _qr_jvp(xp, q, r[..., :m], t[..., :m])
        dr2 = mh(xp, q) @ (t[..., m:] - dq @ r[..., m:])
        return (dq, xp.concat([dr1, dr2], axis=-1))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        q, r = self.get_retained_outputs()
        gq, gr = grad_outputs
        xp = namespace_of(gq if gq is not None else gr)
        m, n = q.shape[-2], r.shape[-1]
        self._check(m, n)
        if m >= n:
            return (_qr_backward(xp, q, r, gq, gr),)
        # Wide x = [X | Y]: X = Q R1 is a square QR and R2 = Q^H Y.
        r1, r2 = r[..., :m], r[..., m:]
        gr1 = None if gr is None else gr[..., :m]
        gr2 = None if gr is None else gr[..., m:]
        if gr2 is not None:
            y = q @ r2
            extra = y @ mh(xp, gr2)
            gq = extra if gq is None else gq + extra
        gx = _qr_backward(xp, q, r1, gq, gr1)
        gy = q @ gr2 if gr2 is not None else raw_zeros(r2, tuple(r2.shape))
        return (xp.concat([gx, gy], axis=-1),)


@ROWS.declare("linalg.qr")
def qr(x: Any, /, *, mode: str = "reduced") -> QRResult:
    """QR decomposition ``x = Q @ R`` with orthonormal columns ``Q`` and upper ``R``.

    The gradient needs ``x`` of full rank; with ``mode='complete'`` it exists only
    when ``x`` has no more rows than columns.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[3.0, 1.0], [4.0, 2.0]]))
    >>> q, r = xp.linalg.qr(a)
    >>> xp.sum(xp.abs(r[0, 0])).backward(); a.grad
    array([[0.6, 0. ],
           [0.8, 0. ]])
    """
    check_matrix("linalg.qr", x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*QR(mode).apply((x,)))


class Eigh(FunctionNode):
    _retain_out = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.xp.linalg.eigh(inputs[0]))

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        return ((x.shape[:-1], real_dtype(x.xp, x.dtype)), (x.shape, x.dtype))

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        # With B = V^H dA V (dA's Hermitian part, as backward's gradient): dlam =
        # Re(diag(B)), dV = V (F o B).
        (lam, v), (t,) = outputs, tangents
        b = mh(xp, v) @ ((t + mh(xp, t)) * 0.5) @ v
        dlam = xp.linalg.diagonal(b)
        if is_complex(b):
            dlam = xp.real(dlam)
        return (dlam, v @ (eigen_gaps(xp, lam) * b))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        lam, v = self.get_retained_outputs()
        glam, gv = grad_outputs
        xp = namespace_of(glam if glam is not None else gv)
        # gA = V (diag(gL) + M) V^H, with diag(gL) applied as a column scaling.
        left = None
        if gv is not None:
            # dV = V (F o (V^H dA V)), F_ij = 1 / (lam_j - lam_i); on Hermitian dA
            # the adjoint takes the skew-Hermitian part of V^H gV.
            vhgv = mh(xp, v) @ gv
            left = v @ (eigen_gaps(xp, lam) * ((vhgv - mh(xp, vhgv)) * 0.5))
        if glam is not None:
            scaled = v * xp.expand_dims(glam, axis=-2)
            left = scaled if left is None else left + scaled
        return (left @ mh(xp, v),)


def eigen_gaps(xp: Any, lam: Any) -> Any:
    """``F_ij = 1 / (lam_j - lam_i)`` off the diagonal, 0 on it."""
    diff = xp.expand_dims(lam, axis=-2) - xp.expand_dims(lam, axis=-1)
    return off_diagonal_inverse(xp, diff, lam.shape[-1])


@ROWS.declare("linalg.eigh")
def eigh(x: Any, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices.

    Only the lower triangle of ``x`` is read; the gradient is Hermitian and assumes
    distinct eigenvalues (it divides by their differences).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[2.0, 0.0], [0.0, 1.0]]))
    >>> w, v = xp.linalg.eigh(a)
    >>> w
    variable([1., 2.])
    >>> xp.sum(w * np.array([0.0, 1.0])).backward(); a.grad
    array([[1., 0.],
           [0., 0.]])
    """
    check_matrix("linalg.eigh", x, square=True)
    return EighResult(*Eigh().apply((x,)))


@ROWS.declare("linalg.eigvalsh")
def eigvalsh(x: Any, /) -> Variable:
    """Eigenvalues (ascending) of Hermitian matrices.

    Computed through :func:`eigh`, whose eigenvectors the gradient needs.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.linalg.eigvalsh(np.array([[2.0, 1.0], [1.0, 2.0]]))
    variable([1., 3.])
    """
    return eigh(x).eigenvalues


class SVD(FunctionNode):
    _retain_out = (0, 1, 2)

    def __init__(self, full_matrices: bool) -> None:
        self.full_matrices = full_matrices

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.xp.linalg.svd(inputs[0], full_matrices=self.full_matrices))

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        *batch, m, n = x.shape
        k = min(m, n)
        u, vh = (m, n) if self.full_matrices else (k, k)
        return (
            ((*batch, m, u), x.dtype),
            ((*batch, k), real_dtype(x.xp, x.dtype)),
            ((*batch, vh, n), x.dtype),
        )

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (u_out, s, vh_out), (t,) = outputs, tangents
        m, n, k = u_out.shape[-2], vh_out.shape[-1], s.shape[-1]
        u, vh = u_out[..., :k], vh_out[..., :k, :]  # full_matrices: the extra basis is fixed
        v = mh(xp, vh)
        # With dP = U^H dA V: dS = Re(diag(dP)); dU = U (F o (dP S + S dP^H)) (+ the
        # part of dA V S^-1 outside U's span), dVh = -(F o (S dP + dP^H S)) Vh (+ ...),
        # F_ij = 1 / (s_j^2 - s_i^2); complex: the phase of each pair rides on U.
        dp = mh(xp, u) @ t @ v
        ds = xp.linalg.diagonal(dp)
        if is_complex(dp):
            ds = xp.real(ds)
        s_col = xp.expand_dims(s, axis=-1)  # scales rows
        s_row = xp.expand_dims(s, axis=-2)  # scales columns
        f = _svd_gaps(xp, s)
        du = u @ (f * (dp * s_row + s_col * mh(xp, dp)))
        dvh = -((f * (s_col * dp + mh(xp, dp) * s_row)) @ vh)
        if is_complex(dp):
            du = du + u * xp.expand_dims((xp.linalg.diagonal(dp) - ds) / s, axis=-2)
        if m > k:
            tv = t @ v
            du = du + (tv - u @ (mh(xp, u) @ tv)) / s_row
        if n > k:
            uht = mh(xp, u) @ t
            dvh = dvh + (uht - (uht @ v) @ vh) / s_col
        if self.full_matrices:
            if u_out.shape[-1] > k:
                du = xp.concat([du, xp.zeros_like(u_out[..., k:])], axis=-1)
            if vh_out.shape[-2] > k:
                dvh = xp.concat([dvh, xp.zeros_like(vh_out[..., k:, :])], axis=-2)
        return (du, ds, dvh)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        u, s, vh = self.get_retained_outputs()
        gu, gs, gvh = grad_outputs
        xp = namespace_of(next(g for g in grad_outputs if g is not None))
        m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
        if self.full_matrices:
            # The columns beyond min(m, n) are an arbitrary basis: ignored (PyTorch).
            u, vh = u[..., :k], vh[..., :k, :]
            gu = None if gu is None else gu[..., :k]
            gvh = None if gvh is None else gvh[..., :k, :]
        s_col = xp.expand_dims(s, axis=-1)  # scales rows
        s_row = xp.expand_dims(s, axis=-2)  # scales columns
        # gA = U (F o (J - J^H) S + S F o (K - K^H) + diag(gS)) Vh, J = U^H gU,
        # K = Vh gVh^H, F_ij = 1 / (s_j^2 - s_i^2); plus the parts of gU, gVh
        # outside the spans of U and V when the matrix is not square.
        middle = None
        if gu is not None or gvh is not None:
            f = _svd_gaps(xp, s)
        if gu is not None:
            j = mh(xp, u) @ gu
            middle = (f * (j - mh(xp, j))) * s_row
            if is_complex(u):
                # The phase of each singular pair is a gauge: with V's fixed, U's
                # diagonal rotation i Im(J_ii) / s_i carries what is left.
                dj = xp.linalg.diagonal(j)
                middle = middle + diag_embed(xp, (dj - xp.conj(dj)) * 0.5 / s)
        if gvh is not None:
            kk = vh @ mh(xp, gvh)
            term = s_col * (f * (kk - mh(xp, kk)))
            middle = term if middle is None else middle + term
        left = None if middle is None else u @ middle
        if gs is not None:
            scaled = u * xp.expand_dims(gs, axis=-2)
            left = scaled if left is None else left + scaled
        if gu is not None and m > k:
            left = left + (gu - u @ (mh(xp, u) @ gu)) / s_row
        ga = None if left is None else left @ vh
        if gvh is not None and n > k:
            out = u @ ((gvh - (gvh @ mh(xp, vh)) @ vh) / s_col)
            ga = out if ga is None else ga + out
        return (ga,)


def _svd_gaps(xp: Any, s: Any) -> Any:
    """``F_ij = 1 / (s_j^2 - s_i^2)`` off the diagonal, 0 on it."""
    return eigen_gaps(xp, s * s)


@ROWS.declare("linalg.svd")
def svd(x: Any, /, *, full_matrices: bool = True) -> SVDResult:
    """Singular value decomposition ``x = U @ diag(S) @ Vh`` (``S`` descending).

    The gradient assumes distinct, nonzero singular values; with
    ``full_matrices=True`` the columns of ``U`` and rows of ``Vh`` beyond
    ``min(M, N)`` get none (they are an arbitrary basis), as in PyTorch.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[3.0, 0.0], [0.0, -2.0]]))
    >>> u, s, vh = xp.linalg.svd(a, full_matrices=False)
    >>> s
    variable([3., 2.])
    >>> xp.sum(s).backward(); a.grad
    array([[ 1.,  0.],
           [ 0., -1.]])
    """
    check_matrix("linalg.svd", x)
    return SVDResult(*SVD(bool(full_matrices)).apply((x,)))


@ROWS.declare("linalg.svdvals")
def svdvals(x: Any, /) -> Variable:
    """Singular values (descending); computed through :func:`svd` for the gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.linalg.svdvals(np.array([[0.0, 2.0], [1.0, 0.0]]))
    variable([2., 1.])
    """
    return svd(x, full_matrices=False).S


# Derived from the rows (none is exported: the extension's are the namespace's only).
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
