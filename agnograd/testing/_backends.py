"""Which array libraries are installed, their namespaces and their devices.

Nothing here imports an array library until a namespace is asked for: whether a
library is installed is decided with :func:`importlib.util.find_spec`, so the pytest
plugin can list the backends without importing torch or jax.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import warnings
from typing import Any

import array_api_compat

# name -> (top-level module that must be installed, module of its array API namespace).
# NumPy and PyTorch go through array-api-compat because that is the namespace
# agnograd itself computes with (``Variable.xp``); JAX and array-api-strict are
# compliant as they are.
KNOWN_BACKENDS: dict[str, tuple[str, str]] = {
    "numpy": ("numpy", "array_api_compat.numpy"),
    "array_api_strict": ("array_api_strict", "array_api_strict"),
    "torch": ("torch", "array_api_compat.torch"),
    "jax": ("jax", "jax.numpy"),
    "cupy": ("cupy", "array_api_compat.cupy"),
    "dask": ("dask", "array_api_compat.dask.array"),
}


def _registered_adapters() -> dict[str, tuple[str, ...]]:
    found = {}
    for entry in importlib.metadata.entry_points(group="agnograd.backends"):
        try:
            adapter = entry.load()
        except Exception:
            continue
        found[adapter.name] = tuple(adapter.modules)
    return found


def installed_backends() -> list[str]:
    """Names of the backends whose library is installed, known ones first.

    A backend counts when agnograd knows it (numpy, array_api_strict, torch, jax,
    cupy, dask) or an adapter is registered for it, and its top-level module can be
    found. Nothing is imported to decide.

    Examples
    --------
    >>> from agnograd.testing import installed_backends
    >>> "numpy" in installed_backends()
    True
    """
    names = list(KNOWN_BACKENDS)
    modules = {name: top for name, (top, _) in KNOWN_BACKENDS.items()}
    for name, mods in _registered_adapters().items():
        if name not in modules and mods:
            names.append(name)
            modules[name] = mods[0]
    return [n for n in names if importlib.util.find_spec(modules[n]) is not None]


def backend_namespace(name: str) -> Any:
    """The array API namespace of the backend called ``name`` (imports the library).

    Examples
    --------
    >>> from agnograd.testing import backend_namespace
    >>> backend_namespace("numpy").__name__
    'array_api_compat.numpy'
    """
    if name in KNOWN_BACKENDS:
        return importlib.import_module(KNOWN_BACKENDS[name][1])
    adapters = _registered_adapters()
    if name not in adapters:
        known = ", ".join([*KNOWN_BACKENDS, *(n for n in adapters if n not in KNOWN_BACKENDS)])
        raise ValueError(f"backend_namespace: unknown backend {name!r}; known backends: {known}")
    import array_api_compat

    module = importlib.import_module(adapters[name][0])
    if not hasattr(module, "asarray"):
        raise ValueError(
            f"backend_namespace: the module {module.__name__} of adapter {name!r} has no "
            "asarray, so its array API namespace cannot be found"
        )
    return array_api_compat.array_namespace(module.asarray(0.0))


def _info(xp: Any) -> Any:
    info = getattr(xp, "__array_namespace_info__", None)
    return None if info is None else info()


def default_device(xp: Any) -> Any:
    """The namespace's default device (``None`` when it cannot tell)."""
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

    Placeholder devices (JAX lists ``None``, PyTorch lists ``meta``) are left out by
    trying them rather than by name.
    """
    info = _info(xp)
    if info is None:
        return [None]
    with warnings.catch_warnings():
        # torch's devices() probes device types and warns about deprecated ones.
        warnings.simplefilter("ignore")
        candidates = list(info.devices())
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


def device_names(device: Any) -> set[str]:
    """Spellings that select ``device`` on the command line (``no_float64``, ``cpu:0``)."""
    names = {str(device), repr(device)}
    names.update(re.findall(r"'([^']*)'", repr(device)))
    return names


def find_device(xp: Any, name: str) -> Any:
    """The device of ``xp`` called ``name`` (see :func:`device_names`)."""
    devices = usable_devices(xp)
    for device in devices:
        if name in device_names(device):
            return device
    raise ValueError(
        f"no device {name!r} in {getattr(xp, '__name__', xp)}; its usable devices are "
        f"{', '.join(sorted(min(device_names(d), key=len) for d in devices))}"
    )


def device_label(device: Any) -> str:
    """Shortest readable name of a device, for test ids and reports."""
    return min(device_names(device), key=len)


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


def dtype_label(dtype: Any) -> str:
    """Short name of a dtype of any library (``float32``, not ``torch.float32``)."""
    name = getattr(dtype, "__name__", None)  # NumPy and JAX scalar types
    return name if isinstance(name, str) else str(dtype).rsplit(".", 1)[-1]
