"""What a compiled plan works out from its graph before running it: each node's
shape and dtype and each function's namespace for new inputs, which inputs need a
gradient, and the order of the engine's backward."""

from __future__ import annotations

import heapq
import itertools

from agnograd.backends._abstract import Abstract, DataDependentError
from agnograd.backends._backend import raw_namespace
from agnograd.core import _type_check as type_check
from agnograd.core._function import FunctionNode
from agnograd.core._variable_node import VariableNode


def _infer_shapes(funcs: list[FunctionNode]) -> None:
    """Every node's shape and dtype, inferred from the inputs' arrays as they are
    now (``funcs`` in forward order); DataDependentError (naming the function) where
    one depends on the data."""
    _set_namespaces(funcs)
    for func in funcs:
        nodes = func.inputs or ()
        specs = []
        for node in nodes:
            data = node.data if node.creator_node is None else None
            shape, dtype = (node.shape, node.dtype) if data is None else (data.shape, data.dtype)
            specs.append(Abstract(tuple(shape or ()), dtype, func.xp))
        if func._checks_types:  # once per plan and signature: the steps run none
            type_check.check_types(func, tuple(specs))
        try:
            inferred = func.infer(tuple(specs))
        except DataDependentError as error:
            raise DataDependentError(
                f"{func.label} cannot infer its output shape for the new inputs ({error})"
            ) from None
        for ref, (shape, dtype) in zip(func.outputs or (), inferred, strict=True):
            out = ref()
            if out is not None:
                out.shape, out.dtype = shape, dtype


def _needed_inputs(funcs: list[FunctionNode]) -> dict[FunctionNode, tuple[int, ...]]:
    """Which inputs of each function need a gradient: a leaf that requires one and is
    alive, or a node computed by a function with such an input (JAX's pruning of
    zeros)."""
    needed_funcs: set[FunctionNode] = set()
    indexes: dict[FunctionNode, tuple[int, ...]] = {}
    for f in funcs:
        idx = tuple(
            i
            for i, x in enumerate(f.inputs or ())
            if x.requires_grad
            and (
                x._variable() is not None
                if x.creator_node is None
                else x.creator_node in needed_funcs
            )
        )
        indexes[f] = idx
        if idx:
            needed_funcs.add(f)
    return indexes


def _set_namespaces(funcs: list[FunctionNode]) -> None:
    """Each function's namespace after its inputs' arrays changed (``funcs`` in
    forward order): that of its first input, a leaf's data or the function computing
    it, where that changed; the one it was applied with otherwise (a transfer's
    output is of another library than its input)."""
    changed: set[FunctionNode] = set()
    for f in funcs:
        inputs = f.inputs or ()
        if not inputs:
            continue
        first = inputs[0]
        creator = first.creator_node
        if creator is None:
            new = f.xp if first.data is None else raw_namespace(first.data)
        elif creator in changed:
            new = creator.xp
        else:
            continue
        if new is not f.xp:
            f.xp = new
            changed.add(f)


def _backward_order(
    outs: list[VariableNode], indexes: dict[FunctionNode, tuple[int, ...]]
) -> tuple[list[FunctionNode], list[VariableNode]]:
    """The order in which the engine runs the backward of each function (its heap,
    run without arrays), and the leaves in the order their first gradient arrives.
    Same order, same sums: the gradients come out equal bit for bit."""
    heap: list[tuple[int, int, FunctionNode]] = []
    count = itertools.count()
    has_grad: set[VariableNode] = set()
    done: set[FunctionNode] = set()
    order: list[FunctionNode] = []
    leaves: list[VariableNode] = []

    def add(x: VariableNode) -> None:
        if x in has_grad:
            return
        has_grad.add(x)
        creator = x.creator_node
        if creator is None:
            leaves.append(x)
        elif indexes.get(creator):
            heapq.heappush(heap, (-creator.rank, next(count), creator))

    for node in outs:
        if node.creator_node is not None:
            add(node)
    while heap:
        func = heapq.heappop(heap)[2]
        if func in done:
            continue
        done.add(func)
        order.append(func)
        inputs = func.inputs or ()
        for i in indexes[func]:
            add(inputs[i])
    return order, leaves
