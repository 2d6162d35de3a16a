"""Indexing as a pair of primitives: ``GetItem`` and ``GetItemGrad``.

Each one's backward is the other. ``GetItemGrad`` scatters a gradient into zeros;
with integer-array keys, repeated indices must accumulate, which the standard
cannot express, so it goes through the owning adapter's scatter-add hook.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat

from agnograd._backend import raw_namespace, scatter_add_flat
from agnograd._function import FunctionNode
from agnograd._variable import Variable

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
            k = xp.asarray(k, device=device)
        out.append(k)
    if is_basic(tuple(out)) and Ellipsis not in out:
        if sum(k is not None for k in out) < ndim:
            out.append(Ellipsis)
        return tuple(out)
    return tuple(out) if isinstance(key, tuple) else out[0]


def is_basic(key: Any) -> bool:
    """Whether ``key`` uses only integers, slices, ``...`` and ``None``."""
    items = key if isinstance(key, tuple) else (key,)
    return all(type(k) in _BASIC for k in items)


def scatter_into_zeros(shape: tuple[int, ...], key: Any, values: Any) -> Any:
    """Zeros of ``shape`` with ``values`` added at ``key`` (repeated indices accumulate)."""
    xp = raw_namespace(values)
    device = array_api_compat.device(values)
    out = xp.zeros(shape, dtype=values.dtype, device=device)
    if is_basic(key):
        # Setting through None is not in the standard: drop the new axes it made.
        items = key if isinstance(key, tuple) else (key,)
        plain = tuple(k for k in items if k is not None)
        try:
            out[plain] = xp.reshape(values, tuple(out[plain].shape))
            return out
        except (TypeError, ValueError, IndexError, NotImplementedError):
            pass  # immutable arrays (JAX): take the scatter-add path below
    size = math.prod(shape)
    positions = xp.reshape(xp.arange(size, device=device), shape)[key]
    flat = scatter_add_flat(
        xp.reshape(out, (size,)), xp.reshape(positions, (-1,)), xp.reshape(values, (-1,))
    )
    return xp.reshape(flat, shape)


class GetItem(FunctionNode):
    def __init__(self, key: Any) -> None:
        self.key = key

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0][self.key],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        shape = self.inputs[0].shape  # type: ignore[index]
        if isinstance(gy, Variable):
            return (GetItemGrad(self.key, shape).apply((gy,))[0],)
        return (scatter_into_zeros(shape, self.key, gy),)


class GetItemGrad(FunctionNode):
    def __init__(self, key: Any, shape: tuple[int, ...]) -> None:
        self.key = key
        self.shape = shape

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (scatter_into_zeros(self.shape, self.key, inputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (grad_outputs[0][self.key],)


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
    if data is None:  # define-then-run: the key is taken as it is
        return GetItem(slices).apply((x,))[0]
    key = normalize_key(slices, raw_namespace(data), array_api_compat.device(data), data.ndim)
    return GetItem(key).apply((x,))[0]


DIFFERENTIABLE: dict[str, Any] = {}
NON_DIFFERENTIABLE: dict[str, Any] = {}
UNSUPPORTED: dict[str, str] = {}
