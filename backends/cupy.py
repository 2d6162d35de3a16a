"""CuPy adapter: devices ``'@cupy:0'``, ``'@cupy:1'``, ... (CUDA or ROCm)."""

from __future__ import annotations

from typing import Any

from agnograd import Adapter
from agnograd.backends._adapter import base_root


def _namespace() -> Any:
    import array_api_compat.cupy

    return array_api_compat.cupy


def _unusable() -> str | None:
    # Installed is not enough: CuPy needs a GPU, which it checks without failing.
    import cupy

    return None if cupy.is_available() else "no CUDA device"


def _devices() -> list[Any]:
    import cupy

    if not cupy.is_available():
        return []
    return [cupy.cuda.Device(i) for i in range(cupy.cuda.runtime.getDeviceCount())]


def _parse_device(text: str) -> Any:
    import cupy

    if not cupy.is_available():
        raise ValueError("cupy is installed but finds no usable GPU (cupy.is_available() is False)")
    if not text:
        return cupy.cuda.Device()  # the current device
    devices = _devices()
    if not text.isdigit() or int(text) >= len(devices):
        raise ValueError(f"cupy has {len(devices)} device(s), numbered 0 to {len(devices) - 1}")
    return devices[int(text)]


def _to_device(array: Any, device: Any, stream: Any) -> Any:
    # ndarray.copy allocates on the current device, copying across GPUs if needed.
    with device:
        if stream is None:
            return array.copy()
        with stream:
            return array.copy()


def _from_dlpack(obj: Any, device: Any, copy: bool | None) -> Any:
    import cupy

    with device:
        result = cupy.from_dlpack(obj)
    if copy:
        with device:
            result = result.copy()
    return result


def _writable(array: Any) -> bool:
    # CuPy has no read-only flag: a broadcast view repeats elements with stride 0, and
    # a write into one would land on the same element again and again.
    return all(s != 0 or n == 1 for s, n in zip(array.strides, array.shape, strict=True))


def _view_problem(array: Any) -> str | None:
    if any(s < 0 for s in array.strides):
        return "the CuPy array has negative strides, which DLPack importers reject"
    return None


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    import cupyx

    cupyx.scatter_add(dst, positions, values)
    return dst


adapter = Adapter(
    name="cupy",
    modules=("cupy", "cupyx"),
    scatter_add=_scatter_add,
    namespace=_namespace,
    devices=_devices,
    device_name=lambda device: str(device.id),
    parse_device=_parse_device,
    default_device=lambda: _parse_device(""),
    device_of=lambda array: array.device,
    to_device=_to_device,
    from_dlpack=_from_dlpack,
    use_device=lambda device: device,
    view_problem=_view_problem,
    writable=_writable,
    export_copy=lambda array: array.copy(order="C"),
    data_pointer=lambda array: array.data.ptr,
    memory=base_root,
    unusable=_unusable,
    fallback_for=("gpu",),  # to_gpu of a library without a GPU (NumPy)
    order=50,
    title="CuPy",
)
