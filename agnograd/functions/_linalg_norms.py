"""The rest of the ``linalg`` extension: ``vector_norm``, ``matrix_norm``,
``matrix_power``, ``diagonal``, ``trace``, ``outer``, ``cross`` and ``matrix_rank``
(conventions: :mod:`agnograd.functions._linalg`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from agnograd.backends._shape_dtype import broadcast_shapes
from agnograd.core._fast import apply1, apply2
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import (
    Spec,
    conjugate,
    constant,
    input_shape,
    normalize_axes,
    raw,
    raw_xp_device,
    real_dtype,
    shape_of,
)
from agnograd.functions._linalg import check_matrix, matmul, raw_zeros
from agnograd.functions._linalg_decompositions import svdvals
from agnograd.functions._linalg_inverse import inv
from agnograd.functions._manipulation import expand_dims, reshape
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


def _table(name: str) -> Any:
    """A differentiable function of another chapter (looked up late: no import cycle)."""
    from agnograd.functions._table import DIFFERENTIABLE as TABLE

    return TABLE[name]


def _expand_reduced(xp: Any, g: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """Reshape a reduction's result ``g`` so that it broadcasts against ``shape``."""
    return xp.reshape(g, tuple(1 if i in axes else s for i, s in enumerate(shape)))


# -- norms -------------------------------------------------------------------------------


