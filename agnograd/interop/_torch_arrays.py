"""The parts of :mod:`agnograd.interop.torch`: the arrays found in a call's
arguments and results, and tensors crossing to and from other libraries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import torch

from agnograd.backends._backend import adapter_named, fallback_adapter, is_array
from agnograd.backends._device import Device, _view_target, get_device, transfer
from agnograd.core._trees import flatten, unflatten_from
from agnograd.core._variable import Variable

#: Rebuilds a call's ``(args, kwargs)`` with new objects in place of the ones found.
Rebuild: TypeAlias = Callable[[Sequence[Any]], Any]


# ---------------------------------------------------------------------------------
# Arguments and results


def _is_tensor(obj: Any) -> bool:
    return isinstance(obj, torch.Tensor)


def _is_input(obj: Any) -> bool:
    return isinstance(obj, Variable) or is_array(obj)


def _split(tree: Any, take: Callable[[Any], bool]) -> tuple[list[Any], Rebuild]:
    """The objects in ``tree`` (through tuples, lists and dicts) for which ``take``
    holds, in order, and a function that rebuilds ``tree`` with others in their place."""
    leaves, structure = flatten(tree)
    places = [i for i, leaf in enumerate(leaves) if take(leaf)]

    def rebuild(new: Sequence[Any]) -> Any:
        merged = list(leaves)
        for i, value in zip(places, new, strict=True):
            merged[i] = value
        return unflatten_from(structure, iter(merged))

    return [leaves[i] for i in places], rebuild


def _variables(result: Any, name: str) -> tuple[list[Variable], Any]:
    """``f``'s result as a list of Variables, and how to shape tensors like it
    (``None``: a single Variable)."""
    if isinstance(result, Variable):
        return [result], None
    if isinstance(result, tuple | list):
        items, kind = list(result), type(result)
        structure = (lambda ts: list(ts)) if kind is list else tuple
    else:
        items, structure = [result], None
    for i, item in enumerate(items):
        where = f"output {i}" if structure is not None else "its result"
        if is_array(item):
            raise TypeError(
                f"function({name}): f returned a {type(item).__module__.split('.')[0]} array "
                f"as {where}, not a Variable: it was computed outside agnograd's graph (for "
                "example with numpy.sum on x.array); compute with agnograd.functions or "
                "x.__array_namespace__(), or wrap a constant in agnograd.Variable"
            )
        if not isinstance(item, Variable):
            raise TypeError(
                f"function({name}): f must return a Variable or a tuple (or list) of "
                f"Variables, got {type(item).__name__} as {where}"
            )
    return items, structure


def _tensors(result: Any, name: str) -> tuple[list[torch.Tensor], Any]:
    """``fn``'s result as a list of tensors, and how to shape Variables like it."""
    if isinstance(result, torch.Tensor):
        return [result], None
    if isinstance(result, tuple | list):
        items = list(result)
        structure = (lambda vs: list(vs)) if isinstance(result, list) else tuple
    else:
        items, structure = [result], None
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            where = f"output {i}" if structure is not None else "its result"
            raise TypeError(
                f"node({name}): fn must return a tensor or a tuple (or list) of tensors, "
                f"got {type(item).__name__} as {where}"
            )
    return items, structure


def _name(fn: Any) -> str:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


# ---------------------------------------------------------------------------------
# Crossing between libraries


_targets: dict[tuple[Any, str], Device] = {}


def _from_torch(t: torch.Tensor, library: str, name: str) -> Any:
    """Tensor ``t`` (detached) as an array of ``library`` on the same memory,
    copied only where DLPack cannot share it."""
    if library == "torch":
        return t
    key = (t.device, library)
    dst = _targets.get(key)
    if dst is None:
        here = get_device(t.device)
        dst, reason = _view_target(here, library)
        twin = fallback_adapter("gpu")
        stands_for_host = "cpu" in adapter_named(library).fallback_for
        if reason is not None and here.is_gpu and twin is not None and stands_for_host:
            dst, reason = _view_target(here, twin.name)  # NumPy's twin on a GPU: CuPy
        if reason is not None:
            raise ValueError(
                f"function({name}): backend={library!r} cannot hold the tensors of {here}: "
                f"{reason}; pass backend='torch', or move the tensors"
            )
        _targets[key] = dst
    return transfer(t, dst)


def _as_tensor(array: Any, home: Device | None, device: Any = None) -> torch.Tensor:
    """``array`` as a fresh tensor object on the same memory (a copy only where
    DLPack cannot share it): on torch's ``device``, or on ``home``'s physical device."""
    if isinstance(array, torch.Tensor):
        return array.detach() if device is None else array.detach().to(device)
    if device is not None:
        dst = _torch_devices.get(device)
        if dst is None:
            dst = _torch_devices[device] = get_device(device)
    else:
        assert home is not None
        dst, _ = _view_target(home, "torch")  # elsewhere, transfer copies
    return transfer(array, dst)  # a new tensor object (DLPack's import makes one)


_torch_devices: dict[Any, Device] = {}


def _to_torch(
    arrays: Sequence[Any], places: Sequence[torch.Tensor] | None, taken: Sequence[torch.Tensor]
) -> list[Any]:
    """``arrays`` (``None`` stays) as tensors: on the device of the tensor at the
    same place in ``places``, or on their own physical device. A result whose memory
    overlaps a tensor of ``taken`` or an earlier result is copied: torch may keep a
    gradient as a leaf's ``.grad`` and later add into it in place."""
    spans = [s for s in map(_span, taken) if s is not None]
    results: list[Any] = []
    for i, array in enumerate(arrays):
        if array is None:
            results.append(None)
            continue
        if places is None:
            t = _as_tensor(array, get_device(array))
        else:
            t = _as_tensor(array, None, places[i].device)
        span = _span(t)
        if span is not None and any(a < span[1] and span[0] < b for a, b in spans):
            t = t.clone()
            span = _span(t)
        if span is not None:
            spans.append(span)
        results.append(t)
    return results


def _span(t: torch.Tensor) -> tuple[int, int] | None:
    """The addresses ``[start, end)`` that tensor ``t`` reads (``None``: none)."""
    n = t.numel()
    if n == 0 or t.layout != torch.strided or t.is_meta:
        return None
    start = t.data_ptr()
    if not t.is_contiguous():
        n = sum((size - 1) * step for size, step in zip(t.shape, t.stride(), strict=True)) + 1
    return start, start + n * t.element_size()
