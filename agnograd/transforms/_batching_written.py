"""The batching rules written out, where no generic rule of
:mod:`agnograd.transforms._batching_rules` fits: products of matrices, ``tensordot``,
``reshape`` and ``broadcast_to``, the gathers (``take``, ``take_along_axis``), the
searches (``searchsorted``, ``isin``) and ``meshgrid``. Each registers itself with
:func:`~agnograd.transforms._batching_rules.batching_rule` (or in ``RULES``), and
reads a batch with that module's helpers, as the indexing of batched arrays does.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from agnograd.backends._backend import raw_namespace
from agnograd.transforms._batching import BatchedArray, level_of
from agnograd.transforms._batching_rules import (
    RULES,
    _aligned,
    _axis,
    _batched,
    _inner,
    _resolve,
    _top,
    _unwrapped,
    batching_namespace,
    batching_rule,
    elementwise,
)

# -- the rules written out


def _expand(x: Any, axis: int) -> Any:
    """``x`` with a new axis ``axis`` (negative) in each example."""
    if x.__class__ is BatchedArray:
        return BatchedArray(_inner(x).expand_dims(x.data, axis=axis), x.level)
    return raw_namespace(x).expand_dims(x, axis=axis)


def _matrices(name: str, x1: Any, x2: Any, fn: Callable[..., Any], vector2: bool) -> Any:
    """``fn(x1, x2)`` of stacks of matrices, batched: a vector operand made a matrix
    (``x1`` a row, ``x2`` a column, where ``vector2``), the stacks aligned."""
    level = max(level_of(x1), level_of(x2))
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(f"{name}: operands must have at least 1 dimension")
    v1, v2 = x1.ndim == 1 and name == "matmul", x2.ndim == 1 and vector2
    a = _expand(x1, -2) if v1 else x1
    b = _expand(x2, -1) if v2 else x2
    rank = max(a.ndim, b.ndim)
    xp = _inner(a if level_of(a) == level else b)
    compute = fn(xp)
    if name == "matmul" and a.shape[-1] == 1:
        # A product of a column and a row (the backward of a vector's product with a
        # matrix): the same values, where stacks of matrices with an inner dimension
        # of 1 make NumPy's matmul take a slow loop (6x the multiply).
        compute = xp.multiply
    out = BatchedArray(compute(_aligned(a, level, rank), _aligned(b, level, rank)), level)
    # The axes the vectors became, both at once (one by one, -2 would move)
    squeezed = ((-2,) if v1 else ()) + ((-1,) if v2 else ())
    return BatchedArray(_inner(out).squeeze(out.data, axis=squeezed), level) if squeezed else out


def matmul_rule(x1: Any, x2: Any) -> Any:
    """``x1 @ x2`` batched (also the operator's)."""
    return _matrices("matmul", x1, x2, lambda xp: xp.matmul, True)


RULES["matmul"] = RULES["linalg.matmul"] = matmul_rule


@batching_rule("linalg.solve")
def _solve(x1: Any, x2: Any, /) -> Any:
    return _matrices("linalg.solve", x1, x2, lambda xp: xp.linalg.solve, x2.ndim == 1)


def _vecdot(name: str) -> Callable[..., Any]:
    def rule(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
        rank = max(x1.ndim, x2.ndim)
        if axis >= 0:
            axis -= rank  # counted from the end, it names the same axis once batched
        fn = _resolve(_inner(x1 if level_of(x1) >= level_of(x2) else x2), name)
        return elementwise(lambda a, b: fn(a, b, axis=axis), (x1, x2), {})

    return rule


for _name in ("vecdot", "linalg.vecdot", "linalg.cross"):
    RULES[_name] = _vecdot(_name)


@batching_rule("linalg.outer")
def _outer(x1: Any, x2: Any, /) -> Any:
    return elementwise(operator.mul, (_expand(x1, -1), _expand(x2, -2)), {})


def _tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    l1, l2 = level_of(x1), level_of(x2)
    if isinstance(axes, int):
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        a1, a2 = [a % x1.ndim for a in axes[0]], [a % x2.ndim for a in axes[1]]
    if l1 == l2:
        # Both batched: a batched matmul of (free axes, contracted axes) matrices
        xp, size = _inner(x1), x1.batch_size
        free1 = [a for a in range(x1.ndim) if a not in a1]
        free2 = [a for a in range(x2.ndim) if a not in a2]
        s1, s2 = [x1.shape[a] for a in free1], [x2.shape[a] for a in free2]
        k = math.prod(x1.shape[a] for a in a1)
        m1 = xp.permute_dims(x1.data, (0, *[a + 1 for a in free1], *[a + 1 for a in a1]))
        m2 = xp.permute_dims(x2.data, (0, *[a + 1 for a in a2], *[a + 1 for a in free2]))
        product = xp.matmul(
            xp.reshape(m1, (size, math.prod(s1), k)), xp.reshape(m2, (size, k, math.prod(s2)))
        )
        return BatchedArray(xp.reshape(product, (size, *s1, *s2)), l1)
    if l1 > l2:
        xp = _inner(x1)
        return BatchedArray(xp.tensordot(x1.data, x2, axes=([a + 1 for a in a1], a2)), l1)
    xp = _inner(x2)
    out = xp.tensordot(x1, x2.data, axes=(a1, [a + 1 for a in a2]))
    return BatchedArray(xp.moveaxis(out, x1.ndim - len(a1), 0), l2)


RULES["tensordot"] = RULES["linalg.tensordot"] = _tensordot


@batching_rule("reshape")
def _reshape(x: Any, /, shape: Any, **kwargs: Any) -> Any:
    if x.__class__ is not BatchedArray:
        return NotImplemented
    return BatchedArray(_inner(x).reshape(x.data, (x.batch_size, *shape), **kwargs), x.level)


@batching_rule("broadcast_to")
def _broadcast_to(x: Any, /, shape: Any) -> Any:
    if x.__class__ is not BatchedArray:
        return NotImplemented
    data = _aligned(x, x.level, len(shape))
    return BatchedArray(_inner(x).broadcast_to(data, (x.batch_size, *shape)), x.level)


@batching_rule("broadcast_arrays")
def _broadcast_arrays(*arrays: Any) -> Any:
    _level, top = _top(arrays, {})
    assert top is not None
    shape = _inner(top).broadcast_shapes(*[tuple(a.shape) for a in arrays])
    ns = batching_namespace(top)
    return [ns.broadcast_to(a, shape) for a in arrays]


@batching_rule("tile")
def _tile(x: Any, repetitions: Any, /) -> Any:
    if x.__class__ is not BatchedArray:
        return NotImplemented
    rank = max(x.ndim, len(repetitions))
    reps = (1,) * (1 + rank - len(repetitions)) + tuple(repetitions)
    return BatchedArray(_inner(x).tile(_aligned(x, x.level, rank), reps), x.level)


@batching_rule("take")
def _take(x: Any, indices: Any, /, *, axis: int | None = None) -> Any:
    level, top = _top((x, indices), {})
    assert top is not None
    a = _axis("take", 0 if axis is None else axis, x.ndim)  # an axis of the batch
    if level_of(indices) != level:
        return BatchedArray(_inner(x).take(x.data, indices, axis=a), level)
    xp, size, n = _inner(top), top.batch_size, indices.shape[0]
    if level_of(x) != level:
        # One take for the whole batch's indices, from the one array they share
        flat = xp.take(x, xp.reshape(indices.data, (-1,)), axis=a - 1)
        shape = (*x.shape[: a - 1], size, n, *x.shape[a:])
        return BatchedArray(xp.moveaxis(xp.reshape(flat, shape), a - 1, 0), level)
    # Each example's indices along its own array: take_along_axis, the indices
    # spread over the other axes
    spread = (size, *(1,) * (a - 1), n, *(1,) * (x.ndim - a))
    index = xp.reshape(indices.data, spread)
    index = xp.broadcast_to(index, (size, *x.shape[: a - 1], n, *x.shape[a:]))
    return BatchedArray(xp.take_along_axis(x.data, index, axis=a), level)


@batching_rule("take_along_axis")
def _take_along_axis(x: Any, indices: Any, /, *, axis: int = -1) -> Any:
    level, top = _top((x, indices), {})
    assert top is not None
    a, i = (_batched(v, level, top.batch_size, top) for v in (x, indices))
    out = _inner(top).take_along_axis(a, i, axis=_axis("take_along_axis", axis, x.ndim))
    return BatchedArray(out, level)


@batching_rule("asarray")
def _asarray(obj: Any, /, **kwargs: Any) -> Any:
    if obj.__class__ is not BatchedArray:
        return NotImplemented
    return BatchedArray(_inner(obj).asarray(obj.data, **kwargs), obj.level)


@batching_rule("searchsorted")
def _searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Any:
    level, top = _top((x1, x2, sorter), {})
    assert top is not None
    if level_of(x1) != level and level_of(sorter) != level:
        # One sorted array for every example: the library's search, on the whole batch
        xp = _inner(x2)
        return BatchedArray(xp.searchsorted(x1, x2.data, side=side, sorter=sorter), level)
    # Each example's own sorted array: where a value goes is how many elements come
    # before it (are less, or not greater, on the right), whatever the order
    ns = batching_namespace(top)
    before = ns.less if side == "left" else ns.less_equal
    info = raw_namespace(_unwrapped(top)).__array_namespace_info__()
    dtype = info.default_dtypes(device=top.device)["indexing"]
    return ns.sum(ns.astype(before(x1, ns.expand_dims(x2, axis=-1)), dtype), axis=-1)


@batching_rule("isin")
def _isin(x1: Any, x2: Any, /, *, invert: bool = False) -> Any:
    level, top = _top((x1, x2), {})
    assert top is not None
    if level_of(x2) != level:  # one x2 for every example: the library's, on the batch
        return BatchedArray(_inner(x1).isin(x1.data, x2, invert=invert), level)
    ns = batching_namespace(top)
    # Every element of x1 against every element of its example's x2
    found = ns.any(ns.equal(ns.expand_dims(x1, axis=-1), ns.reshape(x2, (-1,))), axis=-1)
    return ns.logical_not(found) if invert else found


@batching_rule("meshgrid")
def _meshgrid(*arrays: Any, indexing: str = "xy") -> Any:
    _level, top = _top(arrays, {})
    assert top is not None
    ns = batching_namespace(top)
    shape = [a.shape[0] for a in arrays]
    where = list(range(len(arrays)))
    if indexing == "xy" and len(arrays) > 1:  # the first two axes swapped
        shape[:2], where[:2] = shape[1::-1], [1, 0]
    out = []
    for a, axis in zip(arrays, where, strict=True):
        spread = [1] * len(arrays)
        spread[axis] = a.shape[0]
        out.append(ns.broadcast_to(ns.reshape(a, tuple(spread)), tuple(shape)))
    return out
