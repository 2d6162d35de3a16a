"""Walking the graph of function nodes, and counting the edits of existing graphs."""

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
