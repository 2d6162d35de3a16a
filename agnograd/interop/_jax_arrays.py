"""Arrays crossing between agnograd and JAX: DLPack views (or copies) both ways, the
64-bit dtypes JAX would narrow, and the complex-gradient conventions of the two."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agnograd.backends._backend import dtype_name, raw_namespace
from agnograd.backends._device import Device, _view_target, device_of, transfer, view

_FLOAT0 = jax.dtypes.float0
# The dtypes that JAX turns into their 32-bit kin unless its x64 mode is on.
_WIDE = frozenset({"float64", "int64", "uint64", "complex128"})


def _inexact(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def _cotangent(g: Any, aval: tuple[tuple[int, ...], Any]) -> Any:
    """JAX's cotangent for an output with ``aval``, from agnograd's gradient ``g``."""
    shape, dtype = aval
    if not _inexact(dtype):
        return np.zeros(shape, dtype=_FLOAT0)
    if g is None:
        return jnp.zeros(shape, dtype=dtype)
    return _conj(g)


def _conj(g: Any) -> Any:
    """Between agnograd's (PyTorch's) convention for complex gradients and JAX's."""
    return jnp.conj(g) if jnp.iscomplexobj(g) else g


def _home(array: Any) -> Device | None:
    """The device to return results to: ``None`` for JAX arrays (no conversion)."""
    return None if isinstance(array, jax.Array) else device_of(array)


def _refuse_narrowing(name: str, op: str, index: int) -> None:
    if name in _WIDE and not jax.config.read("jax_enable_x64"):
        raise TypeError(
            f"{op}: input {index} is {name}, which JAX without its x64 mode would "
            f"compute in 32 bits; enable it (jax.config.update('jax_enable_x64', True), or "
            "`with jax.enable_x64(True):` around the computation), or cast the input to a "
            "32-bit dtype first"
        )


def _to_jax(array: Any, op: str, index: int) -> Any:
    """``array`` as a JAX array: itself if it is one (or a tracer), else a DLPack view
    of its memory, else a copy (unaligned, read-only or negatively strided memory)."""
    if isinstance(array, jax.Array):
        return array
    _refuse_narrowing(dtype_name(array.dtype), op, index)
    try:
        return view(array, "jax")
    except BufferError:
        pass
    # A dense copy in the array's own library first: JAX's DLPack import refuses
    # some layouts even for a copy (torch's broadcast gradients, with stride 0).
    dense = raw_namespace(array).asarray(array, copy=True)
    return transfer(dense, _view_target(device_of(array), "jax")[0])


def _from_jax(array: Any, home: Device | None, op: str) -> Any:
    """The JAX ``array`` as an array on ``home`` (a view where DLPack allows it)."""
    if home is None:
        return array
    if isinstance(array, jax.core.Tracer):
        raise TypeError(
            f"{op}: the JAX function returned a traced value for {home.backend} inputs "
            "(it closes over a value of jax.jit or jax.grad); give the node JAX inputs "
            "inside JAX transformations"
        )
    try:
        return view(array, home)
    except BufferError:
        return transfer(array, home, copy=True)
