"""nnabla's ``Variable.recompute``: the nodes marked, the arrays of them that
``forward_all`` frees and drops, and computing those again before a backward."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from agnograd.core import _graph, _versions
from agnograd.core._engine_loop import dropped
from agnograd.core._function import FunctionNode
from agnograd.core._graph import functions_of
from agnograd.core._variable_node import VariableNode, clear_node_data
from agnograd.static._buffers import set_node_data

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
    at = func._saved_at
    if versions is None and func.xp in _versions.uncounted and at != _versions.clock[0]:
        # On a library without a write count: what it still keeps is as its forward saw
        # it unless written since (its backward then refuses it), what it keeps anew is
        # as it is now.
        still = [a for a in (saved_in or ()) + (saved_out or ()) if a is not None]
        if _versions.written_since(tuple(still), at) is None:
            func._saved_at = _versions.clock[0]
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
    # A node kept at several places (``h * h`` keeps ``h`` twice) is one target per
    # place, computed once.
    wanted: dict[tuple[FunctionNode, int], list[int]] = {}
    for k, target in enumerate(targets):
        wanted.setdefault(target, []).append(k)
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
            for k in wanted.get((f, j), ()):
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
