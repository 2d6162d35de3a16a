"""Indexing a :class:`~agnograd.transforms._batching.BatchedArray`: one example's
key, with a full slice in front for the batch axis."""

from __future__ import annotations

from typing import Any

from agnograd.transforms._batching import BatchedArray, level_of
from agnograd.transforms._batching_rules import _aligned, _inner, fallback


def _is_index_array(k: Any) -> bool:
    return hasattr(k, "shape") and not isinstance(k, slice)


def getitem(x: BatchedArray, key: Any) -> Any:
    """``x[key]`` per example: the batch axis gets a full slice in front."""
    items = key if isinstance(key, tuple) else (key,)
    if any(level_of(k) == x.level for k in items):
        return fallback("__getitem__", (x, key), {})
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


def setitem(x: BatchedArray, key: Any, value: Any) -> None:
    """``x[key] = value`` per example."""
    items = key if isinstance(key, tuple) else (key,)
    if any(level_of(k) >= x.level for k in items) or level_of(value) > x.level:
        raise TypeError(
            "vmap: x[key] = value writes into an array batched at an outer level (or indexes "
            "it with a batched index), so each example would write into the same memory; "
            "compute the result out of place (xp.where, or build it with xp.concat)"
        )
    if level_of(value) == x.level:
        value = _aligned(value, x.level, x[key].ndim)
    x.data[(slice(None), *items)] = value
