"""Which array libraries are installed, their namespaces and their devices.

The backends are those of agnograd's adapter registry (``agnograd.backends._backend``).
Nothing here imports an array library until a namespace is asked for: whether a
library is installed is decided without importing it, so the pytest plugin can
list the backends without importing torch or jax.
"""

from __future__ import annotations

import warnings
from typing import Any

import array_api_compat

from agnograd.backends import _backend
from agnograd.backends._device import Device, _from_native


def installed_backends() -> list[str]:
    """Names of the backends whose library is installed, in the adapters' order.

    The backends are agnograd's adapter registry: the adapters shipped with
    agnograd (numpy, array_api_strict, torch, jax, cupy, dask) and any registered
    through the ``agnograd.backends`` entry-point group or
    :func:`agnograd.register_adapter`. Nothing is imported to decide.

    Examples
    --------
    >>> from agnograd.testing import installed_backends
    >>> "numpy" in installed_backends()
    True
    """
    return _backend.installed_backends()


def backend_namespace(name: str) -> Any:
    """The array API namespace of the backend called ``name`` (imports the library):
    what its adapter reports, the namespace ``Variable.xp`` gives for its arrays.

    Examples
    --------
    >>> from agnograd.testing import backend_namespace
    >>> backend_namespace("numpy").__name__
    'array_api_compat.numpy'
    """
    try:
        adapter = _backend.adapter_named(name)
    except ValueError as error:
        raise ValueError(f"backend_namespace: {error}") from None
    try:
        return adapter.get_namespace()
    except AttributeError:
        if adapter.namespace is not None:
            raise
        # Without a namespace hook the namespace is found from module.asarray(0).
        raise ValueError(
            f"backend_namespace: the module {adapter.modules[0]} of adapter {name!r} has no "
            "asarray, so its array API namespace cannot be found (give the adapter a "
            "namespace hook)"
        ) from None


def _info(xp: Any) -> Any:
    info = getattr(xp, "__array_namespace_info__", None)
    return None if info is None else info()


def _adapter_of(xp: Any) -> Any:
    """The adapter that owns the arrays ``xp`` makes; ``None`` for a namespace no
    adapter owns (agnograd's own namespace, whose arrays are Variables)."""
    try:
        return _backend.adapter_for(xp.asarray(0.0))
    except Exception:
        return None


def default_device(xp: Any) -> Any:
    """The namespace's default device: its adapter's (``Adapter.get_default_device``)
    where it has one, else what its inspection namespace reports; ``None`` when it
    cannot tell.

    Examples
    --------
    >>> import array_api_strict
    >>> from agnograd.testing._backends import default_device
    >>> default_device(array_api_strict)
    array_api_strict.Device('CPU_DEVICE')
    """
    adapter = _adapter_of(xp)
    if adapter is not None:
        return adapter.get_default_device()
    info = _info(xp)
    device = None if info is None else info.default_device()
    if device is None:
        # JAX reports None (its placement default): name the device arrays land on.
        try:
            device = array_api_compat.device(xp.asarray(0.0))
        except Exception:
            return None
    return device


def usable_devices(xp: Any) -> list[Any]:
    """The devices of ``xp`` that can hold an array whose values can be read back.

    The candidates are its adapter's devices (``Adapter.get_devices``) where it has
    one, else those its inspection namespace lists. Each is tried, so placeholder
    devices (JAX's inspection namespace lists ``None``, PyTorch's lists ``meta``) are
    left out whatever lists them.

    Examples
    --------
    >>> import array_api_strict
    >>> from agnograd.testing import usable_devices
    >>> [str(d) for d in usable_devices(array_api_strict)][:2]
    ["array_api_strict.Device('CPU_DEVICE')", "array_api_strict.Device('device1')"]
    """
    adapter = _adapter_of(xp)
    lister = adapter.get_devices if adapter is not None else getattr(_info(xp), "devices", None)
    if lister is None:
        return [None]
    with warnings.catch_warnings():
        # torch's devices() probes device types and warns about deprecated ones.
        warnings.simplefilter("ignore")
        candidates = list(lister())
    result = []
    for device in candidates:
        if device is None:
            continue
        try:
            float(xp.asarray(1.0, device=device))
            # Dask lists a device that to_device then refuses: try moving too.
            array_api_compat.to_device(xp.asarray(1.0, dtype=xp.float32), device)
        except Exception:
            continue
        result.append(device)
    return result or [default_device(xp)]


