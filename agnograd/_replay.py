"""What ``y.forward()`` and ``y.backward()`` run: the graph's walk, then a compiled plan.

nnabla code builds a graph once and runs it many times. The first runs of a graph
walk it (:func:`~agnograd.forward_all`, then the engine). Once ``y.forward()`` has
walked the graph behind ``y`` ``agnograd.config.compile_after`` times (10 by
default; 0 compiles it at the first run), it compiles the graph into a plan
(:mod:`agnograd._compiled`) and runs the plan from then on, and a plain
``y.backward()`` right after it runs the plan's backward. Both leave the graph as
the walk would: every node its array (or, with ``clear_buffer`` and
``clear_no_need_grad``, what those options keep), and every function what its
backward reads, so anything may follow them.

A plan is made for its inputs' shapes and dtypes and for the graph as it is. When
either changes, ``y.forward()`` walks the graph again and compiles it anew only
after twice as many runs, so a graph whose input shapes change at every run soon
stops being compiled.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from agnograd import _define_then_run, _extension
from agnograd._compiled import CLEAR, KEEP, NO_NEED_GRAD, CompiledGraph
from agnograd._config import config
from agnograd._variable import Variable, VariableNode


class _Replays:
    """What ``y.forward()`` knows of the graph behind one output node."""

    __slots__ = ("mode", "plans", "runs", "threshold", "waiting")

    def __init__(self, threshold: int) -> None:
        self.plans: dict[str, CompiledGraph] = {}  # one per mode (forward's options)
        self.runs = 0  # walks since the last plan was made or dropped
        self.threshold = threshold
        self.mode: str | None = None  # that of the last forward
        # The plan whose forward ran last, with the count of forwards then: a backward
        # may use its arrays while no other forward ran.
        self.waiting: tuple[CompiledGraph, int] | None = None


_replays: weakref.WeakKeyDictionary[VariableNode, _Replays] = weakref.WeakKeyDictionary()


def forward(var: Variable, clear_buffer: bool = False, clear_no_need_grad: bool = False) -> None:
    """``var.forward(clear_buffer, clear_no_need_grad)``: walk or run a plan."""
    node = var._node
    after = config.compile_after
    if node.creator_node is None or after is None:
        _define_then_run.forward_all([var], clear_buffer, clear_no_need_grad)
        return
    mode = CLEAR if clear_buffer else NO_NEED_GRAD if clear_no_need_grad else KEEP
    state = _replays.get(node)
    if state is None:
        state = _replays[node] = _Replays(after)
    state.waiting = None
    plan = state.plans.get(mode)
    if plan is not None and not plan.current():
        # New input shapes or an edited graph: walk it until it has run unchanged
        # twice as long as before.
        state.plans.clear()
        state.runs = 0
        state.threshold = max(state.threshold, 1) * 2
        plan = None
    if plan is None and state.runs >= state.threshold:
        state.runs = 0
        plan = _compiled(var, mode)
        if plan is None:  # a plan would walk the graph anyway
            state.threshold = sys.maxsize
        else:
            state.plans[mode] = plan
    if plan is None:
        _define_then_run.forward_all([var], clear_buffer, clear_no_need_grad)
        state.runs += 1
    else:
        if state.mode != mode:
            plan._clear(backward=False)  # what the last mode's forward left
        plan._forward()
        state.waiting = (plan, _define_then_run.forwards)
    state.mode = mode


def _compiled(var: Variable, mode: str) -> CompiledGraph | None:
    """The plan of the graph behind ``var`` for ``mode``, or None where one cannot
    help: a graph that writes in place (its plan would walk it at every run), or one
    a plan cannot be made for (a shape that depends on the data)."""
    try:
        plan = CompiledGraph([var], mode)
    except Exception:  # what a plan cannot do, the walk does
        return None
    return None if plan._writes else plan


def backward(var: Variable, grad: Any, clear_buffer: bool) -> bool:
    """``var.backward(grad=grad, clear_buffer=clear_buffer)`` by the plan whose forward
    ran last, if it can; False when the engine must run it."""
    state = _replays.get(var._node)
    if state is None or state.waiting is None:
        return False
    plan, forwards = state.waiting
    state.waiting = None
    if forwards != _define_then_run.forwards or not plan._forwarded or not plan._fits_graph():
        return False  # another forward ran, or the graph changed, since the plan's
    plan.backward(None if grad is None else [grad], clear_buffer=clear_buffer)
    return True


_extension.replay = sys.modules[__name__]
