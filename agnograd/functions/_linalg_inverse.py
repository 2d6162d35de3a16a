"""The ``linalg`` extension's inverses and determinants: ``inv``, ``solve``, ``det``,
``slogdet`` and ``pinv`` (conventions: :mod:`agnograd.functions._linalg`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import array_api_compat

from agnograd.backends._shape_dtype import broadcast_shapes
from agnograd.core._fast import apply1, apply2
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import (
    Spec,
    conjugate,
    held,
    is_complex,
    others_product,
    raw,
    real_dtype,
    shape_of,
)
from agnograd.functions._linalg import check_matrix, mh
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


class SlogdetResult(NamedTuple):
    """Result of :func:`slogdet`: ``det = sign * exp(logabsdet)``."""

    sign: Variable
    logabsdet: Variable


# -- inverse, solve, determinants --------------------------------------------------------


class Inv(FunctionNode):
    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.inv(inputs[0]),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        return ((inputs[0].shape, inputs[0].dtype),)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (y,) = outputs
        return (-(y @ tangents[0] @ y),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (y,) = self.get_retained_outputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        yh = mh(xp, y)
        return (-(yh @ gy @ yh),)


@ROWS.declare("linalg.inv")
def inv(x: Any, /) -> Variable:
    """Inverse of a (stack of) square matrices; the gradient is ``-Y^H gY Y^H``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[2.0, 0.0], [0.0, 4.0]]))
    >>> y = xp.linalg.inv(a)
    >>> y
    variable([[0.5 , 0.  ],
              [0.  , 0.25]])
    >>> xp.sum(y).backward(); a.grad
    array([[-0.25  , -0.125 ],
           [-0.125 , -0.0625]])
    """
    check_matrix("linalg.inv", x, square=True)
    return apply1(Inv(), x)


class Solve(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def __init__(self, vector: bool) -> None:
        self.vector = vector  # x2 of shape (M,): one right-hand side

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.solve(inputs[0], inputs[1]),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        a, b = inputs
        dtype = a.xp.result_type(a.dtype, b.dtype)
        if self.vector:
            return ((a.shape[:-1], dtype),)
        return (((*broadcast_shapes(a.shape[:-2], b.shape[:-2]), *b.shape[-2:]), dtype),)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        # dX = A^-1 (dB - dA X)
        (a, _), (x,), (ta, tb) = inputs, outputs, tangents
        if self.vector:  # columns explicit, as in backward
            x = xp.expand_dims(x, axis=-1)
            tb = None if tb is None else xp.expand_dims(tb, axis=-1)
        rhs = None if ta is None else -(ta @ x)
        if tb is not None:
            rhs = tb if rhs is None else tb + rhs
        tx = xp.linalg.solve(a, rhs)
        return (tx[..., 0] if self.vector else tx,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (a,) = self.get_retained_inputs()
        (x,) = self.get_retained_outputs()
        (gx,) = grad_outputs
        xp = namespace_of(gx)
        if self.vector:
            # A batched result of a single right-hand side: make columns explicit,
            # since solve reads a batched vector as a matrix.
            gx = xp.expand_dims(gx, axis=-1)
            x = xp.expand_dims(x, axis=-1)
        gb = xp.linalg.solve(mh(xp, a), gx)
        result = []
        for i in indexes:
            if i == 0:
                result.append(-(gb @ mh(xp, x)))
            else:
                result.append(gb[..., 0] if self.vector else gb)
        return tuple(result)


@ROWS.declare("linalg.solve")
def solve(x1: Any, x2: Any, /) -> Variable:
    """Solve ``x1 @ X = x2`` for ``X``; ``x2`` of shape ``(M,)`` is one right-hand side.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> b = agnograd.Variable(np.array([1.0, 2.0]))
    >>> x = xp.linalg.solve(np.array([[2.0, 0.0], [0.0, 4.0]]), b)
    >>> x
    variable([0.5, 0.5])
    >>> xp.sum(x).backward(); b.grad
    array([0.5 , 0.25])
    """
    s1 = check_matrix("linalg.solve", x1, square=True, name="x1")
    s2 = shape_of(x2)
    vector = len(s2) == 1
    if len(s2) == 0 or s2[0 if vector else -2] != s1[-1]:
        raise ValueError(
            f"linalg.solve: x2 of shape {s2} does not match x1 of shape {s1}; it must be "
            f"(M,) or (..., M, K) with M = {s1[-1]}"
        )
    return apply2(Solve(vector), x1, x2)


def _matrix_scalar(xp: Any, v: Any) -> Any:
    """``v`` (one value per matrix of a stack) with two axes added, to scale matrices."""
    return xp.expand_dims(xp.expand_dims(v, axis=-1), axis=-1)


def _near_singular(a: Any) -> Any:
    """For each matrix of the raw stack ``a``, whether it is too close to singular for
    ``det * inv``: its smallest singular value at most ``sqrt(eps)`` times its largest
    (a test that scaling rows or columns does not fool). ``None`` when no matrix is, so
    that the usual case skips the adjugate; lazy arrays, and the Variable ``a`` of a
    gradient graph not run yet (see ``held``), always get the array."""
    xp = namespace_of(a)
    if a.shape[-1] == 0:
        return None
    s = xp.linalg.svdvals(a)
    near = s[..., -1] <= math.sqrt(xp.finfo(a.dtype).eps) * s[..., 0]
    if isinstance(near, Variable) or array_api_compat.is_lazy_array(near):
        return near  # a node of a gradient graph not run yet, or a lazy array: no test
    if not bool(xp.any(near)):
        return None
    return near


# The characteristic polynomial gives the adjugate up to this size: exact formulas
# (adj = tr(a) I - a for 2 x 2), differentiable to every order. The recurrence behind
# them cancels badly for larger or badly scaled matrices, which use the SVD.
_POLYNOMIAL_ADJUGATE_MAX = 3


def _adjugate_h(xp: Any, a: Any) -> Any:
    """``adj(a)^H``, the conjugated derivative of ``det``, also where ``a`` is singular.

    Up to 3 x 3, the Faddeev-LeVerrier recurrence: ``M_1 = I``,
    ``M_{k+1} = a M_k - tr(a M_k) / k I`` and ``adj(a) = (-1)^(n+1) M_n``, only
    products and traces. Above, with ``a = U diag(s) Vh``, ``adj(a) = det(U) det(Vh)
    Vh^H diag(p) U^H`` where ``p_i`` is the product of the singular values other than
    ``s_i``: accurate, but its own derivative divides by the singular values, so double
    backprop through it is refused for complex matrices (where that derivative is
    wrong at singular ones) and gives NaN where singular values repeat.
    """
    n = a.shape[-1]
    if n <= _POLYNOMIAL_ADJUGATE_MAX:
        eye = xp.eye(n, dtype=a.dtype, device=a.device)
        m = eye
        for k in range(1, n):
            am = a @ m
            m = am - _matrix_scalar(xp, xp.linalg.trace(am)) / k * eye
        return mh(xp, m if n % 2 else -m)
    if isinstance(a, Variable) and is_complex(a):
        raise ValueError(
            f"linalg.det: no second derivative at a nearly singular complex matrix larger "
            f"than {_POLYNOMIAL_ADJUGATE_MAX} x {_POLYNOMIAL_ADJUGATE_MAX} (shape "
            f"{a.shape}): its first derivative comes from the SVD, whose derivative "
            "is wrong there"
        )
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    phase = xp.linalg.det(u) * xp.linalg.det(vh)
    others = xp.expand_dims(others_product(s, (s.ndim - 1,)), axis=-2)
    return _matrix_scalar(xp, conjugate(xp, phase)) * ((u * others) @ vh)


class Det(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.det(inputs[0]),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        return ((inputs[0].shape[:-2], inputs[0].dtype),)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        # d det = tr(adj(a) dA) (holomorphic)
        return (_paired(xp, _det_slope(xp, inputs[0], outputs[0]), tangents[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (a,) = self.get_retained_inputs()
        (d,) = self.get_retained_outputs()
        (gd,) = grad_outputs
        xp = namespace_of(gd)
        return (_matrix_scalar(xp, gd) * _det_slope(xp, a, d),)


def _det_slope(xp: Any, a: Any, d: Any) -> Any:
    """``adj(a)^H``, the conjugated derivative of ``d = det(a)``: ``conj(d) inv(a)^H``
    for an invertible matrix, the adjugate itself (:func:`_adjugate_h`) for one
    nearly singular."""
    near = _near_singular(held(a))
    scale = _matrix_scalar(xp, conjugate(xp, d))
    if near is None:
        return scale * mh(xp, xp.linalg.inv(a))
    # Each path sees only its own matrices; the others are replaced by ones it
    # handles with finite derivatives (the identity, diag(1, 2, ..., n)), so that
    # the masked-out half of double backprop is zeros, not 0 * inf.
    n = a.shape[-1]
    near = _matrix_scalar(namespace_of(near), near)
    eye = xp.eye(n, dtype=a.dtype, device=a.device)
    steps = xp.asarray([float(k) for k in range(1, n + 1)], dtype=a.dtype, device=a.device)
    by_inverse = scale * mh(xp, xp.linalg.inv(xp.where(near, eye, a)))
    by_adjugate = _adjugate_h(xp, xp.where(near, a, eye * steps))
    return xp.where(near, by_adjugate, by_inverse)


def _paired(xp: Any, slope: Any, t: Any) -> Any:
    """``sum(conj(slope) * t)`` over each matrix: the tangent of a function of a
    matrix whose rule multiplies the output gradient by ``slope``."""
    return xp.sum(conjugate(xp, slope) * t, axis=(-2, -1))


@ROWS.declare("linalg.det")
def det(x: Any, /) -> Variable:
    """Determinant of a (stack of) square matrices.

    The gradient is ``gd * adj(x)^H``: ``gd * conj(det) * inv(x)^H`` for a matrix far
    from singular. For one whose smallest singular value is below ``sqrt(eps)`` times
    its largest, where the inverse is lost, the adjugate comes from the characteristic
    polynomial (up to 3 x 3, differentiable to every order) or from the singular value
    decomposition (larger; its second derivative is NaN where singular values repeat,
    and refused for complex matrices).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[2.0, 1.0], [1.0, 3.0]]))
    >>> y = xp.linalg.det(a)
    >>> y
    variable(5.)
    >>> y.backward(); a.grad
    array([[ 3., -1.],
           [-1.,  2.]])
    """
    check_matrix("linalg.det", x, square=True)
    return apply1(Det(), x)


class Slogdet(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.xp.linalg.slogdet(inputs[0]))

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        return ((x.shape[:-2], x.dtype), (x.shape[:-2], real_dtype(x.xp, x.dtype)))

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        # tr(A^-1 dA) = d log det: its real part moves logabsdet, its imaginary part
        # the phase of a complex sign (a real sign is piecewise constant).
        (a,), (sign, _) = inputs, outputs
        change = _paired(xp, mh(xp, xp.linalg.inv(a)), tangents[0])
        if not is_complex(a):
            return (None, change)
        return (sign * (change - xp.real(change)), xp.real(change))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (a,) = self.get_retained_inputs()
        gs, gl = grad_outputs
        xp = namespace_of(gl if gl is not None else gs)
        coef = gl
        if is_complex(a) and gs is not None:
            # sign = det / |det| moves by i Im(tr(A^-1 dA)) sign; its adjoint
            # contributes -i Im(conj(gs) sign) = (conj(t) - t) / 2 with t = conj(gs) sign.
            (sign,) = self.get_retained_outputs()
            t = xp.conj(gs) * sign
            phase = (xp.conj(t) - t) * 0.5
            coef = phase if coef is None else coef + phase
        if coef is None:  # a real sign is piecewise constant
            return (None,)
        return (_matrix_scalar(xp, coef) * mh(xp, xp.linalg.inv(a)),)


@ROWS.declare("linalg.slogdet")
def slogdet(x: Any, /) -> SlogdetResult:
    """Sign and natural log of the absolute value of the determinant.

    ``logabsdet`` is differentiable where ``x`` is invertible; a real ``sign`` is
    piecewise constant (no gradient), a complex one differentiable.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> result = xp.linalg.slogdet(a)
    >>> result.sign, result.logabsdet
    (variable(-1.), variable(0.69314718))
    >>> result.logabsdet.backward(); a.grad
    array([[-2. ,  1.5],
           [ 1. , -0.5]])
    """
    check_matrix("linalg.slogdet", x, square=True)
    return SlogdetResult(*Slogdet().apply((x,)))


# -- pseudo-inverse ----------------------------------------------------------------------


class Pinv(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def __init__(self, rtol: Any) -> None:
        self.rtol = rtol

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.pinv(inputs[0], rtol=self.rtol),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        return (((*x.shape[:-2], x.shape[-1], x.shape[-2]), x.dtype),)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (a,), (p,), (t,) = inputs, outputs, tangents
        ph, th = mh(xp, p), mh(xp, t)
        # The transpose of backward's: -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P.
        z = (p @ ph) @ th
        w = th @ (ph @ p)
        return (-(p @ t @ p) + (z - (z @ a) @ p) + (w - p @ (a @ w)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (a,) = self.get_retained_inputs()
        (p,) = self.get_retained_outputs()
        (gp,) = grad_outputs
        xp = namespace_of(gp)
        ph, gph = mh(xp, p), mh(xp, gp)
        # Golub & Pereyra's derivative of the pseudo-inverse (constant rank):
        # -P^H gP P^H + (I - A P) gP^H P P^H + P^H P gP^H (I - P A).
        z = gph @ (p @ ph)
        w = (ph @ p) @ gph
        return (-(ph @ gp @ ph) + (z - a @ (p @ z)) + (w - (w @ p) @ a),)


@ROWS.declare("linalg.pinv")
def pinv(x: Any, /, *, rtol: Any = None) -> Variable:
    """Moore-Penrose pseudo-inverse; singular values below ``rtol * max(S)`` are cut.

    The gradient holds where the rank is constant (full-rank ``x`` in practice).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.linalg.pinv(np.array([[2.0, 0.0]]))
    variable([[0.5],
              [0. ]])
    """
    check_matrix("linalg.pinv", x)
    return apply1(Pinv(raw(rtol)), x)


# Derived from the rows (none is exported: the extension's are the namespace's only).
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
