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

import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._abstract import Abstract, DataDependentError
from agnograd.backends._backend import as_array, raw_namespace
from agnograd.backends._device import Device, device_of
from agnograd.core import _extension, _graph, _versions
from agnograd.core._config import HOOKS, MODE, config
from agnograd.core._engine import dropped
from agnograd.core._function import FunctionNode, as_constant, mixed_backends
from agnograd.core._graph import functions_of
from agnograd.core._hooks import callbacks
from agnograd.core._variable import (
    Variable,
    VariableNode,
    _empty_variable,
    clear_node_data,
    note_consumer,
)
from agnograd.functions._transfer import Copy

# node -> Variables made by `unlinked()` that share its buffer: forward updates them.
_unlinked: weakref.WeakKeyDictionary[VariableNode, weakref.WeakSet[Variable]] = (
    weakref.WeakKeyDictionary()
)
# node of an unlinked Variable -> the node it was unlinked from (for its library).
_unlinked_source: weakref.WeakKeyDictionary[VariableNode, VariableNode] = (
    weakref.WeakKeyDictionary()
)


#: Runs of a graph's forward so far (forward_all's and compiled plans'): the backward
#: of a plan is the graph's only while no other forward ran after the plan's.
forwards = 0


def count_forward() -> None:
    """Count one run of a forward (see :data:`forwards`)."""
    global forwards
    forwards += 1


def set_node_data(node: VariableNode, data: Any) -> None:
    """Store a computed array in the node and in its Variable (and unlinked copies)."""
    data = as_array(data)  # a 0-d NumPy result is a scalar
    node._data = data
    var = node._variable()
    if var is not None:
        var._data = data
    node.shape, node.dtype = tuple(data.shape), data.dtype
    shared = _unlinked.get(node)
    if shared:
        for other in shared:
            other._data = data
            if other._node._data is not None:
                other._node._data = data
            other._node.shape, other._node.dtype = node.shape, node.dtype


def apply_deferred(
    func: FunctionNode, inputs: Sequence[Any], enable_backprop: bool
) -> tuple[Variable, ...]:
    """Define-then-run: link the graph now, infer output shapes, compute later."""
    nodes = []
    xp = None
    requires_grad = False
    rank = 0
    for x in inputs:
        if not isinstance(x, Variable):
            x = as_constant(x, func)
        node = x._node
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
    raise RuntimeError(
        f"{node!r} has neither data nor a creator, so its library is unknown; give the "
        "Variable data (or create it with Variable(shape=..., device=...))"
    )


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
        hooks = func._all_hooks() if hooked or func._local_hooks else ()
        for hook in hooks:  # as apply runs them, when the forward computes
            hook.forward_preprocess(func, arrays_t)
        outputs = func.forward(arrays_t)
        wanted = not clear_buffer and not (
            clear_no_need_grad and not any(n.requires_grad for n in in_nodes)
        )
        saved_in = tuple([arrays_t[i] for i in func._retain_in]) if wanted else None
        saved_out = tuple([outputs[i] for i in func._retain_out]) if wanted else None
        func._saved_inputs, func._saved_outputs = saved_in, saved_out
        # What apply does: versions as the forward saw them, so that only later writes
        # make backward raise (and none recorded in an earlier run stays).
        func._saved_versions = None
        if wanted and (_versions.versions or func.xp not in _versions.uncounted):
            sample = (arrays_t or outputs)[0]
            func._saved_versions = _versions.record(
                func.xp, saved_in or (), saved_out or (), sample
            )
        if stale:
            dropped.discard(func)  # what it keeps now is this run's, whole
        if marked:
            _note_holders(func, in_nodes, saved_in, saved_out, holders)
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


# -- recompute (nnabla's Variable.recompute) ------------------------------------------
#
# forward_all frees the data of a node marked recompute once its last reader in the
# forward has run, and drops the references to that array that functions kept for
# backward (their saved tuples get None there; the functions go to the engine's
# `dropped`). Before the backward of such a function the engine calls `restore`,
# which runs the forwards again, from the nearest arrays still held (a node's data,
# or an array a function kept of it), and puts the results back.

# The nodes marked recompute.
_marked: weakref.WeakSet[VariableNode] = weakref.WeakSet()
# node freed by a forward -> where functions kept its array: (function, whether an
# output, position in its saved tuple). Weak to the functions: a node does not keep
# its consumers alive.
_holders: weakref.WeakKeyDictionary[
    VariableNode, list[tuple[weakref.ref[FunctionNode], bool, int]]
] = weakref.WeakKeyDictionary()
# leaf -> the array (and its version) that the last forward with recompute read: a
# recomputation must read the same, or it would not give the forward's values.
_leaf_arrays: weakref.WeakKeyDictionary[VariableNode, tuple[Any, int]] = weakref.WeakKeyDictionary()
# output node -> (graph edits, whether the graph behind it has a node marked).
_marked_behind: weakref.WeakKeyDictionary[VariableNode, tuple[int, bool]] = (
    weakref.WeakKeyDictionary()
)


