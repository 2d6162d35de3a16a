"""Finding an array's namespace and its adapter, cached per array type.

The core never imports an array library: the namespace comes from the array itself
(through array-api-compat for libraries that lack ``__array_namespace__``), and the
few things the standard cannot express come from adapters registered under the
``agnograd.backends`` entry-point group.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
from collections.abc import Collection
from typing import Any, TypeAlias, cast

import array_api_compat
import numpy

#: An array of some array API library: ``numpy.ndarray``, ``torch.Tensor``,
#: ``jax.Array``, ... An alias of ``Any``, because these share no base class and
#: some (torch's, NumPy's before 2.0) lack ``__array_namespace__``, so no protocol
#: a type checker can verify names them all. It documents what a signature takes.
Array: TypeAlias = Any

# Python's numbers: never an array. (A NumPy scalar is one, NumPy's 0-d result; as an
# argument of an operation it counts as a scalar: see SCALARS.)
_SCALARS = (bool, int, float, complex)

#: The types an operation takes as a scalar argument (``x * 2.0``, ``xp.add(x, 1)``):
#: Python's numbers and NumPy's scalars. A NumPy scalar (``numpy.float64(2.0)``, as
#: ``finfo(...).eps`` gives) goes to the library as it is, so torch and JAX treat it
#: as a Python scalar and NumPy and Dask promote with it, as each does on its own.
#: Where it is data (the input of a function, a Variable's array) it is NumPy's
#: 0-d array, as NumPy's reductions return it.
SCALARS = frozenset(
    {bool, int, float, complex}
    | {
        t
        for t in numpy.sctypeDict.values()
        if issubclass(t, (numpy.bool_, numpy.number)) and not issubclass(t, numpy.timedelta64)
    }
)

#: NumPy's scalar types: what NumPy gives for the 0-d result of a ufunc, an operator
#: or a reduction (``numpy.exp(x)``, ``x * 2``, ``x.sum()`` of a 0-d or 1-d ``x``).
NUMPY_SCALARS = frozenset(SCALARS - set(_SCALARS))


def as_array(data: Any) -> Any:
    """``data``, or a 0-d NumPy array of the same value and dtype where ``data`` is a
    NumPy scalar.

    What agnograd holds as data or gradient is an array, as the array API standard
    and Chainer have it: NumPy alone answers a 0-d result with a scalar, which has no
    ``__setitem__``, no ``__dlpack__`` and no place in memory to write. Every array
    an operation hands to a Variable passes here (``Variable``'s constructor, its
    ``array`` setter, :meth:`agnograd.Device.send`).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._backend import as_array
    >>> as_array(np.float32(2.0))
    array(2., dtype=float32)
    >>> x = np.ones(2)
    >>> as_array(x) is x
    True
    """
    if data.__class__ in NUMPY_SCALARS:
        return numpy.asarray(data)
    return data


# type(array) -> raw array API namespace; filled on first sight of each type so the
# hot path is one dict lookup instead of array_api_compat's scan.
_namespaces: dict[type, Any] = {}

# Array types whose namespace depends on the instance (define-then-run's abstract
# arrays, registered by agnograd.backends._abstract): asked every time, never cached.
_per_instance: set[type] = set()


def register_per_instance(cls: type) -> None:
    """Mark ``cls`` as an array type whose instances each name their namespace
    (``__array_namespace__()``), their library's namespace (``xp``) and device
    (``device``)."""
    _per_instance.add(cls)


def dtype_name(dtype: Any) -> str:
    """Short name of a dtype of any library, without the library prefix (``float32``,
    not ``torch.float32``); also of NumPy's and JAX's scalar types (``numpy.float32``),
    which their namespaces give as dtypes.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._backend import dtype_name
    >>> dtype_name(np.float32), dtype_name(np.dtype("complex64"))
    ('float32', 'complex64')
    """
    name = getattr(dtype, "__name__", None)  # NumPy's and JAX's scalar types
    return name if isinstance(name, str) else str(dtype).rsplit(".", 1)[-1]


def label(shape: tuple[int, ...] | None, dtype: Any) -> str:
    """Shape and dtype as short text, for messages: ``'(2, 5), float32'``."""
    if shape is None:
        return "None"
    if shape == ():
        return dtype_name(dtype)
    return f"({', '.join(map(str, shape))}), {dtype_name(dtype)}"


def raw_namespace(array: Any) -> Any:
    """Return the array API namespace of a raw (non-Variable) array.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._backend import raw_namespace
    >>> raw_namespace(np.ones(2)).__name__
    'array_api_compat.numpy'
    """
    try:
        return _namespaces[type(array)]
    except KeyError:
        pass
    if array is None:
        raise RuntimeError(
            "an input holds no data: it is uninitialised, or define-then-run has not "
            "computed it yet (call forward() first)"
        )
    if type(array) in _SCALARS:
        raise TypeError(
            f"expected an array of an array API library, got {type(array).__name__} "
            f"{array!r}; wrap Python values with xp.asarray(...) first"
        )
    if type(array) in _per_instance:
        return array.__array_namespace__()  # depends on the instance: never cached
    if not is_array(array):
        raise TypeError(
            f"expected a raw array of an array API library, got {type(array).__module__}."
            f"{type(array).__qualname__}"
        )
    adapter = adapter_for(array)
    if adapter is not None and adapter.namespace is not None:
        xp = adapter.get_namespace()  # the adapter's word: it may correct a library's
        _namespaces[type(array)] = xp
        return xp
    try:
        xp = array_api_compat.array_namespace(array)
    except TypeError:
        raise TypeError(
            f"expected an array of an array API library, got {type(array).__module__}."
            f"{type(array).__qualname__}; agnograd supports arrays whose library implements "
            f"the Python array API standard (installed adapters: {', '.join(adapter_names())})"
        ) from None
    _namespaces[type(array)] = xp
    return xp


def backend_name(xp: Any) -> str:
    """Short library name of a namespace, for messages (``numpy``, ``torch``, ...)."""
    name: str = getattr(xp, "__name__", repr(xp))
    return name.removeprefix("array_api_compat.")


# Types that speak the array API but wrap arrays (agnograd's Variable): never raw.
_wrappers: set[type] = set()


def register_wrapper(cls: type) -> None:
    """Mark ``cls`` as a wrapper of arrays, so it is never taken for a raw array."""
    _wrappers.add(cls)


def is_wrapper(obj: Any) -> bool:
    """Whether ``obj`` wraps an array (a Variable): its ``array`` is the raw one."""
    return any(isinstance(obj, w) for w in _wrappers)


def known_shape(shape: Any) -> bool:
    """Whether every length of ``shape`` is known (Dask gives ``nan`` for a length it
    knows only after computing, some libraries ``None``).

    Examples
    --------
    >>> from agnograd.backends._backend import known_shape
    >>> known_shape((2, 3)), known_shape((float("nan"), 3))
    (True, False)
    """
    return all(n is not None and n == n for n in shape)


def same_shape(a: Any, b: Any, *, broadcast: bool = False) -> bool:
    """Whether shapes ``a`` and ``b`` agree where both are known (Dask leaves a length
    it cannot know before computing as ``nan``, others as ``None``); with
    ``broadcast``, a length 1 in ``a`` agrees with any length in ``b``.

    Examples
    --------
    >>> from agnograd.backends._backend import same_shape
    >>> same_shape((2, float("nan")), (2, 3)), same_shape((1, 3), (4, 3), broadcast=True)
    (True, True)
    """
    a, b = tuple(a), tuple(b)
    if a == b:
        return True
    return len(a) == len(b) and all(
        m == n or m is None or n is None or m != m or n != n or (broadcast and m == 1)
        for m, n in zip(a, b, strict=True)
    )


def is_array(obj: Any) -> bool:
    """Whether ``obj`` is an array of some array API library (Variables excluded)."""
    cls = type(obj)
    if cls in _namespaces:
        return True
    if cls in _SCALARS or obj is None or any(issubclass(cls, w) for w in _wrappers):
        return False
    return array_api_compat.is_array_api_obj(obj)


# ---------------------------------------------------------------------------------
# Adapters

# Adapters added at run time with register_adapter (tests, interactive use), after
# the ones found through entry points.
_registered: list[Any] = []
# name -> why its entry point could not be loaded (reported in device errors).
_load_errors: dict[str, str] = {}


@functools.cache
def _adapters() -> tuple[Any, ...]:
    found = []
    for entry in importlib.metadata.entry_points(group="agnograd.backends"):
        try:
            adapter = entry.load()
        except Exception as error:
            _load_errors[entry.name] = f"{type(error).__name__}: {error}"
            continue
        found.append(adapter)
    return (*found, *_registered)


def adapters() -> list[Any]:
    """The registered adapters, one per name (the last registered wins), in their
    ``order``: the single list of backends that everything else asks.

    Examples
    --------
    >>> from agnograd.backends._backend import adapters
    >>> [a.name for a in adapters()][:2]
    ['numpy', 'array_api_strict']
    """
    last = {a.name: a for a in _adapters()}
    return sorted(last.values(), key=lambda a: a.order)


def adapter_names() -> list[str]:
    """Names of the registered adapters (entry points and :func:`register_adapter`),
    in their ``order``."""
    return [a.name for a in adapters()]


def register_adapter(adapter: Any) -> None:
    """Add ``adapter`` for this process, as if it had been found as an entry point.

    Meant for trying an adapter before packaging it; a package registers its adapter
    in the ``agnograd.backends`` entry-point group instead. An adapter with the
    same name as an existing one replaces it.

    Examples
    --------
    >>> from agnograd import Adapter
    >>> from agnograd.backends._backend import adapter_named, register_adapter
    >>> register_adapter(Adapter(name="doclib", modules=("doclib",)))
    >>> adapter_named("doclib").modules
    ('doclib',)
    """
    _registered[:] = [a for a in _registered if a.name != adapter.name]
    _registered.append(adapter)
    _adapters.cache_clear()
    _adapter_cache.clear()


def adapter_named(name: str) -> Any:
    """The adapter called ``name``; ``ValueError`` listing the installed ones if none is.

    A name registered twice resolves to the one registered last.
    """
    for adapter in reversed(_adapters()):
        if adapter.name == name:
            return adapter
    broken = f" (its adapter failed to load: {_load_errors[name]})" if name in _load_errors else ""
    raise ValueError(
        f"unknown backend {name!r}{broken}; installed backends: "
        f"{', '.join(installed_backends()) or 'none'}"
    )


def installed_backends() -> list[str]:
    """Names of the adapters whose library is installed (found without importing
    it), in their ``order``.

    Examples
    --------
    >>> from agnograd.backends._backend import installed_backends
    >>> "numpy" in installed_backends()
    True
    """
    return [a.name for a in adapters() if a.is_installed()]


def fallback_adapter(kind: str) -> Any:
    """The adapter that stands in for ``kind`` (``"cpu"`` or ``"gpu"``, see
    ``Adapter.fallback_for``) when an array's own library lacks it: the first in
    ``order`` whose library is installed, else the first declared; ``None`` when no
    adapter declares ``kind``.

    Examples
    --------
    >>> from agnograd.backends._backend import fallback_adapter
    >>> fallback_adapter("cpu").name
    'numpy'
    """
    declared = [a for a in adapters() if kind in a.fallback_for]
    installed = [a for a in declared if a.is_installed()]
    return (installed or declared or [None])[0]


_adapter_cache: dict[type, Any] = {}


def adapter_for(array: Any) -> Any:
    """Return the adapter that owns ``array``'s type, or ``None`` when none does."""
    cls = type(array)
    try:
        return _adapter_cache[cls]
    except KeyError:
        pass
    owner = next((a for a in reversed(_adapters()) if a.owns(cls)), None)
    _adapter_cache[cls] = owner
    return owner


