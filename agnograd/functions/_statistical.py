"""Reductions of the array API standard (statistical chapter) and their rules.

Conventions, chosen to agree with PyTorch (the tests' oracle):

- ``max``/``min``: tied extrema share the gradient evenly (``torch.amax``).
- ``prod``: the gradient of each element is the product of the others, computed
  with exclusive cumulative products, so zeros need no special case and no element
  is ever divided by.
- ``std``: the gradient is 0 where the standard deviation is 0.
- Complex inputs follow PyTorch's conjugate Wirtinger convention: a rule multiplies
  the upstream gradient by the conjugate of the derivative.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from agnograd.backends._backend import known_shape
from agnograd.core._fast import apply1
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import (
    conjugate,
    held,
    input_shape,
    normalize_axes,
    others_product,
)
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)

Axis = int | tuple[int, ...] | None


# -- reductions -------------------------------------------------------------------


def dtype_kwargs(dtype: Any) -> dict[str, Any]:
    """The reduction's ``dtype`` argument, when the caller gave one (the input is then
    already cast to it): without it the backend widens small integers."""
    return {} if dtype is None else {"dtype": dtype}


def as_dtype(x: Any, dtype: Any) -> Any:
    if dtype is None:
        return x
    from agnograd.functions._manipulation import astype

    return astype(x, dtype)


class Sum(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    fn = "sum"

    def __init__(self, axis: Axis, keepdims: bool, dtype: Any = None) -> None:
        self.axis = axis
        self.keepdims = keepdims
        self.kwargs = dtype_kwargs(dtype)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        if not self._retain_in and not known_shape(x.shape):
            # A length Dask cannot know yet (nan): backward needs x to broadcast to.
            self.retain_inputs((0,))
        fn = getattr(self.xp, self.fn)
        return (fn(x, axis=self.axis, keepdims=self.keepdims, **self.kwargs),)

    @property
    def axes(self) -> tuple[int, ...]:
        return normalize_axes(self.axis, len(input_shape(self)), self.fn)

    def _kept(self, gy: Any) -> Any:
        """The output gradient with the reduced axes kept (as length one)."""
        shape = input_shape(self)
        if self.keepdims:
            return gy
        axes = self.axes
        xp = namespace_of(gy)
        if not known_shape(shape):
            for a in axes:
                gy = xp.expand_dims(gy, axis=a)
            return gy
        return xp.reshape(gy, tuple(1 if i in axes else s for i, s in enumerate(shape)))

    def _spread(self, gy: Any) -> Any:
        """Broadcast the output gradient back over the reduced axes."""
        shape = input_shape(self)
        xp = namespace_of(gy)
        if not known_shape(shape):  # broadcast by adding zeros of the input's shape
            (x,) = self.get_retained_inputs()
            return self._kept(gy) + xp.zeros_like(x)
        return xp.broadcast_to(self._kept(gy), shape)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._spread(grad_outputs[0]),)


@ROWS.declare("sum")
def sum(  # noqa: A001 - the standard's name
    x: Any,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    dtype: Any = None,
    keepdims: bool = False,
) -> Variable:
    """Sum of the elements over ``axis`` (all of them by default).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.sum(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=0)
    variable([4., 6.])
    """
    return apply1(Sum(axis, keepdims, dtype), as_dtype(x, dtype))


class Mean(Sum):
    fn = "mean"

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        shape = input_shape(self)
        count = math.prod(shape[a] for a in self.axes)
        return (self._spread(grad_outputs[0]) / count,)


@ROWS.declare("mean")
def mean(
    x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Variable:
    """Arithmetic mean over ``axis`` (all of them by default).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.mean(np.array([1.0, 2.0, 6.0]))
    variable(3.)
    """
    return apply1(Mean(axis, keepdims), x)


class Prod(Sum):
    linear = False  # unlike its base class

    fn = "prod"
    _retain_in = (0,)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        # holomorphic: the derivative itself, where backward takes its conjugate
        axes = normalize_axes(self.axis, len(inputs[0].shape), self.fn)
        others = others_product(inputs[0], axes)
        return (xp.sum(tangents[0] * others, axis=axes, keepdims=self.keepdims),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        others = conjugate(namespace_of(x), others_product(x, self.axes))
        return (self._kept(grad_outputs[0]) * others,)


@ROWS.declare("prod")
def prod(
    x: Any,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    dtype: Any = None,
    keepdims: bool = False,
) -> Variable:
    """Product of the elements over ``axis`` (all of them by default).

    The gradient of each element is the product of the other elements, computed
    without dividing, so it is exact where elements are zero (to every order).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([2.0, 0.0, 3.0]))
    >>> y = xp.prod(x)
    >>> y
    variable(0.)
    >>> y.backward(); x.grad
    array([0., 6., 0.])
    """
    return apply1(Prod(axis, keepdims, dtype), as_dtype(x, dtype))


class Extremum(Sum):
    """``max``/``min``: the gradient goes to the elements equal to the result, split
    evenly among ties (as ``torch.amax`` does)."""

    linear = False  # unlike its base class

    _retain_in = (0,)
    _retain_out = (0,)

    @property
    def label(self) -> str:
        return self.fn.capitalize()

    def _ties(self, x: Any, y: Any, axes: tuple[int, ...]) -> tuple[Any, Any]:
        """Where the extremum ``y`` is in ``x``, and how many tie there: constants of
        the derivative, computed from the arrays (or, in a gradient graph not run yet,
        by nodes of it from the data it runs on: the same operations, so the same ties)."""
        x, y = held(x), held(y)
        r = namespace_of(y)
        kept = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        hit = r.equal(x, y if self.keepdims else r.reshape(y, kept))
        return hit, r.sum(r.astype(hit, x.dtype), axis=axes, keepdims=True)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        axes = normalize_axes(self.axis, len(inputs[0].shape), self.fn)
        hit, count = self._ties(inputs[0], outputs[0], axes)
        shared = xp.where(hit, tangents[0] / count, 0.0)
        return (xp.sum(shared, axis=axes, keepdims=self.keepdims),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        gy = self._kept(grad_outputs[0])
        xp = namespace_of(gy)
        (x,), (y,) = self.get_retained_inputs(), self.get_retained_outputs()
        hit, count = self._ties(x, y, self.axes)
        return (xp.where(hit, gy / count, 0.0),)


def _extremum(fn: str, x: Any, axis: Axis, keepdims: bool) -> Variable:
    node = Extremum(axis, keepdims)
    node.fn = fn
    return node.apply((x,))[0]


@ROWS.declare("max")
def max(  # noqa: A001 - the standard's name
    x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Variable:
    """Largest element over ``axis`` (all of them by default).

    Tied maxima share the gradient evenly, as in ``torch.amax``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0, 3.0, 3.0]))
    >>> y = xp.max(x)
    >>> y.backward(); x.grad
    array([0. , 0.5, 0.5])
    """
    return _extremum("max", x, axis, keepdims)


@ROWS.declare("min")
def min(  # noqa: A001 - the standard's name
    x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Variable:
    """Smallest element over ``axis`` (all of them by default).

    Tied minima share the gradient evenly, as in ``torch.amin``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.min(np.array([[1.0, -3.0], [0.5, 2.0]]), axis=1)
    variable([-3. ,  0.5])
    """
    return _extremum("min", x, axis, keepdims)


class Var(FunctionNode):
    fn = "var"
    _retain_in = (0,)

    def __init__(self, axis: Axis, correction: float, keepdims: bool) -> None:
        self.axis = axis
        self.correction = correction
        self.keepdims = keepdims

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        xp = self.xp
        (x,) = inputs
        try:
            return (
                getattr(xp, self.fn)(
                    x, axis=self.axis, correction=self.correction, keepdims=self.keepdims
                ),
            )
        except NotImplementedError:
            # array-api-compat's PyTorch namespace rejects a fractional correction:
            # compute it from the definition.
            axes = normalize_axes(self.axis, x.ndim, self.fn)
            centered = x - xp.mean(x, axis=axes, keepdims=True)
            if xp.isdtype(x.dtype, "complex floating"):
                squares = xp.real(centered) ** 2 + xp.imag(centered) ** 2
            else:
                squares = centered * centered
            dof = math.prod(x.shape[a] for a in axes) - self.correction
            y = xp.sum(squares, axis=axes, keepdims=self.keepdims) / dof
            return (xp.sqrt(y) if self.fn == "std" else y,)

    def _centered(self, x: Any) -> tuple[Any, float, tuple[int, ...]]:
        """``x - mean(x)``, ``1 / (N - correction)`` and the reduced axes."""
        xp = namespace_of(x)
        shape = tuple(x.shape)
        axes = normalize_axes(self.axis, len(shape), self.fn)
        dof = math.prod(shape[a] for a in axes) - self.correction
        # N - correction <= 0 makes the forward inf or nan; the derivatives follow.
        scale = 1.0 / dof if dof > 0 else math.nan
        return x - xp.mean(x, axis=axes, keepdims=True), scale, axes

    def _parts(self, gy: Any) -> tuple[Any, Any, float]:
        """``gy`` with the reduced axes kept, ``x - mean(x)`` and ``1 / (N - correction)``."""
        (x,) = self.get_retained_inputs()
        centered, scale, axes = self._centered(x)
        if not self.keepdims:
            shape = tuple(x.shape)
            gy = namespace_of(gy).reshape(
                gy, tuple(1 if i in axes else s for i, s in enumerate(shape))
            )
        return gy, centered, scale

    def _half_jvp(self, xp: Any, x: Any, t: Any) -> Any:
        """Half the tangent of the variance: ``sum(Re(conj(x - mean) t)) / (N - correction)``
        (the mean's tangent drops out: the centered values sum to 0)."""
        centered, scale, axes = self._centered(x)
        product = conjugate(xp, centered) * t
        if xp.isdtype(product.dtype, "complex floating"):
            product = xp.real(product)
        return scale * xp.sum(product, axis=axes, keepdims=self.keepdims)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        return (2.0 * self._half_jvp(xp, inputs[0], tangents[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        gy, centered, scale = self._parts(grad_outputs[0])
        return ((2.0 * scale) * gy * centered,)


@ROWS.declare("var")
def var(
    x: Any,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    correction: int | float = 0.0,
    keepdims: bool = False,
) -> Variable:
    """Variance over ``axis``, dividing by ``N - correction`` (1 gives the unbiased one).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0, 2.0, 6.0]))
    >>> y = xp.var(x, correction=1)
    >>> y
    variable(7.)
    >>> y.backward(); x.grad
    array([-2., -1.,  3.])
    """
    return apply1(Var(axis, correction, keepdims), x)


class Std(Var):
    fn = "std"
    _retain_out = (0,)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        return (_over_std(xp, self._half_jvp(xp, inputs[0], tangents[0]), outputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        gy, centered, scale = self._parts(grad_outputs[0])
        xp = namespace_of(gy)
        (y,) = self.get_retained_outputs()
        return (scale * _over_std(xp, gy, xp.reshape(y, tuple(gy.shape))) * centered,)


def _over_std(xp: Any, a: Any, y: Any) -> Any:
    """``a / y``, ``y`` the standard deviation: d std = d var / (2 std), taken as 0
    where std is 0 (as in PyTorch)."""
    zero = held(y) == 0
    return xp.where(zero, 0.0, a / xp.where(zero, 1.0, y))


@ROWS.declare("std")
def std(
    x: Any,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    correction: int | float = 0.0,
    keepdims: bool = False,
) -> Variable:
    """Standard deviation over ``axis``, the square root of :func:`var`.

    Where it is 0 (all elements equal) the gradient is taken as 0, as in PyTorch.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.std(np.array([[1.0, 3.0], [2.0, 2.0]]), axis=1)
    variable([1., 0.])
    """
    return apply1(Std(axis, correction, keepdims), x)


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
