"""Transforms of Variables without data: the derivatives built as a graph.

A transform given Variables of a define-then-run graph that has not run (those
that ``agnograd.jit`` passes to the function it traces, or results built under
``auto_forward(False)``) cannot compute anything. It builds instead: the function
runs with auto-forward off, ``agnograd.grad`` of its outputs builds the gradient
graph (nnabla's ``nn.grad``), and the results are Variables of that graph, which
``forward()`` or a compiled plan computes later. :func:`value_and_grad`,
:func:`vjp`, :func:`jvp`, :func:`vhp` and :func:`hvp` work so; :func:`jacobian`
and :func:`hessian`, which build their matrices a row at a time from the values,
refuse such inputs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from agnograd.backends._backend import dtype_name
from agnograd.core._config import AUTO_FORWARD, MODE, eager_recording, graph_mode, using_config
from agnograd.core._variable import Variable
from agnograd.functions import identity


def is_symbolic(items: Iterable[Any]) -> bool:
    """Whether operations link the graph without computing (auto-forward off) and
    some Variable among ``items`` holds no data but is a result of a graph (one
    whose data a later forward computes). Under auto-forward on, such Variables are
    refused where they are made leaves (``_leaf``), with an error that says why."""
    return building() and any(
        isinstance(x, Variable) and x._data is None and x.creator_node is not None for x in items
    )


@contextlib.contextmanager
def recording(symbolic: bool) -> Iterator[None]:
    """Record the graph inside the block: computing each operation
    (``eager_recording``), or, for ``symbolic`` inputs, only linking it
    (auto-forward off), so that the results are the graph's Variables."""
    if not symbolic:
        with eager_recording():
            yield
        return
    with graph_mode(True, False):
        yield


def recording_for(
    inputs: Iterable[Any], create_graph: bool
) -> tuple[bool, contextlib.AbstractContextManager[None]]:
    """What a torch-style transform of ``inputs`` records with: its ``create_graph``
    (always, for Variables of a graph not run, whose results are that graph's), and
    the block that records ``func``'s graph (:func:`recording`)."""
    symbolic = is_symbolic(inputs)
    return create_graph or symbolic, recording(symbolic)


def building() -> bool:
    """Whether operations link the graph without computing (auto-forward off)."""
    return not MODE.get()[AUTO_FORWARD]


def symbolic_leaf(x: Variable, op: str, where: str, create_graph: bool) -> Variable:
    """What a transform differentiates with respect to, for a Variable ``x`` without
    data: a new Variable of the graph, equal to ``x``, that requires a gradient. Of
    an ``x`` that requires none it is the graph's counterpart of a fresh leaf (no
    gradient flows back into ``x``, and its rank is a leaf's, so the gradients add
    up in the order they do eagerly); of one that does, it stays connected to ``x``
    (``create_graph``, as eagerly)."""
    if x.creator_node is None:
        raise ValueError(f"{op}: {where} holds no data (an uninitialised Variable)")
    if not building():
        raise ValueError(
            f"{op}: {where} is a Variable without data (of a graph built with auto-forward "
            f"off, or traced by agnograd.jit), which {op} cannot differentiate before the "
            "graph has run; call it on arrays"
        )
    if not x.xp.isdtype(x.dtype, ("real floating", "complex floating")):
        raise TypeError(
            f"{op}: {where} has dtype {dtype_name(x.dtype)}; only floating-point or complex "
            "inputs can be differentiated; cast it first, e.g. xp.astype(x, xp.float64)"
        )
    connected = create_graph and x.requires_grad
    with using_config("enable_backprop", connected):
        leaf: Variable = identity(x)  # type: ignore[assignment]
    leaf.requires_grad = True
    return leaf