#: Namespace -> the 0-d arrays that stand for Python numbers in its operators, keyed
#: by number and dtype (``Adapter.scalar_operand``; ``False``: the number is kept), or
#: ``False`` for a library that keeps numbers: read by every operation of a Variable
#: and a Python number (agnograd.core._fast).
scalar_operands: dict[Any, Any] = {}

#: The Python numbers that a 0-d array may stand for (bool, complex and NumPy's
#: scalars, whose types take part in type promotion, are passed as they are).
NUMBERS = frozenset((int, float))


def scalar_operand(xp: Any, array: Any, value: Any) -> Any:
    """The 0-d array that an operator of ``array`` (of namespace ``xp``) takes for the
    Python number ``value`` with the same result, made once per number and dtype by
    the adapter's ``scalar_operand``; ``False`` where the number is passed as it is.

    Only float32 and float64 arrays take one (torch computes with a number at a
    higher precision on the smaller dtypes), and only for numbers that the dtype
    holds as a normal number, made from an exact float64 (an int up to 2**53): no
    ±0 (-0.0 == 0.0, one key), NaN, overflow (whose warning NumPy gives at each
    operation) or subnormal (which torch may flush while it makes the array).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._backend import raw_namespace, scalar_operand
    >>> x = np.ones(3, dtype=np.float32)
    >>> a = scalar_operand(raw_namespace(x), x, 0.5)
    >>> a, a is scalar_operand(raw_namespace(x), x, 0.5)
    (array(0.5, dtype=float32), True)
    >>> scalar_operand(raw_namespace(x), x, -0.0), scalar_operand(raw_namespace(x), x, 1e39)
    (False, False)
    """
    cache: dict[tuple[Any, Any], Any] | bool | None = scalar_operands.get(xp)
    if cache is None:
        adapter = adapter_for(array)
        found = adapter is not None and adapter.scalar_operand is not None
        cache = scalar_operands[xp] = {} if found else False
    if cache is False or value.__class__ not in NUMBERS or value != value:
        return False  # NaN is never stored: one NaN never equals another
    assert isinstance(cache, dict)
    dtype = array.dtype
    made = cache.get((value, dtype))
    if made is not None:
        return made
    made = False
    if dtype == xp.float32 or dtype == xp.float64:
        info = xp.finfo(dtype)
        size = abs(cast(float, value))
        exact = value.__class__ is float or size <= 2**53
        low, high = float(info.smallest_normal), float(info.max)  # no NumPy scalar to compare
        if exact and (low <= size <= high or size == math.inf):
            made = adapter_for(array).scalar_operand(value, array)
            if made is None:
                return False  # not now (a mode of the library): asked again next time
    if len(cache) >= 1024:
        cache.clear()
    cache[(value, dtype)] = made
    return made


