"""Utility functions of the array API standard: ``all`` and ``any`` (no gradient) and
``diff``, differentiable in ``x`` and in ``prepend``/``append``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.backends._backend import SCALARS
from agnograd.core._fast import apply1
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import input_shape, raw_xp_device, shape_of
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


def _zeros(like: Any, shape: tuple[int, ...], raw_only: bool = False) -> Any:
    xp, device = raw_xp_device(like)
    zeros = xp.zeros(shape, dtype=like.dtype, device=device)
    if raw_only or not isinstance(like, Variable):
        return zeros
    return Variable._new(zeros, False)


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"diff: axis {axis} is out of range for an array of {ndim} dimensions")
    return axis % ndim


class Diff(FunctionNode):
    """``n``-th forward difference along ``axis`` of ``concat([prepend, x, append])``."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, axis: int, n: int, has_prepend: bool, has_append: bool) -> None:
        self.given_axis = axis  # the user's: forward and backward resolve it for their shapes
        self.n = n
        self.has_prepend = has_prepend
        self.has_append = has_append

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        rest = iter(inputs[1:])
        prepend = next(rest) if self.has_prepend else None
        append = next(rest) if self.has_append else None
        kwargs = {}
        # Only pass what was given: some libraries reject an explicit None.
        if prepend is not None:
            kwargs["prepend"] = prepend
        if append is not None:
            kwargs["append"] = append
        axis = _axis(self.given_axis, len(inputs[0].shape))
        return (self.xp.diff(inputs[0], axis=axis, n=self.n, **kwargs),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        x = inputs[0]
        shape = list(x.shape)
        axis = _axis(self.given_axis, len(shape))
        shape[axis] = max(sum(a.shape[axis] for a in inputs) - self.n, 0)
        dtype = x.dtype
        if len(inputs) > 1:
            dtype = x.__array_namespace__().result_type(*(a.dtype for a in inputs))
        return ((tuple(shape), dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (g,) = grad_outputs
        xp = namespace_of(g)
        axis = _axis(self.given_axis, len(input_shape(self)))
        lengths = [input_shape(self, i)[axis] for i in range(len(self.inputs or ()))]
        total = sum(lengths)
        if self.n >= total:  # the output is empty: nothing depends on the inputs
            shape = list(input_shape(self))
            shape[axis] = total
            g = _zeros(g, tuple(shape))
        else:
            # The adjoint of one difference d[i] = a[i + 1] - a[i] is
            # a[i] = g[i - 1] - g[i] (zero outside), that is -diff of g padded by zeros.
            for _ in range(self.n):
                shape = list(g.shape)
                shape[axis] = 1
                pad = _zeros(g, tuple(shape), raw_only=True)
                g = -xp.diff(g, axis=axis, prepend=pad, append=pad)
        # Split the gradient of concat([prepend, x, append]) between the inputs.
        order = [0] if not self.has_prepend else [1, 0]
        if self.has_append:
            order.append(len(lengths) - 1)
        bounds, start = {}, 0
        for i in order:
            bounds[i] = (start, start + lengths[i])
            start += lengths[i]
        lead = (slice(None),) * axis
        return tuple(g[(*lead, slice(*bounds[i]), ...)] for i in indexes)


@ROWS.declare("diff")
def diff(
    x: Any,
    /,
    *,
    axis: int = -1,
    n: int = 1,
    prepend: Any = None,
    append: Any = None,
) -> Variable:
    """``n``-th forward difference along ``axis``: ``out[i] = x[i + 1] - x[i]``, repeated.

    ``prepend`` and ``append`` are joined to ``x`` along ``axis`` first; they get
    gradients too. With ``n=0`` the result is ``x`` itself, without them (as NumPy,
    PyTorch and array-api-strict do).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0, 4.0, 9.0, 16.0]))
    >>> y = xp.diff(x)
    >>> y
    variable([3., 5., 7.])
    >>> xp.sum(y * np.array([1.0, 2.0, 3.0])).backward(); x.grad
    array([-1., -1., -1.,  3.])
    """
    _axis(axis, len(shape_of(x)))  # refuses a wrong axis now
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    if n == 0:  # x unchanged, prepend and append ignored (NumPy, PyTorch, array-api-strict)
        return apply1(Diff(axis, 0, False, False), x)
    inputs = [x]
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is None:
            continue
        if type(extra) in SCALARS:
            raise TypeError(
                f"diff: {name} must be an array shaped like x except along axis, got a "
                f"Python {type(extra).__name__}"
            )
        inputs.append(extra)
    return Diff(axis, n, prepend is not None, append is not None).apply(tuple(inputs))[0]


# -- without a gradient, forwarded to the backend
ROWS.nondifferentiable(
    "all", "Whether all elements (over ``axis``) are true; the result has no gradient."
)
ROWS.nondifferentiable(
    "any", "Whether any element (over ``axis``) is true; the result has no gradient."
)


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
