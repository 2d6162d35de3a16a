"""The checks and messages around a FunctionNode's forward and backward: inputs and
outputs taken as tuples or refused, the device that picks forward_cpu or forward_gpu,
broadcast gradients summed back to their input's shape, and the errors naming a node.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agnograd.backends import _backend
from agnograd.backends._adapter import DLPACK_ACCELERATORS
from agnograd.backends._backend import label
from agnograd.core import _type_check as type_check
from agnograd.core._variable import Variable
from agnograd.core._variable_data import _refuse_foreign_graph

if TYPE_CHECKING:
    from agnograd.core._function import FunctionNode


def _on_accelerator(arrays: Sequence[Any]) -> bool:
    """Whether the first array given lives on an accelerator (CUDA, ROCm, ...), as its
    ``__dlpack_device__`` says; False when it cannot say."""
    first = next((a for a in arrays if a is not None), None)
    where = getattr(first, "__dlpack_device__", None)
    if where is None:
        return False
    try:
        kind = where()[0]
    except Exception:  # a library that cannot tell (a lazy array, an old version)
        return False
    return bool(kind in DLPACK_ACCELERATORS)


def input_namespace(func: FunctionNode, inputs: Sequence[Any], x: Variable) -> Any:
    """The namespace of the data of ``x``, one of ``inputs`` of ``func``, where apply's
    cache has none: an input without data (an uninitialised Parameter, a result that
    define-then-run has not computed) is refused, naming it and what gives it data."""
    data = x._data
    if data is None:
        i = next((i for i, v in enumerate(inputs) if v is x), 0)
        raise RuntimeError(f"{func.label}: input {i} holds no data; {x._missing()}")
    return _backend.raw_namespace(data)


def sum_to(gx: Any, shape: tuple[int, ...], func: FunctionNode, index: int) -> Any:
    """Sum a broadcast gradient back to its input's shape (rules never unbroadcast)."""
    xp = _backend.raw_namespace(gx) if not isinstance(gx, Variable) else gx.__array_namespace__()
    lead = len(gx.shape) - len(shape)
    bad = lead < 0 or not _backend.same_shape(shape, gx.shape[lead:], broadcast=True)
    if bad:
        raise ValueError(
            f"backward of {func.label} returned a gradient of shape {tuple(gx.shape)} for "
            f"input {index}, which has shape {shape} and cannot be reached by broadcasting"
        )
    inner = tuple(lead + i for i, s in enumerate(shape) if s == 1 and gx.shape[lead + i] != 1)
    axes = tuple(range(lead)) + inner
    if not axes:
        return gx
    if not inner and shape:  # leading axes alone (a bias's gradient): no reshape
        return xp.sum(gx, axis=axes)
    gx = xp.sum(gx, axis=axes, keepdims=True)
    return xp.reshape(gx, shape) if lead else gx


def _freed_message(func: FunctionNode, what: str) -> str:
    return (
        f"{func.label}: no retained {what} -- call retain_{what}(...) inside forward, and "
        "do not backprop through a graph after unchain() or clear_buffer freed it"
    )


def as_constant(x: Any, func: FunctionNode) -> Variable:
    """A raw array given to ``func`` as an input: a Variable that requires no gradient."""
    if not _backend.is_array(x):
        raise TypeError(
            f"{func.label}: expected a Variable or an array of an array API library as "
            f"input, got {type(x).__name__} {x!r}"
        )
    _refuse_foreign_graph(x, f"{func.label}: an input")
    return Variable._new(x, False)


def _input_sequence(func: FunctionNode, inputs: Any) -> tuple[Any, ...]:
    """``inputs`` as a tuple, refusing a lone Variable or array (``apply(x)`` for
    ``apply((x,))``), which would otherwise be taken apart row by row."""
    if isinstance(inputs, Variable) or _backend.is_array(inputs):
        raise TypeError(
            f"{func.label}.apply(inputs): inputs must be a tuple or list of Variables or "
            f"arrays, got a single {type(inputs).__name__}; write apply((x,))"
        )
    try:
        return tuple(inputs)
    except TypeError:
        raise TypeError(
            f"{func.label}.apply(inputs): inputs must be a tuple or list of Variables or "
            f"arrays, got {type(inputs).__name__}"
        ) from None


def _output_tuple(func: FunctionNode, outputs: Any) -> tuple[Any, ...]:
    """What ``forward`` returned, as a tuple of arrays: a list is taken, anything else
    refused (a bare array would be split into its rows)."""
    if isinstance(outputs, list | tuple):
        outputs = tuple(outputs)
    else:
        raise TypeError(
            f"{func.label}.forward must return a tuple of arrays (one per output), got "
            f"{type(outputs).__name__}; write `return (y,)` for a single output"
        )
    for i, y in enumerate(outputs):
        if not _backend.is_array(y):
            raise TypeError(
                f"{func.label}.forward returned {type(y).__name__} as output {i}; forward "
                "output must be a tuple of ndarrays (arrays of the inputs' library)"
            )
    return outputs


