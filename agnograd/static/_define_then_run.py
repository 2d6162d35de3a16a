"""nnabla's define-then-run on agnograd's graph: ``forward``, buffers, rewiring.

The same FunctionNodes and rules serve both styles; only when forward runs
differs. With auto-forward off, ``FunctionNode.apply`` links the graph and infers
shapes; :func:`forward_all` later runs the forwards in topological order, reading
each input from its node and storing each output in its node, so intermediate
results exist even when no Python Variable refers to them. Each node records the
versions of the arrays it keeps for backward as it runs, as ``apply`` does, so a
write made after ``forward_all`` (a parameter update) makes backward raise, and
one made before it does not. Writes in the graph (``x[key] = value``) go into a
copy (see :mod:`agnograd.functions._inplace`).

A result's library and device are known when the graph is built
(:func:`namespace_of_node`, :func:`device_of_node`), so ``__array_namespace__``,
``device`` and ``to_device`` of a Variable without data work as they do eagerly,
and array API code builds the graph.
"""

from __future__ import annotations

import contextvars
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._abstract import Abstract, DataDependentError
from agnograd.backends._backend import raw_namespace
from agnograd.backends._device import Device, device_of
from agnograd.core import _extension, _graph
from agnograd.core import _type_check as type_check
from agnograd.core._config import HOOKS, MODE, config
from agnograd.core._engine_loop import dropped
from agnograd.core._function import FunctionNode
from agnograd.core._function_checks import as_constant, mixed_backends
from agnograd.core._graph import functions_of
from agnograd.core._hooks import callbacks
from agnograd.core._link import keep_for_backward
from agnograd.core._variable import Variable, _empty_variable
from agnograd.core._variable_node import VariableNode, clear_node_data, note_consumer
from agnograd.functions._transfer import Copy
from agnograd.static._buffers import _unlinked, _unlinked_source, set_node_data

# is_recompute, set_recompute and restore are the core's entries through this module
# (``_extension.define_then_run``); forward_all uses the rest.
from agnograd.static._recompute import (  # noqa: F401 - entries of the core
    _drop,
    _marked,
    _marked_in,
    _note_freed,
    _note_holders,
    is_recompute,
    restore,
    set_recompute,
)

#: While agnograd.jit traces in this context, the list that every function linked is
#: added to: what the trace read (closed-over Variables) is in their inputs, also
#: where the graph it returns does not reach them.
linking: contextvars.ContextVar[list[FunctionNode] | None] = contextvars.ContextVar(
    "linking", default=None
)

#: Runs of a graph's forward so far (forward_all's and compiled plans'): the backward
#: of a plan is the graph's only while no other forward ran after the plan's.
forwards = 0


def count_forward() -> None:
    """Count one run of a forward (see :data:`forwards`)."""
    global forwards
    forwards += 1