def as_device(backend: str, device: Any) -> Device:
    """``device``, a device object of ``backend``'s library, as an
    :class:`agnograd.Device`, whose ``name`` is its specifier (``'@jax:cpu:1'``):
    how reports and messages name a device.

    Examples
    --------
    >>> from agnograd.testing._backends import as_device
    >>> as_device("numpy", "cpu").name
    '@numpy'
    """
    return _from_native(_backend.adapter_named(backend), device)


def device_spellings(backend: str) -> list[str]:
    """How ``--agnograd-backend`` (and ``--backend`` of the conformance suite) can
    name each usable device of ``backend``: ``NAME:DEVICE``, with ``DEVICE`` the
    part of its specifier after ``@NAME:``; ``NAME`` alone for a library's single
    device.

    Examples
    --------
    >>> from agnograd.testing._backends import device_spellings
    >>> device_spellings("numpy"), device_spellings("array_api_strict")[:2]
    (['numpy'], ['array_api_strict:CPU_DEVICE', 'array_api_strict:device1'])
    """
    found = [as_device(backend, d) for d in usable_devices(backend_namespace(backend))]
    return [f"{d.backend}:{d.local}" if d.local else d.backend for d in found]


def backend_device(backend: str, name: str | None = None) -> Any:
    """The device of ``backend``'s library called ``name``, the part of a device
    specifier after ``@backend:`` (``'cuda:1'`` for ``'@torch:cuda:1'``; see
    :func:`agnograd.get_device`); its default device for ``None`` or ``""``.

    Raises
    ------
    ValueError
        For a device the library does not have here; the message lists the valid
        spellings (see :func:`device_spellings`).

    Examples
    --------
    >>> from agnograd.testing._backends import backend_device
    >>> backend_device("array_api_strict", "device1")
    array_api_strict.Device('device1')
    >>> backend_device("numpy", "gpu")
    Traceback (most recent call last):
    ...
    ValueError: numpy has one device, '@numpy'; got 'gpu' (valid spellings: numpy)
    """
    adapter = _backend.adapter_named(backend)
    if not name:
        return adapter.get_default_device()
    try:
        return adapter.find_device(name)
    except ImportError:
        raise
    except ValueError as error:
        problem = str(error)
    except Exception as error:  # a parser failing otherwise (torch's 'cuda' without CUDA)
        problem = f"{backend} has no device {name!r} here ({type(error).__name__}: {error})"
    valid = ", ".join(device_spellings(backend))
    raise ValueError(f"{problem} (valid spellings: {valid})") from None


def supports_float64(xp: Any, device: Any = None) -> bool:
    """Whether ``float64`` arrays can live on ``device`` (JAX without x64 cannot)."""
    info = _info(xp)
    if info is None:
        return hasattr(xp, "float64")
    kwargs = {} if device is None else {"device": device}
    return "float64" in info.dtypes(kind="real floating", **kwargs)


def default_float(xp: Any, device: Any = None) -> Any:
    """The most precise real floating dtype of ``device``: float64 where supported."""
    return xp.float64 if supports_float64(xp, device) else xp.float32


def dtype_of(xp: Any, dtype: Any) -> Any:
    """``xp``'s dtype for ``dtype``: one of ``xp``'s dtypes, its name (``"float32"``),
    or any NumPy spelling of one, as Chainer's testing functions take them
    (``"d"``, ``numpy.float64``, ``numpy.dtype("f")``).

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from agnograd.testing._backends import dtype_of
    >>> dtype_of(xp, "d"), dtype_of(xp, "float32")
    (array_api_strict.float64, array_api_strict.float32)
    """
    if isinstance(dtype, str) and hasattr(xp, dtype):
        return getattr(xp, dtype)
    if isinstance(dtype, str | type) or type(dtype).__module__.startswith("numpy"):
        import numpy

        try:
            name = numpy.dtype(dtype).name
        except TypeError:
            return dtype  # the library's own dtype object
        found = getattr(xp, name, None)
        if found is None:
            raise TypeError(f"dtype {dtype!r} ({name}) is not a dtype of {xp.__name__}")
        return found
    return dtype
