"""The batched array of :func:`agnograd.vmap`: one more backend underneath Variables.

A :class:`BatchedArray` holds a backend array whose axis 0 is the batch, and reports
the shape of one example (without that axis). Its namespace
(:mod:`agnograd.transforms._batching_rules`) computes every array API function for
the whole batch at once, so that the function under ``vmap``, the backward rules
its Variables run and the engine's ``sum_to`` all see per-example shapes and run as
batched array operations, with no change to them.

Nested ``vmap`` nests batched arrays: each call has a *level* (the outermost 1),
and a level's batched array may hold one of a lower level (or a raw array). An
operation among arrays of several levels is batched at the highest: the others are
unbatched there, as a closed-over array is.

Reading values in Python (``bool``, ``float``, ``item()``, ``numpy.asarray``)
raises :class:`~agnograd.ConcretizationTypeError`: a batched array holds a value
per example, not one.
"""

from __future__ import annotations

import contextvars
import itertools
import operator
import os
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agnograd.backends._backend import is_array, raw_namespace, register_per_instance
from agnograd.static._jit_trace import _PACKAGE, _STDLIB, ConcretizationTypeError

# The levels of the vmap calls running now in this thread (or task), innermost last:
# a context variable, as agnograd's MODE is, so that vmaps in two threads never see
# each other's levels. The counter is shared, so that no two calls share a level.
_active: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar(
    "agnograd.vmap_levels", default=()
)
_counter = itertools.count(1)


def enter_level() -> int:
    """A new level for a vmap call starting now (higher than every active one)."""
    level = next(_counter)
    _active.set((*_active.get(), level))
    return level


def exit_level(level: int) -> None:
    _active.set(tuple(a for a in _active.get() if a != level))


def is_active(level: int) -> bool:
    """Whether the vmap call of ``level`` is running now in this thread (its
    function is being called), rather than finished."""
    return level in _active.get()


def level_of(x: Any) -> int:
    """The level of ``x`` if it is a batched array, else 0 (unbatched)."""
    return x.level if x.__class__ is BatchedArray else 0


class BatchedArray:
    """An array holding a batch: ``data``'s axis 0, reported without it.

    ``shape``, ``ndim``, ``size``, indexing and every function of its namespace are
    those of one example; ``data`` holds them all, stacked on axis 0.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.transforms._batching import BatchedArray
    >>> b = BatchedArray(np.arange(6.0).reshape(3, 2), level=1)
    >>> b.shape, b.batch_size
    ((2,), 3)
    >>> (b * 2.0 + b[0]).data
    array([[ 0.,  2.],
           [ 6.,  8.],
           [12., 14.]])
    """

    __slots__ = ("data", "level")
    __array_ufunc__ = None  # NumPy defers its operators to ours
    __array_priority__ = 400

    def __init__(self, data: Any, level: int) -> None:
        self.data = data
        self.level = level

    def __repr__(self) -> str:
        return f"BatchedArray(level={self.level}, batch_size={self.batch_size}, data={self.data!r})"

    @property
    def batch_size(self) -> int:
        return int(self.data.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[1:])

    @property
    def ndim(self) -> int:
        return len(self.data.shape) - 1

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    @property
    def device(self) -> Any:
        return self.data.device

    @property
    def xp(self) -> Any:
        """The namespace of the library underneath (what agnograd's device lookup
        asks of an array type whose instances name their namespace)."""
        data = self.data
        while data.__class__ is BatchedArray:
            data = data.data
        return raw_namespace(data)

    @property
    def mT(self) -> Any:  # noqa: N802 - the standard's name
        return self.__array_namespace__().matrix_transpose(self)

    @property
    def T(self) -> Any:  # noqa: N802 - the standard's name
        return self.__array_namespace__().permute_dims(self, tuple(range(self.ndim))[::-1])

    def __array_namespace__(self, api_version: str | None = None) -> Any:
        from agnograd.transforms._batching_rules import batching_namespace

        return batching_namespace(self)

    def to_device(self, device: Any, /, *, stream: Any = None) -> BatchedArray:
        kwargs = {} if stream is None else {"stream": stream}
        return BatchedArray(self.data.to_device(device, **kwargs), self.level)

    __hash__ = object.__hash__  # by identity, although __eq__ is elementwise

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __getitem__(self, key: Any) -> Any:
        from agnograd.transforms._batching_index import getitem

        return getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        from agnograd.transforms._batching_index import setitem

        setitem(self, key, value)

    def _needs_value(self, what: str) -> ConcretizationTypeError:
        line = _caller_line()
        if _WRITE.search(line):
            # The library's own array answers `h[key] = value`: it takes the value as
            # one number or array, and every example would write into its memory.
            return ConcretizationTypeError(
                "vmap: writing into an array that every example shares, with a batched "
                f"value or index, at {line}: the array is the library's own (an argument, "
                "or made by the library's namespace), so each example would write into the "
                "same memory. "
                "Write out of place (xp.where(mask, value, h), or build it with xp.concat), "
                "or make the array with agnograd's namespace (agnograd.namespace(x).zeros"
                "(...)) or as an agnograd.Variable: a batched write makes a Variable batched"
            )
        return ConcretizationTypeError(
            f"vmap: {what} needs the value of a batched array, at {line}; under "
            "vmap an array holds one value per example, not one: choose with xp.where "
            "instead of `if`, pass that argument unbatched (in_axes=None), or call the "
            "function without vmap"
        )

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # PyTorch asks the value of `tensor[key] = value` (and of its functions) first
        if getattr(func, "__name__", None) == "__setitem__":
            batched = next(a for a in args if a.__class__ is cls)
            raise batched._needs_value("a write into a tensor")
        return NotImplemented

    def __bool__(self) -> bool:
        raise self._needs_value("bool()")

    def __int__(self) -> int:
        raise self._needs_value("int()")

    def __float__(self) -> float:
        raise self._needs_value("float()")

    def __complex__(self) -> complex:
        raise self._needs_value("complex()")

    def __index__(self) -> int:
        raise self._needs_value("an index (operator.index)")

    def item(self) -> Any:
        raise self._needs_value(".item()")

    def tolist(self) -> Any:
        raise self._needs_value(".tolist()")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise self._needs_value(
            "a conversion to NumPy (numpy.asarray, or writing it into an unbatched array)"
        )

    def __dlpack__(self, **kwargs: Any) -> Any:
        raise self._needs_value("__dlpack__ (from_dlpack)")

    def __dlpack_device__(self) -> Any:
        return self.data.__dlpack_device__()

    if TYPE_CHECKING:  # the operators are set on the class below

        def __getattr__(self, name: str) -> Any: ...