def apply_deferred(
    func: FunctionNode, inputs: Sequence[Any], enable_backprop: bool
) -> tuple[Variable, ...]:
    """Define-then-run: link the graph now, infer output shapes, compute later."""
    nodes = []
    xp = None
    requires_grad = False
    rank = 0
    for i, x in enumerate(inputs):
        if not isinstance(x, Variable):
            x = as_constant(x, func)
        node = x._node
        if node.shape is None:  # an uninitialised Variable: no shape to build on
            raise RuntimeError(f"{func.label}: input {i} has no shape; {x._missing()}")
        if node.creator_node is None and node._data is None and x._data is not None:
            # The graph runs later: it must hold its leaves' arrays itself.
            node._data = x._data
        nodes.append(node)
        requires_grad = requires_grad or node.requires_grad
        rank = max(rank, node.rank)
        other = namespace_of_node(node)
        if xp is None:
            xp = other
        elif other is not xp:
            raise mixed_backends(func, xp, other)
    func.xp = xp
    # Every node has a shape here: a leaf has data, the others were inferred.
    specs = tuple(Abstract(n.shape, n.dtype, xp) for n in nodes)  # type: ignore[arg-type]
    if func._checks_types:  # as apply checks before forward, on the shapes known now
        type_check.check_types(func, specs)
    try:
        outputs = func.infer(specs)
    except DataDependentError as error:
        raise TypeError(
            f"{func.label}: define-then-run cannot infer its output shape ({error}); "
            f"compute it eagerly (auto_forward(True)) or override {type(func).__name__}.infer"
        ) from None
    requires_grad = requires_grad and func.differentiable and enable_backprop
    func.rank = rank
    func.inputs = tuple(nodes)
    note_consumer(func, func.inputs)  # for function_references
    linked = linking.get()
    if linked is not None:
        linked.append(func)
    # Ranks as eager gives them: an output that needs no gradient is not recorded
    # there, so it has rank 0 (the engine's order, and so its sums, are the same).
    out_rank = rank + 1 if requires_grad else 0
    results = tuple(
        _empty_variable(shape, dtype, requires_grad, func, out_rank) for shape, dtype in outputs
    )
    func.outputs = tuple(weakref.ref(r._node) for r in results)
    if config.recompute:  # inside agnograd.recompute(): nnabla's nn.recompute
        _marked.update(r._node for r in results)
    return results


def namespace_of_node(node: VariableNode) -> Any:
    data = node.data
    if data is not None:
        return raw_namespace(data)
    if node.creator_node is not None:
        return node.creator_node.xp
    source = _unlinked_source.get(node)
    if source is not None:
        return namespace_of_node(source)
    var = node._variable()
    fix = (
        "give the Variable data (or create it with Variable(shape=..., device=...))"
        if var is None
        else var._missing()
    )
    raise RuntimeError(f"{node!r} has neither data nor a creator, so its library is unknown; {fix}")


def device_of_node(node: VariableNode) -> Device | None:
    """The :class:`~agnograd.Device` of a node's data, or where define-then-run will
    put it: a function's output is on its first input's device, a :class:`Copy`'s on
    its destination. ``None`` for an uninitialised Variable."""
    while True:
        data = node.data
        if data is not None:
            return device_of(data)
        creator = node.creator_node
        if creator is None:
            source = _unlinked_source.get(node)
            if source is None:
                return None
            node = source
        elif isinstance(creator, Copy):
            return creator.dst
        elif creator.inputs:
            node = creator.inputs[0]
        else:
            return None