class VectorNorm(FunctionNode):
    _retain_in = (0,)
    _retain_out = (0,)

    def __init__(
        self,
        axis: int | tuple[int, ...] | None,
        keepdims: bool,
        ord: float,  # noqa: A002
    ) -> None:
        self.axis = axis  # the user's: forward and backward resolve it for their shape
        self.keepdims = keepdims
        self.ord = ord
        if ord == 0:  # a count of the nonzero elements: piecewise constant
            self.differentiable = False

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x = inputs[0]
        axes = normalize_axes(self.axis, len(x.shape), "linalg.vector_norm")
        # All axes as None: some libraries reject an empty tuple for 0-d arrays.
        axis = None if len(axes) == len(x.shape) else axes
        return (self.xp.linalg.vector_norm(x, axis=axis, keepdims=self.keepdims, ord=self.ord),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        axes = normalize_axes(self.axis, len(x.shape), "linalg.vector_norm")
        if self.keepdims:
            shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        else:
            shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
        return ((shape, real_dtype(x.xp, x.dtype)),)

    def _slope(self, x: Any, y: Any, shape: tuple[int, ...]) -> tuple[Any, tuple[int, ...]]:
        """``w`` such that the norm's gradient is ``gy * w`` and its tangent the sum of
        ``Re(conj(w) t)`` (``w`` is ``2 dy/d conj(x)`` for complex ``x``), and the axes."""
        xp = namespace_of(x)
        axes = normalize_axes(self.axis, len(shape), "linalg.vector_norm")
        if not self.keepdims:
            y = _expand_reduced(xp, y, shape, axes)
        p = self.ord
        # The gradient at the zero vector is 0 (PyTorch's subgradient): zeros are
        # replaced by ones where they would be divided by, and multiplied by 0 anyway.
        y_safe = y + xp.astype(y == 0, y.dtype)
        if p == 2:
            return x / y_safe, axes
        ax = xp.abs(x)
        ax_safe = ax + xp.astype(ax == 0, ax.dtype)
        unit = x / ax_safe  # sign(x), or x / |x| for complex x; 0 at 0
        if math.isinf(p):
            # All of the extreme elements share the gradient evenly (ties split).
            hit = xp.astype(ax == y, ax.dtype)
            count = xp.sum(hit, axis=axes, keepdims=True)
            return unit * (hit / count), axes
        if p == 1:
            return unit, axes
        return unit * (ax_safe / y_safe) ** (p - 1), axes

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (x,), (t,) = inputs, tangents
        w, axes = self._slope(x, outputs[0], tuple(x.shape))
        product = conjugate(xp, w) * t
        if xp.isdtype(product.dtype, "complex floating"):
            product = xp.real(product)
        return (xp.sum(product, axis=axes, keepdims=self.keepdims),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        (y,) = self.get_retained_outputs()
        (gy,) = grad_outputs
        shape = input_shape(self)
        w, axes = self._slope(x, y, shape)
        if not self.keepdims:
            gy = _expand_reduced(namespace_of(gy), gy, shape, axes)
        return (gy * w,)


@ROWS.declare("linalg.vector_norm")
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
    if not shape and axis not in (None, ()):
        # normalize_axes gives a 0-d array axis 0, as the reductions want; NumPy's
        # vector_norm refuses it, and so has agnograd's.
        bad = axis if isinstance(axis, int) else axis[0]
        raise ValueError(
            f"linalg.vector_norm: axis {bad} is out of range for an array of 0 dimensions"
        )
    normalize_axes(axis, len(shape), "linalg.vector_norm")  # refuses a wrong axis now
    if isinstance(ord, bool) or not isinstance(ord, int | float):
        raise TypeError(f"linalg.vector_norm: ord must be a real number, got {ord!r}")
    if axis is not None and not isinstance(axis, int):
        axis = tuple(axis)
    return apply1(VectorNorm(axis, bool(keepdims), ord), x)


@ROWS.declare("linalg.matrix_norm")
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
    check_matrix("linalg.matrix_norm", x)
    if ord == "fro":
        return vector_norm(x, axis=(-2, -1), keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        p = {"nuc": 1, 2: math.inf, -2: -math.inf}[ord]
        y = vector_norm(svdvals(x), axis=-1, ord=p)
    elif ord in (1, -1, math.inf, -math.inf):
        inner = -2 if ord in (1, -1) else -1  # column sums for 1, row sums for inf
        sums = vector_norm(x, axis=inner, keepdims=True, ord=1)
        y = vector_norm(sums, axis=(-2, -1), ord=math.inf if ord > 0 else -math.inf)
    else:
        raise ValueError(
            f"linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}"
        )
    # Axes inserted, not a reshape to the batch shape: a graph re-run on a new shape
    # takes it from its input.
    return expand_dims(y, axis=(-2, -1)) if keepdims else y


# -- products, powers, diagonals ---------------------------------------------------------


@ROWS.declare("linalg.matrix_power")
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
    shape = check_matrix("linalg.matrix_power", x, square=True)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {n!r}")
    if n == 0:
        rxp, device = raw_xp_device(x)
        identity = rxp.eye(shape[-1], dtype=x.dtype, device=device)
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


def _diagonal_length(m: int, n: int, offset: int) -> int:
    return max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))


class Diagonal(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.diagonal(inputs[0], offset=self.offset),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        m, n = x.shape[-2:]
        return (((*x.shape[:-2], _diagonal_length(m, n, self.offset)), x.dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        shape = input_shape(self)
        *batch, m, n = shape
        k = gy.shape[-1]
        if k == 0:
            return (raw_zeros(gy, shape),)
        # Row r0 + t holds the t-th diagonal element: pad gy to one entry per row,
        # then spread each row's entry onto the offset diagonal with a mask.
        r0 = max(-self.offset, 0)
        pieces = [gy]
        if r0:
            pieces.insert(0, raw_zeros(gy, (*batch, r0)))
        if m - r0 - k:
            pieces.append(raw_zeros(gy, (*batch, m - r0 - k)))
        column = xp.concat(pieces, axis=-1) if len(pieces) > 1 else gy
        rxp, device = raw_xp_device(gy)
        rows = rxp.expand_dims(rxp.arange(m, device=device), axis=1)
        cols = rxp.expand_dims(rxp.arange(n, device=device), axis=0)
        mask = rxp.astype(cols - rows == self.offset, gy.dtype)
        return (xp.expand_dims(column, axis=-1) * mask,)


@ROWS.declare("linalg.diagonal")
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
    check_matrix("linalg.diagonal", x)
    return apply1(Diagonal(int(offset)), x)


@ROWS.declare("linalg.trace")
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


@ROWS.declare("linalg.outer")
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
    # -1, not the lengths: a define-then-run graph takes them from its inputs at each run.
    return _table("multiply")(reshape(x1, (-1, 1)), reshape(x2, (1, -1)))


class Cross(FunctionNode):
    bilinear = True  # forward mode: f(t1, x2) + f(x1, t2)

    _retain_in = (0, 1)

    def __init__(self, axis: int) -> None:
        self.axis = axis  # negative

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.cross(inputs[0], inputs[1], axis=self.axis),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        a, b = inputs
        return ((broadcast_shapes(a.shape, b.shape), a.xp.result_type(a.dtype, b.dtype)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        # gy . (x1 x x2) = x1 . (x2 x gy) = x2 . (gy x x1)  (scalar triple product)
        return tuple(
            xp.linalg.cross(conjugate(xp, x2), gy, axis=self.axis)
            if i == 0
            else xp.linalg.cross(gy, conjugate(xp, x1), axis=self.axis)
            for i in indexes
        )


@ROWS.declare("linalg.cross")
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
    return apply2(Cross(axis), x1, x2)


class MatrixRank(FunctionNode):
    differentiable = False

    def __init__(self, rtol: Any) -> None:
        self.rtol = rtol

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.linalg.matrix_rank(inputs[0], rtol=self.rtol),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[Spec, ...]:
        x = inputs[0]
        return ((x.shape[:-2], x.xp.__array_namespace_info__().default_dtypes()["indexing"]),)


@ROWS.declare("linalg.matrix_rank", differentiable=False)
def matrix_rank(x: Any, /, *, rtol: Any = None) -> Variable:
    """Number of singular values above ``rtol * max(S)``; an integer, no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.linalg.matrix_rank(np.array([[1.0, 2.0], [2.0, 4.0]]))
    variable(1)
    """
    check_matrix("linalg.matrix_rank", x)
    return apply1(MatrixRank(raw(rtol)), x)


# Derived from the rows (none is exported: the extension's are the namespace's only).
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