#: A line of code that writes through a subscript (`h[0] = v`, `h[i] += v`).
_WRITE = re.compile(r"\]\s*([-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)")


def _caller_line() -> str:
    """``file:line (`code`)`` of the innermost caller outside agnograd and the
    standard library, for errors: outside installed packages too where there is one
    (array-api-strict's ``__setitem__`` converting a value is not where the user wrote
    it)."""
    first = None  # the innermost such frame
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        installed = "-packages" + os.sep in filename
        if not filename.startswith(_PACKAGE) and not (
            filename.startswith(_STDLIB) and not installed
        ):
            first = first or frame
            if not installed:
                break
        frame = frame.f_back  # type: ignore[assignment]
    frame = frame or first
    if frame is None:
        return "a line of agnograd"
    import linecache

    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    return f"{where} (`{code}`)" if code else where


# -- the operators: the elementwise rule, with Python's operator as the function

_BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "lshift": operator.lshift,
    "rshift": operator.rshift,
}
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_UNARY = ("neg", "pos", "invert", "abs")
_SCALARS = (bool, int, float, complex)


def _operand(other: Any) -> bool:
    return other.__class__ is BatchedArray or isinstance(other, _SCALARS) or is_array(other)


def _binary(name: str, op: Any, reflected: bool) -> Any:
    def method(self: BatchedArray, other: Any) -> Any:
        if not _operand(other):
            return NotImplemented  # a Variable's reflected operator takes it
        from agnograd.transforms._batching_rules import elementwise

        return elementwise(op, (other, self) if reflected else (self, other), {})

    method.__name__ = name
    return method


def _unary(name: str, op: Any) -> Any:
    def method(self: BatchedArray) -> Any:
        from agnograd.transforms._batching_rules import elementwise

        return elementwise(op, (self,), {})

    method.__name__ = name
    return method


def _matmul(reflected: bool) -> Any:
    def method(self: BatchedArray, other: Any) -> Any:
        if not _operand(other):
            return NotImplemented
        from agnograd.transforms._batching_written import matmul_rule

        return matmul_rule(*((other, self) if reflected else (self, other)))

    return method


for _name, _op in _BINARY.items():
    setattr(BatchedArray, f"__{_name}__", _binary(f"__{_name}__", _op, False))
    setattr(BatchedArray, f"__r{_name}__", _binary(f"__r{_name}__", _op, True))
for _name in _COMPARISONS:
    setattr(BatchedArray, f"__{_name}__", _binary(f"__{_name}__", getattr(operator, _name), False))
for _name in _UNARY:
    setattr(BatchedArray, f"__{_name}__", _unary(f"__{_name}__", getattr(operator, _name)))
for _name, _reflected in (("matmul", False), ("rmatmul", True)):
    setattr(BatchedArray, f"__{_name}__", _matmul(_reflected))

# Its namespace depends on the instance's level: asked every time, never cached.
register_per_instance(BatchedArray)
