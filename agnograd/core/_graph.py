"""Walking the graph of function nodes (all of them, or those between seeds and
targets), and counting the edits of existing graphs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agnograd.core._function import FunctionNode
    from agnograd.core._variable_node import VariableNode


#: How many times a graph already built was edited: a creator set or forgotten
#: (``set_creator_node``, ``unchain``, ``rewire_on``), ``unlinked``, or a node's
#: ``requires_grad`` or ``persistent`` changed. A plan made for a graph
#: (:mod:`agnograd.static._compiled`) compares it with the count it was made at; recording
#: new operations is no edit (it changes no graph that existed before).
edits = 0


def edited() -> None:
    """Count one edit of an existing graph (see :data:`edits`)."""
    global edits
    edits += 1


def functions_of(outputs: Iterable[VariableNode]) -> list[FunctionNode]:
    """Every function node behind ``outputs``, in a topological (forward) order.

    The order is a depth-first post-order from the outputs, so it is stable: the
    same graph always gives the same order, inputs visited left to right.
    """
    order: list[FunctionNode] = []
    seen: set[FunctionNode] = set()
    for out in outputs:
        root = out.creator_node
        if root is None or root in seen:
            continue
        seen.add(root)
        stack: list[tuple[FunctionNode, int]] = [(root, 0)]
        while stack:
            func, i = stack.pop()
            inputs = func.inputs or ()
            if i < len(inputs):
                stack.append((func, i + 1))
                creator = inputs[i].creator_node
                if creator is not None and creator not in seen:
                    seen.add(creator)
                    stack.append((creator, 0))
            else:
                order.append(func)
    return order


def relevant_functions(
    seeds: Iterable[VariableNode], targets: set[VariableNode]
) -> set[FunctionNode] | None:
    """Function nodes that lie on a path from a seed down to a target; None where
    that is every node the seeds reach and every input that requires a gradient is
    a target or has a creator: nothing to prune, and the backward loop then asks each
    node what backward's asks (the same gradients, fewer questions)."""
    # (It reads creators as the engine does, _creator: it records no node's outputs.)
    funcs: list[FunctionNode] = []
    seen: set[FunctionNode] = set()
    stack = [n._creator for n in seeds if n._creator is not None]
    # Whether every node has an input that is a target or has a creator, and no
    # input outside the targets is a leaf that requires a gradient: then every node
    # is on a path to a target (by rank: a creator's is lower), and the loop asks
    # requires_grad alone, as backward's does.
    pruning = False
    while stack:
        f = stack.pop()
        if f in seen:
            continue
        seen.add(f)
        funcs.append(f)
        reaches = False
        x0, x1 = f._node_in0, f._node_in1  # f.inputs, without the property's call
        for x in (f._node_ins or ()) if x0 is None else (x0,) if x1 is None else (x0, x1):
            creator = x._creator
            if creator is not None:
                stack.append(creator)
                reaches = True
            elif x in targets:
                reaches = True
            elif x.requires_grad:
                pruning = True
        if not reaches:
            pruning = True
    if not pruning:
        return None
    relevant: set[FunctionNode] = set()
    for f in sorted(funcs, key=lambda f: f.rank):
        if any(x in targets or x._creator in relevant for x in f.inputs or ()):
            relevant.add(f)
    return relevant
