"""The namespace of :class:`~agnograd.transforms._batching.BatchedArray`: each array
API function computed for a whole batch, its rule derived from a small table.

- Elementwise functions (every row of agnograd's elementwise chapter, so a new row
  is batched by itself, and ``where``) share one rule: batched operands get singleton
  axes after their batch axis so that the examples' ranks align; unbatched operands
  and Python scalars pass as they are.
- Functions with axis arguments (reductions, ``sort``, ``concat``, ``fft.fft``, ...)
  share one rule, from :data:`AXES`: the axes, normalised for one example, move one
  to the right; ``None`` (every axis, or the flattened array) is made explicit.
- Functions of the last axes (``linalg.inv``, ``tril``, ``astype``, ``zeros_like``,
  in :data:`DIRECT`) run on the batch as they are; creation functions
  (:data:`UNBATCHED`) make unbatched arrays.
- The rest is written out in :data:`RULES` (``matmul``, ``tensordot``, ``reshape``,
  ``take``, ``linalg.solve``, ...), where :func:`batching_rule` adds one.

A function with no rule, or arguments its rule does not take (a batched index of
``take``), runs once per example in a Python loop, with a
:class:`~agnograd.VmapFallbackWarning` once per function.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

from agnograd.backends._backend import raw_namespace
from agnograd.core._trees import flatten, tree_map, unflatten
from agnograd.functions._elementwise import CHAPTER
from agnograd.functions._table import PASSTHROUGH
from agnograd.transforms._batching import BatchedArray, level_of


class VmapFallbackWarning(UserWarning):
    """A function under :func:`agnograd.vmap` has no batching rule for its arguments
    and runs once per example, in a Python loop (correct, but slow).

    It is given once per function; :func:`agnograd.func.batching_rule` adds a rule.
    """


#: Elementwise functions: the standard's rows of agnograd's elementwise chapter.
ELEMENTWISE = frozenset({name for name, row in CHAPTER.items() if row.standard} | {"where"})


class Axes(NamedTuple):
    """How a function of one array (or a list of arrays) names its axes."""

    names: tuple[str, ...] = ("axis",)  #: its axis parameters
    default: Any = None  #: the first axis parameter's default
    #: what ``None`` means: ``"all"`` every axis, ``"flatten"`` the flattened array
    none: str = "all"
    positional: tuple[str, ...] = ()  #: the parameters after the array(s), in order
    insert: bool = False  #: the axis is one of the result's (expand_dims, stack)
    many: bool = False  #: the first argument is a list of arrays (concat, stack)


_REDUCE = Axes()
_LAST = Axes(default=-1)
_FLAT = Axes(none="flatten")
AXES: dict[str, Axes] = {
    **dict.fromkeys(
        ["sum", "prod", "mean", "std", "var", "max", "min", "all", "any", "count_nonzero"],
        _REDUCE,
    ),
    "linalg.vector_norm": _REDUCE,
    **dict.fromkeys(["argmax", "argmin", "cumulative_sum", "cumulative_prod"], _FLAT),
    **dict.fromkeys(["sort", "argsort", "diff"], _LAST),
    "flip": _REDUCE,
    "roll": Axes(none="flatten", positional=("shift",)),
    "repeat": Axes(none="flatten", positional=("repeats",)),
    "expand_dims": Axes(default=0, insert=True),
    "squeeze": Axes(positional=("axis",), none="error"),
    "moveaxis": Axes(("source", "destination"), none="error", positional=("source", "destination")),
    "permute_dims": Axes(("axes",), none="error", positional=("axes",)),
    "unstack": Axes(default=0),
    "concat": Axes(default=0, none="flatten", many=True),
    "stack": Axes(default=0, insert=True, many=True),
    **{f"fft.{n}": _LAST for n in ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]},
    **{f"fft.{n}": Axes(("axes",)) for n in ["fftn", "ifftn", "rfftn", "irfftn"]},
    **{f"fft.{n}": Axes(("axes",)) for n in ["fftshift", "ifftshift"]},
}

#: Functions of the last axes, or of one array as a whole per element: batched as
#: they are, when their first argument alone is batched.
DIRECT = frozenset(
    {f"linalg.{n}" for n in ["cholesky", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv"]}
    | {f"linalg.{n}" for n in ["pinv", "qr", "slogdet", "svd", "svdvals", "matrix_power"]}
    | {f"linalg.{n}" for n in ["matrix_transpose", "diagonal", "trace", "matrix_norm"]}
    | {"linalg.matrix_rank", "matrix_transpose", "tril", "triu", "astype"}
    | {"zeros_like", "ones_like", "empty_like", "full_like"}
)
#: How many trailing axes each function of :data:`DIRECT` needs of one example.
_MATRIX = {n for n in DIRECT if n.startswith("linalg.")} | {"matrix_transpose", "tril", "triu"}

#: Functions that make arrays from no array: unbatched.
UNBATCHED = frozenset(
    {"arange", "empty", "eye", "full", "linspace", "ones", "zeros", "from_dlpack"}
    | {"fft.fftfreq", "fft.rfftfreq", "broadcast_shapes"}
)

#: Rules written out: ``rule(*args, **kwargs)`` with the batched arrays of the
#: highest level among the arguments; NotImplemented for the loop.
RULES: dict[str, Callable[..., Any]] = {}


def batching_rule(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the batching rule of the array API function ``name`` under
    :func:`agnograd.vmap`, replacing the loop (or the rule) it had.

    The rule takes the function's arguments, some of them
    :class:`~agnograd.transforms._batching.BatchedArray` (``.data`` holds the batch
    on axis 0, ``.level`` says which ``vmap``), and returns the result, its batched
    arrays wrapped again with that level; or ``NotImplemented`` for the loop.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.transforms._batching import BatchedArray
    >>> @agnograd.func.batching_rule("linalg.matrix_rank")
    ... def rank(x, /, **kwargs):
    ...     if x.__class__ is not BatchedArray:
    ...         return NotImplemented
    ...     xp = x.data.__array_namespace__()
    ...     return BatchedArray(xp.linalg.matrix_rank(x.data, **kwargs), x.level)
    >>> agnograd.vmap(lambda m: m.__array_namespace__().linalg.matrix_rank(m))(
    ...     np.stack([np.eye(2), np.ones((2, 2))]))
    array([2, 1])
    """

    def register(rule: Callable[..., Any]) -> Callable[..., Any]:
        RULES[name] = rule
        return rule

    return register


