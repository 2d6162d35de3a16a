"""PyTorch adapter: devices ``'@torch:cpu'``, ``'@torch:cuda:1'``, ``'@torch:mps'``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agnograd import Adapter


def _namespace() -> Any:
    import array_api_compat.torch

    return array_api_compat.torch


def _devices() -> list[Any]:
    import torch

    found = [torch.device("cpu")]
    if torch.cuda.is_available():
        found += [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append(torch.device("mps", 0))
    return found


def _canonical(device: Any) -> Any:
    import torch

    if device.type == "cuda" and device.index is None:
        # "cuda" means the current CUDA device: name it, so specifiers round-trip.
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _device_name(device: Any) -> str:
    device = _canonical(device)
    return device.type if device.index is None or device.type == "cpu" else str(device)


def _parse_device(text: str) -> Any:
    import torch

    if not text:
        return _canonical(torch.get_default_device())
    try:
        device = torch.device(text)
    except RuntimeError:
        raise ValueError(
            f"{text!r} is not a torch device name (write 'cpu', 'cuda', 'cuda:1', 'mps')"
        ) from None
    device = _canonical(device)
    if device not in _devices():
        raise ValueError(f"torch device {text!r} is not available on this machine")
    return device


def _dlpack_device(device: Any) -> tuple[int, int]:
    # Asked of torch itself, so CUDA and ROCm builds each answer with their own type.
    import torch

    kind, index = torch.empty(0, device=device).__dlpack_device__()
    return int(kind), int(index)


@contextlib.contextmanager
def _use_device(device: Any) -> Iterator[None]:
    import torch

    with contextlib.ExitStack() as stack:
        stack.enter_context(device)  # the default device of factory functions
        if device.type == "cuda":
            stack.enter_context(torch.cuda.device(device))
        yield


def _to_device(array: Any, device: Any, stream: Any) -> Any:
    import torch

    if stream is None or device.type != "cuda":
        return array.to(device)
    with torch.cuda.stream(stream):
        return array.to(device, non_blocking=True)


def _from_dlpack(obj: Any, device: Any, copy: bool | None) -> Any:
    import torch

    if device.type == "cpu" and obj.__dlpack_device__()[0] == 1:
        device = None  # already in host memory (see the NumPy adapter on JAX's cpu:1)
    return torch.from_dlpack(obj, device=device, copy=copy)


def _view_problem(array: Any) -> str | None:
    import torch

    if array.requires_grad:
        return (
            "the tensor requires grad, so torch's autograd owns it (pass tensor.detach(), "
            "which shares its memory)"
        )
    if array.is_conj() or array.is_neg():
        return "the tensor has a lazy conjugate/negative bit, which DLPack cannot describe"
    if array.layout != torch.strided:
        return f"the tensor's layout is {array.layout}, and DLPack describes strided tensors only"
    return None


def _scalar_operand(value: Any, array: Any) -> Any:
    import torch

    # A plain tensor on the CPU, which torch takes with a tensor on any device; none
    # for a tensor subclass, or under a mode that would make another (FakeTensorMode).
    if array.__class__ is not torch.Tensor:
        return None
    made = torch.tensor(value, dtype=array.dtype, device="cpu")
    return made if made.__class__ is torch.Tensor and made.device.type == "cpu" else None


def _export_copy(array: Any) -> Any:
    import torch

    return array.detach().resolve_conj().resolve_neg().clone(memory_format=torch.contiguous_format)


def _writable(array: Any) -> bool:
    # An expanded tensor repeats elements with stride 0: torch refuses writes into it.
    strides = array.stride()
    if 0 not in strides:  # the common case, without a loop in Python
        return True
    return all(s != 0 or n == 1 for s, n in zip(strides, array.shape, strict=True))


def _memory(array: Any) -> Any:
    return array if array._base is None else array._base  # torch links a view to its root


def _write_count(array: Any) -> int | None:
    # Shared by views (and detach()), and bumped by every in-place operation.
    try:
        return array._version  # type: ignore[no-any-return]
    except RuntimeError:  # inference tensors (torch.inference_mode) keep no count
        return None
    except AttributeError:  # not a tensor (a node of torch inputs may keep others)
        return None


def _scatter_add(dst: Any, positions: Any, values: Any) -> Any:
    return dst.index_add_(0, positions, values)


adapter = Adapter(
    name="torch",
    modules=("torch",),
    scatter_add=_scatter_add,
    namespace=_namespace,
    devices=_devices,
    device_name=_device_name,
    parse_device=_parse_device,
    default_device=lambda: _parse_device(""),
    device_of=lambda array: array.device,
    to_device=_to_device,
    from_dlpack=_from_dlpack,
    dlpack_device=_dlpack_device,
    use_device=_use_device,
    view_problem=_view_problem,
    writable=_writable,
    export_copy=_export_copy,
    data_pointer=lambda array: array.data_ptr(),
    memory=_memory,
    write_count=_write_count,
    scalar_operand=_scalar_operand,
    order=30,
    title="PyTorch",
)
