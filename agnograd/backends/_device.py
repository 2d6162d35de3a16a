"""Devices as values (``Device``, ``get_device``), moving arrays and DLPack views.

A device is named by a specifier, ``'@' backend [':' name]``: ``'@numpy'``,
``'@cupy:0'``, ``'@torch:cpu'``, ``'@torch:cuda:1'``, ``'@jax:cpu:1'``,
``'@array_api_strict:device1'``, ``'@dask'``. The part after the backend belongs to
the backend's adapter, which parses it; agnograd itself only splits at the first
colon, so a new library brings its own device names.
"""

from __future__ import annotations

import math
import sys
import warnings
from contextlib import AbstractContextManager
from typing import Any

from agnograd.backends import _backend
from agnograd.backends._adapter import DLPACK_ACCELERATORS, DLPACK_CPU, Adapter
from agnograd.backends._backend import (
    adapter_for,
    adapter_named,
    dtype_name,
    installed_backends,
    is_array,
    known_shape,
)

_EXAMPLES = "'@numpy', '@torch:cpu', '@torch:cuda:1', '@jax:cpu:1', '@cupy:0', '@dask'"


class CopyWarning(UserWarning):
    """A conversion that was asked to be a view had to copy (``allow_copy=True``)."""


class Device:
    """One device of one array library, as a value.

    Made by :func:`get_device`; two Devices are equal when they name the same device
    of the same library, and a Device also equals the library's own device object.

    Attributes
    ----------
    adapter : Adapter
        The adapter of the library.
    native : object
        The library's own device object (``torch.device('cuda', 1)``, ...).
    local : str
        The part of the specifier after ``@backend:`` (``''`` for one-device
        libraries).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> device = agnograd.get_device("@numpy")
    >>> print(device)
    @numpy
    >>> device.backend, device.xp.__name__, device.physical
    ('numpy', 'array_api_compat.numpy', (1, 0))
    >>> device.send(np.ones(2))
    array([1., 1.])
    >>> device == "cpu"  # NumPy's own device object
    True
    """

    __slots__ = ("_physical", "adapter", "local", "native")

    def __init__(self, adapter: Adapter, native: Any, local: str) -> None:
        self.adapter = adapter
        self.native = native
        self.local = local
        self._physical: tuple[int, int] | None = None

    @property
    def device(self) -> Any:
        """The library's own device object (Chainer's name for :attr:`native`)."""
        return self.native

    @property
    def backend(self) -> str:
        """The name of the library's adapter (``"torch"``)."""
        return self.adapter.name

    @property
    def name(self) -> str:
        """The specifier, e.g. ``'@torch:cuda:1'``; ``get_device(name)`` gives this device."""
        return f"@{self.adapter.name}:{self.local}" if self.local else f"@{self.adapter.name}"

    @property
    def xp(self) -> Any:
        """The library's array API namespace (the one ``Variable.xp`` reports)."""
        return self.adapter.get_namespace()

    @property
    def physical(self) -> tuple[int, int]:
        """The physical device, as DLPack's ``(device type, id)``: ``(1, 0)`` is host memory."""
        if self._physical is None:
            self._physical = self.adapter.get_dlpack_device(self.native)
        return self._physical

    @property
    def is_cpu(self) -> bool:
        """Whether arrays on this device live in host memory."""
        return self.physical[0] == DLPACK_CPU

    @property
    def is_gpu(self) -> bool:
        """Whether this device is an accelerator (CUDA, ROCm, Metal, oneAPI, ...)."""
        return self.physical[0] in DLPACK_ACCELERATORS

    def send(self, arrays: Any) -> Any:
        """Transfer arrays of any library to this device and library.

        ``arrays`` is an array or a list, tuple or dict of them (nested freely);
        ``None`` stays ``None``. An array already here is returned as it is, and an
        array of another library on the same physical device may share its memory
        (DLPack); use :func:`agnograd.functions.copy` for a fresh array. A NumPy
        scalar (``numpy.dot`` of two vectors) arrives as a 0-d array, as Chainer's
        ``send`` gives it.

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> agnograd.get_device("@numpy").send({"w": np.ones(2), "s": np.float32(3)})
        {'w': array([1., 1.]), 's': array(3., dtype=float32)}
        """
        if arrays is None:
            return None
        if isinstance(arrays, list | tuple):
            return type(arrays)(self.send(a) for a in arrays)
        if isinstance(arrays, dict):
            return {k: self.send(v) for k, v in arrays.items()}
        return transfer(arrays, self)

    def use(self) -> AbstractContextManager[Any]:
        """A context in which this is the library's default device for new arrays.

        Examples
        --------
        >>> import agnograd
        >>> with agnograd.get_device("@numpy").use():
        ...     pass
        """
        return self.adapter.use(self.native)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Device('{self.name}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Device):
            return self.adapter.name == other.adapter.name and self.local == other.local
        if isinstance(other, str) and other.startswith("@"):
            return other == self.name
        try:
            return bool(self.native == other)
        except Exception:
            return False

    def __hash__(self) -> int:
        # Equal to the native device, so hash like it where it can be hashed.
        try:
            return hash(self.native)
        except TypeError:
            return hash(self.name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (get_device, (self.name,))


# ---------------------------------------------------------------------------------
# Finding devices

_by_spec: dict[str, Device] = {}
_by_native: dict[tuple[str, Any], Device] = {}


def get_device(spec: Any) -> Device:
    """The :class:`Device` named by ``spec``.

    Parameters
    ----------
    spec : str, Device, device object, array or Variable
        A specifier such as ``'@numpy'``, ``'@cupy:0'``, ``'@torch:cpu'``,
        ``'@torch:cuda:1'``, ``'@jax:cpu:1'``, ``'@array_api_strict:device1'`` or
        ``'@dask'`` (``'@torch'``, ``'@jax'``: the library's default device); a
        library's own device object (``torch.device('cpu')``); ``'cpu'``, the
        device array-api-compat names for NumPy arrays, which is ``'@numpy'``
        (the library whose adapter declares ``fallback_for=("cpu",)``); or an
        array or Variable, whose device is returned.

    Raises
    ------
    ValueError
        For an unknown backend or device (the message lists the installed
        backends), or a backend whose library cannot be imported.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.get_device("@numpy")
    Device('@numpy')
    >>> agnograd.get_device(np.zeros(3)) == agnograd.get_device("@numpy")
    True
    >>> agnograd.get_device("cpu")
    Device('@numpy')
    >>> agnograd.get_device("@nosuchlib")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: get_device: unknown backend 'nosuchlib'; installed backends: ...numpy...
    """
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, str):
        return _parse(spec)
    if _backend.is_wrapper(spec):  # a Variable
        if spec.array is not None:
            return device_of(spec.array)
        # Define-then-run knows a result's device before its data exists.
        device = spec.device
        if device is None:
            raise ValueError("get_device: the Variable holds no data, so it has no device")
        return device
    if type(spec) in _backend._per_instance or is_array(spec):
        return device_of(spec)
    for adapter in reversed(_backend._adapters()):
        if adapter.owns_device(spec):
            return _from_native(adapter, spec)
    raise ValueError(
        f"get_device: cannot tell the device of {type(spec).__name__} {spec!r}; pass a "
        f"specifier ({_EXAMPLES}), a Device, a library's device object or an array "
        f"(installed backends: {', '.join(installed_backends())})"
    )


def get_device_for(spec: Any, adapter: Adapter, op: str = "get_device") -> Device:
    """The :class:`Device` ``spec`` names for an array of ``adapter``'s library.

    As :func:`get_device`, except that a plain name (no ``'@'``) is first read as
    that library's own spelling of one of its devices, as array API code passes it
    to the library (``x.to_device("cpu")`` of a torch array is torch's CPU). ``op``
    names the operation in the error for a name that is neither.

    Examples
    --------
    >>> import agnograd
    >>> from agnograd.backends._backend import adapter_named
    >>> from agnograd.backends._device import get_device_for
    >>> get_device_for("device1", adapter_named("array_api_strict"))
    Device('@array_api_strict:device1')
    >>> get_device_for("cpu", adapter_named("numpy"))
    Device('@numpy')
    """
    if isinstance(spec, str) and spec and not spec.startswith("@"):
        try:
            return _from_native(adapter, adapter.find_device(spec))
        except (ValueError, ImportError) as error:
            # Not a name of this library's: read it as get_device does, and if that
            # fails too, say why the library refused it.
            try:
                return get_device(spec)
            except ValueError as not_a_spec:
                raise ValueError(
                    f"{op}: {spec!r} is neither a device of {adapter.name} ({error}) nor a "
                    f"device specifier ({not_a_spec})"
                ) from None
    return get_device(spec)


def device_of(array: Any) -> Device:
    """The :class:`Device` of a raw array (no Variables)."""
    adapter = adapter_for(array)
    if adapter is None:
        if type(array) in _backend._per_instance:
            return _device_of_per_instance(array)
        raise TypeError(
            f"no installed adapter owns {type(array).__module__}.{type(array).__qualname__} "
            f"arrays; installed backends: {', '.join(installed_backends())}"
        )
    return _from_native(adapter, adapter.get_device_of(array))


def native_device(device: Any) -> Any:
    """The library's own device object for a :class:`Device`; anything else unchanged.

    For code that passes a device on to a library function (``xp.asarray(...,
    device=...)``), which knows nothing of agnograd's Devices.
    """
    return device.native if isinstance(device, Device) else device


def _parse(spec: str) -> Device:
    try:
        return _by_spec[spec]
    except KeyError:
        pass
    if not spec.startswith("@"):
        host = _host_device(spec)
        if host is not None:
            _by_spec[spec] = host
            return host
        raise ValueError(
            f"get_device: {spec!r} is not a device specifier; specifiers start with '@', "
            f"for example {_EXAMPLES} (installed backends: {', '.join(installed_backends())})"
        )
    backend, _, local = spec[1:].partition(":")
    try:
        adapter = adapter_named(backend)
    except ValueError as error:
        raise ValueError(f"get_device: {error}") from None
    try:
        native = adapter.find_device(local)
    except ImportError as error:
        raise ValueError(
            f"get_device: backend {backend!r} is registered but its library cannot be "
            f"imported ({error}); installed backends: {', '.join(installed_backends())}"
        ) from None
    except ValueError as error:
        raise ValueError(f"get_device: {spec!r}: {error}{_listing(adapter)}") from None
    device = _from_native(adapter, native)
    _by_spec[spec] = device
    return device


def _host_device(name: str) -> Device | None:
    """``'cpu'``, as array-api-compat names NumPy's device: the device of that name
    of the library that stands in for host memory (``fallback_for=("cpu",)``)."""
    if name != "cpu":
        return None
    adapter = _backend.fallback_adapter("cpu")
    if adapter is None:
        return None
    try:
        return _from_native(adapter, adapter.find_device(name))
    except (ValueError, ImportError):
        return None


def _listing(adapter: Adapter) -> str:
    try:
        names = [_from_native(adapter, d).name for d in adapter.get_devices()]
    except Exception:
        return ""
    return f" (devices of {adapter.name}: {', '.join(names) or 'none'})"


def _from_native(adapter: Adapter, native: Any) -> Device:
    key = (adapter.name, native)
    try:
        return _by_native[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable device object: no cache
        return Device(adapter, native, adapter.get_device_name(native))
    device = Device(adapter, native, adapter.get_device_name(native))
    _by_native[key] = device
    return device


def _device_of_per_instance(array: Any) -> Device:
    # An abstract array (define-then-run) knows its namespace; its library is loaded.
    for adapter in reversed(_backend._adapters()):
        if adapter.modules[0] in sys.modules and adapter.get_namespace() is array.xp:
            native = array.device if array.device is not None else adapter.get_default_device()
            return _from_native(adapter, native)
    raise TypeError(f"no installed adapter has the namespace {array.xp!r}")


def _owner(array: Any, op: str) -> Adapter:
    adapter = adapter_for(array)
    if adapter is None:
        raise TypeError(
            f"{op}: expected an array of an installed backend, got "
            f"{type(array).__module__}.{type(array).__qualname__} (installed backends: "
            f"{', '.join(installed_backends())})"
        )
    return adapter


def _library_devices(adapter: Adapter, op: str) -> list[Any]:
    try:
        return adapter.get_devices()
    except ImportError as error:
        raise ValueError(
            f"{op}: backend {adapter.name!r} is registered but its library cannot be "
            f"imported ({error}); installed backends: {', '.join(installed_backends())}"
        ) from None


# ---------------------------------------------------------------------------------
# Moving arrays


def transfer(array: Any, device: Device, *, copy: bool | None = None, stream: Any = None) -> Any:
    """``array`` on ``device``, of ``device``'s library.

    ``copy=True`` always gives a fresh buffer; ``copy=None`` returns ``array`` itself
    when it is already there and may share memory across libraries on the same
    physical device. A NumPy scalar is taken as the 0-d array it stands for.
    """
    array = _backend.as_array(array)
    src = _owner(array, "transfer")
    dst = device.adapter
    if src is dst:
        here = src.get_device_of(array)
        if src.get_device_name(here) == device.local:
            return src.get_namespace().asarray(array, copy=True) if copy else array
        moved = src.move(array, device.native, stream)
        if copy and _shares(src, array, moved):
            moved = src.get_namespace().asarray(moved, copy=True)
        return moved
    obj, fresh = array, False
    if src.get_view_problem(array) is not None:
        # Never hand an exporter what an importer may choke on (torch aborts on
        # negative strides): export a clean copy instead.
        obj, fresh = src.copy_for_export(array), True
    want_copy = None if fresh else copy
    try:
        result = dst.import_dlpack(obj, device.native, want_copy)
    except Exception as error:
        _refuse_missing_dtype(array, src, device, error)
        if _from_native(src, src.get_device_of(array)).physical == device.physical:
            error.add_note(f"in agnograd's transfer of a {src.name} array to {device}")
            raise
        # Different physical devices and an importer that cannot cross them: go
        # through host memory.
        host = _to_host(obj, src)
        result = device.xp.asarray(host, device=device.native, copy=True)
        fresh = True
    if copy and not fresh and _shares(src, array, result, dst):
        result = device.xp.asarray(result, copy=True)
    return result


def _refuse_missing_dtype(array: Any, src: Adapter, device: Device, error: Exception) -> None:
    """Name the dtype the library lacks (NumPy's bfloat16): its importer does not."""
    name = dtype_name(array.dtype)
    if not hasattr(device.xp, name):
        raise TypeError(
            f"transfer: the {src.name} array ({tuple(array.shape)}, {name}) cannot be "
            f"moved to {device}: {device.backend} has no {name} dtype "
            f"({type(error).__name__}: {error}); cast it to one that {device.backend} has "
            "first (x.astype(float32) holds bfloat16 and float16 values exactly)"
        ) from error


def _to_host(array: Any, adapter: Adapter) -> Any:
    host = adapter.host_device()
    if host is not None:
        return adapter.move(array, host)
    import array_api_compat

    return array_api_compat.to_device(array, "cpu")  # e.g. CuPy: a NumPy copy


def _shares(src: Adapter, a: Any, b: Any, dst: Adapter | None = None) -> bool:
    """Whether ``b`` may share ``a``'s memory (``True`` when it cannot be told)."""
    if _size(a) == 0:
        return False
    p, q = src.get_data_pointer(a), (dst or src).get_data_pointer(b)
    return p is None or q is None or p == q


def _size(array: Any) -> int:
    shape = tuple(array.shape)
    if not known_shape(shape):  # a length Dask knows only once computed
        return -1
    return math.prod(shape)


# ---------------------------------------------------------------------------------
# Views


def view(array: Any, target: Any, *, allow_copy: bool = False) -> Any:
    """``array`` as an array of another library, sharing its memory (DLPack, O(1)).

    Parameters
    ----------
    array : array
        An array of any installed backend.
    target : str, Device or device object
        A library name (``'torch'`` or ``'@torch'``): its device on the same
        physical device as ``array``; or a full specifier or Device, which must be
        on the same physical device.
    allow_copy : bool
        When a view is impossible (read-only NumPy arrays, negative strides, torch
        tensors that require grad, JAX's 64-byte alignment or missing float64,
        different physical devices, lazy Dask arrays), copy with a
        :class:`CopyWarning` instead of raising ``BufferError``.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._device import view
    >>> a = np.zeros(3)
    >>> b = view(a, "array_api_strict")
    >>> a[0] = 5.0
    >>> float(b[0])
    5.0
    >>> a.flags.writeable = False
    >>> view(a, "array_api_strict")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    BufferError: view: ... the NumPy array is read-only, ...
    """
    src = _owner(array, "view")
    here = _from_native(src, src.get_device_of(array))
    dst, reason = _view_target(here, target)
    if reason is None:
        if dst == here:
            return array
        result, reason = _zero_copy(array, src, dst)
        if reason is None:
            return result
    if _size(array) == 0:
        return transfer(array, dst, copy=True)  # no memory to share: nothing is lost
    what = (
        f"view: the {src.name} array ({tuple(array.shape)}, {dtype_name(array.dtype)}) on "
        f"{here} cannot be viewed as {dst.backend} on {dst} without a copy: {reason}"
    )
    if not allow_copy:
        raise BufferError(f"{what}; pass allow_copy=True to copy it instead")
    warnings.warn(f"{what}; copied it (allow_copy=True)", CopyWarning, stacklevel=3)
    return transfer(array, dst, copy=True)


_library_targets: dict[tuple[str, Device], tuple[Device, str | None]] = {}


def _view_target(here: Device, target: Any) -> tuple[Device, str | None]:
    """The device to view on, and why a view is impossible (``None``: possible)."""
    if isinstance(target, str):
        name = target.removeprefix("@")
        if ":" not in name:  # a library: its device on the same physical device
            key = (name, here)
            if key not in _library_targets:
                _library_targets[key] = _library_target(here, name)
            return _library_targets[key]
    dst = get_device(target)
    if dst.physical != here.physical:
        return dst, f"{dst} and {here} are different physical devices"
    return dst, None


def _library_target(here: Device, name: str) -> tuple[Device, str | None]:
    try:
        adapter = adapter_named(name)
    except ValueError as error:
        raise ValueError(f"view: {error}") from None
    if adapter is here.adapter:
        return here, None
    devices = [_from_native(adapter, d) for d in _library_devices(adapter, "view")]
    same = [d for d in devices if d.physical == here.physical]
    default = _from_native(adapter, adapter.get_default_device())
    if not same:
        reason = f"{name} has no device on the physical device {here.physical} of the array"
        return default, reason
    return (default if default in same else same[0]), None


# Keyed with the dtype's class first, so dtypes of two libraries are never compared
# (array_api_strict warns when its dtypes meet NumPy's).
_dtype_names: dict[tuple[type, Any], str] = {}


def _dtype_name(dtype: Any) -> str:
    key = (dtype.__class__, dtype)
    try:
        return _dtype_names[key]
    except KeyError:
        name = _dtype_names[key] = dtype_name(dtype)
        return name


def _zero_copy(array: Any, src: Adapter, dst: Device) -> tuple[Any, str | None]:
    problem = src.get_view_problem(array)
    if problem is not None:
        return None, problem
    if not dst.adapter.views:
        return None, f"{dst.backend} arrays are not memory buffers that DLPack can share"
    try:
        result = dst.adapter.import_dlpack(array, dst.native, False)
    except Exception as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return (
            None,
            f"{dst.backend} refused a zero-copy import ({type(error).__name__}: {first_line})",
        )
    if _dtype_name(result.dtype) != _dtype_name(array.dtype):
        return None, (
            f"{dst.backend} turned {_dtype_name(array.dtype)} into {_dtype_name(result.dtype)}"
            + (" (JAX needs jax_enable_x64 for 64-bit types)" if dst.backend == "jax" else "")
        )
    p, q = src.get_data_pointer(array), dst.adapter.get_data_pointer(result)
    if p is not None and q is not None and p != q and _size(array) > 0:
        return None, f"{dst.backend} made a copy instead of sharing the buffer"
    return result, None