# -- helpers


def _inner(batched: BatchedArray) -> Any:
    """The namespace of ``batched``'s data: the batching one, also for a library's
    array, since an operand batched at a lower level may meet it there (a tangent
    batched inside ``vmap(jacfwd(f))`` meets the point batched outside); for
    arrays of no level it calls the library's function at once."""
    data = batched.data
    return (
        raw_namespace(data) if data.__class__ is BatchedArray else _namespace(raw_namespace(data))
    )


def _resolve(xp: Any, name: str) -> Any:
    for part in name.split("."):
        xp = getattr(xp, part)
    return xp


def _top(args: Any, kwargs: Any) -> tuple[int, BatchedArray | None]:
    """The highest level among the arguments (lists included), and one array of it."""
    best, found = 0, None
    for a in (*args, *kwargs.values()):
        for leaf in a if isinstance(a, list | tuple) else (a,):
            lv = level_of(leaf)
            if lv > best:
                best, found = lv, leaf
    return best, found


def _aligned(x: Any, level: int, rank: int) -> Any:
    """``x``'s data with singleton axes after the batch axis, so that one example has
    ``rank`` axes; anything not batched at ``level`` as it is."""
    if level_of(x) != level:
        return x
    missing = rank - x.ndim
    if missing <= 0:
        return x.data
    return _inner(x).reshape(x.data, (x.batch_size, *(1,) * missing, *x.shape))


def _batched(x: Any, level: int, size: int, like: BatchedArray) -> Any:
    """``x``'s data if batched at ``level``, else ``x`` repeated ``size`` times."""
    if level_of(x) == level:
        return x.data
    xp = _inner(like)
    return xp.broadcast_to(xp.expand_dims(x, axis=0), (size, *x.shape))


class AxisError(ValueError, IndexError):
    """An axis out of range for one example (a ValueError and an IndexError, as
    NumPy's)."""


def _axis(name: str, axis: int, ndim: int) -> int:
    """``axis`` of an example of ``ndim`` axes, as an axis of the batch."""
    if not -ndim <= axis < ndim:
        raise AxisError(f"{name}: axis {axis} is out of range for arrays of {ndim} dimensions")
    return axis % ndim + 1


