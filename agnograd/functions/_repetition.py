"""Manipulation functions whose result repeats elements of its inputs, each node class
beside the function that applies it: broadcasting (``broadcast_to``,
``broadcast_arrays``, ``broadcast_shapes``), ``repeat`` and ``tile``. The gradient of
an element is the sum of the gradients of its copies."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from agnograd.backends._backend import is_array
from agnograd.core._fast import apply1
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import input_shape, shape_of
from agnograd.functions._manipulation import _one_axis, reshape
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


class BroadcastTo(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.broadcast_to(inputs[0], self.shape),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # The engine sums a gradient back to its input's shape.
        return grad_outputs


@ROWS.declare("broadcast_to")
def broadcast_to(x: Any, /, shape: tuple[int, ...]) -> Variable:
    """Broadcast ``x`` to ``shape``; the gradient is summed back.

    A new Variable even where ``x`` has that shape already (Chainer returns ``x``
    itself there): a graph is the same whatever shapes it was built for.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.broadcast_to(np.array([1.0, 2.0]), (2, 2))
    variable([[1., 2.],
              [1., 2.]])
    """
    shape = tuple(shape)
    if isinstance(x, Variable) or is_array(x):  # else apply refuses it, naming the node
        given = shape_of(x)
        lead = len(shape) - len(given)
        if lead < 0 or any(n not in (1, shape[lead + i]) for i, n in enumerate(given)):
            raise ValueError(
                f"broadcast_to: x of shape {given} cannot be broadcast to {shape}: each axis "
                "of x, counted from the end, must have length 1 or that of the shape"
            )
    return apply1(BroadcastTo(shape), x)


class BroadcastArrays(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # The shape comes from the inputs at every run, not from the build.
        return tuple(self.xp.broadcast_arrays(*inputs))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # The engine sums each gradient back to its input's shape.
        return tuple([grad_outputs[i] for i in indexes])


@ROWS.declare("broadcast_arrays")
def broadcast_arrays(*arrays: Any) -> tuple[Variable, ...]:
    """Broadcast the arrays against each other; each gradient is summed back. A tuple,
    as 2025.12 specifies (a list before).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> a, b = xp.broadcast_arrays(np.zeros((2, 1)), np.ones(3))
    >>> a.shape, b.shape
    ((2, 3), (2, 3))
    """
    if not arrays:
        return ()
    broadcast_shapes(*(shape_of(a) for a in arrays))  # refuses the shapes now
    return BroadcastArrays().apply(arrays)


# A pure function of shapes: no arrays, nothing to differentiate.
@ROWS.declare("broadcast_shapes", differentiable=False)
def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape that arrays of ``shapes`` broadcast to (no arrays involved).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).broadcast_shapes((3, 1), (4,), ())
    (3, 4)
    """
    ndim = builtins.max((len(s) for s in shapes), default=0)
    result = []
    for i in range(-ndim, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i and s[i] != 1}
        if len(sizes) > 1:
            raise ValueError(
                f"broadcast_shapes: shapes {', '.join(map(str, shapes))} cannot be broadcast "
                f"together (sizes {sorted(sizes)} meet at axis {i})"
            )
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


class Repeat(FunctionNode):
    """``repeat`` with the same integer count for every element: the gradient of an
    element is the sum of its ``repeats`` copies."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, repeats: int, axis: int) -> None:
        self.repeats = repeats
        self.axis = axis  # the user's, resolved for each input's number of axes

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        axis = _one_axis(self.axis, len(x.shape), "repeat", "the")
        return (self.xp.repeat(x, self.repeats, axis=axis),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        (x,) = inputs
        shape = list(x.shape)
        shape[_one_axis(self.axis, len(shape), "repeat", "the")] *= self.repeats
        return ((tuple(shape), x.dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        shape = input_shape(self)
        axis = _one_axis(self.axis, len(shape), "repeat", "the")
        split = (*shape[:axis], shape[axis], self.repeats, *shape[axis + 1 :])
        return (xp.sum(xp.reshape(gy, split), axis=axis + 1),)


@ROWS.declare("repeat")
def repeat(x: Any, repeats: Any, /, *, axis: int | None = None) -> Variable:
    """Repeat each element ``repeats`` times along ``axis`` (of the flattened ``x`` by
    default); ``repeats`` is an int or an integer array with one count per element.

    The gradient of an element is the sum of the gradients of its copies.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> y = xp.repeat(x, np.array([3, 1]))
    >>> y
    variable([1., 1., 1., 2.])
    >>> F.sum(y).backward(); x.grad
    array([3., 1.])
    """
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    _one_axis(axis, len(shape_of(x)), "repeat", "the")  # refuses a wrong axis now
    if isinstance(repeats, int) and not isinstance(repeats, bool):
        if repeats < 0:
            raise ValueError(f"repeat: repeats must not be negative, got {repeats}")
        return apply1(Repeat(repeats, axis), x)
    if type(repeats) in (bool, float, complex, list, tuple):
        raise TypeError(
            f"repeat: repeats must be an int or an integer array, got {type(repeats).__name__}"
        )
    from agnograd.functions._indexing import gather

    def fn(xp: Any, a: Any, counts: Any) -> Any:
        return xp.repeat(a, counts, axis=axis)

    return gather(fn, x, repeats, "Repeat")


class Tile(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, repetitions: tuple[int, ...]) -> None:
        self.repetitions = repetitions

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.tile(inputs[0], self.repetitions),)

    def _padded(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Shape and repetitions, both padded with leading ones to the same length."""
        reps = self.repetitions
        n = len(shape) if len(shape) > len(reps) else len(reps)
        return (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + reps

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        (x,) = inputs
        shape, reps = self._padded(tuple(x.shape))
        return ((tuple(s * r for s, r in zip(shape, reps, strict=True)), x.dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        shape = input_shape(self)
        padded, reps = self._padded(shape)
        # The output is laid out as (r0, s0, r1, s1, ...): sum over the copies.
        split = tuple(n for pair in zip(reps, padded, strict=True) for n in pair)
        summed = xp.sum(xp.reshape(gy, split), axis=tuple(range(0, len(split), 2)))
        return (xp.reshape(summed, shape),)


@ROWS.declare("tile")
def tile(x: Any, repetitions: tuple[int, ...], /) -> Variable:
    """Repeat the whole array ``repetitions[i]`` times along each axis ``i``.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> y = xp.tile(x, (2, 2))
    >>> y
    variable([[1., 2., 1., 2.],
              [1., 2., 1., 2.]])
    >>> F.sum(y).backward(); x.grad
    array([4., 4.])
    """
    reps = tuple(repetitions)
    if any(not isinstance(r, int) or r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be non-negative ints, got {repetitions!r}")
    return apply1(Tile(reps), x)


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
