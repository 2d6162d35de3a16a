"""Abstract evaluation: run a forward on shapes and dtypes instead of arrays.

Define-then-run infers every output's shape and dtype when the graph is built,
before any data exists. Rather than a shape rule per function, the function's own
forward runs on :class:`Abstract` values, whose namespace computes the shape and
dtype each array API function would produce. Nothing is computed on data of the
size of the arrays.

Elementwise functions (those given to :func:`register_elementwise`, the standard's
elementwise chapter, and ``where``) and the operators share one rule: the result
has the operands' broadcast shape and the dtype the backend's own function gives,
found by calling it on one-element arrays of the operands' dtypes and cached, so
each library's promotion (PyTorch's 0-d operands, integer division) is what it is
and no table of dtype rules is kept here. Reductions take their dtype the same way.

Operations whose result depends on the values (boolean-mask indexing, ``int(x)``)
raise :class:`DataDependentError`; a FunctionNode can then declare its outputs by
overriding ``FunctionNode.infer``.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy

from agnograd.backends._backend import register_per_instance
from agnograd.backends._shape_dtype import (
    _REDUCTIONS,
    _dtype_of,
    _dummy,
    _is_bool,
    _matmul_shape,
    _reduced,
    _reduction_dtype,
    _result_dtype,
    _shape,
    broadcast_shapes,
    canonical_dtype,
)


class DataDependentError(TypeError):
    """The result's shape or value depends on data that does not exist yet."""


class Abstract:
    """A stand-in for an array that has a shape, a dtype and a namespace, but no data.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> from agnograd.backends._abstract import Abstract
    >>> a = Abstract((2, 3), xp.float32, xp)
    >>> b = xp.exp(a) if False else a.__array_namespace__().exp(a)
    >>> (a @ a.mT + 1.0).shape, b.dtype
    ((2, 2), dtype('float32'))
    """

    __slots__ = ("device", "dtype", "shape", "xp")
    __array_ufunc__ = None
    __array_priority__ = 300

    def __init__(self, shape: Sequence[int], dtype: Any, xp: Any, device: Any = None) -> None:
        self.shape = tuple(shape)
        self.dtype = canonical_dtype(xp, dtype)
        self.xp = xp
        self.device = device

    def __repr__(self) -> str:
        return f"Abstract(shape={self.shape}, dtype={self.dtype})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def mT(self) -> Abstract:  # noqa: N802 - the standard's name
        return self._like((*self.shape[:-2], self.shape[-1], self.shape[-2]))

    @property
    def T(self) -> Abstract:  # noqa: N802 - the standard's name
        return self._like(self.shape[::-1])

    def _like(self, shape: tuple[int, ...], dtype: Any = None) -> Abstract:
        return Abstract(shape, self.dtype if dtype is None else dtype, self.xp, self.device)

    def __array_namespace__(self, api_version: str | None = None) -> AbstractNamespace:
        return AbstractNamespace(self.xp)

    def __getitem__(self, key: Any) -> Abstract:
        items = key if isinstance(key, tuple) else (key,)
        plain = []
        for k in items:
            if isinstance(k, Abstract):
                if _is_bool(self.xp, k.dtype):
                    raise DataDependentError(
                        "indexing with a boolean mask has a data-dependent shape"
                    )
                k = _dummy(k.shape)
            elif hasattr(k, "shape") and hasattr(k, "dtype"):
                k = numpy.asarray(k) if _is_bool(self.xp, k.dtype) else _dummy(tuple(k.shape))
            plain.append(k)
        return self._like(_dummy(self.shape)[tuple(plain)].shape)

    def __bool__(self) -> bool:
        raise DataDependentError("the truth value of an array without data is unknown")

    def __int__(self) -> int:
        raise DataDependentError("the value of an array without data is unknown")

    __float__ = __index__ = __complex__ = __int__

    def __len__(self) -> int:
        return self.shape[0]

    __hash__ = object.__hash__  # by identity, although __eq__ is elementwise

    def __matmul__(self, other: Any) -> Abstract:
        shape = _matmul_shape(self.shape, _shape(other))
        return Abstract(shape, _result_dtype(self.xp, self, other), self.xp, self.device)

    def __rmatmul__(self, other: Any) -> Abstract:
        shape = _matmul_shape(_shape(other), self.shape)
        return Abstract(shape, _result_dtype(self.xp, self, other), self.xp, self.device)

    # The other operators are set on the class below, by the elementwise rule;
    # declared here for type checkers only.
    if TYPE_CHECKING:

        def __neg__(self) -> Abstract: ...
        def __pos__(self) -> Abstract: ...
        def __invert__(self) -> Abstract: ...
        def __abs__(self) -> Abstract: ...
        def __truediv__(self, other: Any) -> Abstract: ...
        def __rtruediv__(self, other: Any) -> Abstract: ...

        def __add__(self, other: Any) -> Abstract: ...
        def __radd__(self, other: Any) -> Abstract: ...
        def __sub__(self, other: Any) -> Abstract: ...
        def __rsub__(self, other: Any) -> Abstract: ...
        def __mul__(self, other: Any) -> Abstract: ...
        def __rmul__(self, other: Any) -> Abstract: ...
        def __floordiv__(self, other: Any) -> Abstract: ...
        def __rfloordiv__(self, other: Any) -> Abstract: ...
        def __pow__(self, other: Any) -> Abstract: ...
        def __rpow__(self, other: Any) -> Abstract: ...
        def __mod__(self, other: Any) -> Abstract: ...
        def __rmod__(self, other: Any) -> Abstract: ...
        def __and__(self, other: Any) -> Abstract: ...
        def __rand__(self, other: Any) -> Abstract: ...
        def __or__(self, other: Any) -> Abstract: ...
        def __ror__(self, other: Any) -> Abstract: ...
        def __xor__(self, other: Any) -> Abstract: ...
        def __rxor__(self, other: Any) -> Abstract: ...
        def __lshift__(self, other: Any) -> Abstract: ...
        def __rlshift__(self, other: Any) -> Abstract: ...
        def __rshift__(self, other: Any) -> Abstract: ...
        def __rrshift__(self, other: Any) -> Abstract: ...
        # Elementwise comparisons: Abstract values of dtype bool.
        def __eq__(self, other: object) -> Abstract: ...  # type: ignore[override]
        def __ne__(self, other: object) -> Abstract: ...  # type: ignore[override]
        def __lt__(self, other: Any) -> Abstract: ...
        def __le__(self, other: Any) -> Abstract: ...
        def __gt__(self, other: Any) -> Abstract: ...
        def __ge__(self, other: Any) -> Abstract: ...