def _shifted(name: str, value: Any, ndim: int) -> Any:
    if isinstance(value, tuple | list):
        return type(value)(_axis(name, a, ndim) for a in value)
    return _axis(name, value, ndim)


def wrap(out: Any, level: int) -> Any:
    """Arrays in ``out`` (a tuple, namedtuple or list of them too) batched at ``level``."""
    if isinstance(out, tuple | list):
        items = [wrap(o, level) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    return BatchedArray(out, level)


# -- the generic rules


def elementwise(fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """The broadcasting rule: ``fn`` on the operands, batched ones aligned."""
    level, _ = _top(args, kwargs)
    arrays = [a for a in (*args, *kwargs.values()) if hasattr(a, "shape")]
    rank = max([a.ndim for a in arrays], default=0)
    d = arrays[0].dtype if arrays else None
    new = [_aligned(a, level, rank) for a in args]
    out = fn(*new, **{k: _aligned(v, level, rank) for k, v in kwargs.items()})
    if out.shape[0] and any(a.ndim == 0 for a in arrays) and any(a.dtype != d for a in arrays):
        out = _promoted(fn, args, kwargs, level, rank, out)
    return BatchedArray(out, level)


def _promoted(
    fn: Callable[..., Any], args: Any, kwargs: Any, level: int, rank: int, out: Any
) -> Any:
    """``out`` in the dtype the examples' own call gives, where a 0-d operand of one
    example took part in type promotion as the array it is in the batch: PyTorch
    promotes a 0-d tensor beside others by its kind only (float32 beside a float64
    0-d tensor stays float32; batched, the 0-d one has an axis and wins), so the 0-d
    operands are cast to the first example's result dtype and ``fn`` runs again, as
    PyTorch casts them before computing."""

    def first(a: Any) -> Any:
        return a.data[0, ...] if level_of(a) == level else a

    one = fn(*[first(a) for a in args], **{k: first(v) for k, v in kwargs.items()})
    if one.dtype == out.dtype:
        return out
    xp = raw_namespace(one)

    def cast(a: Any) -> Any:
        # (where's condition stays bool)
        if hasattr(a, "shape") and not a.ndim and not xp.isdtype(a.dtype, "bool"):
            a = raw_namespace(a).astype(a, one.dtype)
        return _aligned(a, level, rank)

    return fn(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})


def _bind(name: str, spec: Axes, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    if len(args) > 1 + len(spec.positional):
        raise TypeError(f"{name}: too many positional arguments ({len(args)})")
    bound = dict(kwargs)
    for param, value in zip(spec.positional, args[1:], strict=False):
        bound[param] = value
    return bound


def _axis_rule(name: str, spec: Axes, args: Any, kwargs: dict[str, Any]) -> Any:
    level, top = _top(args, kwargs)
    assert top is not None
    first = args[0]
    bound = _bind(name, spec, args, kwargs)
    if any(level_of(v) == level for v in bound.values()):
        return NotImplemented  # a batched shift, repeats, prepend: the loop
    xp = _inner(top)
    if spec.many:
        data = [_batched(a, level, top.batch_size, top) for a in first]
        ndim = first[0].ndim
    else:
        if level_of(first) != level:
            return NotImplemented
        data, ndim = first.data, first.ndim
    if spec.insert:
        ndim += 1
    key = spec.names[0]
    value = bound.get(key, spec.default)
    flat_shape = None
    if (value is None and key in bound) or (value is None and key not in bound):
        if spec.none == "all":
            value = tuple(range(ndim))
            s = bound.get("s")
            if s is not None:  # fftn's axes: the last len(s)
                value = tuple(range(ndim - len(s), ndim))
        elif spec.none == "flatten":
            flat_shape = first.shape if not spec.many else None
            if spec.many:
                data = [xp.reshape(d, (top.batch_size, -1)) for d in data]
            else:
                data = xp.reshape(data, (top.batch_size, -1))
            value, ndim = 0, 1
        else:
            raise TypeError(f"{name}: its axis argument is required")
    bound[key] = _shifted(name, value, ndim)
    for other in spec.names[1:]:
        bound[other] = _shifted(name, bound[other], ndim)
    if name == "permute_dims":
        bound["axes"] = (0, *bound["axes"])
    positional = [bound.pop(p) for p in spec.positional if p in bound]
    out = _resolve(xp, name)(data, *positional, **bound)
    if flat_shape is not None and name == "roll":
        out = xp.reshape(out, (top.batch_size, *flat_shape))
    elif flat_shape is not None and kwargs.get("keepdims"):
        out = xp.reshape(out, (top.batch_size, *(1,) * len(flat_shape)))
    return wrap(out, level)


def _direct(name: str, args: Any, kwargs: dict[str, Any]) -> Any:
    level, _ = _top(args, kwargs)
    first = args[0]
    if level_of(first) != level or any(level_of(a) == level for a in (*args[1:], *kwargs.values())):
        return NotImplemented
    if name in _MATRIX and first.ndim < 2:
        raise ValueError(f"{name}: expected arrays of at least 2 dimensions, got {first.shape}")
    return wrap(_resolve(_inner(first), name)(first.data, *args[1:], **kwargs), level)


# -- the fallback: a loop over the batch

_warned: set[str] = set()


def fallback(name: str, args: Any, kwargs: Any, fn: Callable[..., Any] | None = None) -> Any:
    """``name`` (the function ``fn``, by default the namespace's ``name``) once per
    example, the results stacked, with a warning once."""
    level, top = _top(args, kwargs)
    assert top is not None
    xp = _inner(top)
    if fn is None:
        fn = _resolve(xp, name)
    results = []
    for i in range(top.batch_size):

        def one(a: Any, i: int = i) -> Any:
            return a.data[i, ...] if level_of(a) == level else a

        results.append(fn(*tree_map(one, list(args)), **tree_map(one, dict(kwargs))))
    # Once the loop ran (a library that lacks the function raises before: its caller
    # may compute it another way, with rules)
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"vmap: {name} has no batching rule for these arguments, so it runs once per "
            "example in a Python loop (slow); add one with agnograd.func.batching_rule"
            f"({name!r}) (see the vmap guide)",
            VmapFallbackWarning,
            stacklevel=3,
        )
    leaves, structure = flatten(results[0])
    columns = [flatten(r)[0] for r in results]
    stacked = []
    for j in range(len(leaves)):
        shapes = {tuple(c[j].shape) for c in columns}
        if len(shapes) > 1:
            raise ValueError(
                f"vmap: {name} gives results of different shapes across the batch "
                f"({sorted(shapes)[:3]}): the size of its result depends on each example's "
                "values, and a batch has one shape; call it outside vmap, once per example"
            )
        stacked.append(BatchedArray(xp.stack([c[j] for c in columns], axis=0), level))
    return unflatten(structure, stacked)


# -- the namespace


class BatchingNamespace:
    """The array API namespace of batched arrays over one library (``raw``)."""

    def __init__(self, raw: Any, prefix: str = "") -> None:
        self._raw = raw
        self._prefix = prefix
        self.__name__ = f"agnograd.vmap({getattr(raw, '__name__', raw)})"

    def __repr__(self) -> str:
        return f"<agnograd vmap namespace for {self._raw.__name__}>"

    def _combine(self, other: Any) -> Any:
        """This namespace, where ``other`` is its library's or another level's
        (``FunctionNode.apply`` asks it when a node's inputs mix them)."""
        if other is self._base() or (
            isinstance(other, BatchingNamespace) and other._base() is self._base()
        ):
            return self
        return None

    def _share(self, func: Any, inputs: Any) -> Any:
        """A node's inputs with its unbatched Variables that require a gradient
        shared into the batch (``FunctionNode.apply`` asks it after ``_combine``)."""
        from agnograd.transforms._vmap import share

        return share(func, inputs)

    def _base(self) -> Any:
        return self._raw

    def _scatter_add_flat(self, dst: Any, positions: Any, values: Any) -> Any:
        """:func:`agnograd.backends._backend.scatter_add_flat` of each example: the
        batch's rows laid end to end, each example's positions moved to its row."""
        from agnograd.backends._backend import scatter_add_flat

        level, top = _top((dst, positions, values), {})
        assert top is not None
        xp, size, n = _inner(top), top.batch_size, dst.shape[0]
        rows = xp.reshape(xp.arange(size, dtype=positions.dtype, device=top.data.device), (-1, 1))
        moved = _batched(positions, level, size, top) + rows * n
        out = scatter_add_flat(
            xp.reshape(_batched(dst, level, size, top), (-1,)),
            xp.reshape(moved, (-1,)),
            xp.reshape(_batched(values, level, size, top), (-1,)),
        )
        return BatchedArray(xp.reshape(out, (size, n)), level)

    def _forward(self, node: Any, inputs: Any) -> Any:
        """The outputs of ``node`` (of a class with a ``vmap`` rule) from ``inputs``,
        by its rule; NotImplemented where the rule says so (``FunctionNode``'s
        ``forward`` of such a class asks it of its namespace)."""
        level, top = _top(inputs, {})
        if top is None or node.vmap is None:  # a subclass may take the rule away
            return NotImplemented
        in_axes = tuple(0 if level_of(a) == level else None for a in inputs)
        data = tuple(a.data if axis == 0 else a for a, axis in zip(inputs, in_axes, strict=True))
        xp, node.xp = node.xp, _inner(top)
        try:
            result = node.vmap(in_axes, data)
        finally:
            node.xp = xp
        if result is NotImplemented:
            return NotImplemented
        outputs, out_axes = result
        outputs = tuple(outputs)
        if out_axes is None or isinstance(out_axes, int):
            out_axes = (out_axes,) * len(outputs)
        if len(out_axes) != len(outputs):
            raise ValueError(
                f"{node.label}.vmap: it returned {len(outputs)} output(s) and "
                f"{len(out_axes)} out_axes; give one axis (or None) per output"
            )
        return tuple(
            y
            if axis is None
            else BatchedArray(_inner(top).moveaxis(y, axis, 0) if axis else y, level)
            for y, axis in zip(outputs, out_axes, strict=True)
        )

    def _lift(self, x: Any, others: Any, *, copy: bool = False) -> Any:
        """``x`` batched at the highest level among ``others`` (the index or the value
        of an indexing node): a raw ``x`` repeated over the batch (a view, or with
        ``copy`` an array of its own that a write may change), else ``x`` as it is.

        Indexing nodes ask it of their namespace (see
        :func:`agnograd.functions._core.lifted`), since ``x[key]`` and ``x[key] =
        value`` are Python's operators on ``x``, which a batched key or value cannot
        answer for it.
        """
        level, top = _top(others, {})
        if top is None or level_of(x) >= level:
            return x
        data = _batched(x, level, top.batch_size, top)
        if copy:
            data = _inner(top).asarray(data, copy=True)
        return BatchedArray(data, level)

    def __array_namespace_info__(self) -> Any:
        return self._raw.__array_namespace_info__()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        key = self._prefix + name
        raw = getattr(self._raw, name)
        value: Any
        if key in ("linalg", "fft"):
            value = BatchingNamespace(raw, prefix=key + ".")
        elif not callable(raw) or key in PASSTHROUGH:
            value = _passthrough(raw) if key in {"result_type", "can_cast", "finfo"} else raw
        else:
            value = _function(key, raw)
        setattr(self, name, value)
        return value


def _unwrapped(a: Any) -> Any:
    while a.__class__ is BatchedArray:
        a = a.data
    return a


def _passthrough(fn: Any) -> Any:
    return lambda *args, **kwargs: fn(*[_unwrapped(a) for a in args], **kwargs)


def _function(key: str, raw: Any) -> Callable[..., Any]:
    """``key`` of the namespace: its rule, or the loop."""
    if key in ("linalg", "fft"):
        return raw

    def function(*args: Any, **kwargs: Any) -> Any:
        level, top = _top(args, kwargs)
        if level == 0:
            return raw(*args, **kwargs)
        out: Any = NotImplemented
        if key in RULES:
            out = RULES[key](*args, **kwargs)
        elif key in ELEMENTWISE:
            out = elementwise(_resolve(_inner(top), key), args, kwargs)  # type: ignore[arg-type]
        elif key in AXES:
            out = _axis_rule(key, AXES[key], args, kwargs)
        elif key in DIRECT:
            out = _direct(key, args, kwargs)
        if out is NotImplemented:
            out = fallback(key, args, kwargs)
        return out

    function.__name__ = key
    return function


@functools.cache
def _namespace(raw: Any) -> BatchingNamespace:
    return BatchingNamespace(raw)


def batching_namespace(x: BatchedArray) -> BatchingNamespace:
    """The batching namespace of ``x``'s library (one per library, for every level)."""
    return _namespace(raw_namespace(_unwrapped(x)))


# The rules written out register themselves in RULES (matmul, tensordot, take, ...).
from agnograd.transforms import _batching_written  # noqa: E402, F401
