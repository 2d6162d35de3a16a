"""Reductions of the array API standard (statistical chapter) and their rules."""

from __future__ import annotations

import math
from typing import Any

from agnograd._function import FunctionNode
from agnograd._namespace import namespace_of
from agnograd._variable import Variable


def normalize_axes(axis: int | tuple[int, ...] | None, ndim: int, op: str) -> tuple[int, ...]:
    """Non-negative, sorted axes; ``None`` means all of them."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    result = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise ValueError(f"{op}: axis {a} is out of range for an array of {ndim} dimensions")
        result.append(a % ndim if ndim else 0)
    if len(set(result)) != len(result):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(result))


class Sum(FunctionNode):
    fn = "sum"

    def __init__(self, axis: int | tuple[int, ...] | None, keepdims: bool) -> None:
        self.axis = axis
        self.keepdims = keepdims

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        return (getattr(self.xp, self.fn)(x, axis=self.axis, keepdims=self.keepdims),)

    def _spread(self, gy: Any) -> Any:
        """Broadcast the output gradient back over the reduced axes."""
        xp = namespace_of(gy)
        shape = self.inputs[0].shape  # type: ignore[index]
        if not self.keepdims and self.axis is not None:
            axes = normalize_axes(self.axis, len(shape), self.fn)
            gy = xp.reshape(gy, tuple(1 if i in axes else s for i, s in enumerate(shape)))
        return xp.broadcast_to(gy, shape)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._spread(grad_outputs[0]),)


class Mean(Sum):
    fn = "mean"

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        shape = self.inputs[0].shape  # type: ignore[index]
        axes = normalize_axes(self.axis, len(shape), "mean")
        count = math.prod(shape[a] for a in axes)
        return (self._spread(grad_outputs[0]) / count,)


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
    if dtype is not None:
        from agnograd.functions._manipulation import astype

        x = astype(x, dtype)
    return Sum(axis, keepdims).apply((x,))[0]


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
    return Mean(axis, keepdims).apply((x,))[0]


DIFFERENTIABLE = {"mean": mean, "sum": sum}
NON_DIFFERENTIABLE: dict[str, object] = {}
UNSUPPORTED: dict[str, str] = {}
