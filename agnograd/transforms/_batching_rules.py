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
import operator
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
    ranks = [a.ndim for a in (*args, *kwargs.values()) if hasattr(a, "shape")]
    rank = max(ranks, default=0)
    new = [_aligned(a, level, rank) for a in args]
    out = fn(*new, **{k: _aligned(v, level, rank) for k, v in kwargs.items()})
    return BatchedArray(out, level)


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


def fallback(name: str, args: Any, kwargs: Any) -> Any:
    """``name`` once per example, the results stacked, with a warning once."""
    level, top = _top(args, kwargs)
    assert top is not None
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"vmap: {name} has no batching rule for these arguments, so it runs once per "
            "example in a Python loop (slow); add one with agnograd.func.batching_rule"
            f"({name!r}) (see the vmap guide)",
            VmapFallbackWarning,
            stacklevel=3,
        )
    xp = _inner(top)
    fn = _resolve(xp, name)
    results = []
    for i in range(top.batch_size):

        def one(a: Any, i: int = i) -> Any:
            return a.data[i, ...] if level_of(a) == level else a

        results.append(fn(*tree_map(one, list(args)), **tree_map(one, dict(kwargs))))
    leaves, structure = flatten(results[0])
    columns = [flatten(r)[0] for r in results]
    stacked = []
    for j in range(len(leaves)):
        shapes = {tuple(c[j].shape) for c in columns}
        if len(shapes) > 1:
            raise ValueError(
                f"vmap: {name} gives results of different shapes across the batch "
                f"({sorted(shapes)[:3]}); a batch needs one shape: compute without it"
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
    if l1 == l2:
        return NotImplemented  # both batched: the loop
    if isinstance(axes, int):
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        a1, a2 = [a % x1.ndim for a in axes[0]], [a % x2.ndim for a in axes[1]]
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
    if level_of(x) <= level_of(indices):
        return NotImplemented  # a batched index: the loop
    axis = 0 if axis is None else axis
    return BatchedArray(_inner(x).take(x.data, indices, axis=_axis("take", axis, x.ndim)), x.level)


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
