"""Manipulation functions of the array API standard and their rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agnograd._function import FunctionNode
from agnograd._namespace import namespace_of
from agnograd._variable import Variable
from agnograd.functions._core import shape_of
from agnograd.functions._statistical import normalize_axes


class BroadcastTo(FunctionNode):
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.broadcast_to(inputs[0], self.shape),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # The engine sums a gradient back to its input's shape.
        return grad_outputs


class Reshape(FunctionNode):
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.reshape(inputs[0], self.shape),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return (namespace_of(gy).reshape(gy, self.inputs[0].shape),)  # type: ignore[index]


class PermuteDims(FunctionNode):
    def __init__(self, axes: tuple[int, ...]) -> None:
        self.axes = axes

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.permute_dims(inputs[0], self.axes),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        inverse = tuple(sorted(range(len(self.axes)), key=self.axes.__getitem__))
        return (namespace_of(gy).permute_dims(gy, inverse),)


class Concat(FunctionNode):
    def __init__(self, axis: int) -> None:
        self.axis = axis

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.concat(inputs, axis=self.axis),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        inputs = self.inputs
        assert inputs is not None
        axis = self.axis % len(inputs[0].shape)
        bounds = [0]
        for node in inputs:
            bounds.append(bounds[-1] + node.shape[axis])
        lead = (slice(None),) * axis
        return tuple([gy[(*lead, slice(bounds[i], bounds[i + 1]), ...)] for i in indexes])


class Stack(FunctionNode):
    def __init__(self, axis: int) -> None:
        self.axis = axis

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.stack(inputs, axis=self.axis),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        lead = (slice(None),) * (self.axis % len(gy.shape))
        return tuple([gy[(*lead, i, ...)] for i in indexes])


class AsType(FunctionNode):
    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.astype(inputs[0], self.dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # The engine casts a gradient back to its input's dtype.
        return grad_outputs


def broadcast_to(x: Any, /, shape: tuple[int, ...]) -> Variable:
    """Broadcast ``x`` to ``shape``; the gradient is summed back.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.broadcast_to(np.array([1.0, 2.0]), (2, 2))
    variable([[1., 2.],
              [1., 2.]])
    """
    return BroadcastTo(tuple(shape)).apply((x,))[0]


def reshape(x: Any, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Variable:
    """Give ``x`` a new shape with the same elements (``-1`` infers one dimension).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.reshape(np.arange(4.0), (2, 2))
    variable([[0., 1.],
              [2., 3.]])
    """
    return Reshape(tuple(shape)).apply((x,))[0]


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
    return PermuteDims(tuple(a % ndim for a in axes)).apply((x,))[0]


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


def matrix_transpose(x: Any, /) -> Variable:
    """Swap the last two axes.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.matrix_transpose(np.zeros((4, 2, 3))).shape
    (4, 3, 2)
    """
    ndim = len(shape_of(x))
    if ndim < 2:
        raise ValueError(f"matrix_transpose: needs at least 2 dimensions, got shape {shape_of(x)}")
    return PermuteDims((*range(ndim - 2), ndim - 1, ndim - 2)).apply((x,))[0]


def expand_dims(x: Any, /, *, axis: int = 0) -> Variable:
    """Insert an axis of length one at ``axis``.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.expand_dims(np.zeros(3), axis=-1).shape
    (3, 1)
    """
    shape = list(shape_of(x))
    ndim = len(shape) + 1
    if not -ndim <= axis < ndim:
        raise ValueError(f"expand_dims: axis {axis} is out of range for {ndim - 1} dimensions")
    shape.insert(axis % ndim, 1)
    return reshape(x, tuple(shape))


def squeeze(x: Any, /, axis: int | tuple[int, ...]) -> Variable:
    """Remove axes of length one.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.squeeze(np.zeros((1, 3, 1)), axis=(0, 2)).shape
    (3,)
    """
    shape = shape_of(x)
    axes = normalize_axes(axis, len(shape), "squeeze")
    for a in axes:
        if shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has length {shape[a]}, not 1 (shape {shape})")
    return reshape(x, tuple(s for i, s in enumerate(shape) if i not in axes))


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Variable:
    """Join arrays along an existing axis (flattened first when ``axis`` is ``None``).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.concat([np.zeros(2), np.ones(1)])
    variable([0., 0., 1.])
    """
    if axis is None:
        arrays = [reshape(a, (-1,)) for a in arrays]
        axis = 0
    return Concat(axis).apply(tuple(arrays))[0]


def stack(arrays: Sequence[Any], /, *, axis: int = 0) -> Variable:
    """Join arrays along a new axis.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.stack([np.zeros(2), np.ones(2)]).shape
    (2, 2)
    """
    return Stack(axis).apply(tuple(arrays))[0]


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Variable:
    """Cast to ``dtype``; the gradient is cast back to the input's dtype.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.astype(np.array([1.5]), np.float32)
    variable([1.5])
    """
    return AsType(dtype).apply((x,))[0]


DIFFERENTIABLE = {
    "broadcast_to": broadcast_to,
    "concat": concat,
    "expand_dims": expand_dims,
    "permute_dims": permute_dims,
    "reshape": reshape,
    "squeeze": squeeze,
    "stack": stack,
    # data type functions
    "astype": astype,
}
NON_DIFFERENTIABLE: dict[str, object] = {}
UNSUPPORTED: dict[str, str] = {}