def writable(array: Any) -> Any:
    """``array``, or a copy of it where its library cannot write it in place (a
    broadcast view): what backward stores in a leaf's ``.grad``, which users scale in
    place.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._backend import writable
    >>> view = np.broadcast_to(np.ones(1), (3,))
    >>> writable(view).flags.writeable, writable(view) is view
    (True, False)
    """
    adapter = adapter_for(array)
    if adapter is None or adapter.writable is None or adapter.writable(array):
        return array
    return raw_namespace(array).asarray(array, copy=True)


def owned(arrays: list[Any], held: Collection[int] = ()) -> list[Any]:
    """``arrays`` as arrays of the caller's own, copied where their library writes in
    place and one is not: it shares memory with an array before it (a gradient
    given to two arguments) or with ``held`` (ids of memory kept elsewhere, such as
    a plan's constants), or it cannot be written element by element (a broadcast
    view, as the gradient of a sum is). Immutable arrays (JAX, Dask) stay as they
    are. Replaces the copied ones in ``arrays``, and returns it.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._backend import owned
    >>> a = np.ones(3)
    >>> b, c, d = owned([a, a[1:], np.broadcast_to(a[:1], (3,))])
    >>> b is a, np.shares_memory(b, c), d.flags.writeable
    (True, False, True)
    """
    seen: set[int] = set()
    for i, a in enumerate(arrays):
        adapter = adapter_for(a)
        if adapter is None or adapter.memory is None:  # immutable, or not an array
            continue
        memory = id(adapter.memory(a))
        if (
            memory in held
            or memory in seen
            or not (adapter.writable is None or adapter.writable(a))
        ):
            arrays[i] = raw_namespace(a).asarray(a, copy=True)  # shares nothing
        else:
            seen.add(memory)
    return arrays


