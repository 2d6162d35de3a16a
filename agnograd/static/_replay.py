"""What ``y.forward()`` and ``y.backward()`` run: the graph's walk, then a compiled plan.

nnabla code builds a graph once and runs it many times. The first runs of a graph
walk it (:func:`~agnograd.forward_all`, then the engine). Once ``y.forward()`` has
walked the graph behind ``y`` ``agnograd.config.compile_after`` times (10 by
default; 0 compiles it at the first run), it compiles the graph into a plan
(:mod:`agnograd.static._compiled`) and runs the plan from then on, and a plain
``y.backward()`` right after it runs the plan's backward. Both leave the graph as
the walk would: every node its array (or, with ``clear_buffer`` and
``clear_no_need_grad``, what those options keep), and every function what its
backward reads, so anything may follow them.

A plan is made for its inputs' shapes and dtypes and for the graph as it is. Plans
are kept per input signature (the last eight), as ``jax.jit`` keeps its traces: a
signature is compiled once it has been walked as many times, so an epoch's smaller
last batch gets a plan of its own in time and one seen once is never compiled. An
edited graph drops every plan, and is compiled again only after twice as many runs.
Graphs of more than :data:`LARGEST` functions are walked, and so are the runs of
any thread but the one that first ran the graph: a plan holds one run's arrays.
So are the runs given nnabla's ``function_pre_hook`` or ``function_post_hook``
(they are called around each function's forward, which a plan does not run one
by one), and those of a graph with a Variable marked ``recompute`` (forward frees
its data and backward recomputes it, which the walk and the engine do).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from agnograd.core import _engine_loop, _extension
from agnograd.core._config import config
from agnograd.core._graph import functions_of
from agnograd.core._hooks import callbacks  # also Variable.backward's
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode
from agnograd.static import _define_then_run
from agnograd.static._compiled import CLEAR, KEEP, NO_NEED_GRAD, CompiledGraph
from agnograd.static._recompute import recomputes

# Plans kept per graph: one per mode and input signature, as jax.jit keeps a trace
# per signature, so that an epoch's smaller last batch keeps the others' plans.
_PLANS = 8
# Graphs of more functions are walked. Compiling pays back its time after about ten
# runs at any size, but its peak memory grows with the graph, about 2.7 kB a function
# (twice the graph's own: 270 MiB for 100,000 functions), which no time saved pays
# back on a machine without it to spare (agnograd.compile still makes one).
LARGEST = 20_000


class _Replays:
    """What ``y.forward()`` knows of the graph behind one output node."""

    __slots__ = ("plans", "runs", "shaped", "thread", "threshold", "waiting")

    def __init__(self, threshold: int) -> None:
        # By mode (forward's options) and input signature, oldest first.
        self.plans: dict[tuple[str, Any], CompiledGraph] = {}
        # Walks by the same key since its plan was made or dropped; the signature is
        # None until a plan knows the graph's inputs.
        self.runs: dict[tuple[str, Any], int] = {}
        self.threshold = threshold
        # The signature whose shapes the graph's nodes hold: the last run's, which
        # set them (a walk) or inferred them (a plan made or run for another one).
        self.shaped: Any = None
        # The plan whose forward ran last, with the counts of forwards and of clearing
        # backwards then: a backward may use its arrays while no other forward ran,
        # and no backward freed what a walk would have kept for it.
        self.waiting: tuple[CompiledGraph, int, int] | None = None
        # Plans hold one run's arrays: the thread that made them alone runs them,
        # the others walk (which is exact).
        self.thread = threading.get_ident()


_replays: weakref.WeakKeyDictionary[VariableNode, _Replays] = weakref.WeakKeyDictionary()


def forward(
    var: Variable,
    clear_buffer: bool = False,
    clear_no_need_grad: bool = False,
    function_pre_hook: Callable[[Any], Any] | None = None,
    function_post_hook: Callable[[Any], Any] | None = None,
) -> None:
    """``var.forward(clear_buffer, clear_no_need_grad, function_pre_hook,
    function_post_hook)``: walk or run a plan."""
    node = var._node
    after = config.compile_after
    if (
        node.creator_node is None
        or after is None
        or function_pre_hook is not None
        or function_post_hook is not None
        or recomputes(node)
    ):
        with callbacks("forward", function_pre_hook, function_post_hook):
            _define_then_run.forward_all([var], clear_buffer, clear_no_need_grad)
        return
    state = _replays.get(node)
    if state is None:
        state = _replays[node] = _Replays(after)
    if state.thread != threading.get_ident():
        _define_then_run.forward_all([var], clear_buffer, clear_no_need_grad)
        return
    mode = CLEAR if clear_buffer else NO_NEED_GRAD if clear_no_need_grad else KEEP
    state.waiting = None
    plans = state.plans
    key: tuple[str, Any] = (mode, None)
    plan = None
    if plans:
        key = (mode, next(iter(plans.values())).signature())
        plan = plans.get(key)
        if plan is not None and not plan._fits_graph():
            # An edited graph: walk it until it has run unchanged twice as long.
            plans.clear()
            state.runs.clear()
            state.threshold = max(state.threshold, 1) * 2
            key, plan = (mode, None), None
    runs = state.runs.get(key, 0)
    if plan is None and runs >= state.threshold:
        state.runs.pop(key, None)
        plan = _compiled(var, mode)
        if plan is None:  # a plan would walk the graph anyway, or cost more than it saves
            state.threshold = sys.maxsize
        else:
            plans[(mode, plan.signature())] = plan
            state.shaped = plan.signature()
            if len(plans) > _PLANS:
                del plans[next(iter(plans))]
    if plan is None:
        state.shaped = None  # a walk that raises leaves its shapes in some nodes
        _define_then_run.forward_all([var], clear_buffer, clear_no_need_grad)
        if len(state.runs) > 4 * _PLANS:  # signatures seen once each: forget them
            state.runs.clear()
        state.runs[key] = runs + 1
        state.shaped = key[1]
    else:
        if state.shaped != key[1]:  # nodes' shapes, which some functions read, are another's
            plan._infer()
            state.shaped = key[1]
        plan._forward()
        state.waiting = (plan, _define_then_run.forwards, _engine_loop.clears)


def _compiled(var: Variable, mode: str) -> CompiledGraph | None:
    """The plan of the graph behind ``var`` for ``mode``, or None where one cannot
    help: a graph that writes in place (its plan would walk it at every run), one
    larger than ``LARGEST`` functions, or one a plan cannot be made for (a shape that
    depends on the data)."""
    if len(functions_of([var._node])) > LARGEST:
        return None
    try:
        plan = CompiledGraph([var], mode)
    except Exception:  # what a plan cannot do, the walk does
        return None
    return None if plan._writes else plan


def backward(var: Variable, grad: Any, clear_buffer: bool) -> bool:
    """``var.backward(grad=grad, clear_buffer=clear_buffer)`` by the plan whose forward
    ran last, if it can; False when the engine must run it."""
    state = _replays.get(var._node)
    if state is None or state.waiting is None or state.thread != threading.get_ident():
        return False
    plan, forwards, clears = state.waiting
    state.waiting = None
    if (
        forwards != _define_then_run.forwards
        or clears != _engine_loop.clears
        or not plan._forwarded
        or not plan._fits_graph()
    ):
        # Another forward ran, a backward freed what the graph kept, or the graph
        # changed, since the plan's forward: the engine does what the walk does, and
        # the plan holds no array of its forward that the graph no longer holds.
        plan._discard()
        return False
    plan.backward(None if grad is None else [grad], clear_buffer=clear_buffer)
    return True


_extension.replay = sys.modules[__name__]
