"""Which array libraries are installed, their namespaces and their devices.

The backends are those of agnograd's adapter registry (``agnograd._backend``).
Nothing here imports an array library until a namespace is asked for: whether a
library is installed is decided without importing it, so the pytest plugin can
list the backends without importing torch or jax.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import array_api_compat

from agnograd import _backend


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