# ---------------------------------------------------------------------------------
# The elementwise rule

_ELEMENTWISE: set[str] = {"where"}  # where is elementwise in shape and dtype too
_probed: dict[tuple[Any, ...], Any] = {}


def register_elementwise(*names: str) -> None:
    """Declare functions of the array API standard elementwise, for abstract evaluation.

    The result of an elementwise function ``name(*operands)`` has the broadcast
    shape of its array operands, and the dtype the backend's own ``name`` gives: it
    is found by calling that function on one-element arrays of the operands' dtypes
    (0-d for a 0-d operand, since PyTorch promotes those differently; Python scalars
    passed as they are), once per library, name and operand types. So no promotion
    rule is written here, and a dtype the backend refuses is refused when the graph
    is built, with the backend's own error.

    The layer that declares functions calls it with their names; names are those of
    the backends' namespaces (``"exp"``, ``"atan2"``), not agnograd's extras.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> from agnograd.backends._abstract import Abstract, register_elementwise
    >>> register_elementwise("hypot")
    >>> a = Abstract((3, 1), xp.float32, xp)
    >>> b = Abstract((4,), xp.int8, xp)
    >>> a.__array_namespace__().hypot(a, b)
    Abstract(shape=(3, 4), dtype=float32)
    """
    _ELEMENTWISE.update(names)


def _is_array(x: Any) -> bool:
    # Not a class: numpy.float32, a dtype, has the attributes `shape` and `dtype` too.
    return isinstance(x, Abstract) or (
        hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)
    )


