"""agnograd's differentiable namespace: the array API, bound to one backend.

Every name resolves through the tables derived from the rows the chapter modules
declare (elementwise, statistical, manipulation, ...): differentiable functions (with
a rule), non-differentiable ones (their results require no gradient) and unsupported
ones (with the reason). Dtypes, constants and dtype queries pass through from the
backend. A name in none of them is an ``AttributeError`` that says so, never a
silently non-differentiable fallback.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from agnograd.backends._backend import backend_name
from agnograd.backends._device import native_device
from agnograd.core import _extension
from agnograd.core._variable import Variable
from agnograd.functions._core import Bound, constant, forwarding, native_kwargs, raw
from agnograd.functions._rows import chapter, namespace_tables, unsupported_table
from agnograd.functions._standard import VERSION

#: The modules that declare the namespace's functions, each in its table of rows
#: (``ROWS``, see ``_rows.py``): the chapters of the standard and its extensions (the
#: elementwise chapter in four modules, the statistical one in two, linear algebra in
#: four).
CHAPTERS = tuple(
    importlib.import_module(f"agnograd.functions._{name}")
    for name in [
        "unary",
        "binary",
        "arithmetic",
        "elementwise",
        "creation",
        "cumulative",
        "fft",
        "indexing",
        "linalg",
        "linalg_decompositions",
        "linalg_eig",
        "linalg_inverse",
        "linalg_norms",
        "manipulation",
        "repetition",
        "searching",
        "set",
        "sorting",
        "statistical",
        "utility",
    ]
)

#: Every declared row, by name: a name declared twice, in one module or two, is
#: refused here, at import.
DECLARED = chapter(*(module.ROWS for module in CHAPTERS))
DIFFERENTIABLE, NON_DIFFERENTIABLE = namespace_tables(DECLARED)
UNSUPPORTED = unsupported_table(DECLARED)

#: Names taken from the backend as they are: dtypes, constants, dtype queries.
PASSTHROUGH = {
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "e",
    "inf",
    "nan",
    "newaxis",
    "pi",
    "isdtype",
    "finfo",
    "iinfo",
    "result_type",
    "can_cast",
}


# Dtype queries that also accept arrays: they get the Variables' arrays.
_TAKES_ARRAYS = {"result_type", "can_cast", "finfo", "iinfo"}


def _unwrapping(name: str, fn: Any) -> Any:
    return forwarding(
        name,
        lambda *args: fn(*[_dtype_query_argument(a) for a in args]),
        f"``{name}`` of the backend, given the arrays of Variables.",
    )


def _dtype_query_argument(a: Any) -> Any:
    """A Variable's array; its dtype while define-then-run has not computed it."""
    if isinstance(a, Variable):
        return a.dtype if a._data is None else a._data
    return a


