"""JAX adapter: devices ``'@jax:cpu:0'``, ``'@jax:cpu:1'``, ``'@jax:gpu:0'``, ...

A device is named by its platform and its position among that platform's devices.
"""

from __future__ import annotations

from typing import Any

from agnograd import Adapter

# Platform aliases accepted in specifiers (JAX calls every CUDA/ROCm device "gpu").
_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


def _namespace() -> Any:
    import jax.numpy

    return jax.numpy


def _platform_devices(platform: str) -> list[Any]:
    import jax

    try:
        return list(jax.devices(platform))
    except RuntimeError:  # no such platform on this machine
        return []


def _devices() -> list[Any]:
    import jax

    found = list(jax.devices())
    for platform in ("cpu", "gpu", "tpu"):
        found += [d for d in _platform_devices(platform) if d not in found]
    return found


def _device_name(device: Any) -> str:
    return f"{device.platform}:{_platform_devices(device.platform).index(device)}"


def _default_device() -> Any:
    import jax

    chosen = jax.config.jax_default_device
    if chosen is None:
        return jax.devices()[0]
    if isinstance(chosen, str):  # a platform name
        return jax.devices(chosen)[0]
    return chosen


def _parse_device(text: str) -> Any:
    if not text:
        return _default_device()
    platform, _, index = text.partition(":")
    platform = _ALIASES.get(platform, platform)
    devices = _platform_devices(platform)
    if not devices:
        raise ValueError(f"jax has no {platform!r} devices on this machine")
    if not index:
        return devices[0]
    if not index.isdigit() or int(index) >= len(devices):
        raise ValueError(
            f"jax has {len(devices)} {platform} device(s), numbered 0 to {len(devices) - 1}; "
            f"got {text!r}"
        )
    return devices[int(index)]


def _device_of(array: Any) -> Any:
    import jax

    if isinstance(array, jax.core.Tracer):
        # A tracer (under jax.jit, jax.grad, jax.vmap) has no device to ask for: its
        # .devices() and .sharding raise. Arrays made for it go on the default device,
        # where jax.jit puts them too unless the inputs were placed elsewhere.
        return _default_device()
    devices = array.devices()
    if len(devices) != 1:
        raise ValueError(
            f"the jax array is sharded over {len(devices)} devices, so it has no single device"
        )
    return next(iter(devices))


def _to_device(array: Any, device: Any, stream: Any) -> Any:
    import jax

    return jax.device_put(array, device)


def _from_dlpack(obj: Any, device: Any, copy: bool | None) -> Any:
    import jax.numpy

    return jax.numpy.from_dlpack(obj, device=device, copy=copy)


def _dlpack_device(device: Any) -> tuple[int, int]:
    if device.platform == "cpu":
        return (1, 0)  # every JAX CPU device is host memory
    import jax

    kind, index = jax.device_put(jax.numpy.zeros(0), device).__dlpack_device__()
    return int(kind), int(index)


def _use_device(device: Any) -> Any:
    import jax

    return jax.default_device(device)


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    return dst.at[positions].add(values)


adapter = Adapter(
    name="jax",
    modules=("jax", "jaxlib"),
    scatter_add=_scatter_add,
    namespace=_namespace,
    devices=_devices,
    device_name=_device_name,
    parse_device=_parse_device,
    default_device=_default_device,
    device_of=_device_of,
    to_device=_to_device,
    from_dlpack=_from_dlpack,
    dlpack_device=_dlpack_device,
    use_device=_use_device,
    data_pointer=lambda array: array.unsafe_buffer_pointer(),
    order=40,
    title="JAX",
)