_SCALAR_TYPES = (bool, int, float, complex, type(None))


def _signature(x: Any) -> Any:
    """What of an operand decides a result's dtype: an array's dtype (with its class,
    so that dtypes of two libraries are never compared), a Python scalar's type, any
    other argument itself (a dtype, a string)."""
    if _is_array(x):
        return (_is_array, x.dtype.__class__, x.dtype, len(x.shape) == 0)
    if x.__class__ is int:
        # Its size decides too: uint8 + 300 overflows where uint8 + 1 does not.
        return (int, x.bit_length(), x < 0)
    if x.__class__ in _SCALAR_TYPES:
        return x.__class__
    return (x.__class__, x)


def _stand_in(xp: Any, x: Any) -> Any:
    """A one-element array of ``x``'s dtype for an array operand, 0-d where ``x`` is
    (PyTorch promotes 0-d operands differently); anything else as it is."""
    if not _is_array(x):
        return x
    return xp.ones(() if len(x.shape) == 0 else (1,), dtype=x.dtype)


def _probe(xp: Any, key: Any, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """The dtype of ``fn(*args, **kwargs)``, computed on one-element stand-ins of the
    array operands, once per library, ``key`` and operand signatures."""
    sig = (
        xp,
        key,
        tuple(_signature(a) for a in args),
        tuple((k, _signature(v)) for k, v in kwargs.items()),
    )
    try:
        return _probed[sig]
    except KeyError:
        cacheable = True
    except TypeError:  # an unhashable argument: probe without caching
        cacheable = False
    with warnings.catch_warnings(), numpy.errstate(all="ignore"):
        # inf and nan from the stand-ins' values (atanh(1), x / 0) are no concern.
        warnings.simplefilter("ignore")
        out = fn(
            *[_stand_in(xp, a) for a in args], **{k: _stand_in(xp, v) for k, v in kwargs.items()}
        )
    dtype = out.dtype
    if cacheable:
        _probed[sig] = dtype
    return dtype


def elementwise(
    xp: Any, key: Any, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> Abstract:
    """The abstract result of the elementwise ``fn`` (``key`` names it in the cache):
    the operands' broadcast shape, and the dtype ``fn`` gives for their dtypes."""
    operands = [*args, *kwargs.values()]
    shape = broadcast_shapes(*[_shape(o) for o in operands if _is_array(o)])
    dtype = _probe(xp, key, fn, args, kwargs)
    device = next((o.device for o in operands if isinstance(o, Abstract)), None)
    return Abstract(shape, dtype, xp, device)


def _elementwise_function(xp: Any, name: str) -> Callable[..., Abstract]:
    fn = getattr(xp, name)

    def function(*args: Any, **kwargs: Any) -> Abstract:
        return elementwise(xp, name, fn, args, kwargs)

    function.__name__ = name
    return function


def _operator(name: str, op: Callable[..., Any], reflected: bool = False) -> Any:
    def method(self: Abstract, other: Any) -> Any:
        if not (_is_array(other) or isinstance(other, bool | int | float | complex)):
            return NotImplemented
        args = (other, self) if reflected else (self, other)
        return elementwise(self.xp, name, op, args, {})

    method.__name__ = name
    return method


def _unary_operator(name: str, op: Callable[..., Any]) -> Any:
    def method(self: Abstract) -> Abstract:
        return elementwise(self.xp, name, op, (self,), {})

    method.__name__ = name
    return method


for _name in (
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "pow",
    "mod",
    "and",
    "or",
    "xor",
    "lshift",
    "rshift",
):
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(Abstract, f"__{_name}__", _operator(f"__{_name}__", _op))
    setattr(Abstract, f"__r{_name}__", _operator(f"__r{_name}__", _op, reflected=True))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Abstract, f"__{_name}__", _operator(f"__{_name}__", getattr(operator, _name)))
for _name in ("neg", "pos", "invert", "abs"):
    setattr(Abstract, f"__{_name}__", _unary_operator(f"__{_name}__", getattr(operator, _name)))


def _reduction_function(xp: Any, name: str) -> Callable[..., Abstract]:
    """A reduction: the shape from ``axis`` and ``keepdims``, the dtype from the
    backend's own function on a one-element stand-in (as for elementwise functions),
    or for a function the backend lacks (``logsumexp``), from the standard's rules."""
    fn = getattr(xp, name, None)

    def function(x: Any, /, *, axis: Any = None, keepdims: bool = False, **kw: Any) -> Abstract:
        shape = _reduced(x, axis, keepdims)
        if fn is None:
            return x._like(shape, _reduction_dtype(xp, name, x.dtype, kw.get("dtype")))
        return x._like(shape, _probe(xp, name, fn, (x,), kw))

    function.__name__ = name
    return function


class AbstractNamespace:
    """The array API namespace of :class:`Abstract` values (shapes and dtypes only)."""

    def __init__(self, xp: Any) -> None:
        self._xp = xp
        self.__name__ = f"agnograd.abstract({xp.__name__})"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        xp = self._xp
        if name in _ELEMENTWISE:
            return _elementwise_function(xp, name)
        if name in _REDUCTIONS:
            return _reduction_function(xp, name)
        method = getattr(self, "_" + name, None)
        if method is not None:
            return method
        if (hasattr(xp, name) and not callable(getattr(xp, name))) or name in (
            "isdtype",
            "result_type",
            "finfo",
            "iinfo",
            "can_cast",
        ):
            return getattr(xp, name)
        raise DataDependentError(f"no abstract rule for {name!r}")

    def _default(self, kind: str) -> Any:
        return self._xp.__array_namespace_info__().default_dtypes()[kind]

    # -- creation
    def _zeros(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Abstract:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return Abstract(shape, dtype or self._default("real floating"), self._xp, device)

    _ones = _empty = _zeros

    def _full(
        self, shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None
    ) -> Abstract:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return Abstract(shape, dtype or _dtype_of(self._xp, fill_value), self._xp, device)

    def _zeros_like(self, x: Any, /, *, dtype: Any = None, device: Any = None) -> Abstract:
        return Abstract(_shape(x), dtype or x.dtype, self._xp, device)

    _ones_like = _empty_like = _zeros_like

    def _full_like(
        self, x: Any, /, fill_value: Any, *, dtype: Any = None, device: Any = None
    ) -> Abstract:
        return Abstract(_shape(x), dtype or x.dtype, self._xp, device)

    def _arange(
        self,
        start: Any,
        /,
        stop: Any = None,
        step: Any = 1,
        *,
        dtype: Any = None,
        device: Any = None,
    ) -> Abstract:
        if stop is None:
            start, stop = 0, start
        n = max(math.ceil((stop - start) / step), 0)
        kind = (
            "integral" if all(isinstance(v, int) for v in (start, stop, step)) else "real floating"
        )
        return Abstract((n,), dtype or self._default(kind), self._xp, device)

    def _eye(
        self,
        n_rows: int,
        n_cols: int | None = None,
        /,
        *,
        k: int = 0,
        dtype: Any = None,
        device: Any = None,
    ) -> Abstract:
        return Abstract(
            (n_rows, n_cols or n_rows), dtype or self._default("real floating"), self._xp, device
        )

    def _asarray(
        self, obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None
    ) -> Any:
        if isinstance(obj, Abstract):
            return obj if dtype is None else obj._like(obj.shape, dtype)
        if hasattr(obj, "shape") and hasattr(obj, "dtype"):
            return Abstract(tuple(obj.shape), dtype or obj.dtype, self._xp, device)
        return Abstract(
            numpy.shape(obj),
            dtype or _dtype_of(self._xp, numpy.asarray(obj).flat[0] if numpy.size(obj) else 0.0),
            self._xp,
            device,
        )

    # -- manipulation
    def _astype(self, x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Abstract:
        return x._like(x.shape, dtype)

    def _reshape(self, x: Any, /, shape: Any, *, copy: Any = None) -> Abstract:
        shape = list(shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape[shape.index(-1)] = x.size // known if known else 0
        if math.prod(shape) != x.size:
            raise ValueError(f"reshape: cannot reshape {x.shape} into {tuple(shape)}")
        return x._like(tuple(shape))

    def _permute_dims(self, x: Any, /, axes: Sequence[int]) -> Abstract:
        return x._like(tuple(x.shape[a] for a in axes))

    def _matrix_transpose(self, x: Any, /) -> Abstract:
        return x.mT

    def _broadcast_to(self, x: Any, /, shape: Sequence[int]) -> Abstract:
        broadcast_shapes(_shape(x), tuple(shape))
        return Abstract(tuple(shape), x.dtype, self._xp, getattr(x, "device", None))

    def _broadcast_arrays(self, *arrays: Any) -> list[Abstract]:
        shape = broadcast_shapes(*[_shape(a) for a in arrays])
        return [self._broadcast_to(a, shape) for a in arrays]

    def _expand_dims(self, x: Any, /, *, axis: int = 0) -> Abstract:
        shape = list(x.shape)
        shape.insert(axis % (x.ndim + 1), 1)
        return x._like(tuple(shape))

    def _squeeze(self, x: Any, /, axis: Any) -> Abstract:
        return x._like(_reduced(x, axis, keepdims=False))

    def _concat(self, arrays: Sequence[Any], /, *, axis: int | None = 0) -> Abstract:
        first = arrays[0]
        dtype = self._xp.result_type(*[a.dtype for a in arrays]) if len(arrays) > 1 else first.dtype
        if axis is None:
            return Abstract(
                (sum(math.prod(_shape(a)) for a in arrays),), dtype, self._xp, first.device
            )
        if first.ndim == 0:
            raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
        if not -first.ndim <= axis < first.ndim:
            raise IndexError(f"concat: axis {axis} is out of range for {first.ndim} dimensions")
        axis %= first.ndim
        for a in arrays:
            other = _shape(a)
            if len(other) != first.ndim or any(
                s != o for i, (s, o) in enumerate(zip(first.shape, other, strict=True)) if i != axis
            ):
                raise ValueError(f"concat: shapes {first.shape} and {other} differ off axis {axis}")
        shape = list(first.shape)
        shape[axis] = sum(_shape(a)[axis] for a in arrays)
        return Abstract(tuple(shape), dtype, self._xp, getattr(first, "device", None))

    def _stack(self, arrays: Sequence[Any], /, *, axis: int = 0) -> Abstract:
        first = arrays[0]
        dtype = self._xp.result_type(*[a.dtype for a in arrays]) if len(arrays) > 1 else first.dtype
        shape = list(first.shape)
        shape.insert(axis % (first.ndim + 1), len(arrays))
        return Abstract(tuple(shape), dtype, self._xp, getattr(first, "device", None))

    def _flip(self, x: Any, /, *, axis: Any = None) -> Abstract:
        return x._like(x.shape)

    def _roll(self, x: Any, /, shift: Any, *, axis: Any = None) -> Abstract:
        return x._like(x.shape)

    def _matmul(self, x1: Any, x2: Any, /) -> Abstract:
        return x1 @ x2 if isinstance(x1, Abstract) else x2.__rmatmul__(x1)

    def _cumulative_sum(
        self, x: Any, /, *, axis: Any = None, dtype: Any = None, include_initial: bool = False
    ) -> Abstract:
        shape = list(x.shape)
        if include_initial:
            shape[(axis or 0) % x.ndim] += 1
        return x._like(tuple(shape), _reduction_dtype(self._xp, "sum", x.dtype, dtype))

    _cumulative_prod = _cumulative_sum

    def _take(self, x: Any, indices: Any, /, *, axis: int | None = None) -> Abstract:
        if axis is None:
            return x._like(_shape(indices))
        axis %= x.ndim
        return x._like((*x.shape[:axis], *_shape(indices), *x.shape[axis + 1 :]))

    def _take_along_axis(self, x: Any, indices: Any, /, *, axis: int = -1) -> Abstract:
        return x._like(_shape(indices))

    def _sort(
        self, x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True
    ) -> Abstract:
        return x._like(x.shape)

    def _argsort(self, x: Any, /, **kwargs: Any) -> Abstract:
        return x._like(x.shape, self._default("indexing"))


register_per_instance(Abstract)