class Namespace:
    """The differentiable array API namespace of one backend.

    Obtain it with ``x.__array_namespace__()`` on a Variable, or
    :func:`agnograd.namespace` for a backend namespace or array.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([0.5, 1.0]))
    >>> y = xp.sum(xp.exp(x) * xp.ones_like(x))
    >>> y.backward(); x.grad
    array([1.64872127, 2.71828183])
    """

    def __init__(self, raw_namespace: Any, prefix: str = "", name: str | None = None) -> None:
        self._raw = raw_namespace
        self._prefix = prefix
        # array-api-compat tells namespaces apart by __name__, so it is one per raw
        # namespace (``agnograd.namespace.array_api_compat.numpy``), and never the raw
        # one's own: is_numpy_namespace and the like must not take it for NumPy.
        # Dotted as a module's, since code builds module names and regular
        # expressions from it.
        self.__name__ = name or f"agnograd.namespace.{raw_namespace.__name__}"

    @property
    def __array_api_version__(self) -> str:
        """The version agnograd implements, or the backend's if that is older (asked
        each time: array-api-strict's changes with its flags)."""
        return min(getattr(self._raw, "__array_api_version__", VERSION), VERSION)

    def __repr__(self) -> str:
        if self._prefix:
            return f"<agnograd namespace for {backend_name(self._raw)} ({self._prefix[:-1]})>"
        # array-api-compat's refusal of a Variable beside a raw array of its library
        # ("Multiple namespaces for array inputs: [...]") shows this, and the fix.
        library = backend_name(self._raw)
        hint = "wrap raw arrays with agnograd.as_variable to mix them"
        return f"<agnograd namespace for {library} ({hint})>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name not in PASSTHROUGH:
            raise AttributeError(name)
        key = self._prefix + name
        if key in DIFFERENTIABLE:
            value = DIFFERENTIABLE[key]
        elif key in NON_DIFFERENTIABLE:
            value = NON_DIFFERENTIABLE[key]
        elif key == "asarray":
            value = self._asarray
        elif not self._prefix and name in _TAKES_ARRAYS:
            value = _unwrapping(name, getattr(self._raw, name))
        elif not self._prefix and name in PASSTHROUGH:
            value = getattr(self._raw, name)
        elif any(k.startswith(key + ".") for k in (*DIFFERENTIABLE, *NON_DIFFERENTIABLE)):
            value = Namespace(
                getattr(self._raw, name), prefix=key + ".", name=f"{self.__name__}.{name}"
            )
        elif key in UNSUPPORTED:
            raise AttributeError(
                f"agnograd's namespace does not support {key!r}: {UNSUPPORTED[key]}"
            )
        else:
            raise AttributeError(
                f"agnograd's namespace has no {key!r}: it is neither a differentiable nor a "
                "non-differentiable function of the array API standard that agnograd supports"
            )
        if isinstance(value, Bound):
            value = value.factory(self._raw)
        setattr(self, name, value)  # cache: later lookups skip __getattr__
        return value

    def __dir__(self) -> list[str]:
        """Every name the namespace offers: its functions, its extensions (``linalg``,
        ``fft``) where the backend has them, and the backend's dtypes, constants and
        dtype queries (names resolve on first use, so ``object.__dir__`` alone would
        list none of them).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> xp = agnograd.namespace(np)
        >>> {"exp", "argmax", "asarray", "linalg", "float32"} <= set(dir(xp))
        True
        >>> "solve" in dir(xp.linalg)
        True
        """
        names = set(object.__dir__(self))  # methods, properties, names resolved already
        start = len(self._prefix)
        for key in (*DIFFERENTIABLE, *NON_DIFFERENTIABLE):
            if key.startswith(self._prefix):
                head, dot, _ = key[start:].partition(".")
                if not dot or hasattr(self._raw, head):  # an extension the backend has
                    names.add(head)
        if not self._prefix:
            names.add("asarray")
            names.update(name for name in PASSTHROUGH if hasattr(self._raw, name))
        return sorted(names)

    def __array_namespace_info__(self) -> Any:
        """The backend's inspection object, answering as the standard version of
        ``__array_api_version__`` says.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.namespace(np).__array_namespace_info__().devices()
        (Device('@numpy'),)
        """
        return _Info(self._raw.__array_namespace_info__(), self._raw)

    def _asarray(
        self, obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None
    ) -> Any:
        if isinstance(obj, Variable):
            return _extension.transfer.asarray(
                self._raw, obj, dtype=dtype, device=device, copy=copy
            )
        if isinstance(obj, list | tuple) and _holds_variables(obj):
            # Nested sequences of Variables (0-d ones, as array API code writes
            # asarray([[a[i, j] ...]])) are stacked, so the gradient flows back.
            return self._asarray(self._stacked(obj), dtype=dtype, device=device, copy=copy)
        kwargs = native_kwargs({"dtype": dtype, "device": device, "copy": copy})
        array = self._raw.asarray(raw(obj), **kwargs)
        if not self._raw.isdtype(array.dtype, ("bool", "numeric")):
            # NumPy makes strings, dates and objects, which the standard has not: refused
            # here, as array-api-strict refuses them, not in some later function.
            raise TypeError(
                f"asarray: {_abbreviated(obj)} gives {backend_name(self._raw)}'s dtype "
                f"{array.dtype}, which is not an array API dtype (booleans and numbers "
                "only); convert it to numbers first (labels to integer codes)"
            )
        return constant(array)

    def _stacked(self, obj: Any) -> Any:
        if isinstance(obj, Variable):
            return obj
        if isinstance(obj, list | tuple):
            return DIFFERENTIABLE["stack"]([self._stacked(item) for item in obj])
        return constant(self._raw.asarray(obj))


def _abbreviated(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 40 else text[:37] + "..."


def _holds_variables(obj: Any) -> bool:
    """Whether the nested sequence ``obj`` holds a Variable."""
    return any(
        isinstance(item, Variable) or (isinstance(item, list | tuple) and _holds_variables(item))
        for item in obj
    )


class _Info:
    """A backend's ``__array_namespace_info__()`` object, answering with agnograd's
    :class:`~agnograd.Device` values (those of Variables: ``x.device in
    info.devices()`` holds), and ``devices()`` a tuple, as 2025.12 specifies (a list
    before)."""

    def __init__(self, info: Any, raw_namespace: Any) -> None:
        self._info = info
        self._raw = raw_namespace

    @functools.cached_property
    def _adapter(self) -> Any:
        from agnograd.backends._backend import adapter_for

        return adapter_for(self._raw.asarray(0))  # the library's, whatever the device

    def _device(self, native: Any) -> Any:
        from agnograd.backends._device import _from_native

        return native if self._adapter is None else _from_native(self._adapter, native)

    def devices(self) -> tuple[Any, ...]:
        return tuple([self._device(d) for d in self._info.devices()])

    def default_device(self) -> Any:
        return self._device(self._info.default_device())

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        return self._info.default_dtypes(device=native_device(device))

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        return self._info.dtypes(device=native_device(device), kind=kind)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._info, name)


__all__ = ["CHAPTERS", "DIFFERENTIABLE", "NON_DIFFERENTIABLE", "UNSUPPORTED", "Namespace"]
