"""The shape and dtype arithmetic of abstract evaluation (``_abstract``), on shapes and
dtypes alone: broadcasting, matmul, indexing and reduction shapes, and the dtypes of
Python scalars, of mixed operands and, by the standard's rules, of reductions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy

if TYPE_CHECKING:
    from agnograd.backends._abstract import Abstract


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape the standard's broadcasting rules give ``shapes``.

    Examples
    --------
    >>> from agnograd.backends._shape_dtype import broadcast_shapes
    >>> broadcast_shapes((3, 1), (4,))
    (3, 4)
    """
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {', '.join(map(str, shapes))} cannot be broadcast together")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if hasattr(x, "shape") else ()


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: shapes {a} and {b} do not align ({a2[-1]} != {b2[-2]})")
    shape = (*broadcast_shapes(a2[:-2], b2[:-2]), a2[-2], b2[-1])
    if len(a) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b) == 1:
        shape = shape[:-1]
    return shape


def _dummy(shape: tuple[int, ...]) -> numpy.ndarray:
    # A read-only array of any shape in O(1) memory: a broadcast scalar.
    return numpy.broadcast_to(numpy.zeros((), dtype=numpy.int8), shape)


_REDUCTIONS = {
    "sum",
    "prod",
    "mean",
    "max",
    "min",
    "var",
    "std",
    "all",
    "any",
    "argmax",
    "argmin",
    "count_nonzero",
    "logsumexp",
}


def _reduced(x: Abstract, axis: Any, keepdims: bool) -> tuple[int, ...]:
    if axis is None:
        axes = set(range(x.ndim))
    else:
        axes = set()
        for a in (axis,) if isinstance(axis, int) else axis:
            if not -x.ndim <= a < max(x.ndim, 1):
                raise ValueError(f"axis {a} is out of range for {x.ndim} dimensions")
            axes.add(a % max(x.ndim, 1))
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    return tuple(s for i, s in enumerate(x.shape) if i not in axes)


_canonical: dict[tuple[Any, Any], Any] = {}


def canonical_dtype(xp: Any, dtype: Any) -> Any:
    """The dtype object arrays of ``xp`` report (``numpy.float32`` -> ``dtype('float32')``)."""
    key = (xp, dtype)
    try:
        return _canonical[key]
    except KeyError:
        pass
    except TypeError:  # unhashable dtype object: use it as it is
        return dtype
    result = _canonical[key] = xp.empty((0,), dtype=dtype).dtype
    return result


def _is_bool(xp: Any, dtype: Any) -> bool:
    return bool(xp.isdtype(dtype, "bool"))


def _dtype_of(xp: Any, x: Any, other_dtype: Any = None) -> Any:
    """dtype of an operand; Python scalars are weak and take the array's dtype."""
    if hasattr(x, "dtype"):
        return x.dtype
    info = xp.__array_namespace_info__().default_dtypes()
    if isinstance(x, bool):
        return other_dtype if other_dtype is not None else xp.bool
    if isinstance(x, int):
        if other_dtype is not None and not _is_bool(xp, other_dtype):
            return other_dtype
        return info["integral"]
    if isinstance(x, float):
        if other_dtype is not None and xp.isdtype(
            other_dtype, ("real floating", "complex floating")
        ):
            return other_dtype
        return info["real floating"]
    if other_dtype is not None and xp.isdtype(other_dtype, "complex floating"):
        return other_dtype
    if other_dtype == xp.float32:
        return xp.complex64
    return info["complex floating"]


def _result_dtype(xp: Any, *operands: Any) -> Any:
    dtypes = [o.dtype for o in operands if hasattr(o, "dtype")]
    dtype = xp.result_type(*dtypes) if len(dtypes) > 1 else dtypes[0]
    for o in operands:
        if not hasattr(o, "dtype"):
            dtype = _dtype_of(xp, o, dtype)
    return dtype


def _floating(xp: Any, dtype: Any) -> Any:
    """The dtype of a floating-only function's result: integers become the default float."""
    if xp.isdtype(dtype, ("integral", "bool")):
        return xp.__array_namespace_info__().default_dtypes()["real floating"]
    return dtype


def _real_dtype(xp: Any, dtype: Any) -> Any:
    if xp.isdtype(dtype, "complex floating"):
        return xp.float32 if dtype == xp.complex64 else xp.float64
    return dtype


def _reduction_dtype(xp: Any, name: str, dtype: Any, requested: Any) -> Any:
    if requested is not None:
        return requested
    if name in ("all", "any"):
        return xp.bool
    if name in ("argmax", "argmin", "count_nonzero"):
        return xp.__array_namespace_info__().default_dtypes()["indexing"]
    if name in ("sum", "prod") and xp.isdtype(dtype, ("integral", "bool")):
        default = xp.__array_namespace_info__().default_dtypes()["integral"]
        if xp.isdtype(dtype, "unsigned integer"):  # the unsigned of the default's width
            return xp.uint64 if xp.iinfo(default).bits == 64 else xp.uint32
        return default
    if name in ("var", "std"):
        return _real_dtype(xp, _floating(xp, dtype))
    if name == "mean":
        return _floating(xp, dtype)
    return dtype