def forward_all(
    variables: Sequence[Variable],
    clear_buffer: bool = False,
    clear_no_need_grad: bool = False,
    function_pre_hook: Callable[[FunctionNode], Any] | None = None,
    function_post_hook: Callable[[FunctionNode], Any] | None = None,
) -> None:
    """Run the forward of every function the ``variables`` depend on, once each.

    Inputs are read from the graph's leaves as they are now, so a graph built once
    is run again with new data by assigning the leaves' ``d`` and calling this.

    Parameters
    ----------
    variables : sequence of Variable
        The outputs to compute; they keep their data whatever the options.
    clear_buffer : bool
        Free each intermediate array as soon as no later function reads it, and keep
        nothing for backward (inference). ``persistent`` Variables are kept.
    clear_no_need_grad : bool
        Free intermediate arrays as above but keep what backward needs (training).
    function_pre_hook, function_post_hook : callable, optional
        nnabla's hooks: each is called with every :class:`~agnograd.FunctionNode`,
        right before its forward and right after it (its outputs then hold their
        arrays).

    Notes
    -----
    Whatever the options, the data of a Variable marked ``recompute`` (other than
    the ``variables``, a leaf or a ``persistent`` one) is freed, with every array a
    function kept of it for backward, once no later function reads it; backward
    computes it again when a function's backward needs it.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(shape=(2,), need_grad=True)
    >>> with agnograd.auto_forward(False):
    ...     a = F.exp(x)
    ...     b = F.sum(x * 3)
    >>> x.d = np.array([0.0, 1.0], dtype=np.float32)
    >>> agnograd.forward_all([a, b])
    >>> [round(float(v), 3) for v in a.d], float(b.d)
    ([1.0, 2.718], 3.0)
    >>> agnograd.forward_all([b], function_pre_hook=lambda f: print(f.label))
    MulConstant
    Sum
    """
    if function_pre_hook is not None or function_post_hook is not None:
        with callbacks("forward_all", function_pre_hook, function_post_hook):
            forward_all(variables, clear_buffer, clear_no_need_grad)
        return
    count_forward()
    hooked = bool(MODE.get()[HOOKS])
    keep = {v._node for v in variables}
    funcs = functions_of(keep)
    clearing = clear_buffer or clear_no_need_grad
    # The graph's nodes marked recompute; the functions that kept each node's array
    # (for recompute's drops and recomputations), only when there are such nodes.
    marked = _marked_in(funcs) if _marked else set()
    holders: dict[VariableNode, list[tuple[FunctionNode, bool, int]]] = {}
    stale = bool(dropped)  # drops of an earlier forward, which this one replaces
    pending: dict[VariableNode, int] = {}
    if clearing or marked:
        for func in funcs:
            for node in func.inputs or ():
                pending[node] = pending.get(node, 0) + 1
    for func in funcs:
        in_nodes = func.inputs or ()
        arrays = []
        for i, node in enumerate(in_nodes):
            data = node.data
            if data is None:
                raise RuntimeError(
                    f"forward: input {i} of {func.label} ({node.label}) has no data; "
                    "feed the graph's inputs first (x.d = array), and do not read a buffer "
                    "that clear_buffer freed"
                )
            arrays.append(data)
        arrays_t = tuple(arrays)
        func.xp = raw_namespace(arrays_t[0])
        if func._checks_types:  # on this run's arrays, whose shapes may be new
            type_check.check_types(func, arrays_t)
        hooks = func._all_hooks() if hooked or func._local_hooks else ()
        for hook in hooks:  # as apply runs them, when the forward computes
            hook.forward_preprocess(func, arrays_t)
        outputs = func.forward(arrays_t)
        wanted = not clear_buffer and not (
            clear_no_need_grad and not any(n.requires_grad for n in in_nodes)
        )
        # What apply keeps, and their versions as the forward saw them, so that only
        # later writes make backward raise (and none recorded in an earlier run stays).
        keep_for_backward(func, arrays_t, outputs, wanted)
        if stale:
            dropped.discard(func)  # what it keeps now is this run's, whole
        if marked:
            _note_holders(func, in_nodes, func._saved_inputs, func._saved_outputs, holders)
        for ref, y in zip(func.outputs or (), outputs, strict=True):
            out = ref()
            if out is not None:
                set_node_data(out, y)
        for hook in hooks:  # once the outputs are in their nodes, as nnabla's post hook
            hook.forward_postprocess(func, arrays_t)
        if clearing or marked:
            for node in in_nodes:
                pending[node] -= 1
                if (
                    pending[node] == 0
                    and node.creator_node is not None
                    and node not in keep
                    and not node.persistent
                ):
                    if node in marked:
                        _drop(node, holders)
                    elif clearing:
                        clear_node_data(node)
                        if marked:  # its array may live on in a function
                            _note_freed(node, holders)


def unlinked(var: Variable, need_grad: bool | None) -> Variable:
    """``var.unlinked(need_grad)``: a Variable without creator sharing ``var``'s buffer."""
    _graph.edited()
    node = var._node
    requires_grad = node.requires_grad if need_grad is None else bool(need_grad)
    other = _empty_variable(node.shape, node.dtype, requires_grad, None, 0)
    other._data = var._data
    _unlinked.setdefault(node, weakref.WeakSet()).add(other)
    _unlinked_source[other._node] = node
    if config.recompute:
        _marked.add(other._node)
    return other


_extension.define_then_run = sys.modules[__name__]
