"""Indexing as pairs of primitives: ``GetItem``/``GetItemGrad`` and ``Gather``/``ScatterAdd``.

Each one's backward is the other. ``GetItemGrad`` and ``ScatterAdd`` add a gradient
into zeros; with integer indices, repeated ones must accumulate, which the standard
cannot express, so it goes through the owning adapter's scatter-add hook.

``Gather`` serves every function whose output elements are elements of its input
(``take``, ``take_along_axis``, ``repeat`` with an array of repeats, ``sort``):
applied to the flat positions ``0, 1, ..., size - 1`` laid out in the input's
shape, the same function says where each output element came from, and the
gradient is scattered back to those positions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import array_api_compat

from agnograd.backends._backend import raw_namespace, scatter_add_flat
from agnograd.core import _extension
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import held, input_shape, raw, raw_xp_device, shape_of
from agnograd.functions._inplace import is_combining, lifted, note_view
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)

_BASIC = (int, slice, type(Ellipsis), type(None))


def normalize_key(key: Any, xp: Any, device: Any, ndim: int) -> Any:
    """Replace Variables by their arrays and Python lists by integer/bool arrays.

    A basic key that names fewer axes than the array has gets a trailing ``...``
    (NumPy's reading of ``x[0]``, which the standard spells ``x[0, ...]``).
    """
    items = key if isinstance(key, tuple) else (key,)
    out = []
    for k in items:
        if isinstance(k, Variable):
            k = k._data
        elif isinstance(k, list):
            # An empty list indexes nothing (NumPy's x[[]]): integers, not asarray's floats.
            dtype = (index_dtype(xp, device) or xp.int64) if _empty(k) else None
            k = xp.asarray(k, dtype=dtype, device=device)
        out.append(k)
    if is_basic(tuple(out)) and Ellipsis not in out:
        if sum(k is not None for k in out) < ndim:
            out.append(Ellipsis)
        return tuple(out)
    return tuple(out) if isinstance(key, tuple) else out[0]


def _empty(items: list[Any]) -> bool:
    """Whether the nested list ``items`` holds no element (``[]``, ``[[]]``)."""
    return all(isinstance(k, list) and _empty(k) for k in items)


def is_basic(key: Any) -> bool:
    """Whether ``key`` uses only integers, slices, ``...`` and ``None``."""
    items = key if isinstance(key, tuple) else (key,)
    return all(type(k) in _BASIC for k in items)


def scatter_into_zeros(shape: tuple[int, ...], key: Any, values: Any) -> Any:
    """Zeros of ``shape`` with ``values`` added at ``key`` (repeated indices accumulate)."""
    xp = raw_namespace(values)
    device = array_api_compat.device(values)
    items = key if isinstance(key, tuple) else (key,)
    # Under vmap, zeros of each example where the values or the key are batched
    out = xp.zeros(shape, dtype=values.dtype, device=device)
    out = lifted(xp, out, (values, *items), copy=True)
    if is_basic(key):
        # Setting through None is not in the standard: drop the new axes it made.
        plain = tuple(k for k in items if k is not None)
        try:
            out[plain] = xp.reshape(values, tuple(out[plain].shape))
            return out
        except (TypeError, ValueError, IndexError, NotImplementedError):
            pass  # immutable arrays (JAX): take the scatter-add path below
    size = math.prod(shape)
    positions = lifted(xp, xp.reshape(xp.arange(size, device=device), shape), items)[key]
    flat = scatter_add_flat(
        xp.reshape(out, (size,)), xp.reshape(positions, (-1,)), xp.reshape(values, (-1,))
    )
    return xp.reshape(flat, shape)


class GetItem(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    def __init__(self, key: Any) -> None:
        self.key = key

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0][self.key],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        shape = input_shape(self)
        if isinstance(gy, Variable):
            return (GetItemGrad(self.key, shape).apply((gy,))[0],)
        return (scatter_into_zeros(shape, self.key, gy),)


def _filled(key: tuple[Any, ...], where: tuple[int, ...], arrays: Any) -> tuple[Any, ...]:
    """``key`` with the arrays of ``arrays`` (or of its Variables) at ``where``."""
    filled = list(key)
    for i, array in zip(where, arrays, strict=True):
        filled[i] = raw(array)
    return tuple(filled)


class GetItemAt(GetItem):
    """``x[key]`` where the key holds Variables: their arrays are inputs of the node
    after ``x``, read at every run, so a define-then-run graph re-run after ``i.d =
    ...`` takes the new indices (``key`` has None where they go, at ``where``)."""

    def __init__(self, key: tuple[Any, ...], where: tuple[int, ...]) -> None:
        self.key = key
        self.where = where
        self._retain_in = tuple(range(1, len(where) + 1))  # the indices, for backward

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x = lifted(self.xp, inputs[0], inputs[1:])
        return (x[_filled(self.key, self.where, inputs[1:])],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # Indices take no gradient (a key computed from data that does, such as a mask
        # of x > 0, is asked for one).
        if 0 not in indexes:
            return (None,) * len(indexes)
        (gy,) = grad_outputs
        shape = input_shape(self)
        indices = self.get_retained_inputs()
        if isinstance(gy, Variable):  # the indices as inputs: a gradient graph reads them
            gx = GetItemGrad(self.key, shape, self.where).apply((gy, *indices))[0]
        else:
            gx = scatter_into_zeros(shape, _filled(self.key, self.where, indices), gy)
        return tuple([gx if i == 0 else None for i in indexes])


class GetItemGrad(FunctionNode):
    """Zeros of ``shape`` with the input added at ``key``; with ``where``, the key's
    index arrays at those positions are the inputs after the first (see
    :class:`GetItemAt`, its backward)."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, key: Any, shape: tuple[int, ...], where: tuple[int, ...] = ()) -> None:
        self.key = key
        self.shape = shape
        self.where = where
        self._retain_in = tuple(range(1, len(where) + 1))

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        key = _filled(self.key, self.where, inputs[1:]) if self.where else self.key
        return (scatter_into_zeros(self.shape, key, inputs[0]),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        return ((self.shape, inputs[0].dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (g,) = grad_outputs
        if not self.where:
            return (g[self.key],)
        indices = self.get_retained_inputs()
        if isinstance(g, Variable):
            gx = GetItemAt(self.key, self.where).apply((g, *indices))[0]
        else:
            gx = g[_filled(self.key, self.where, indices)]
        return tuple([gx if i == 0 else None for i in indexes])


@ROWS.declare("get_item", standard=False)  # Chainer's; behind Variable.__getitem__
def get_item(x: Any, slices: Any) -> Variable:
    """``x[slices]``: basic slicing, ``...``, ``None``, integer arrays or one boolean mask.

    The gradient of integer-array indexing accumulates over repeated indices.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(np.arange(3.0))
    >>> y = F.get_item(x, np.array([0, 2, 2]))
    >>> y
    variable([0., 2., 2.])
    >>> F.sum(y).backward(); x.grad
    array([1., 0., 2.])
    """
    data = x._data if isinstance(x, Variable) else x
    items = slices if isinstance(slices, tuple) else (slices,)
    # Index Variables, and vmap's batched indices (so that the node's namespace is the
    # batch's), are inputs of the node.
    where = tuple(
        i
        for i, k in enumerate(items)
        if type(k) not in _BASIC and (isinstance(k, Variable) or is_combining(k))
    )
    if where:  # read at every run: inputs of the node
        key = tuple(None if i in where else k for i, k in enumerate(items))
        arrays = [items[i] for i in where]
        node = GetItemAt(key, where)
        try:
            return node.apply((x, *arrays))[0]
        except TypeError as error:
            if "boolean mask" in str(error):  # the shape inference's refusal
                raise TypeError(
                    "get_item: the key is a boolean mask held in a Variable: in a "
                    "define-then-run graph the result would have a data-dependent shape; "
                    "index with integer arrays, or compute the mask eagerly and index "
                    "with its array"
                ) from None
            raise
    if data is None:  # define-then-run: namespace and ndim from the graph
        xp = _extension.define_then_run.namespace_of_node(x._node)
        key = normalize_key(slices, xp, None, len(x._node.shape))
    else:
        key = normalize_key(slices, raw_namespace(data), array_api_compat.device(data), data.ndim)
    y = GetItem(key).apply((x,))[0]
    if y._node.creator_node is None and is_basic(key):  # a view made outside the graph
        note_view(x, key, y)
    return y


def scatter_add_positions(positions: Any, shape: tuple[int, ...], values: Any) -> Any:
    """Zeros of ``shape`` with ``values`` added at the flat ``positions`` (same shape as
    ``values``); repeated positions accumulate."""
    xp = raw_namespace(values)
    size = math.prod(shape)
    out = xp.zeros((size,), dtype=values.dtype, device=array_api_compat.device(values))
    flat = scatter_add_flat(out, xp.reshape(positions, (-1,)), xp.reshape(values, (-1,)))
    return xp.reshape(flat, shape)


def index_dtype(xp: Any, device: Any) -> Any:
    """The default indexing dtype of ``device`` (int32 where a device has no int64)."""
    try:
        return xp.__array_namespace_info__().default_dtypes(device=device)["indexing"]
    except (AttributeError, TypeError, ValueError):  # no inspection API: the default
        return None


def take_along_axis_of(xp: Any, x: Any, indices: Any, axis: int) -> Any:
    """``xp.take_along_axis``, or a flat ``take`` where the library lacks it (Dask).

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from agnograd.functions._indexing import take_along_axis_of
    >>> x = xp.asarray([[10, 11, 12], [20, 21, 22]])
    >>> take_along_axis_of(xp, x, xp.asarray([[2, 0], [1, 1]]), 1)
    Array([[12, 10],
           [21, 21]], dtype=array_api_strict.int64)
    """
    if hasattr(xp, "take_along_axis"):
        return xp.take_along_axis(x, indices, axis=axis)
    shape = tuple(x.shape)
    device = array_api_compat.device(x)
    # Flat position of each output element: the index along axis and its own
    # coordinates on the other axes, times the strides of x. The other axes
    # broadcast: where x has length 1 the coordinate is 0.
    flat = indices * math.prod(shape[axis + 1 :])
    for k, n in enumerate(shape):
        if k == axis or n == 1:
            continue
        coordinate = xp.arange(n, dtype=indices.dtype, device=device) * math.prod(shape[k + 1 :])
        flat = flat + xp.reshape(coordinate, tuple(n if j == k else 1 for j in range(len(shape))))
    picked = xp.take(xp.reshape(x, (-1,)), xp.reshape(flat, (-1,)), axis=0)
    return xp.reshape(picked, tuple(flat.shape))


class Gather(FunctionNode):
    """``fn(xp, x, *indices)`` for a function that only picks elements of ``x``.

    The index arrays are inputs too (so that define-then-run can defer them), but
    they get no gradient. ``x``'s gradient scatters the output gradient back to the
    positions ``fn`` picked, found by applying ``fn`` to the flat positions of ``x``.
    """

    linear = True  # forward mode: applied to the tangents

    def __init__(self, fn: Callable[..., Any], n_indices: int, label: str) -> None:
        self.fn = fn
        self.name = label
        self._retain_in = tuple(range(1, n_indices + 1))

    @property
    def label(self) -> str:
        return self.name

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.fn(self.xp, *inputs),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        shape = input_shape(self)
        xp, device = raw_xp_device(gy)
        size = math.prod(shape)
        where = xp.reshape(xp.arange(size, dtype=index_dtype(xp, device), device=device), shape)
        indices = [held(i) for i in self.get_retained_inputs()] if self._retain_in else []
        if any(isinstance(i, Variable) for i in indices):
            # A gradient graph not run yet: its nodes pick the positions, from the
            # indices it runs on (see ``held``).
            positions = self.fn(namespace_of(gy), where, *indices)
        else:
            positions = self.fn(xp, where, *indices)
        if isinstance(gy, Variable):
            gx = ScatterAdd(shape).apply((gy, positions))[0]
        else:
            gx = scatter_add_positions(positions, shape, gy)
        return tuple(gx if i == 0 else None for i in indexes)


class ScatterAdd(FunctionNode):
    """Zeros of ``shape`` with input 0 added at the flat positions of input 1 (which
    gets no gradient); backward gathers."""

    linear = True  # forward mode: applied to the tangents

    _retain_in = (1,)

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        values, positions = inputs
        return (scatter_add_positions(positions, self.shape, values),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        return ((self.shape, inputs[0].dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (g,) = grad_outputs
        xp = namespace_of(g)
        (positions,) = self.get_retained_inputs()
        flat = xp.take(xp.reshape(g, (-1,)), xp.reshape(positions, (-1,)))
        gx = xp.reshape(flat, tuple(positions.shape))
        return tuple(gx if i == 0 else None for i in indexes)


def gather(fn: Callable[..., Any], x: Any, indices: Any, label: str) -> Variable:
    """Apply the :class:`Gather` ``fn(xp, x, indices)``.

    Index Variables (the result of ``argsort``, say) are inputs of the node, so that
    define-then-run computes them first; raw index arrays are kept by the node.
    """
    if isinstance(indices, Variable) or is_combining(indices):
        return Gather(fn, 1, label).apply((x, indices))[0]

    def bound(xp: Any, a: Any) -> Any:
        return fn(xp, a, indices)

    return Gather(bound, 0, label).apply((x,))[0]


def _index_array(indices: Any, op: str) -> Any:
    if isinstance(indices, Variable):
        return indices
    if type(indices) in (bool, int, float, complex, list, tuple) or indices is None:
        raise TypeError(
            f"{op}: indices must be an integer array, got {type(indices).__name__}; "
            "wrap it with xp.asarray(...)"
        )
    return indices


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for an array of {ndim} dimensions")
    return axis % ndim


def _take_axis(axis: int | None, ndim: int) -> int:
    if axis is None:
        if ndim != 1:
            raise ValueError(
                f"take: axis is required for an array of {ndim} dimensions (only a "
                "one-dimensional x may leave it out)"
            )
        return 0
    return _axis(axis, ndim, "take")


@ROWS.declare("take")
def take(x: Any, indices: Any, /, *, axis: int | None = None) -> Variable:
    """Elements of ``x`` at ``indices`` (1-D integer array) along ``axis``.

    ``axis`` may be left out only for a one-dimensional ``x``. The gradient adds
    the output gradient back at the indices, so repeated indices accumulate.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> y = xp.take(x, np.array([1, 1, 0]), axis=1)
    >>> y
    variable([[2., 2., 1.],
              [4., 4., 3.]])
    >>> F.sum(y).backward(); x.grad
    array([[1., 2.],
           [1., 2.]])
    """
    _take_axis(axis, len(shape_of(x)))  # refuses a wrong axis now

    def fn(xp: Any, a: Any, i: Any) -> Any:
        # Resolved at each call: a graph re-run on a new shape reads the new one.
        return xp.take(a, i, axis=_take_axis(axis, len(a.shape)))

    return gather(fn, x, _index_array(indices, "take"), "Take")


@ROWS.declare("take_along_axis")
def take_along_axis(x: Any, indices: Any, /, *, axis: int = -1) -> Variable:
    """Elements of ``x`` picked along ``axis`` by ``indices`` (same number of dimensions).

    Repeated indices accumulate in the gradient.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([[1.0, 5.0], [7.0, 3.0]]))
    >>> y = xp.take_along_axis(x, np.array([[1], [0]]), axis=1)
    >>> y
    variable([[5.],
              [7.]])
    >>> F.sum(y * 2.0).backward(); x.grad
    array([[0., 2.],
           [2., 0.]])
    """
    _axis(axis, len(shape_of(x)), "take_along_axis")  # refuses a wrong axis now

    def fn(xp: Any, a: Any, i: Any) -> Any:
        # Resolved at each call: a graph re-run on a new shape reads the new one.
        return take_along_axis_of(xp, a, i, _axis(axis, len(a.shape), "take_along_axis"))

    return gather(fn, x, _index_array(indices, "take_along_axis"), "TakeAlongAxis")


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
