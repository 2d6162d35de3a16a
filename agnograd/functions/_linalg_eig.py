"""The ``linalg`` extension's eigendecomposition of general square matrices (2025.12):
``eig`` and ``eigvals`` (conventions: :mod:`agnograd.functions._linalg`).

Results are complex for real and complex inputs alike, as the standard specifies:
``complex64`` for ``float32`` and ``complex64`` inputs, ``complex128`` for
``float64`` and ``complex128`` ones. A backend whose ``eig`` returns a real array
for a real spectrum (plain NumPy) has its results cast.

Gauge. Each eigenvector is determined up to a nonzero complex factor. Backends
normalize them to norm 1 (LAPACK's ``geev``, which also makes the largest component
of each real), which leaves one phase per column to convention. The gradient is
PyTorch's (``linalg_eig_backward``): it holds the norms at 1 and moves each
eigenvector ``v_k`` by ``dv_k = sum_j X_jk v_j`` with a real ``X_kk`` (the
component of ``dv_k`` along ``v_k``, in the basis of the eigenvectors, turns no
phase). That is the gradient of any loss that does not depend on the phases -- a
function of the eigenvalues, of ``|V|``, of ``V diag(f(w)) V^H``, ... For a loss that
does depend on them, PyTorch raises; agnograd does not check (the check would read
the data back to the host, which define-then-run and double backprop cannot do) and
returns the gradient of the loss on eigenvectors whose phases follow that rule: at
``x0`` with eigenvectors ``V0``, the gradient of ``x -> loss(V(x) D(x))`` with the
phases ``D(x)`` that make the diagonal of ``V0^-1 V(x) D(x)`` real and positive.
Central differences through the backend's own phase convention differ from it.

The gradient divides by differences of eigenvalues: it is finite only where they
are distinct. Eigenvalues come in the backend's order (LAPACK's), which no
convention fixes: a loss that reads them by position is differentiable only where
that order does not change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import Spec, input_dtype
from agnograd.functions._linalg import check_matrix, diag_embed, mh
from agnograd.functions._linalg_decompositions import eigen_gaps
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


class EigResult(NamedTuple):
    """Result of :func:`eig`: the eigenvalues and the unit-norm eigenvectors as columns."""

    eigenvalues: Variable
    eigenvectors: Variable


def _complex_dtype(xp: Any, dtype: Any) -> Any:
    """The complex dtype of ``dtype``'s precision (``dtype`` itself if complex)."""
    if xp.isdtype(dtype, "complex floating"):
        return dtype
    return xp.complex64 if dtype == xp.float32 else xp.complex128


class Eig(FunctionNode):
    _retain_out = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        xp = self.xp
        backend_eig = getattr(getattr(xp, "linalg", None), "eig", None)
        if backend_eig is None:
            raise NotImplementedError(
                f"linalg.eig: the backend {getattr(xp, '__name__', xp)!r} has no linalg.eig"
            )
        w, v = backend_eig(x)
        dtype = _complex_dtype(xp, x.dtype)
        # NumPy itself returns real results where the spectrum is real.
        if w.dtype != dtype:
            w = xp.astype(w, dtype)
        if v.dtype != dtype:
            v = xp.astype(v, dtype)
        return w, v

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        dtype = _complex_dtype(x.xp, x.dtype)
        return ((tuple(x.shape[:-1]), dtype), (tuple(x.shape), dtype))

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        # PyTorch's linalg_eig_jvp: with P = V^-1 dA V, dw = diag(P) and dV = V (E o P)
        # less V diag(Re(diag(V^H V (E o P)))), which keeps the columns at norm 1 (the
        # gauge of backward), E_ij = 1 / (w_j - w_i) off the diagonal.
        (w, v), (t,) = outputs, tangents
        p = xp.linalg.solve(v, xp.astype(t, v.dtype) @ v)
        dv = v @ (eigen_gaps(xp, w) * p)
        norms = xp.real(xp.linalg.diagonal(mh(xp, v) @ dv))
        return (xp.linalg.diagonal(p), dv - v * xp.astype(xp.expand_dims(norms, axis=-2), v.dtype))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        w, v = self.get_retained_outputs()
        gw, gv = grad_outputs
        xp = namespace_of(gw if gw is not None else gv)
        vh = mh(xp, v)
        # gA = V^-H (diag(gw) + E o P) V^H (PyTorch's linalg_eig_backward), with
        # P = V^H gV - V^H V diag(Re diag(V^H gV)), which keeps the columns at norm
        # 1, and E_ij = 1 / conj(w_j - w_i) off the diagonal, 0 on it: the diagonal
        # of P, i Im(diag(V^H gV)), would turn the phases, and is dropped.
        inner = None
        if gv is not None:
            vhgv = vh @ gv
            norms = xp.real(xp.linalg.diagonal(vhgv))
            p = vhgv - vh @ (v * xp.expand_dims(norms, axis=-2))
            inner = eigen_gaps(xp, xp.conj(w)) * p
        if gw is not None:
            diagonal = diag_embed(xp, gw)
            inner = diagonal if inner is None else inner + diagonal
        ga = xp.linalg.solve(vh, inner @ vh)
        if not self.xp.isdtype(input_dtype(self), "complex floating"):
            # A real input moves along real matrices only (torch's handle_r_to_c).
            ga = xp.real(ga)
        return (ga,)


@ROWS.declare("linalg.eig")
def eig(x: Any, /) -> EigResult:
    """Eigenvalues and right eigenvectors of square matrices: ``x @ V = V * w``.

    ``x`` has shape ``(..., M, M)`` and a real or complex floating-point dtype; the
    eigenvalues (shape ``(..., M)``) and eigenvectors (shape ``(..., M, M)``, one
    per column, of norm 1) are complex, of the precision of ``x``, in the
    backend's order.

    The gradient is PyTorch's: it needs distinct eigenvalues, and a loss that
    does not depend on the arbitrary phase of each eigenvector. For one that does,
    no error is raised (PyTorch raises): the gradient is that of the loss on
    eigenvectors ``V`` whose phases keep the diagonal of ``V0^-1 V`` real, with
    ``V0`` those at ``x``. A real ``x`` gets the real part of the gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[2.0, 1.0], [0.0, 3.0]]))
    >>> w, v = xp.linalg.eig(a)
    >>> w
    variable([2.+0.j, 3.+0.j])
    >>> loss = xp.sum(xp.real(w * w)) + xp.sum(xp.abs(v[..., 0, :]) ** 2)
    >>> loss.backward(); a.grad
    array([[4.5, 0.5],
           [1.5, 5.5]])
    """
    check_matrix("linalg.eig", x, square=True)
    return EigResult(*Eig().apply((x,)))


@ROWS.declare("linalg.eigvals")
def eigvals(x: Any, /) -> Variable:
    """Eigenvalues of square matrices, complex, in the backend's order.

    Computed through :func:`eig`, whose eigenvectors the gradient needs; a real
    ``x`` gets the real part of the gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[0.0, -1.0], [1.0, 0.0]]))
    >>> w = xp.linalg.eigvals(a)
    >>> w
    variable([0.+1.j, 0.-1.j])
    >>> xp.sum(xp.imag(w[0:1])).backward(); a.grad
    array([[ 0. , -0.5],
           [ 0.5,  0. ]])
    """
    return eig(x).eigenvalues


# Derived from the rows (none is exported: the extension's are the namespace's only).
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