def _forward_failed(error: Exception, func: FunctionNode, arrays: tuple[Any, ...]) -> None:
    """Raise what a failed forward means, else note on ``error`` where it happened."""
    if func.broadcasts and isinstance(error, ValueError):
        shapes = [tuple(a.shape) for a in arrays]
        if not _broadcastable(shapes):
            raise type_check.InvalidType(
                "the shapes of the inputs broadcast against each other",
                " and ".join(map(str, shapes)) + " do not",
                f"{func.label}: the shapes of its inputs, {' and '.join(map(str, shapes))}, "
                "do not broadcast against each other",
            ) from error
    error.add_note(f"in agnograd {func.label}.forward with inputs {describe_arrays(arrays)}")


def _broadcastable(shapes: Sequence[tuple[int, ...]]) -> bool:
    """Whether ``shapes`` broadcast against each other (the array API's rule)."""
    ndim = max(len(s) for s in shapes)
    for axis in range(1, ndim + 1):
        sizes = {s[-axis] for s in shapes if len(s) >= axis} - {1}
        if len(sizes) > 1:
            return False
    return True


def describe_arrays(arrays: Sequence[Any]) -> str:
    """Shapes and dtypes of arrays or Variables (``None`` for a missing one), for the
    notes that errors in forward and backward carry."""
    parts = []
    for a in arrays:
        raw = a._data if isinstance(a, Variable) else a
        parts.append("None" if raw is None else label(tuple(raw.shape), raw.dtype))
    return ", ".join(parts)


def combines(xp: Any, other: Any) -> bool:
    """Whether arrays of namespaces ``xp`` and ``other`` may meet in one node."""
    return any(
        getattr(a, "_combine", None) is not None and a._combine(b) is not None
        for a, b in ((xp, other), (other, xp))
    )


def combined_namespace(
    func: FunctionNode | None, xp: Any, other: Any, inputs: Sequence[Any] | None = None
) -> tuple[Any, list[Any] | None]:
    """The namespace for inputs of two namespaces ``xp`` and ``other``: one that
    takes both where either says so (``vmap``'s batched arrays beside their
    library's, through its ``_combine``), else :func:`mixed_backends`' error.

    With the node's ``inputs``, also those inputs as that namespace needs them (its
    ``_share``: under ``vmap``, each unbatched input that requires a gradient passes
    first through a node whose backward sums its examples' gradients), or None where
    they stay as they are.
    """
    for a, b in ((xp, other), (other, xp)):
        combine = getattr(a, "_combine", None)
        found = None if combine is None else combine(b)
        if found is not None:
            share = getattr(found, "_share", None)
            if inputs is None or share is None:
                return found, None
            return found, share(func, inputs)
    raise mixed_backends(func, xp, other)  # type: ignore[arg-type]


def mixed_backends(func: FunctionNode, xp: Any, other: Any) -> TypeError:
    return TypeError(
        f"{func.label}: inputs mix arrays of two libraries, {_backend.backend_name(xp)} and "
        f"{_backend.backend_name(other)}; move them to one library first "
        "(agnograd.functions.copy or the library's from_dlpack)"
    )


def batched_by_rule(forward: Any) -> Any:
    """``forward`` of a class with a ``FunctionNode.vmap`` rule: under vmap (a
    namespace that runs rules, through its ``_forward``), the rule; else itself."""

    @functools.wraps(forward)
    def batched(self: Any, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        run = getattr(self.xp, "_forward", None)
        if run is not None:
            outputs = run(self, inputs)
            if outputs is not NotImplemented:
                return outputs
        return forward(self, inputs)

    batched._batched_by_vmap = True  # type: ignore[attr-defined]
    return batched


def combined_with(xp: Any, arrays: Sequence[Any]) -> Any:
    """The namespace ``xp`` combined with that of the first array (or Variable's
    data) in ``arrays``, where the two differ and combine (vmap's batched gradients
    into a node of unbatched arrays: a Jacobian's rows in one backward pass); None
    where they do not differ, do not combine, or ``xp`` is None."""
    for a in arrays:
        raw = a._data if isinstance(a, Variable) else a
        if raw is None:
            continue
        if xp is None or _backend._namespaces.get(raw.__class__) is xp:
            return None
        other = _backend.raw_namespace(raw)
        return combined_namespace(None, xp, other)[0] if combines(xp, other) else None
    return None
