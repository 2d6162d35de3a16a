"""Cumulative sums and products of the array API standard (statistical chapter).

Conventions, chosen to agree with PyTorch (the tests' oracle):

- ``cumulative_prod``: exact with zeros, to first and second order; as in PyTorch,
  nonzero elements are divided by, so the second derivative loses accuracy where
  ``|x|`` is tiny (around 1e-100 in float64).
- Complex inputs follow PyTorch's conjugate Wirtinger convention: a rule multiplies
  the upstream gradient by the conjugate of the derivative.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.core._fast import apply1
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import conjugate, held, input_shape, shape_of
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows
from agnograd.functions._statistical import as_dtype, dtype_kwargs

ROWS = Rows(__name__)


def _single_axis(axis: int | None, ndim: int, op: str) -> int:
    if axis is None:
        if ndim != 1:
            raise ValueError(
                f"{op}: axis is required for an array of {ndim} dimensions (only a "
                "one-dimensional x may leave it out)"
            )
        return 0
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for an array of {ndim} dimensions")
    return axis % ndim


def _along(axis: int, key: slice) -> tuple[Any, ...]:
    """Index that applies ``key`` to ``axis`` only."""
    return (*(slice(None),) * axis, key, ...)


def reverse_cumulative_sum(x: Any, axis: int) -> Any:
    """``out[i] = sum(x[i:])`` along ``axis`` (flips keep it exact, unlike total - cumsum)."""
    xp = namespace_of(x)
    return xp.flip(xp.cumulative_sum(xp.flip(x, axis=axis), axis=axis), axis=axis)


# -- cumulative -------------------------------------------------------------------


class CumulativeSum(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    fn = "cumulative_sum"

    def __init__(self, axis: int | None, include_initial: bool, dtype: Any = None) -> None:
        self.given_axis = axis  # the user's: forward and backward resolve it for their shape
        self.include_initial = include_initial
        self.kwargs = dtype_kwargs(dtype)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        fn = getattr(self.xp, self.fn)
        x = inputs[0]
        axis = _single_axis(self.given_axis, len(x.shape), self.fn)
        return (fn(x, axis=axis, include_initial=self.include_initial, **self.kwargs),)

    @property
    def axis(self) -> int:
        """The non-negative axis, for the input's shape (its node's)."""
        return _single_axis(self.given_axis, len(input_shape(self)), self.fn)

    def _trim(self, a: Any, axis: int) -> Any:
        """Drop the leading initial value (``include_initial``) along ``axis``."""
        return a[_along(axis, slice(1, None))] if self.include_initial else a

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        axis = self.axis
        return (reverse_cumulative_sum(self._trim(grad_outputs[0], axis), axis),)


@ROWS.declare("cumulative_sum")
def cumulative_sum(
    x: Any,
    /,
    *,
    axis: int | None = None,
    dtype: Any = None,
    include_initial: bool = False,
) -> Variable:
    """Running sum along ``axis`` (optional for a one-dimensional ``x``).

    ``include_initial=True`` starts the result with a 0 (one more element).

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0, 2.0, 3.0]))
    >>> y = xp.cumulative_sum(x, include_initial=True)
    >>> y
    variable([0., 1., 3., 6.])
    >>> F.sum(y).backward(); x.grad
    array([3., 2., 1.])
    """
    _single_axis(axis, len(shape_of(x)), "cumulative_sum")  # refuses a wrong axis now
    return apply1(CumulativeSum(axis, include_initial, dtype), as_dtype(x, dtype))


class CumulativeProd(CumulativeSum):
    linear = False  # unlike its base class

    fn = "cumulative_prod"
    _retain_in = (0,)
    _retain_out = (0,)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (x,), (t,) = inputs, tangents
        axis = _single_axis(self.given_axis, len(x.shape), self.fn)
        # ty[j] = sum over i <= j of t[i] * prod(x[k] for k <= j, k != i) (holomorphic:
        # no conjugates). Before the first zero z1 that is y[j] * cumsum(t / x)[j]; from
        # z1 on, the term i = z1 is t[z1] * cumprod(x with x[z1] = 1)[j], the terms of
        # the other nonzero x[i] are x[z1] * that cumprod * t[i] / x[i] and, from the
        # second zero z2 on, that of i = z2 is x[z1] * t[z2] * cumprod(x with x[z1] =
        # x[z2] = 1): 0, but not their derivatives (forward over forward), as in backward.
        zero, first, second = _zeros(x, axis)
        lead = xp.cumulative_prod(xp.where(first, 1.0, x), axis=axis)
        both = xp.cumulative_prod(xp.where(first | second, 1.0, x), axis=axis)
        ratio = xp.cumulative_sum(xp.where(zero, 0.0, t / xp.where(zero, 1.0, x)), axis=axis)
        x1 = xp.sum(xp.where(first, x, 0.0), axis=axis, keepdims=True)
        t1 = xp.sum(xp.where(first, t, 0.0), axis=axis, keepdims=True)
        t2 = xp.sum(xp.where(second, t, 0.0), axis=axis, keepdims=True)
        ty = lead * xp.where(_before(first, axis), ratio, t1 + x1 * ratio)
        ty = ty + xp.where(_before(second, axis), 0.0, x1 * t2 * both)
        if self.include_initial:
            ty = xp.concat([xp.zeros_like(outputs[0][_along(axis, slice(0, 1))]), ty], axis=axis)
        return (ty,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        axis = self.axis
        gy = self._trim(grad_outputs[0], axis)
        xp = namespace_of(gy)
        (x,) = self.get_retained_inputs()
        y = self._trim(self.get_retained_outputs()[0], axis)
        x, y = conjugate(xp, x), conjugate(xp, y)
        # gx[i] = sum over j >= i of gy[j] * prod(x[k] for k <= j, k != i).
        # Where x[i] != 0 that is rcs(gy * y)[i] / x[i] (rcs: reverse cumulative sum);
        # at the first zero z1 it is rcs(gy * cumprod(x with x[z1] = 1))[z1]; at the
        # second zero z2 it is x[z1] * rcs(gy * cumprod(x with x[z1] = x[z2] = 1))[z2],
        # whose value is 0 but whose derivative (double backprop) is not; after two
        # zeros both value and derivative vanish.
        zero, first, second = _zeros(x, axis)
        gx = xp.where(zero, 0.0, reverse_cumulative_sum(gy * y, axis) / xp.where(zero, 1.0, x))
        at_first = reverse_cumulative_sum(
            gy * xp.cumulative_prod(xp.where(first, 1.0, x), axis=axis), axis
        )
        gx = xp.where(first, at_first, gx)
        if isinstance(gy, Variable):
            both = xp.where(first | second, 1.0, x)
            lead = xp.sum(xp.where(first, x, 0.0), axis=axis, keepdims=True)
            at_second = lead * reverse_cumulative_sum(
                gy * xp.cumulative_prod(both, axis=axis), axis
            )
            gx = xp.where(second, at_second, gx)
        return (gx,)


def _zeros(x: Any, axis: int) -> tuple[Any, Any, Any]:
    """Where ``x`` is zero, where its first zero along ``axis`` is, and its second:
    constants of the derivatives (nodes of a gradient graph not run yet)."""
    rx = held(x)
    r = namespace_of(rx)
    zero = rx == 0
    # int32 counts: some devices have no int64 (array-api-strict's no_x64).
    count = r.cumulative_sum(r.astype(zero, r.int32), axis=axis, dtype=r.int32)
    return zero, zero & (count == 1), zero & (count == 2)


def _before(mask: Any, axis: int) -> Any:
    """Where no element of ``mask`` is true yet along ``axis`` (inclusive)."""
    r = namespace_of(mask)
    return r.cumulative_sum(r.astype(mask, r.int32), axis=axis, dtype=r.int32) == 0


@ROWS.declare("cumulative_prod")
def cumulative_prod(
    x: Any,
    /,
    *,
    axis: int | None = None,
    dtype: Any = None,
    include_initial: bool = False,
) -> Variable:
    """Running product along ``axis`` (optional for a one-dimensional ``x``).

    ``include_initial=True`` starts the result with a 1. The gradient is exact where
    elements are zero, to first and second order; nonzero elements are divided by (as
    in PyTorch), so the second derivative loses accuracy where ``|x|`` is tiny.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([2.0, 0.0, 3.0]))
    >>> y = xp.cumulative_prod(x)
    >>> y
    variable([2., 0., 0.])
    >>> F.sum(y).backward(); x.grad
    array([1., 8., 0.])
    """
    _single_axis(axis, len(shape_of(x)), "cumulative_prod")  # refuses a wrong axis now
    return apply1(CumulativeProd(axis, include_initial, dtype), as_dtype(x, dtype))


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