def is_recompute(node: VariableNode) -> bool:
    """``Variable.recompute``: whether the node is marked for recomputation."""
    return bool(_marked) and node in _marked


def set_recompute(node: VariableNode, value: bool) -> None:
    """Set ``Variable.recompute``; an edit of the graph (plans are made again)."""
    if bool(value) != is_recompute(node):
        _graph.edited()
        if value:
            _marked.add(node)
        else:
            _marked.discard(node)


def recomputes(node: VariableNode) -> bool:
    """Whether a node marked recompute lies behind ``node`` (which compiled plans
    leave to the walk); known until the next edit of a graph."""
    if not _marked:
        return False
    known = _marked_behind.get(node)
    if known is not None and known[0] == _graph.edits:
        return known[1]
    found = bool(_marked_in(functions_of([node])))
    _marked_behind[node] = (_graph.edits, found)
    return found


def _marked_in(funcs: Sequence[FunctionNode]) -> set[VariableNode]:
    """The nodes computed by ``funcs`` that are marked recompute."""
    marked = set(_marked)
    return {
        out
        for func in funcs
        for ref in func.outputs or ()
        if (out := ref()) is not None and out in marked
    }


def _note_holders(
    func: FunctionNode,
    in_nodes: Sequence[VariableNode],
    saved_in: tuple[Any, ...] | None,
    saved_out: tuple[Any, ...] | None,
    holders: dict[VariableNode, list[tuple[FunctionNode, bool, int]]],
) -> None:
    """Record which node's array ``func`` kept at each place of its saved tuples,
    and the arrays of the leaves it read (a recomputation must read the same)."""
    if saved_in:
        for p, i in enumerate(func._retain_in):
            holders.setdefault(in_nodes[i], []).append((func, False, p))
    if saved_out:
        refs = func.outputs or ()
        for p, j in enumerate(func._retain_out):
            out = refs[j]()
            if out is not None:
                holders.setdefault(out, []).append((func, True, p))
    for node in in_nodes:
        if node.creator_node is None:
            data = node.data
            _leaf_arrays[node] = (data, _versions.of((data,))[0])


def _note_freed(
    node: VariableNode, holders: dict[VariableNode, list[tuple[FunctionNode, bool, int]]]
) -> None:
    """Remember where the array of ``node``, whose data forward freed, is kept."""
    _holders[node] = [(weakref.ref(f), is_out, p) for f, is_out, p in holders.get(node, ())]


def _drop(
    node: VariableNode, holders: dict[VariableNode, list[tuple[FunctionNode, bool, int]]]
) -> None:
    """Free the array of ``node`` (marked recompute): its data and every reference
    to it that a function kept for backward."""
    clear_node_data(node)
    for func, is_out, p in holders.get(node, ()):
        saved = func._saved_outputs if is_out else func._saved_inputs
        if saved is None or saved[p] is None:
            continue
        kept = list(saved)
        kept[p] = None
        if is_out:
            func._saved_outputs = tuple(kept)
        else:
            func._saved_inputs = tuple(kept)
        dropped.add(func)
    _note_freed(node, holders)


def restore(func: FunctionNode) -> None:
    """Before ``func``'s backward: compute again the arrays it kept for backward
    that forward dropped (recompute), and put them back.

    The forwards run again from the nearest arrays still held, through nodes whose
    data was freed, whether marked recompute or freed by ``clear_no_need_grad``.
    Each recomputed node that a function whose backward is still to run needs keeps
    its data (as nnabla keeps it); the others are freed again after their last use.
    No hook runs for these forwards (nnabla calls none either).
    """
    dropped.discard(func)
    wanted: list[tuple[bool, int, FunctionNode, int]] = []  # where, and what computes it
    saved_in, saved_out = func._saved_inputs, func._saved_outputs
    inputs = func.inputs or ()
    if saved_in is not None:
        for p, i in enumerate(func._retain_in):
            if saved_in[p] is None:
                node = inputs[i]
                creator = node.creator_node
                if creator is None:
                    raise RuntimeError(_lost(func, node))
                wanted.append((False, p, creator, _output_index(creator, node)))
    if saved_out is not None:
        for p, j in enumerate(func._retain_out):
            if saved_out[p] is None:
                wanted.append((True, p, func, j))
    if not wanted:
        return
    arrays = _recompute([(f, j) for _, _, f, j in wanted], func)
    kept_in = None if saved_in is None else list(saved_in)
    kept_out = None if saved_out is None else list(saved_out)
    versions = func._saved_versions
    new_versions = None if versions is None else (list(versions[0]), list(versions[1]))
    for (is_out, p, _, _), array in zip(wanted, arrays, strict=True):
        kept = kept_out if is_out else kept_in
        assert kept is not None
        kept[p] = array
        if new_versions is not None:  # a new array, at its version now
            new_versions[is_out][p] = _versions.of((array,))[0]
    func._saved_inputs = None if kept_in is None else tuple(kept_in)
    func._saved_outputs = None if kept_out is None else tuple(kept_out)
    if new_versions is not None:
        func._saved_versions = (tuple(new_versions[0]), tuple(new_versions[1]))


