"""agnograd's adapter for tinylib, registered in the ``agnograd.backends`` group."""

from __future__ import annotations

from typing import Any

from agnograd import Adapter


def _namespace() -> Any:
    # tinylib arrays are NumPy arrays underneath: they compute with NumPy's namespace.
    import array_api_compat.numpy

    return array_api_compat.numpy


def _from_dlpack(obj: Any, device: Any, copy: bool | None) -> Any:
    import tinylib

    return tinylib.from_dlpack(obj, copy=copy)


adapter = Adapter(
    name="tinylib",
    modules=("tinylib",),
    namespace=_namespace,
    devices=lambda: ["cpu"],
    default_device=lambda: "cpu",
    dlpack_device=lambda device: (1, 0),
    from_dlpack=_from_dlpack,
)