def scatter_add_flat(dst: Any, positions: Any, values: Any) -> Any:
    """Return ``dst`` (1-D) with ``values`` added at ``positions``, repeats accumulating.

    The standard has no scatter-add, so the owning adapter's hook is used; without an
    adapter a sort-based composition of standard functions is used.
    """
    for array in (values, positions):
        # vmap's batched arrays: their namespace scatters each example's values
        batched = getattr(raw_namespace(array), "_scatter_add_flat", None)
        if batched is not None:
            return batched(dst, positions, values)
    adapter = adapter_for(dst)
    if adapter is not None and adapter.scatter_add is not None:
        return adapter.scatter_add(dst, positions, values)
    return generic_scatter_add(dst, positions, values)


def generic_scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    """Scatter-add written with standard functions only (sort, cumulative sum, search).

    Exact for integers, and accurate to rounding of a running sum for floats.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from agnograd.backends._backend import generic_scatter_add
    >>> out = generic_scatter_add(xp.zeros(4), xp.asarray([1, 3, 1]), xp.asarray([1., 2., 5.]))
    >>> [float(v) for v in out]
    [0.0, 6.0, 0.0, 2.0]
    """
    xp = raw_namespace(dst)
    n = dst.shape[0]
    if positions.shape[0] == 0:
        return dst
    order = xp.argsort(positions)
    pos = xp.take(positions, order)
    vals = xp.take(values, order)
    sums_at = xp.cumulative_sum(vals, include_initial=True)
    unique = xp.unique_values(pos)
    left = xp.searchsorted(pos, unique, side="left")
    right = xp.searchsorted(pos, unique, side="right")
    sums = xp.take(sums_at, right) - xp.take(sums_at, left)
    everywhere = xp.arange(n, dtype=unique.dtype, device=array_api_compat.device(dst))
    slot = xp.searchsorted(unique, everywhere)
    slot = xp.clip(slot, max=unique.shape[0] - 1)
    hit = xp.take(unique, slot) == everywhere
    return dst + xp.where(hit, xp.take(sums, slot), xp.zeros_like(dst))