def _output_index(func: FunctionNode, node: VariableNode) -> int:
    for j, ref in enumerate(func.outputs or ()):
        if ref() is node:
            return j
    raise RuntimeError(f"recompute: {node.label} is not an output of its creator {func.label}")


def _lost(func: FunctionNode, node: VariableNode) -> str:
    return (
        f"backward of {func.label}: the data of {node.label}, freed in forward to be "
        "recomputed, cannot be computed again: the graph's inputs it depends on have no "
        "data; run forward() again before backward()"
    )


def _recompute(targets: list[tuple[FunctionNode, int]], func: FunctionNode) -> list[Any]:
    """Output ``j`` of each ``(f, j)`` of ``targets``, computed again for the backward
    of ``func``, running the forwards needed from the nearest arrays still held."""
    # The functions to run, inputs first: an iterative depth-first post-order (a
    # recomputed chain may be as long as the graph).
    order: list[FunctionNode] = []
    found: dict[VariableNode, Any] = {}
    seen: set[FunctionNode] = set()
    for root, _ in targets:
        if root in seen:
            continue
        seen.add(root)
        stack: list[tuple[FunctionNode, int]] = [(root, 0)]
        while stack:
            f, i = stack.pop()
            ins = f.inputs
            if ins is None:
                raise RuntimeError(
                    f"backward of {func.label}: recomputing {f.label}, which was unchained"
                )
            if i == len(ins):
                order.append(f)
                continue
            stack.append((f, i + 1))
            node = ins[i]
            if node in found:
                continue
            array = _held(node, func)
            if array is not None:
                found[node] = array
                continue
            creator = node.creator_node
            if creator is None:
                raise RuntimeError(_lost(func, node))
            if creator not in seen:
                seen.add(creator)
                stack.append((creator, 0))
    reads: dict[VariableNode, int] = {}
    for f in order:
        for node in f.inputs or ():
            reads[node] = reads.get(node, 0) + 1
    wanted = {(f, j): k for k, (f, j) in enumerate(targets)}
    wanted_nodes = {ref() for f, j in targets if (ref := (f.outputs or ())[j]) is not None}
    results: list[Any] = [None] * len(targets)
    values = dict(found)
    for f in order:
        arrays = tuple([values[node] for node in f.inputs or ()])
        try:
            outputs = f.forward(arrays)
        except Exception as error:
            error.add_note(
                f"in agnograd {f.label}.forward, recomputed for the backward of "
                f"{func.label} (recompute)"
            )
            raise
        for j, (ref, y) in enumerate(zip(f.outputs or (), outputs, strict=True)):
            k = wanted.get((f, j))
            if k is not None:
                results[k] = y
            out = ref()
            if out is None:
                continue
            if reads.get(out):
                values[out] = y
            if out.data is None and (out in wanted_nodes or _needed(out)):
                set_node_data(out, y)
        for node in f.inputs or ():
            reads[node] -= 1
            if not reads[node]:
                values.pop(node, None)  # no later recomputation reads it
    return results


def _held(node: VariableNode, func: FunctionNode) -> Any:
    """The array of ``node`` if one is still held: its data, or the array a function
    kept of it for backward; None if it must be computed again."""
    data = node.data
    if data is not None:
        if node.creator_node is None:
            seen = _leaf_arrays.get(node)
            if seen is not None and (seen[0] is not data or _versions.of((data,))[0] != seen[1]):
                var = node._variable()
                what = node.label if var is None else var._describe()
                raise RuntimeError(
                    f"backward of {func.label}: recomputing data freed in forward needs the "
                    f"input {what}, which was given another array or written in place since "
                    "that forward, so the recomputation would not give the forward's values; "
                    "run forward() again before backward(), or change inputs after backward()"
                )
        return data
    for ref, is_out, p in _holders.get(node, ()):
        holder = ref()
        if holder is None:
            continue
        saved = holder._saved_outputs if is_out else holder._saved_inputs
        if saved is not None and saved[p] is not None:
            return saved[p]
    return None


def _needed(node: VariableNode) -> bool:
    """Whether a function whose backward is still to run lost the array of ``node``
    (forward dropped it, and it would be computed again)."""
    for ref, is_out, p in _holders.get(node, ()):
        holder = ref()
        if holder is None or holder not in dropped:
            continue
        saved = holder._saved_outputs if is_out else holder._saved_inputs
        if (
            saved is not None
            and saved[p] is None
            and any(x.requires_grad for x in holder.inputs or ())
        ):
            return True
    return False


_extension.define_then_run = sys.modules[__name__]
