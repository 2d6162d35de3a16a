"""array-api-strict adapter: the standard and nothing else, so no scatter-add hook.

Its devices (``'@array_api_strict:CPU_DEVICE'``, ``':device1'``, ``':device2'``, ...)
are simulated on host memory: arrays on different devices refuse to mix, which
makes them the way to test multi-device code on a machine without accelerators.
"""

from __future__ import annotations

import re
from typing import Any

from agnograd import Adapter
from agnograd.backends._adapter import base_root


def _namespace() -> Any:
    import array_api_strict

    return array_api_strict


def _device_name(device: Any) -> str:
    # The public spelling is the repr, array_api_strict.Device('device1').
    match = re.fullmatch(r".*\('([^']*)'\)", repr(device))
    if match is None:
        raise ValueError(f"unexpected array_api_strict device {device!r}")
    return match.group(1)


def _parse_device(text: str) -> Any:
    import array_api_strict

    info = array_api_strict.__array_namespace_info__()
    if not text:
        return info.default_device()
    for device in info.devices():
        if _device_name(device) == text:
            return device
    raise ValueError(f"array_api_strict has no device {text!r}")


def _view_problem(array: Any) -> str | None:
    # The arrays wrap NumPy buffers and export them as they are: look at that buffer.
    import numpy

    buffer = numpy.from_dlpack(array, copy=False)
    if not buffer.flags.writeable:
        return "the array's buffer is read-only"
    if any(s < 0 for s in buffer.strides):
        return "the array has negative strides, which DLPack importers reject"
    return None


def _writable(array: Any) -> bool:
    return bool(array._array.flags.writeable)  # the wrapped NumPy array (private)


def _memory(array: Any) -> Any:
    # An Array wraps a NumPy array (private ``_array``), a view of the wrapped one
    # for a view of the Array: follow it to its base.
    return base_root(array._array)


adapter = Adapter(
    name="array_api_strict",
    modules=("array_api_strict",),
    namespace=_namespace,
    device_name=_device_name,
    parse_device=_parse_device,
    dlpack_device=lambda device: (1, 0),
    view_problem=_view_problem,
    writable=_writable,
    memory=_memory,
    order=20,
    title="array-api-strict",
)
