"""Linear algebra: the standard's chapter (``matmul``, ``tensordot``, ``vecdot``,
``matrix_transpose``) and its ``linalg`` extension (keys ``"linalg.<name>"``).

Conventions (PyTorch's, so that ``torch.autograd`` is an oracle):

- Complex inputs follow the conjugate Wirtinger convention: for a real loss ``L``,
  ``x.grad = dL/dRe(x) + i dL/dIm(x)``; linear maps get their adjoint (``A^H``).
- Functions of Hermitian matrices (``cholesky``, ``eigh``, ``eigvalsh``) read one
  triangle of their input; their gradient is the Hermitian matrix that acts on
  Hermitian perturbations, as PyTorch returns it (for complex ``cholesky``
  PyTorch adds a skew-Hermitian part on the diagonal, which no Hermitian input
  sees; agnograd leaves it out).
- Spectral gradients (``eigh``, ``svd``) divide by differences of eigenvalues or
  singular values: they are finite only when those are distinct. Losses of complex
  eigenvectors or singular vectors must not depend on their arbitrary phases.
- ``inv``, ``solve``, ``det``, ``slogdet``, ``qr`` and ``pinv`` differentiate where
  the matrix is invertible (``qr``, ``pinv``: of full rank).

Every backward rule is written with array API functions of ``namespace_of(gy)``,
which are themselves in these tables, so gradients of any order come free.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

import array_api_compat

from agnograd._abstract import broadcast_shapes
from agnograd._function import FunctionNode
from agnograd._namespace import namespace_of
from agnograd._variable import Variable
from agnograd.functions._core import constant, others_product, raw, shape_of
from agnograd.functions._manipulation import matrix_transpose, reshape

_Spec = tuple[tuple[int, ...], Any]


class EighResult(NamedTuple):
    """Result of :func:`eigh`: ascending eigenvalues and the eigenvectors as columns."""

    eigenvalues: Variable
    eigenvectors: Variable


class QRResult(NamedTuple):
    """Result of :func:`qr`."""

    Q: Variable  # the standard's field name
    R: Variable


class SlogdetResult(NamedTuple):
    """Result of :func:`slogdet`: ``det = sign * exp(logabsdet)``."""

    sign: Variable
    logabsdet: Variable


class SVDResult(NamedTuple):
    """Result of :func:`svd`: ``x = U @ (S[..., None] * Vh)``, ``S`` descending."""

    U: Variable  # the standard's field name
    S: Variable
    Vh: Variable


# -- helpers shared by the rules ---------------------------------------------------------


def _retained_outputs(node: FunctionNode) -> tuple[Any, ...]:
    """``node.get_retained_outputs()``, with recreated outputs put back in the graph.

    Workaround for the core: when the caller dropped an output (``eigvalsh`` keeps
    only ``eigh``'s eigenvalues), double backprop recreates its Variable but leaves
    ``node.outputs`` pointing at the dead node, so the gradient that later reaches
    the new one is lost (a second-order gradient of ``None``). Registering it here
    keeps it; this can go once ``FunctionNode.get_retained_outputs`` does the same.
    """
    values = node.get_retained_outputs()
    if node._variables_in_backward and node.outputs is not None:
        refs = list(node.outputs)
        for i, value in zip(node._retain_out, values, strict=True):
            if refs[i]() is None:
                refs[i] = weakref.ref(value._node)
        node.outputs = tuple(refs)
    return values


def _is_complex(x: Any) -> bool:
    return bool(namespace_of(x).isdtype(x.dtype, "complex floating"))


def _conj(xp: Any, x: Any) -> Any:
    return xp.conj(x) if _is_complex(x) else x


def _mh(xp: Any, x: Any) -> Any:
    """Conjugate transpose of the last two axes (plain transpose for real dtypes)."""
    return _conj(xp, xp.matrix_transpose(x))


def _raw_xp_device(x: Any) -> tuple[Any, Any]:
    data = raw(x)
    return namespace_of(data), array_api_compat.device(data)


def _eye(like: Any, n: int, dtype: Any = None) -> Any:
    """The ``n x n`` identity as a raw array with ``like``'s dtype and device."""
    rxp, device = _raw_xp_device(like)
    return rxp.eye(n, dtype=like.dtype if dtype is None else dtype, device=device)


def _zeros(like: Any, shape: tuple[int, ...]) -> Any:
    rxp, device = _raw_xp_device(like)
    return rxp.zeros(shape, dtype=like.dtype, device=device)


def _diag_embed(xp: Any, v: Any) -> Any:
    """``(..., n) -> (..., n, n)`` with ``v`` on the diagonal."""
    return xp.expand_dims(v, axis=-2) * _eye(v, v.shape[-1])


def _off_diagonal_inverse(xp: Any, d: Any, n: int) -> Any:
    """``1 / d`` off the diagonal and 0 on it, with ``d`` of shape ``(..., n, n)``.

    The diagonal is replaced by ones before dividing, so no division by zero
    happens (and the expression stays differentiable).
    """
    eye = _eye(d, n)
    # xp.divide rather than `/`: the raw numerator would not defer to a Variable.
    return xp.divide(1 - eye, d + eye)


def _real_dtype(xp: Any, dtype: Any) -> Any:
    if xp.isdtype(dtype, "complex floating"):
        return xp.float32 if dtype == xp.complex64 else xp.float64
    return dtype


def _check_matrix(op: str, x: Any, square: bool = False, name: str = "x") -> tuple[int, ...]:
    shape = shape_of(x)
    if len(shape) < 2:
        raise ValueError(f"{op}: {name} must have at least 2 dimensions, got shape {shape}")
    if square and shape[-1] != shape[-2]:
        raise ValueError(f"{op}: {name} must be a stack of square matrices, got shape {shape}")
    return shape


def _normalize_axes(axis: int | tuple[int, ...] | None, ndim: int, op: str) -> tuple[int, ...]:
    """Sorted non-negative axes; ``None`` means all of them."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of range for an array of {ndim} dimensions")
    result = sorted(a % ndim for a in axes)
    if len(set(result)) != len(result):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(result)


def _table(name: str) -> Any:
    """A differentiable function of another chapter (looked up late: no import cycle)."""
    from agnograd.functions._table import DIFFERENTIABLE as TABLE

    return TABLE[name]


def _expand_reduced(xp: Any, g: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """Reshape a reduction's result ``g`` so that it broadcasts against ``shape``."""
    return xp.reshape(g, tuple(1 if i in axes else s for i, s in enumerate(shape)))


# -- matmul, tensordot, vecdot -----------------------------------------------------------


class MatMul(FunctionNode):
    _retain_in = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.matmul(inputs[0], inputs[1]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        a, b = self.get_retained_inputs()
        (g,) = grad_outputs
        xp = namespace_of(g)
        # Treat 1-D operands as matrices (a row on the left, a column on the right),
        # as the standard defines matmul, and drop the added axis again afterwards.
        a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
        if a_vec:
            a = xp.reshape(a, (1, a.shape[0]))
            g = xp.reshape(g, (*g.shape[:-1], 1, g.shape[-1]) if not b_vec else (1, 1))
        if b_vec:
            b = xp.reshape(b, (b.shape[0], 1))
            if not a_vec:
                g = xp.reshape(g, (*g.shape, 1))
        result = []
        for i in indexes:
            if i == 0:
                ga = xp.matmul(g, _mh(xp, b))
                if a_vec:
                    ga = xp.reshape(ga, (*ga.shape[:-2], ga.shape[-1]))
                result.append(ga)
            else:
                gb = xp.matmul(_mh(xp, a), g)
                if b_vec:
                    gb = xp.reshape(gb, gb.shape[:-1])
                result.append(gb)
        return tuple(result)


def matmul(x1: Any, x2: Any, /) -> Variable:
    """Matrix product with broadcasting over leading (batch) axes.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> a = agnograd.Variable(np.array([[1.0, 2.0]]))
    >>> y = F.matmul(a, np.array([[3.0], [4.0]]))
    >>> y
    variable([[11.]])
    >>> y.backward(); a.grad
    array([[3., 4.]])
    """
    for name, x in (("x1", x1), ("x2", x2)):
        shape = shape_of(x)
        if len(shape) == 0:
            raise ValueError(f"matmul: {name} is 0-d; matmul needs at least one dimension")
    return MatMul().apply((x1, x2))[0]


def linear(x: Any, W: Any, b: Any = None) -> Variable:  # noqa: N803 - Chainer's name
    """Affine map ``x @ W.T + b`` with ``W`` of shape ``(out, in)`` (Chainer's layout).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.linear(np.ones((1, 2)), np.array([[1.0, 2.0]]), np.array([0.5]))
    variable([[3.5]])
    """
    y = matmul(x, matrix_transpose(W))
    return y if b is None else y + b


class TensorDot(FunctionNode):
    _retain_in = (0, 1)

    def __init__(self, axes1: tuple[int, ...], axes2: tuple[int, ...]) -> None:
        self.axes1 = axes1
        self.axes2 = axes2

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.tensordot(inputs[0], inputs[1], axes=(self.axes1, self.axes2)),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        a, b = inputs
        free1 = [s for i, s in enumerate(a.shape) if i not in self.axes1]
        free2 = [s for i, s in enumerate(b.shape) if i not in self.axes2]
        return (((*free1, *free2), a.xp.result_type(a.dtype, b.dtype)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        a1, a2 = self.axes1, self.axes2
        free1 = [i for i in range(len(x1.shape)) if i not in a1]
        free2 = [i for i in range(len(x2.shape)) if i not in a2]
        nf1 = len(free1)
        result = []
        for i in indexes:
            if i == 0:
                # Contract gy's x2-part with conj(x2)'s free axes; what is left of x2
                # are its contracted axes, in x2's order: map them to x1's axes.
                g = xp.tensordot(
                    gy, _conj(xp, x2), axes=(tuple(range(nf1, nf1 + len(free2))), tuple(free2))
                )
                order = free1 + [a1[a2.index(j)] for j in sorted(a2)]
            else:
                g = xp.tensordot(_conj(xp, x1), gy, axes=(tuple(free1), tuple(range(nf1))))
                order = [a2[a1.index(j)] for j in sorted(a1)] + free2
            perm = tuple(order.index(k) for k in range(len(order)))
            if perm != tuple(range(len(perm))):
                g = xp.permute_dims(g, perm)
            result.append(g)
        return tuple(result)


def tensordot(
    x1: Any, x2: Any, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2
) -> Variable:
    """Sum of products over the last ``axes`` axes of ``x1`` and first of ``x2``,
    or over the axes paired in ``axes = (x1_axes, x2_axes)``.

    Contracted axes must have equal sizes (no broadcasting).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.arange(6.0).reshape(2, 3))
    >>> y = xp.tensordot(a, np.ones((3, 2)), axes=1)
    >>> y
    variable([[ 3.,  3.],
              [12., 12.]])
    >>> xp.sum(y).backward(); a.grad
    array([[2., 2., 2.],
           [2., 2., 2.]])
    """
    s1, s2 = shape_of(x1), shape_of(x2)
    if isinstance(axes, int):
        if axes < 0 or axes > min(len(s1), len(s2)):
            raise ValueError(
                f"tensordot: axes={axes} must be between 0 and the smaller rank of x1 {s1} "
                f"and x2 {s2}"
            )
        a1 = tuple(range(len(s1) - axes, len(s1)))
        a2 = tuple(range(axes))
    else:
        if len(axes) != 2 or len(axes[0]) != len(axes[1]):
            raise ValueError(
                f"tensordot: axes must be an int or a pair of equally long sequences, got {axes!r}"
            )
        a1 = tuple(_axis(a, len(s1), "tensordot", "x1") for a in axes[0])
        a2 = tuple(_axis(a, len(s2), "tensordot", "x2") for a in axes[1])
        if len(set(a1)) != len(a1) or len(set(a2)) != len(a2):
            raise ValueError(f"tensordot: repeated axis in axes={axes!r}")
    for i, j in zip(a1, a2, strict=True):
        if s1[i] != s2[j]:
            raise ValueError(
                f"tensordot: axis {i} of x1 {s1} and axis {j} of x2 {s2} have different sizes"
            )
    return TensorDot(a1, a2).apply((x1, x2))[0]


def _axis(a: int, ndim: int, op: str, name: str) -> int:
    if not -ndim <= a < ndim:
        raise ValueError(f"{op}: axis {a} is out of range for {name} with {ndim} dimensions")
    return a % ndim


class VecDot(FunctionNode):
    _retain_in = (0, 1)

    def __init__(self, axis: int) -> None:
        self.axis = axis  # negative: counted from the end of the broadcast shape

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.vecdot(inputs[0], inputs[1], axis=self.axis),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        a, b = inputs
        shape = list(broadcast_shapes(a.shape, b.shape))
        del shape[self.axis]
        return ((tuple(shape), a.xp.result_type(a.dtype, b.dtype)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        g = xp.expand_dims(gy, axis=self.axis)
        # y = sum(conj(x1) * x2): linear in x2, conjugate-linear in x1.
        return tuple(_conj(xp, g) * x2 if i == 0 else g * x1 for i in indexes)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Variable:
    """Dot product ``sum(conj(x1) * x2, axis=axis)`` with broadcasting.

    ``axis`` counts in the broadcast shape; the contracted axis must have the same
    size in both arrays.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> y = xp.vecdot(a, np.array([1.0, -1.0]))
    >>> y
    variable([-1., -1.])
    >>> xp.sum(y).backward(); a.grad
    array([[ 1., -1.],
           [ 1., -1.]])
    """
    s1, s2 = shape_of(x1), shape_of(x2)
    ndim = max(len(s1), len(s2))
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"vecdot: axis {axis} is out of range for the broadcast shape of {s1} and {s2}"
        )
    axis = axis - ndim if axis >= 0 else axis
    for name, s in (("x1", s1), ("x2", s2)):
        if len(s) < -axis:
            raise ValueError(f"vecdot: {name} of shape {s} has no axis {axis}")
    if s1[axis] != s2[axis]:
        raise ValueError(
            f"vecdot: the contracted axis {axis} has size {s1[axis]} in x1 but {s2[axis]} in x2"
        )
    return VecDot(axis).apply((x1, x2))[0]


# -- inverse, solve, determinants --------------------------------------------------------


class Inv(FunctionNode):
    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.inv(inputs[0]),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        return ((inputs[0].shape, inputs[0].dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (y,) = self.get_retained_outputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        yh = _mh(xp, y)
        return (-(yh @ gy @ yh),)


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
    _check_matrix("linalg.inv", x, square=True)
    return Inv().apply((x,))[0]


class Solve(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def __init__(self, vector: bool) -> None:
        self.vector = vector  # x2 of shape (M,): one right-hand side

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.solve(inputs[0], inputs[1]),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        a, b = inputs
        dtype = a.xp.result_type(a.dtype, b.dtype)
        if self.vector:
            return ((a.shape[:-1], dtype),)
        return (((*broadcast_shapes(a.shape[:-2], b.shape[:-2]), *b.shape[-2:]), dtype),)

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
        gb = xp.linalg.solve(_mh(xp, a), gx)
        result = []
        for i in indexes:
            if i == 0:
                result.append(-(gb @ _mh(xp, x)))
            else:
                result.append(gb[..., 0] if self.vector else gb)
        return tuple(result)


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
    s1 = _check_matrix("linalg.solve", x1, square=True, name="x1")
    s2 = shape_of(x2)
    vector = len(s2) == 1
    if len(s2) == 0 or s2[0 if vector else -2] != s1[-1]:
        raise ValueError(
            f"linalg.solve: x2 of shape {s2} does not match x1 of shape {s1}; it must be "
            f"(M,) or (..., M, K) with M = {s1[-1]}"
        )
    return Solve(vector).apply((x1, x2))[0]


class Det(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.det(inputs[0]),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        return ((inputs[0].shape[:-2], inputs[0].dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (a,) = self.get_retained_inputs()
        (d,) = self.get_retained_outputs()
        (gd,) = grad_outputs
        xp = namespace_of(gd)
        # gd * adj(a)^H, where adj(a) = det(a) inv(a) for an invertible matrix.
        near = _near_singular(raw(a))
        scale = _matrix_scalar(xp, gd * _conj(xp, d))
        if near is None:
            return (scale * _mh(xp, xp.linalg.inv(a)),)
        # Each path sees only its own matrices; the others are replaced by ones it
        # handles with finite derivatives (the identity, diag(1, 2, ..., n)), so that
        # the masked-out half of double backprop is zeros, not 0 * inf.
        n = a.shape[-1]
        near = _matrix_scalar(namespace_of(near), near)
        eye = xp.eye(n, dtype=a.dtype, device=a.device)
        steps = xp.asarray([float(k) for k in range(1, n + 1)], dtype=a.dtype, device=a.device)
        by_inverse = scale * _mh(xp, xp.linalg.inv(xp.where(near, eye, a)))
        by_adjugate = _matrix_scalar(xp, gd) * _adjugate_h(xp, xp.where(near, a, eye * steps))
        return (xp.where(near, by_adjugate, by_inverse),)


def _matrix_scalar(xp: Any, v: Any) -> Any:
    """``v`` (one value per matrix of a stack) with two axes added, to scale matrices."""
    return xp.expand_dims(xp.expand_dims(v, axis=-1), axis=-1)


def _near_singular(a: Any) -> Any:
    """For each matrix of the raw stack ``a``, whether it is too close to singular for
    ``det * inv``: its smallest singular value at most ``sqrt(eps)`` times its largest
    (a test that scaling rows or columns does not fool). ``None`` when no matrix is, so
    that the usual case skips the adjugate; lazy arrays always get the array."""
    xp = namespace_of(a)
    if a.shape[-1] == 0:
        return None
    s = xp.linalg.svdvals(a)
    near = s[..., -1] <= math.sqrt(xp.finfo(a.dtype).eps) * s[..., 0]
    if not array_api_compat.is_lazy_array(near) and not bool(xp.any(near)):
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
        return _mh(xp, m if n % 2 else -m)
    if isinstance(a, Variable) and _is_complex(a):
        raise ValueError(
            f"linalg.det: no second derivative at a nearly singular complex matrix larger "
            f"than {_POLYNOMIAL_ADJUGATE_MAX} x {_POLYNOMIAL_ADJUGATE_MAX} (shape "
            f"{a.shape}): its first derivative comes from the SVD, whose derivative "
            "is wrong there"
        )
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    phase = xp.linalg.det(u) * xp.linalg.det(vh)
    others = xp.expand_dims(others_product(s, (s.ndim - 1,)), axis=-2)
    return _matrix_scalar(xp, _conj(xp, phase)) * ((u * others) @ vh)


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
    _check_matrix("linalg.det", x, square=True)
    return Det().apply((x,))[0]


class Slogdet(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.xp.linalg.slogdet(inputs[0]))

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        return ((x.shape[:-2], x.dtype), (x.shape[:-2], _real_dtype(x.xp, x.dtype)))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (a,) = self.get_retained_inputs()
        gs, gl = grad_outputs
        xp = namespace_of(gl if gl is not None else gs)
        coef = gl
        if _is_complex(a) and gs is not None:
            # sign = det / |det| moves by i Im(tr(A^-1 dA)) sign; its adjoint
            # contributes -i Im(conj(gs) sign) = (conj(t) - t) / 2 with t = conj(gs) sign.
            (sign,) = _retained_outputs(self)
            t = xp.conj(gs) * sign
            phase = (xp.conj(t) - t) * 0.5
            coef = phase if coef is None else coef + phase
        if coef is None:  # a real sign is piecewise constant
            return (None,)
        return (_matrix_scalar(xp, coef) * _mh(xp, xp.linalg.inv(a)),)


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
    _check_matrix("linalg.slogdet", x, square=True)
    return SlogdetResult(*Slogdet().apply((x,)))


# -- decompositions ----------------------------------------------------------------------


def _tril_half(xp: Any, x: Any) -> Any:
    """The lower triangle of ``x`` with its diagonal halved (a mask, so differentiable)."""
    n = x.shape[-1]
    rxp, device = _raw_xp_device(x)
    rows = rxp.expand_dims(rxp.arange(n, device=device), axis=1)
    cols = rxp.expand_dims(rxp.arange(n, device=device), axis=0)
    dtype = _real_dtype(rxp, raw(x).dtype)
    mask = rxp.astype(rows > cols, dtype) + rxp.astype(rows == cols, dtype) * 0.5
    return x * mask


class Cholesky(FunctionNode):
    _retain_out = (0,)

    def __init__(self, upper: bool) -> None:
        self.upper = upper

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.cholesky(inputs[0], upper=self.upper),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        return ((inputs[0].shape, inputs[0].dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (factor,) = self.get_retained_outputs()
        (g,) = grad_outputs
        xp = namespace_of(g)
        if self.upper:  # U = L^H
            factor, g = _mh(xp, factor), _mh(xp, g)
        # dL = L Phi(L^-1 dA L^-H) with Phi = lower triangle, half diagonal; its
        # adjoint on Hermitian dA is L^-H herm(Phi(L^H gL)) L^-1.
        phi = _tril_half(xp, _mh(xp, factor) @ g)
        middle = (phi + _mh(xp, phi)) * 0.5
        linv = xp.linalg.inv(factor)
        return (_mh(xp, linv) @ middle @ linv,)


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
    _check_matrix("linalg.cholesky", x, square=True)
    return Cholesky(bool(upper)).apply((x,))[0]


class QR(FunctionNode):
    _retain_out = (0, 1)

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.xp.linalg.qr(inputs[0], mode=self.mode))

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        *batch, m, n = x.shape
        k = m if self.mode == "complete" else min(m, n)
        return (((*batch, m, k), x.dtype), ((*batch, k, n), x.dtype))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        q, r = _retained_outputs(self)
        gq, gr = grad_outputs
        xp = namespace_of(gq if gq is not None else gr)
        m, n = q.shape[-2], r.shape[-1]
        if self.mode == "complete" and m > n:
            raise NotImplementedError(
                "linalg.qr: no gradient for mode='complete' with more rows than columns: "
                "the extra columns of Q are not determined by x; use mode='reduced'"
            )
        if m >= n:
            return (_qr_backward(xp, q, r, gq, gr),)
        # Wide x = [X | Y]: X = Q R1 is a square QR and R2 = Q^H Y.
        r1, r2 = r[..., :m], r[..., m:]
        gr1 = None if gr is None else gr[..., :m]
        gr2 = None if gr is None else gr[..., m:]
        if gr2 is not None:
            y = q @ r2
            extra = y @ _mh(xp, gr2)
            gq = extra if gq is None else gq + extra
        gx = _qr_backward(xp, q, r1, gq, gr1)
        gy = q @ gr2 if gr2 is not None else _zeros(r2, tuple(r2.shape))
        return (xp.concat([gx, gy], axis=-1),)


def _qr_backward(xp: Any, q: Any, r: Any, gq: Any, gr: Any) -> Any:
    """Gradient of ``x = Q R`` with ``x`` square or tall and of full rank.

    With M = gR R^H - Q^H gQ, the gradient is [gQ + Q (M - tril(M - M^H)/half
    diagonal)] R^-H: the term in parentheses keeps M's upper triangle and mirrors it
    to a Hermitian matrix.
    """
    terms = []
    if gr is not None:
        terms.append(gr @ _mh(xp, r))
    if gq is not None:
        qhgq = _mh(xp, q) @ gq
        terms.append(-qhgq)
    m = terms[0] if len(terms) == 1 else terms[0] + terms[1]
    b = q @ (m - _tril_half(xp, m - _mh(xp, m)))
    if gq is not None:
        b = b + gq
    # b R^-H, as the solution of R Z = b^H transposed back.
    return _mh(xp, xp.linalg.solve(r, _mh(xp, b)))


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
    _check_matrix("linalg.qr", x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*QR(mode).apply((x,)))


class Eigh(FunctionNode):
    _retain_out = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(self.xp.linalg.eigh(inputs[0]))

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        return ((x.shape[:-1], _real_dtype(x.xp, x.dtype)), (x.shape, x.dtype))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        lam, v = _retained_outputs(self)
        glam, gv = grad_outputs
        xp = namespace_of(glam if glam is not None else gv)
        n = lam.shape[-1]
        # gA = V (diag(gL) + M) V^H, with diag(gL) applied as a column scaling.
        left = None
        if gv is not None:
            # dV = V (F o (V^H dA V)), F_ij = 1 / (lam_j - lam_i); on Hermitian dA
            # the adjoint takes the skew-Hermitian part of V^H gV.
            vhgv = _mh(xp, v) @ gv
            diff = xp.expand_dims(lam, axis=-2) - xp.expand_dims(lam, axis=-1)
            f = _off_diagonal_inverse(xp, diff, n)
            left = v @ (f * ((vhgv - _mh(xp, vhgv)) * 0.5))
        if glam is not None:
            scaled = v * xp.expand_dims(glam, axis=-2)
            left = scaled if left is None else left + scaled
        return (left @ _mh(xp, v),)


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
    _check_matrix("linalg.eigh", x, square=True)
    return EighResult(*Eigh().apply((x,)))


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

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        *batch, m, n = x.shape
        k = min(m, n)
        u, vh = (m, n) if self.full_matrices else (k, k)
        return (
            ((*batch, m, u), x.dtype),
            ((*batch, k), _real_dtype(x.xp, x.dtype)),
            ((*batch, vh, n), x.dtype),
        )

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        u, s, vh = _retained_outputs(self)
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
            s2 = s * s
            f = _off_diagonal_inverse(
                xp, xp.expand_dims(s2, axis=-2) - xp.expand_dims(s2, axis=-1), k
            )
        if gu is not None:
            j = _mh(xp, u) @ gu
            middle = (f * (j - _mh(xp, j))) * s_row
            if _is_complex(u):
                # The phase of each singular pair is a gauge: with V's fixed, U's
                # diagonal rotation i Im(J_ii) / s_i carries what is left.
                dj = xp.linalg.diagonal(j)
                middle = middle + _diag_embed(xp, (dj - xp.conj(dj)) * 0.5 / s)
        if gvh is not None:
            kk = vh @ _mh(xp, gvh)
            term = s_col * (f * (kk - _mh(xp, kk)))
            middle = term if middle is None else middle + term
        left = None if middle is None else u @ middle
        if gs is not None:
            scaled = u * xp.expand_dims(gs, axis=-2)
            left = scaled if left is None else left + scaled
        if gu is not None and m > k:
            left = left + (gu - u @ (_mh(xp, u) @ gu)) / s_row
        ga = None if left is None else left @ vh
        if gvh is not None and n > k:
            out = u @ ((gvh - (gvh @ _mh(xp, vh)) @ vh) / s_col)
            ga = out if ga is None else ga + out
        return (ga,)


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
    _check_matrix("linalg.svd", x)
    return SVDResult(*SVD(bool(full_matrices)).apply((x,)))


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


class Pinv(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def __init__(self, rtol: Any) -> None:
        self.rtol = rtol

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.pinv(inputs[0], rtol=self.rtol),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        return (((*x.shape[:-2], x.shape[-1], x.shape[-2]), x.dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (a,) = self.get_retained_inputs()
        (p,) = self.get_retained_outputs()
        (gp,) = grad_outputs
        xp = namespace_of(gp)
        ph, gph = _mh(xp, p), _mh(xp, gp)
        # Golub & Pereyra's derivative of the pseudo-inverse (constant rank):
        # -P^H gP P^H + (I - A P) gP^H P P^H + P^H P gP^H (I - P A).
        z = gph @ (p @ ph)
        w = (ph @ p) @ gph
        return (-(ph @ gp @ ph) + (z - a @ (p @ z)) + (w - (w @ p) @ a),)


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
    _check_matrix("linalg.pinv", x)
    return Pinv(raw(rtol)).apply((x,))[0]


# -- norms -------------------------------------------------------------------------------


class VectorNorm(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def __init__(self, axes: tuple[int, ...], keepdims: bool, ord: float) -> None:  # noqa: A002
        self.axes = axes
        self.keepdims = keepdims
        self.ord = ord
        if ord == 0:  # a count of the nonzero elements: piecewise constant
            self.differentiable = False

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x = inputs[0]
        # All axes as None: some libraries reject an empty tuple for 0-d arrays.
        axis = None if len(self.axes) == len(x.shape) else self.axes
        return (self.xp.linalg.vector_norm(x, axis=axis, keepdims=self.keepdims, ord=self.ord),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        if self.keepdims:
            shape = tuple(1 if i in self.axes else s for i, s in enumerate(x.shape))
        else:
            shape = tuple(s for i, s in enumerate(x.shape) if i not in self.axes)
        return ((shape, _real_dtype(x.xp, x.dtype)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        (y,) = self.get_retained_outputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        shape = tuple(x.shape)
        if not self.keepdims:
            y = _expand_reduced(xp, y, shape, self.axes)
            gy = _expand_reduced(xp, gy, shape, self.axes)
        p = self.ord
        # The gradient at the zero vector is 0 (PyTorch's subgradient): zeros are
        # replaced by ones where they would be divided by, and multiplied by 0 anyway.
        y_safe = y + xp.astype(y == 0, y.dtype)
        if p == 2:
            return (gy * x / y_safe,)
        ax = xp.abs(x)
        ax_safe = ax + xp.astype(ax == 0, ax.dtype)
        unit = x / ax_safe  # sign(x), or x / |x| for complex x; 0 at 0
        if math.isinf(p):
            # All of the extreme elements share the gradient evenly (ties split).
            hit = xp.astype(ax == y, ax.dtype)
            count = xp.sum(hit, axis=self.axes, keepdims=True)
            return (gy * unit * (hit / count),)
        if p == 1:
            return (gy * unit,)
        return (gy * unit * (ax_safe / y_safe) ** (p - 1),)


def vector_norm(
    x: Any,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    keepdims: bool = False,
    ord: float = 2,  # noqa: A002 - the standard's name
) -> Variable:
    """``(sum |x|^ord)^(1/ord)`` over ``axis`` (all axes by default).

    ``ord`` may be any real number, ``inf`` (max of ``|x|``) or ``-inf`` (min);
    ``ord=0`` counts nonzero elements and has no gradient. The gradient at the zero
    vector is 0 (PyTorch's), and ties of ``inf``/``-inf`` share it evenly.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([3.0, -4.0]))
    >>> y = xp.linalg.vector_norm(x)
    >>> y
    variable(5.)
    >>> y.backward(); x.grad
    array([ 0.6, -0.8])
    """
    shape = shape_of(x)
    axes = _normalize_axes(axis, len(shape), "linalg.vector_norm")
    if isinstance(ord, bool) or not isinstance(ord, int | float):
        raise TypeError(f"linalg.vector_norm: ord must be a real number, got {ord!r}")
    return VectorNorm(axes, bool(keepdims), ord).apply((x,))[0]


def matrix_norm(
    x: Any,
    /,
    *,
    keepdims: bool = False,
    ord: float | str = "fro",  # noqa: A002 - the standard's name
) -> Variable:
    """Matrix norm over the last two axes: ``'fro'``, ``'nuc'``, ``1``, ``-1``,
    ``2``, ``-2``, ``inf`` or ``-inf``.

    Built from :func:`vector_norm` and :func:`svdvals`, whose gradient conventions
    it inherits (ties share the gradient; ``2``, ``-2`` and ``'nuc'`` need distinct
    singular values).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([[1.0, -2.0], [3.0, 4.0]]))
    >>> xp.linalg.matrix_norm(x, ord=1)
    variable(6.)
    >>> y = xp.linalg.matrix_norm(x, ord="fro")
    >>> y.backward(); x.grad
    array([[ 0.18257419, -0.36514837],
           [ 0.54772256,  0.73029674]])
    """
    shape = _check_matrix("linalg.matrix_norm", x)
    batch = shape[:-2]
    if ord == "fro":
        return vector_norm(x, axis=(-2, -1), keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        p = {"nuc": 1, 2: math.inf, -2: -math.inf}[ord]  # type: ignore[index]
        y = vector_norm(svdvals(x), axis=-1, ord=p)
    elif ord in (1, -1, math.inf, -math.inf):
        inner = -2 if ord in (1, -1) else -1  # column sums for 1, row sums for inf
        sums = vector_norm(x, axis=inner, keepdims=True, ord=1)
        y = vector_norm(sums, axis=(-2, -1), ord=math.inf if ord > 0 else -math.inf)  # type: ignore[operator]
    else:
        raise ValueError(
            f"linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}"
        )
    return reshape(y, (*batch, 1, 1)) if keepdims else y


# -- products, powers, diagonals ---------------------------------------------------------


def matrix_power(x: Any, n: int, /) -> Variable:
    """``x`` multiplied by itself ``n`` times (``n < 0``: powers of the inverse).

    Built from :func:`matmul` (by repeated squaring) and :func:`inv`; ``n = 0``
    gives the identity, which has no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([[1.0, 1.0], [0.0, 1.0]]))
    >>> y = xp.linalg.matrix_power(a, 3)
    >>> y
    variable([[1., 3.],
              [0., 1.]])
    >>> xp.sum(y).backward(); a.grad
    array([[ 6.,  3.],
           [10.,  6.]])
    """
    shape = _check_matrix("linalg.matrix_power", x, square=True)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {n!r}")
    if n == 0:
        data = raw(x)
        rxp = namespace_of(data)
        identity = rxp.eye(shape[-1], dtype=data.dtype, device=array_api_compat.device(data))
        return constant(rxp.broadcast_to(identity, shape))
    base = inv(x) if n < 0 else x
    n = abs(n)
    result = None
    while True:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if not n:
            break
        base = matmul(base, base)
    if not isinstance(result, Variable):  # n = 1 with a raw array
        result = constant(result)
    return result


class Diagonal(FunctionNode):
    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.in_shape: tuple[int, ...] = ()

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        self.in_shape = tuple(inputs[0].shape)
        return (self.xp.linalg.diagonal(inputs[0], offset=self.offset),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        m, n = x.shape[-2:]
        return (((*x.shape[:-2], _diagonal_length(m, n, self.offset)), x.dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        shape = self.in_shape
        *batch, m, n = shape
        k = gy.shape[-1]
        if k == 0:
            return (_zeros(gy, shape),)
        # Row r0 + t holds the t-th diagonal element: pad gy to one entry per row,
        # then spread each row's entry onto the offset diagonal with a mask.
        r0 = max(-self.offset, 0)
        pieces = [gy]
        if r0:
            pieces.insert(0, _zeros(gy, (*batch, r0)))
        if m - r0 - k:
            pieces.append(_zeros(gy, (*batch, m - r0 - k)))
        column = xp.concat(pieces, axis=-1) if len(pieces) > 1 else gy
        rxp, device = _raw_xp_device(gy)
        rows = rxp.expand_dims(rxp.arange(m, device=device), axis=1)
        cols = rxp.expand_dims(rxp.arange(n, device=device), axis=0)
        mask = rxp.astype(cols - rows == self.offset, raw(gy).dtype)
        return (xp.expand_dims(column, axis=-1) * mask,)


def _diagonal_length(m: int, n: int, offset: int) -> int:
    return max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))


def diagonal(x: Any, /, *, offset: int = 0) -> Variable:
    """The diagonal ``x[..., i, i + offset]`` of each matrix.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.arange(6.0).reshape(2, 3))
    >>> y = xp.linalg.diagonal(x, offset=1)
    >>> y
    variable([1., 5.])
    >>> xp.sum(y).backward(); x.grad
    array([[0., 1., 0.],
           [0., 0., 1.]])
    """
    _check_matrix("linalg.diagonal", x)
    return Diagonal(int(offset)).apply((x,))[0]


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Variable:
    """Sum of the diagonal ``x[..., i, i + offset]`` of each matrix.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> y = xp.linalg.trace(x)
    >>> y
    variable(5.)
    >>> y.backward(); x.grad
    array([[1., 0.],
           [0., 1.]])
    """
    return _table("sum")(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def outer(x1: Any, x2: Any, /) -> Variable:
    """Outer product ``x1[:, None] * x2[None, :]`` of two vectors (no conjugation).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([1.0, 2.0]))
    >>> y = xp.linalg.outer(a, np.array([1.0, 10.0, 100.0]))
    >>> xp.sum(y).backward(); a.grad
    array([111., 111.])
    """
    s1, s2 = shape_of(x1), shape_of(x2)
    if len(s1) != 1 or len(s2) != 1:
        raise ValueError(f"linalg.outer: x1 and x2 must be 1-D, got shapes {s1} and {s2}")
    return _table("multiply")(reshape(x1, (s1[0], 1)), reshape(x2, (1, s2[0])))


class Cross(FunctionNode):
    _retain_in = (0, 1)

    def __init__(self, axis: int) -> None:
        self.axis = axis  # negative

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.cross(inputs[0], inputs[1], axis=self.axis),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        a, b = inputs
        return ((broadcast_shapes(a.shape, b.shape), a.xp.result_type(a.dtype, b.dtype)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        # gy . (x1 x x2) = x1 . (x2 x gy) = x2 . (gy x x1)  (scalar triple product)
        return tuple(
            xp.linalg.cross(_conj(xp, x2), gy, axis=self.axis)
            if i == 0
            else xp.linalg.cross(gy, _conj(xp, x1), axis=self.axis)
            for i in indexes
        )


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Variable:
    """Cross product of 3-vectors along ``axis`` (of the broadcast shape).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a = agnograd.Variable(np.array([1.0, 0.0, 0.0]))
    >>> y = xp.linalg.cross(a, np.array([0.0, 1.0, 0.0]))
    >>> y
    variable([0., 0., 1.])
    >>> xp.sum(y * np.array([0.0, 0.0, 2.0])).backward(); a.grad
    array([2., 0., 0.])
    """
    s1, s2 = shape_of(x1), shape_of(x2)
    ndim = max(len(s1), len(s2))
    if not -ndim <= axis < ndim:
        raise ValueError(f"linalg.cross: axis {axis} is out of range for shapes {s1} and {s2}")
    axis = axis - ndim if axis >= 0 else axis
    for name, s in (("x1", s1), ("x2", s2)):
        if len(s) < -axis or s[axis] != 3:
            raise ValueError(f"linalg.cross: {name} of shape {s} has no axis {axis} of size 3")
    return Cross(axis).apply((x1, x2))[0]


class MatrixRank(FunctionNode):
    differentiable = False

    def __init__(self, rtol: Any) -> None:
        self.rtol = rtol

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.matrix_rank(inputs[0], rtol=self.rtol),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        return ((x.shape[:-2], x.xp.__array_namespace_info__().default_dtypes()["indexing"]),)


def matrix_rank(x: Any, /, *, rtol: Any = None) -> Variable:
    """Number of singular values above ``rtol * max(S)``; an integer, no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.linalg.matrix_rank(np.array([[1.0, 2.0], [2.0, 4.0]]))
    variable(1)
    """
    _check_matrix("linalg.matrix_rank", x)
    return MatrixRank(raw(rtol)).apply((x,))[0]


DIFFERENTIABLE = {
    "matmul": matmul,
    "matrix_transpose": matrix_transpose,
    "tensordot": tensordot,
    "vecdot": vecdot,
    "linalg.cholesky": cholesky,
    "linalg.cross": cross,
    "linalg.det": det,
    "linalg.diagonal": diagonal,
    "linalg.eigh": eigh,
    "linalg.eigvalsh": eigvalsh,
    "linalg.inv": inv,
    "linalg.matmul": matmul,
    "linalg.matrix_norm": matrix_norm,
    "linalg.matrix_power": matrix_power,
    "linalg.matrix_transpose": matrix_transpose,
    "linalg.outer": outer,
    "linalg.pinv": pinv,
    "linalg.qr": qr,
    "linalg.slogdet": slogdet,
    "linalg.solve": solve,
    "linalg.svd": svd,
    "linalg.svdvals": svdvals,
    "linalg.tensordot": tensordot,
    "linalg.trace": trace,
    "linalg.vecdot": vecdot,
    "linalg.vector_norm": vector_norm,
}
NON_DIFFERENTIABLE: dict[str, Any] = {"linalg.matrix_rank": matrix_rank}
UNSUPPORTED: dict[str, str] = {}
