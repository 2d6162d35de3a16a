"""Indexing a :class:`~agnograd.transforms._batching.BatchedArray`: one example's
key, with a full slice in front for the batch axis."""

from __future__ import annotations

import operator
from typing import Any

from agnograd.transforms._batching import BatchedArray, level_of
from agnograd.transforms._batching_rules import _aligned, _inner, batching_namespace, fallback


def _is_index_array(k: Any) -> bool:
    return hasattr(k, "shape") and not isinstance(k, slice)


def getitem(x: BatchedArray, key: Any) -> Any:
    """``x[key]`` per example: the batch axis gets a full slice in front."""
    items = key if isinstance(key, tuple) else (key,)
    if any(level_of(k) == x.level for k in items):
        out = _batched_key(x, items)
        if out is NotImplemented:
            out = fallback("__getitem__", (x, key), {}, operator.getitem)
        return out
    out = x.data[(slice(None), *items)]
    # Advanced indices apart (x[i, :, j]) put their axes first, before the batch's.
    advanced = [
        p
        for p, k in enumerate(items)
        if _is_index_array(k) or (isinstance(k, int) and k is not True)
    ]
    if any(_is_index_array(k) for k in items) and advanced[-1] - advanced[0] + 1 != len(advanced):
        nd = max(len(items[p].shape) if _is_index_array(items[p]) else 0 for p in advanced)
        out = _inner(x).moveaxis(out, nd, 0)
    return BatchedArray(out, x.level)


def _batched_key(x: BatchedArray, items: tuple[Any, ...]) -> Any:
    """``x[items]`` per example where some index arrays are batched (at ``x``'s
    level): one integer array among full slices is a ``take``; integer arrays and
    integers alone index with the batch's own positions in front. NotImplemented
    (the loop) for the rest: boolean masks (their shapes depend on the data), ``None``,
    slices beside several arrays."""
    items = _expanded(x, items)
    if items is NotImplemented:
        return NotImplemented
    arrays = [p for p, k in enumerate(items) if _is_index_array(k)]
    ns = batching_namespace(x)
    if any(ns.isdtype(items[p].dtype, "bool") for p in arrays):
        return NotImplemented
    rest = [k for p, k in enumerate(items) if p not in arrays]
    if len(arrays) == 1 and all(k == slice(None) for k in rest):
        (p,) = arrays
        index = items[p]
        out = ns.take(x, ns.reshape(index, (-1,)), axis=p)
        return ns.reshape(out, (*x.shape[:p], *index.shape, *x.shape[p + 1 :]))
    if all(isinstance(k, int) for k in rest):
        return BatchedArray(x.data[_with_batch(x, items)], x.level)
    return NotImplemented


def setitem(x: BatchedArray, key: Any, value: Any) -> None:
    """``x[key] = value`` per example."""
    items = key if isinstance(key, tuple) else (key,)
    if any(level_of(k) > x.level for k in items) or level_of(value) > x.level:
        raise TypeError(
            "vmap: x[key] = value writes into an array batched at an outer level, so each "
            "example would write into the same memory; compute the result out of place "
            "(xp.where, or build it with xp.concat)"
        )
    full = (slice(None), *items)
    if any(level_of(k) == x.level for k in items):
        full = _batched_write(x, items)
    if level_of(value) == x.level:
        value = _aligned(value, x.level, x[key].ndim)
    x.data[full] = value


def _batched_write(x: BatchedArray, items: tuple[Any, ...]) -> tuple[Any, ...]:
    """The key of ``x.data`` that writes each example's ``x[items]``, some index
    arrays batched: integer arrays and integers first, then full slices, with the
    batch's own positions in front (the written elements of each example then come
    first, as the value's batch does)."""
    expanded = _expanded(x, items)
    items = () if expanded is NotImplemented else expanded
    arrays = [p for p, k in enumerate(items) if _is_index_array(k)]
    lead = max(arrays, default=-1) + 1
    if (
        not arrays
        or any(not (_is_index_array(k) or isinstance(k, int)) for k in items[:lead])
        or any(k != slice(None) for k in items[lead:])
        or any(batching_namespace(x).isdtype(items[p].dtype, "bool") for p in arrays)
    ):
        raise TypeError(
            "vmap: x[key] = value with a batched index takes integer arrays and integers "
            "for the first axes and full slices after them; write the others out of place "
            "(xp.where, or build the result with xp.concat)"
        )
    return _with_batch(x, items[:lead]) + items[lead:]


def _expanded(x: BatchedArray, items: tuple[Any, ...]) -> Any:
    """``items`` with ``...`` and the trailing axes as full slices; NotImplemented for
    keys with ``None`` or several ``...``."""
    if any(k is None for k in items) or items.count(Ellipsis) > 1:
        return NotImplemented
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (x.ndim - len(items) + 1) + items[at + 1 :]
    return items + (slice(None),) * (x.ndim - len(items))


def _with_batch(x: BatchedArray, items: tuple[Any, ...]) -> tuple[Any, ...]:
    """``items`` (integer arrays, some batched, and integers) as a key of ``x.data``:
    the batch's positions in front, the batched arrays aligned with them."""
    xp = _inner(x)
    rank = max(k.ndim for k in items if _is_index_array(k))
    batch = xp.reshape(xp.arange(x.batch_size, device=x.data.device), (-1, *(1,) * rank))
    return (batch, *[_aligned(k, x.level, rank) for k in items])
