"""What an adapter tells agnograd about one array library.

An adapter is a frozen bundle of small functions ("hooks"). Every hook is optional:
a missing one falls back to what the Python array API standard offers (the
inspection namespace for devices, ``to_device``, ``from_dlpack``), so an adapter for
a compliant library can be two lines. The methods below are what agnograd calls;
they apply the hook when there is one and the standard's way otherwise.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import re
import warnings
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

#: DLPack device types (``__dlpack_device__()[0]``) of host memory and of accelerators.
DLPACK_CPU = 1
DLPACK_ACCELERATORS = frozenset({2, 4, 7, 8, 10, 13, 14, 15, 16, 17})


@dataclass(frozen=True)
class Adapter:
    """Description of one array library, registered under the ``agnograd.backends``
    entry-point group.

    Only ``name`` and ``modules`` are required; each hook left as ``None`` is
    replaced by the array API standard's way of doing the same thing. Hooks must
    import their library lazily (inside the function), because agnograd loads every
    adapter to find the owner of an array and must not import libraries the user
    does not use.

    Parameters
    ----------
    name : str
        Short name used in device specifiers and messages (``"torch"``).
    modules : tuple of str
        Top-level modules whose array and device types this adapter owns; ownership
        is decided from ``type(obj).__module__``, so the library is never imported
        to check. The first one is imported to reach the library.
    scatter_add : callable, optional
        ``scatter_add(dst, positions, values) -> array``: add 1-D ``values`` into the
        1-D ``dst`` at integer ``positions``, accumulating repeats. The result may be
        ``dst`` updated in place (it is a fresh buffer). Without it a sort-based
        composition of standard functions is used.
    namespace : callable, optional
        ``namespace() -> module``: the array API namespace of the library's arrays,
        which every operation on them uses; by default what
        ``array_api_compat.array_namespace`` reports for them. An adapter corrects a
        library's functions here (the Dask adapter's ``linalg.cholesky``).
    devices : callable, optional
        ``devices() -> sequence``: the library's usable device objects.
    device_name : callable, optional
        ``device_name(device) -> str``: the part of the specifier after
        ``@name:`` (``"cuda:1"``); ``""`` for a library with a single device.
    parse_device : callable, optional
        ``parse_device(text) -> device``: the device called ``text`` (the part after
        ``@name:``, ``""`` when absent); raises ``ValueError`` for an unknown name.
    default_device : callable, optional
        ``default_device() -> device``: where new arrays go by default.
    device_of : callable, optional
        ``device_of(array) -> device``.
    to_device : callable, optional
        ``to_device(array, device, stream) -> array``: the array on another device of
        the same library.
    from_dlpack : callable, optional
        ``from_dlpack(obj, device, copy) -> array``: import any object that supports
        DLPack, with the standard's meaning of ``device`` and ``copy`` (``copy=False``
        must raise rather than copy).
    dlpack_device : callable, optional
        ``dlpack_device(device) -> (type, id)``: the physical device as DLPack names
        it (``(1, 0)`` for host memory, ``(2, k)`` for CUDA device ``k``).
    use_device : callable, optional
        ``use_device(device) -> context manager`` making ``device`` the library's
        default inside a ``with`` block.
    view_problem : callable, optional
        ``view_problem(array) -> str or None``: why exporting ``array`` by DLPack
        without a copy would be wrong or impossible (read-only memory, negative
        strides, ...), ``None`` when it is fine. Checked before any exporter runs,
        because some importers crash on what they cannot represent.
    export_copy : callable, optional
        ``export_copy(array) -> object``: a fresh, contiguous copy that supports
        DLPack, used when the array itself cannot be exported.
    data_pointer : callable, optional
        ``data_pointer(array) -> int or None``: address of the first element, used to
        verify that a view really shares memory.
    memory : callable, optional
        ``memory(array) -> object``: what owns the memory ``array`` reads, the same
        object for every view of it (NumPy: the array at the end of ``.base``; see
        :func:`base_root`). agnograd counts its in-place writes per memory, so a
        write through one view invalidates the saved arrays sharing the buffer.
        Without it each array is its own memory (right for immutable arrays).
    write_count : callable, optional
        ``write_count(array) -> int or None``: the library's own count of in-place
        writes into ``array``'s memory, shared by its views (PyTorch's
        ``Tensor._version``). agnograd records and compares it, which also catches
        writes made outside agnograd; ``None`` for an array that has no count.
    writable : callable, optional
        ``writable(array) -> bool``: whether ``array`` can be written in place, each
        element on its own (``False`` for NumPy's read-only and broadcast views,
        torch's expanded tensors). A gradient that backward stores in a leaf's
        ``.grad`` is copied where it cannot, as torch copies an expanded one, so that
        ``x.grad *= 0.5`` works. Without it every array counts as writable (right for
        immutable arrays, which are never written in place).
    scalar_operand : callable, optional
        ``scalar_operand(value, array) -> array``: the Python number ``value`` as a
        0-d array of ``array``'s (real floating) dtype, which the library's operators
        take with ``array`` and compute with as they compute with ``value`` (NumPy:
        ``numpy.asarray(value, dtype=array.dtype)``; PyTorch: a 0-d tensor on the
        CPU, which it takes with a tensor on any device). agnograd makes one per
        value and dtype and passes it to the operators of ``x * 0.5`` and the like
        instead of the number, which such a library converts at every call (0.4 µs
        on a small torch tensor, 0.16 µs on a NumPy array); it returns ``None`` where
        it cannot make a plain one now (torch under a dispatch mode), and is asked
        again next time. Without it the number is passed as it is.
    views : bool
        Whether arrays of this library are buffers that DLPack can share (``False``
        for lazy libraries such as Dask).
    unusable : callable, optional
        ``unusable() -> str or None``: why the installed library cannot be used on
        this machine (CuPy without a GPU: ``"no CUDA device"``), ``None`` when it
        can. Imports the library. Without it an installed library whose namespace
        imports is usable.
    fallback_for : tuple of str
        What this library stands in for when an array's own library lacks it:
        ``"cpu"`` (``Variable.to_cpu`` of an array whose library has no device in
        host memory goes here; NumPy) and ``"gpu"`` (``Variable.to_gpu`` of an array
        whose library has no GPU; CuPy). Where several adapters declare the same,
        the first in ``order`` whose library is installed is used.
    order : int
        Where the library comes in lists of backends (the demo, the pytest
        plugin's fixtures, ``--backend all`` of the conformance suite): lower
        first, ties in registration order. agnograd's own adapters use 10 to 60.
    title : str
        The library's name as people write it, for messages (``"CuPy"``);
        default: ``name``.

    Examples
    --------
    >>> from agnograd import Adapter
    >>> adapter = Adapter(name="mylib", modules=("mylib",))
    >>> adapter.owns(type("Array", (), {"__module__": "mylib.core"}))
    True
    """

    name: str
    modules: tuple[str, ...]
    scatter_add: Callable[[Any, Any, Any], Any] | None = None
    namespace: Callable[[], Any] | None = None
    devices: Callable[[], Sequence[Any]] | None = None
    device_name: Callable[[Any], str] | None = None
    parse_device: Callable[[str], Any] | None = None
    default_device: Callable[[], Any] | None = None
    device_of: Callable[[Any], Any] | None = None
    to_device: Callable[[Any, Any, Any], Any] | None = None
    from_dlpack: Callable[[Any, Any, bool | None], Any] | None = None
    dlpack_device: Callable[[Any], tuple[int, int]] | None = None
    use_device: Callable[[Any], AbstractContextManager[Any]] | None = None
    view_problem: Callable[[Any], str | None] | None = None
    export_copy: Callable[[Any], Any] | None = None
    data_pointer: Callable[[Any], int | None] | None = None
    memory: Callable[[Any], Any] | None = None
    write_count: Callable[[Any], int | None] | None = None
    writable: Callable[[Any], bool] | None = None
    scalar_operand: Callable[[Any, Any], Any] | None = None
    views: bool = True
    unusable: Callable[[], str | None] | None = None
    fallback_for: tuple[str, ...] = ()
    order: int = 100
    title: str = ""

    # -- ownership (never imports the library) ------------------------------------

    def owns(self, array_type: type) -> bool:
        """Whether arrays of ``array_type`` belong to this adapter's library."""
        return array_type.__module__.partition(".")[0] in self.modules

    def owns_device(self, device: Any) -> bool:
        """Whether ``device`` is one of this library's own device objects."""
        return type(device).__module__.partition(".")[0] in self.modules

    # -- what the lists of backends ask ------------------------------------------------

    def is_installed(self) -> bool:
        """Whether the library can be found (without importing it)."""
        try:
            return importlib.util.find_spec(self.modules[0]) is not None
        except (ImportError, ValueError, IndexError):
            return False

    def why_unusable(self) -> str | None:
        """Why the library cannot be used here (``None``: it can); imports it.

        ``"not installed"``, a failed import, or what the ``unusable`` hook says.
        """
        if not self.is_installed():
            return "not installed"
        try:
            self.get_namespace()
            return None if self.unusable is None else self.unusable()
        except Exception as error:  # a broken install is a reason, not a crash
            return f"cannot import ({type(error).__name__}: {error})"

    # -- capabilities, derived from the devices and their DLPack types ---------------

    def host_device(self) -> Any:
        """A device of this library in host memory (the default device when it is
        one), ``None`` when the library has none (CuPy)."""
        default = self.get_default_device()
        candidates = [default, *(d for d in self.get_devices() if d != default)]
        for device in candidates:
            if self.get_dlpack_device(device)[0] == DLPACK_CPU:
                return device
        return None

    def gpu_devices(self) -> list[tuple[int, Any]]:
        """The library's accelerators (CUDA, ROCm, Metal, ...) as ``(number, device)``
        pairs, numbered as DLPack numbers them; empty when it has none."""
        found = []
        for device in self.get_devices():
            kind, index = self.get_dlpack_device(device)
            if kind in DLPACK_ACCELERATORS:
                found.append((index, device))
        return found

    def gpu_device(
        self, index: int | None = None, gpus: Sequence[tuple[int, Any]] | None = None
    ) -> Any:
        """GPU number ``index`` of the library, or with ``None`` its default device
        when that is a GPU, else its first GPU; ``None`` when there is no such GPU.
        ``gpus``: what :meth:`gpu_devices` returned, when already asked."""
        gpus = self.gpu_devices() if gpus is None else gpus
        if index is not None:
            return next((g for i, g in gpus if i == index), None)
        if not gpus:
            return None
        default = self.get_default_device()
        return default if any(default == g for _, g in gpus) else gpus[0][1]

    def representative_devices(self) -> list[Any]:
        """The devices one computation is worth trying on: the default device, then
        a device in host memory and a GPU where the library has them and the default
        is not one (torch: ``cpu`` and ``cuda:0``). What ``agnograd demo`` runs on."""
        chosen = [self.get_default_device()]
        for device in (self.host_device(), self.gpu_device()):
            if device is not None and not any(device == c for c in chosen):
                chosen.append(device)
        return chosen

    # -- what agnograd calls: the hook, or the standard's way ------------------------

    def get_namespace(self) -> Any:
        """The library's array API namespace (imports the library)."""
        return _namespace_of(self)

    def get_devices(self) -> list[Any]:
        """The library's usable devices."""
        if self.devices is not None:
            return list(self.devices())
        info = self.get_namespace().__array_namespace_info__()
        return [d for d in info.devices() if d is not None]

    def get_default_device(self) -> Any:
        """The device new arrays of the library go to by default."""
        if self.default_device is not None:
            return self.default_device()
        return self.get_namespace().__array_namespace_info__().default_device()

    def get_device_name(self, device: Any) -> str:
        """The name of ``device`` in a specifier, after ``@name:``."""
        if self.device_name is not None:
            return self.device_name(device)
        devices = self.get_devices()
        if len(devices) == 1 and devices[0] == device:
            return ""
        text = str(device)
        quoted = re.findall(r"'([^']*)'", text)  # array_api_strict.Device('device1')
        return quoted[0] if len(quoted) == 1 else text

    def find_device(self, text: str) -> Any:
        """The device called ``text`` (``""``: the default device)."""
        if self.parse_device is not None:
            return self.parse_device(text)
        if not text:
            return self.get_default_device()
        for device in self.get_devices():
            if self.get_device_name(device) == text:
                return device
        raise ValueError(f"{self.name} has no device called {text!r}")

    def get_device_of(self, array: Any) -> Any:
        """The device ``array`` lives on, as the library spells it."""
        if self.device_of is not None:
            return self.device_of(array)
        import array_api_compat

        return array_api_compat.device(array)

    def move(self, array: Any, device: Any, stream: Any = None) -> Any:
        """``array`` on ``device`` of the same library (a copy unless already there)."""
        if self.to_device is not None:
            return self.to_device(array, device, stream)
        import array_api_compat

        return array_api_compat.to_device(array, device, stream=stream)

    def import_dlpack(self, obj: Any, device: Any, copy: bool | None) -> Any:
        """Import ``obj`` (anything with ``__dlpack__``) onto ``device``."""
        if self.from_dlpack is not None:
            return self.from_dlpack(obj, device, copy)
        return self.get_namespace().from_dlpack(obj, device=device, copy=copy)

    def get_dlpack_device(self, device: Any) -> tuple[int, int]:
        """The physical device behind ``device``, as DLPack's ``(type, id)``."""
        if self.dlpack_device is not None:
            kind, index = self.dlpack_device(device)
        else:
            probe = self.get_namespace().empty((0,), device=device)
            kind, index = probe.__dlpack_device__()
        return int(kind), int(index)

    def use(self, device: Any) -> AbstractContextManager[Any]:
        """A context in which ``device`` is the library's default device."""
        if self.use_device is not None:
            return self.use_device(device)
        return contextlib.nullcontext()

    def get_view_problem(self, array: Any) -> str | None:
        """Why ``array`` cannot be shared through DLPack as it is (``None``: it can)."""
        if not self.views:
            return f"{self.name} arrays are not memory buffers that DLPack can share"
        if self.view_problem is not None:
            return self.view_problem(array)
        return None

    def copy_for_export(self, array: Any) -> Any:
        """A fresh contiguous copy of ``array`` that supports DLPack."""
        if self.export_copy is not None:
            return self.export_copy(array)
        return self.get_namespace().asarray(array, copy=True)

    def get_data_pointer(self, array: Any) -> int | None:
        """Address of ``array``'s first element (``None`` when it cannot be known)."""
        if self.data_pointer is None:
            return dlpack_data_pointer(array)
        try:
            return self.data_pointer(array)
        except Exception:
            return None

    def get_memory(self, array: Any) -> Any:
        """The object that owns ``array``'s memory (``array`` itself by default)."""
        return array if self.memory is None else self.memory(array)


def base_root(array: Any) -> Any:
    """The array at the end of ``array.base`` links: the owner of a view's memory.

    For libraries whose views name their base as NumPy does (NumPy, CuPy); a base
    that is not an array (a ``memoryview``, a DLPack capsule) ends the chain.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._adapter import base_root
    >>> a = np.arange(6.0)
    >>> base_root(a[1:].reshape(1, 5)[:, ::2]) is a, base_root(a) is a
    (True, True)
    """
    while True:
        base = getattr(array, "base", None)
        if base is None or not hasattr(base, "base") or not hasattr(base, "shape"):
            return array
        array = base


_NAMESPACES: dict[Adapter, Any] = {}


def _namespace_of(adapter: Adapter) -> Any:
    try:
        return _NAMESPACES[adapter]
    except KeyError:
        pass
    if adapter.namespace is not None:
        xp = adapter.namespace()
    else:
        import array_api_compat

        module = importlib.import_module(adapter.modules[0])
        xp = array_api_compat.array_namespace(module.asarray(0))
    _NAMESPACES[adapter] = xp
    return xp


# -- reading an address out of a DLPack capsule (the default data_pointer) -------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_data_pointer(array: Any) -> int | None:
    """Address of the first element of any array that exports DLPack, else ``None``.

    Both capsule kinds hold a ``DLTensor``: at the start of a legacy
    ``DLManagedTensor``, 32 bytes in (after version, context, deleter and flags) in
    a versioned one. An unconsumed capsule frees itself when collected, so reading
    it has no lasting effect.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.backends._adapter import dlpack_data_pointer
    >>> a = np.arange(4.0)
    >>> dlpack_data_pointer(a[1:]) == a.__array_interface__["data"][0] + 8
    True
    """
    # Versioned first: exporters refuse legacy capsules for read-only arrays.
    for kwargs, name, offset in ((_VERSIONED, b"dltensor_versioned", 32), ({}, b"dltensor", 0)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                capsule = array.__dlpack__(**kwargs)
            address = _capsule_pointer(capsule, name)
        except Exception:
            continue
        tensor = _DLTensor.from_address(address + offset)
        return int(tensor.data or 0) + int(tensor.byte_offset)
    return None


_VERSIONED = {"max_version": (1, 0)}
