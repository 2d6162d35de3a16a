"""Manipulation functions of the array API standard that lay out each element of their
inputs once (reshape, permute, join, split, flip, roll, ...) and their rules, each node
class beside the function; also ``astype`` (a data type function), ``matrix_transpose``
(of linear algebra) and Chainer's ``transpose``. Those that repeat are ``_repetition``'s."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agnograd.backends._backend import raw_namespace
from agnograd.core._fast import apply1
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import apply_nondifferentiable, input_shape, normalize_axes, shape_of
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


class Reshape(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.reshape(inputs[0], self.shape),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return (namespace_of(gy).reshape(gy, input_shape(self)),)


@ROWS.declare("reshape")
def reshape(x: Any, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Variable:
    """Give ``x`` a new shape with the same elements (``-1`` infers one dimension).

    A new Variable even where ``x`` has that shape already (Chainer returns ``x``
    itself there): a graph is the same whatever shapes it was built for.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.reshape(np.arange(4.0), (2, 2))
    variable([[0., 1.],
              [2., 3.]])
    """
    return apply1(Reshape(tuple(shape)), x)


class PermuteDims(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, axes: tuple[int, ...]) -> None:
        self.axes = axes

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.permute_dims(inputs[0], self.axes),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        inverse = tuple(sorted(range(len(self.axes)), key=self.axes.__getitem__))
        return (namespace_of(gy).permute_dims(gy, inverse),)


@ROWS.declare("permute_dims")
def permute_dims(x: Any, /, axes: tuple[int, ...]) -> Variable:
    """Permute the axes of ``x``.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.permute_dims(np.zeros((1, 2, 3)), (2, 0, 1)).shape
    (3, 1, 2)
    """
    ndim = len(shape_of(x))
    if sorted(a % ndim for a in axes) != list(range(ndim)) or len(axes) != ndim:
        raise ValueError(
            f"permute_dims: axes {tuple(axes)} are not a permutation of the {ndim} axes"
        )
    return apply1(PermuteDims(tuple(a % ndim for a in axes)), x)


@ROWS.declare("transpose", standard=False)  # Chainer's
def transpose(x: Any, axes: Sequence[int] | None = None) -> Variable:
    """Permute the axes of ``x``; reverse them when ``axes`` is ``None`` (Chainer's API).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.transpose(np.zeros((2, 3))).shape
    (3, 2)
    """
    if axes is None:
        axes = tuple(reversed(range(len(shape_of(x)))))
    return permute_dims(x, tuple(axes))


@ROWS.declare("matrix_transpose", "linalg.matrix_transpose")  # linear algebra's
def matrix_transpose(x: Any, /) -> Variable:
    """Swap the last two axes.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.matrix_transpose(np.zeros((4, 2, 3))).shape
    (4, 3, 2)
    """
    if len(shape_of(x)) < 2:
        raise ValueError(f"matrix_transpose: needs at least 2 dimensions, got shape {shape_of(x)}")
    return apply1(MatrixTranspose(), x)


class MatrixTranspose(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    # Its own node, not a PermuteDims: the permutation depends on the number of axes,
    # which a graph re-run on a new shape takes from the new input.
    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.matrix_transpose(inputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return (namespace_of(gy).matrix_transpose(gy),)


def _expanded(shape: tuple[int, ...], axis: int | tuple[int, ...]) -> tuple[int, ...]:
    """The shape ``expand_dims(x, axis=axis)`` gives ``x`` of ``shape``."""
    try:
        axes = tuple(map(operator.index, axis if isinstance(axis, tuple) else (axis,)))
    except TypeError:
        raise TypeError(
            f"expand_dims: axis must be an int or a tuple of ints, got {axis!r}"
        ) from None
    ndim = len(shape) + len(axes)
    for a in axes:
        if not -ndim <= a < ndim:
            raise IndexError(
                f"expand_dims: axis {a} is out of range for a result of {ndim} dimensions"
            )
    new = sorted(a % ndim for a in axes)
    if len(set(new)) != len(new):
        raise ValueError(f"expand_dims: axis {axis} names the same axis twice")
    result = list(shape)
    for a in new:
        result.insert(a, 1)
    return tuple(result)


def _squeezed(shape: tuple[int, ...], axis: int | tuple[int, ...]) -> tuple[int, ...]:
    """The shape ``squeeze(x, axis=axis)`` gives ``x`` of ``shape``."""
    axes = normalize_axes(axis, len(shape), "squeeze")
    for a in axes:
        if shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has length {shape[a]}, not 1 (shape {shape})")
    return tuple(s for i, s in enumerate(shape) if i not in axes)


class _Relayout(FunctionNode):
    """A reshape that inserts or removes axes of length one, its shape derived from
    the input's at every run (a graph re-run on a new shape gets the new layout) and
    the user's ``axis``."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, axis: int | tuple[int, ...]) -> None:
        self.axis = axis

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return (namespace_of(gy).reshape(gy, input_shape(self)),)


class ExpandDims(_Relayout):
    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        return (self.xp.reshape(x, _expanded(tuple(x.shape), self.axis)),)


class Squeeze(_Relayout):
    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        return (self.xp.reshape(x, _squeezed(tuple(x.shape), self.axis)),)


@ROWS.declare("expand_dims")
def expand_dims(x: Any, /, axis: int | tuple[int, ...] = 0) -> Variable:
    """Insert an axis of length one at ``axis`` (or at each of a tuple of axes).

    ``axis`` counts in the result's axes; out of range is an ``IndexError``.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.expand_dims(np.zeros(3), axis=-1).shape
    (3, 1)
    >>> F.expand_dims(np.zeros(3), axis=(0, 2)).shape
    (1, 3, 1)
    """
    # The signature takes 2023.12's default (axis=0) and 2025.12's tuples of axes, and
    # lets axis be given by position as 2024.12 does: a superset of the three.
    _expanded(shape_of(x), axis)  # refuses a wrong axis now, not when the graph runs
    return apply1(ExpandDims(axis), x)


@ROWS.declare("squeeze")
def squeeze(x: Any, /, axis: int | tuple[int, ...]) -> Variable:
    """Remove axes of length one.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.squeeze(np.zeros((1, 3, 1)), axis=(0, 2)).shape
    (3,)
    """
    _squeezed(shape_of(x), axis)
    return apply1(Squeeze(axis), x)


class Concat(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, axis: int) -> None:
        self.axis = axis

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.concat(inputs, axis=self.axis),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        axis = self.axis % len(input_shape(self))
        bounds = [0]
        for i in range(len(self.inputs or ())):
            bounds.append(bounds[-1] + input_shape(self, i)[axis])
        lead = (slice(None),) * axis
        return tuple([gy[(*lead, slice(bounds[i], bounds[i + 1]), ...)] for i in indexes])


@ROWS.declare("concat")
def concat(arrays: Sequence[Any], /, axis: int | None = 0) -> Variable:
    """Join arrays along an existing axis (flattened first when ``axis`` is ``None``).

    ``axis`` may also be given positionally, as Chainer's ``F.concat(xs, axis)``
    takes it; its default is the standard's, 0 (Chainer's is 1).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.concat([np.zeros(2), np.ones(1)])
    variable([0., 0., 1.])
    >>> F.concat([np.zeros((2, 1)), np.ones((2, 2))], 1).shape
    (2, 3)
    """
    if axis is not None:
        try:
            axis = operator.index(axis)
        except TypeError:
            raise TypeError(
                f"concat: axis must be an integer or None, got {type(axis).__name__} {axis!r}"
            ) from None
    if axis is None:
        arrays = [reshape(a, (-1,)) for a in arrays]
        axis = 0
    return Concat(axis).apply(tuple(arrays))[0]


class Stack(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, axis: int) -> None:
        self.axis = axis

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.stack(inputs, axis=self.axis),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        lead = (slice(None),) * (self.axis % len(gy.shape))
        return tuple([gy[(*lead, i, ...)] for i in indexes])


@ROWS.declare("stack")
def stack(arrays: Sequence[Any], /, *, axis: int = 0) -> Variable:
    """Join arrays along a new axis.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.stack([np.zeros(2), np.ones(2)]).shape
    (2, 2)
    """
    return Stack(axis).apply(tuple(arrays))[0]


class Flip(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, axis: int | tuple[int, ...] | None) -> None:
        self.axis = axis

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.flip(inputs[0], axis=self.axis),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return (namespace_of(gy).flip(gy, axis=self.axis),)


@ROWS.declare("flip")
def flip(x: Any, /, *, axis: int | tuple[int, ...] | None = None) -> Variable:
    """Reverse the order of elements along ``axis`` (all axes by default).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).flip(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=1)
    variable([[2., 1.],
              [4., 3.]])
    """
    shape = shape_of(x)
    if axis is not None:
        normalize_axes(axis, len(shape), "flip")
    return apply1(Flip(axis), x)


def _moved(
    ndim: int, source: int | tuple[int, ...], destination: int | tuple[int, ...]
) -> tuple[int, ...]:
    """The permutation of ``ndim`` axes that ``moveaxis(x, source, destination)`` is."""
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError(
            f"moveaxis: source {source!r} and destination {destination!r} must name as many axes"
        )
    src = tuple(_one_axis(a, ndim, "moveaxis", "source") for a in src)
    dst = tuple(_one_axis(a, ndim, "moveaxis", "destination") for a in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(
            f"moveaxis: repeated axis in source {source!r} or destination {destination!r}"
        )
    order = [a for a in range(ndim) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return tuple(order)


class MoveAxis(FunctionNode):
    """``moveaxis``: a permutation derived from the user's axes and the input's number
    of axes, at each run (a graph re-run on a new shape takes the new one) and in
    backward (from the input's node)."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, source: int | tuple[int, ...], destination: int | tuple[int, ...]) -> None:
        self.source = source
        self.destination = destination

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        return (self.xp.permute_dims(x, _moved(len(x.shape), self.source, self.destination)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        axes = _moved(len(input_shape(self)), self.source, self.destination)
        inverse = tuple(sorted(range(len(axes)), key=axes.__getitem__))
        return (namespace_of(gy).permute_dims(gy, inverse),)


@ROWS.declare("moveaxis")
def moveaxis(
    x: Any, source: int | tuple[int, ...], destination: int | tuple[int, ...], /
) -> Variable:
    """Move the axes ``source`` to the positions ``destination``; the others keep their order.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).moveaxis(np.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    _moved(len(shape_of(x)), source, destination)  # refuses wrong axes now
    # Copies of the user's sequences, which the node keeps.
    source = source if isinstance(source, int) else tuple(source)
    destination = destination if isinstance(destination, int) else tuple(destination)
    return apply1(MoveAxis(source, destination), x)


def _one_axis(axis: int, ndim: int, op: str, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: {name} axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim


class Roll(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, shift: int | tuple[int, ...], axis: int | tuple[int, ...] | None) -> None:
        self.shift = shift
        self.axis = axis

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.roll(inputs[0], shift=self.shift, axis=self.axis),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        back = -self.shift if isinstance(self.shift, int) else tuple(-s for s in self.shift)
        return (namespace_of(gy).roll(gy, shift=back, axis=self.axis),)


@ROWS.declare("roll")
def roll(
    x: Any,
    /,
    shift: int | tuple[int, ...],
    *,
    axis: int | tuple[int, ...] | None = None,
) -> Variable:
    """Shift elements cyclically by ``shift`` along ``axis`` (of the flattened ``x`` by
    default); the gradient rolls back.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).roll(np.array([1.0, 2.0, 3.0]), 1)
    variable([3., 1., 2.])
    """
    if not isinstance(shift, int) and axis is not None and not isinstance(axis, int):
        if len(tuple(shift)) != len(tuple(axis)):
            raise ValueError(f"roll: shift {shift!r} and axis {axis!r} differ in length")
        shift = tuple(shift)
    return apply1(Roll(shift, axis), x)


class Unstack(FunctionNode):
    """``unstack``: as many outputs as ``x`` has elements along ``axis`` when the
    graph is built. A graph is made of its nodes, so that count cannot follow a new
    input shape: a run on another length is refused."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, axis: int, shape: tuple[int, ...]) -> None:
        self.axis = axis  # as given (counted from the end where negative)
        self.built_shape = shape

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        shape = tuple(x.shape)
        axis = _one_axis(self.axis, len(shape), "unstack", "the")
        count = self.built_shape[self.axis]
        if shape[axis] != count:
            raise ValueError(
                f"unstack: the graph was built for x of shape {self.built_shape}, split into "
                f"{count} arrays along axis {self.axis}, and now runs on x of shape {shape}, "
                f"of length {shape[axis]} there; a graph cannot change its number of "
                "outputs: build it again for the new shape (or run it eagerly)"
            )
        lead = (slice(None),) * axis
        return tuple(x[(*lead, i, ...)] for i in range(count))

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        present = next(g for g in grad_outputs if g is not None)
        xp = namespace_of(present)
        # Outputs that received no gradient contribute zeros.
        zeros = None
        parts = []
        for g in grad_outputs:
            if g is None:
                if zeros is None:
                    zeros = xp.zeros_like(present)
                g = zeros
            parts.append(g)
        # A negative axis of x is the same axis of the stack (both have x's ndim).
        return (xp.stack(parts, axis=self.axis),)


@ROWS.declare("unstack")
def unstack(x: Any, /, *, axis: int = 0) -> tuple[Variable, ...]:
    """Split ``x`` along ``axis`` into a tuple of arrays (the inverse of :func:`stack`).

    A define-then-run graph has as many outputs as ``x`` had elements along ``axis``
    when it was built, and refuses to run on another length.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> a, b = agnograd.namespace(np).unstack(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=1)
    >>> a, b
    (variable([1., 3.]), variable([2., 4.]))
    """
    shape = shape_of(x)
    _one_axis(axis, len(shape), "unstack", "the")
    return Unstack(axis, shape).apply((x,))


class AsType(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.astype(inputs[0], self.dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # The engine casts a gradient back to its input's dtype.
        return grad_outputs


@ROWS.declare("astype")  # of the data type functions
def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Variable:
    """Cast to ``dtype``; the gradient is cast back to the input's dtype.

    A cast to an integer or boolean dtype has no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.astype(np.array([1.5]), np.float32)
    variable([1.5])
    """
    xp = _library_of(x)
    if xp is not None:
        try:
            floating = xp.isdtype(dtype, ("real floating", "complex floating"))
        except (AttributeError, TypeError, ValueError):  # torch's isdtype, given np.float64
            raise TypeError(
                f"astype: {dtype!r} is not a dtype of {xp.__name__}, the library of x; "
                f"use one of its own (xp.float64, ...)"
            ) from None
        if not floating:
            # Integers and booleans carry no gradient.
            return apply_nondifferentiable(_astype, (x,), {"dtype": dtype})
    return apply1(AsType(dtype), x)


def _library_of(x: Any) -> Any:
    """The raw namespace of ``x``'s array, also of a Variable that define-then-run has
    not computed yet; None for an uninitialised Variable."""
    if not isinstance(x, Variable):
        return raw_namespace(x)
    if x._data is not None:
        return raw_namespace(x._data)
    try:
        return x.xp
    except RuntimeError:  # no data and no creator: its library is not known yet
        return None


def _astype(xp: Any, x: Any, *, dtype: Any) -> Any:
    return xp.astype(x, dtype)


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
