"""NumPy adapter: one device, ``'@numpy'`` (host memory)."""

from __future__ import annotations

from typing import Any

from agnograd import Adapter
from agnograd.backends._adapter import base_root


def _namespace() -> Any:
    import array_api_compat.numpy

    return array_api_compat.numpy


def _parse_device(text: str) -> str:
    if text in ("", "cpu"):
        return "cpu"
    raise ValueError(f"numpy has one device, '@numpy'; got {text!r}")


def _to_device(array: Any, device: Any, stream: Any) -> Any:
    _parse_device(str(device))
    return array


def _from_dlpack(obj: Any, device: Any, copy: bool | None) -> Any:
    import numpy

    if obj.__dlpack_device__()[0] == 1:
        # Already in host memory: name no device, or JAX, whose CPU devices all
        # report (1, 0), would think its cpu:1 arrays must move to cpu:0.
        return numpy.from_dlpack(obj, copy=copy)
    return numpy.from_dlpack(obj, device="cpu", copy=copy)


def _view_problem(array: Any) -> str | None:
    if not array.flags.writeable:
        return (
            "the NumPy array is read-only, and a view in another library could write "
            "into it (torch ignores DLPack's read-only flag)"
        )
    if any(s < 0 for s in array.strides):
        return "the NumPy array has negative strides, which DLPack importers reject"
    if not array.dtype.isnative:
        return "the NumPy array is not in native byte order, which DLPack cannot describe"
    return None


def _writable(array: Any) -> bool:
    return bool(array.flags.writeable)


def _scalar_operand(value: Any, array: Any) -> Any:
    import numpy

    return numpy.asarray(value, dtype=array.dtype)


def _export_copy(array: Any) -> Any:
    import numpy

    return numpy.array(array, dtype=array.dtype.newbyteorder("="), order="C", copy=True)


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    import numpy

    numpy.add.at(dst, positions, values)
    return dst


adapter = Adapter(
    name="numpy",
    modules=("numpy",),
    scatter_add=_scatter_add,
    namespace=_namespace,
    devices=lambda: ["cpu"],
    device_name=lambda device: "",
    parse_device=_parse_device,
    default_device=lambda: "cpu",
    device_of=lambda array: "cpu",
    to_device=_to_device,
    from_dlpack=_from_dlpack,
    dlpack_device=lambda device: (1, 0),
    view_problem=_view_problem,
    writable=_writable,
    export_copy=_export_copy,
    data_pointer=lambda array: array.__array_interface__["data"][0],
    memory=base_root,
    scalar_operand=_scalar_operand,
    fallback_for=("cpu",),  # to_cpu of a library without host memory (CuPy)
    order=10,
    title="NumPy",
)
