"""Writes into Variables: ``x[key] = value`` and the in-place operators.

A write rebinds the Variable to the output of a node, so the graph stays right:
``x[key] = v`` gives the overwritten positions a zero gradient and ``v`` the
upstream gradient at ``key``. The write goes into the existing array where the
backend allows it (NumPy, PyTorch, CuPy, array-api-strict) and the version of its
memory is bumped (see :mod:`agnograd._versions`), so a node that saved the old
values, or a view of them, raises at backward time instead of computing a wrong
gradient. Immutable arrays (JAX) get a fresh array.

A leaf that requires a gradient is never written, neither directly nor through a
view of its memory (``x[0:2][0] = v``), while a graph is recorded. Define-then-run
writes into a copy: its forwards run later, in an order that need not be the
order of the program, so a write must not change what another node reads.

In-place operators (``x += y``) compute a new array and rebind the Variable to it;
the old array is left untouched.
"""

from __future__ import annotations

import weakref
from typing import Any

import array_api_compat

from agnograd import _versions
from agnograd._backend import raw_namespace
from agnograd._config import AUTO_FORWARD, BACKPROP, MODE
from agnograd._function import FunctionNode
from agnograd._namespace import namespace_of
from agnograd._variable import Variable

_SCALARS = (bool, int, float, complex)


class _Gone:
    pass


# A reference that is already dead, put in place of any Variable's reference.
_dead: weakref.ref[Any] = weakref.ref(_Gone())


def _written_mask(shape: tuple[int, ...], key: Any, like: Any) -> Any:
    """Boolean array of ``shape``: True where ``x[key] = ...`` writes."""
    from agnograd.functions._indexing import scatter_into_zeros

    xp = raw_namespace(like)
    region = xp.ones(tuple(xp.zeros(shape, dtype=xp.int8, device=_device(like))[key].shape),
                     dtype=xp.int8, device=_device(like))  # fmt: skip
    return scatter_into_zeros(shape, key, region) != 0


def _device(a: Any) -> Any:
    return array_api_compat.device(a)


class SetItem(FunctionNode):
    """``x[key] = value`` as a node: input 0 is ``x``, input 1 (if any) ``value``."""

    def __init__(self, key: Any, scalar: Any, copy: bool = False) -> None:
        self.key = key
        self.scalar = scalar  # a Python scalar value, else None
        self.copy = copy  # write into a copy: the array is kept for a backward

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        return ((inputs[0].shape, inputs[0].dtype),)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x = inputs[0]
        if self.copy:
            x = self.xp.asarray(x, copy=True)
        value = self.scalar if len(inputs) == 1 else inputs[1]
        try:
            x[self.key] = value
        except (TypeError, ValueError, NotImplementedError):
            # Immutable arrays: build the result with standard functions.
            xp = self.xp
            mask = _written_mask(tuple(x.shape), self.key, x)
            if type(value) in _SCALARS:
                filled = xp.full(tuple(x.shape), value, dtype=x.dtype, device=_device(x))
            else:
                from agnograd.functions._indexing import scatter_into_zeros

                region = tuple(xp.zeros(tuple(x.shape), dtype=xp.int8)[self.key].shape)
                filled = scatter_into_zeros(
                    tuple(x.shape), self.key, xp.astype(xp.broadcast_to(value, region), x.dtype)
                )
            return (xp.where(mask, filled, x),)
        _versions.bump(x)
        return (x,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        # The inputs are set (backward runs on a linked node) and have a shape.
        shape: tuple[int, ...] = self.inputs[0].shape  # type: ignore[index, assignment]
        result = []
        for i in indexes:
            if i == 0:
                mask = _written_mask(shape, self.key, gy._data if isinstance(gy, Variable) else gy)
                result.append(xp.where(mask, xp.zeros_like(gy), gy))
            else:
                result.append(gy[self.key])  # summed to the value's shape by the engine
        return tuple(result)


def _rebind(var: Variable, out: Variable) -> None:
    """Make ``var`` the Variable of ``out``'s node (its old node stays in the graph)."""
    if out._node.creator_node is None:
        var.array = out._data  # no graph: only the data changes
        return
    old = var._node
    old._variable = _dead
    var._data = out._data
    var._node = out._node
    out._node._variable = weakref.ref(var)


def _records(var: Variable, *others: Any) -> bool:
    """Whether an operation of ``var`` and ``others`` is recorded in the graph."""
    return MODE.get()[BACKPROP] and (
        var._node.requires_grad or any(isinstance(o, Variable) and o.requires_grad for o in others)
    )


def _check_leaf(var: Variable, op: str, *others: Any) -> None:
    node = var._node
    if node.creator_node is None and node.requires_grad and _records(var, *others):
        raise RuntimeError(
            f"{op}: {var._describe()} is a leaf that requires a gradient; writing into it "
            "would lose that gradient. Write into a copy (y = x * 1), or do it inside "
            "agnograd.no_backprop_mode() (e.g. a parameter update)"
        )


def _check_view_of_leaf(var: Variable, value: Any) -> None:
    """Refuse a write into a view of the memory of a leaf that requires a gradient."""
    data = var._data
    if data is None or var._node.creator_node is None or not _records(var, value):
        return
    memory = _versions.memory_of(data)
    if memory is data:
        return  # the array owns its memory (arrays that wrap another's always walk)
    # A leaf's memory reaches ``var`` through nodes that all share it: walk up the
    # graph, past nodes whose array is gone, and stop at arrays of other memory.
    seen = {var._node}
    stack = [var._node]
    while stack:
        func = stack.pop().creator_node
        for node in (func.inputs or ()) if func is not None else ():
            if node in seen:
                continue
            seen.add(node)
            node_data = node.data
            if node_data is not None and _versions.memory_of(node_data) is not memory:
                continue
            if node.creator_node is not None:
                stack.append(node)
            elif node.requires_grad and node_data is not None:
                leaf = node._variable()
                what = "a leaf" if leaf is None else leaf._describe() + ", a leaf"
                raise RuntimeError(
                    f"x[key] = value: the array of {var._describe()} is a view of the memory "
                    f"of {what} that requires a gradient, so the write would change that "
                    "leaf behind the graph and its gradient would be wrong. Write into a "
                    "copy (y = x * 1, then y[...] = value), or do it inside "
                    "agnograd.no_backprop_mode() (e.g. a parameter update)"
                )


def setitem(self: Variable, key: Any, value: Any) -> None:
    """``x[key] = value``: the Variable now holds the written array (see the module)."""
    from agnograd.functions._indexing import normalize_key

    _check_leaf(self, "__setitem__", value)
    _check_view_of_leaf(self, value)
    data = self._data
    if data is not None:
        key = normalize_key(key, raw_namespace(data), _device(data), len(data.shape))
    if not MODE.get()[AUTO_FORWARD]:
        copy = True  # define-then-run (see the module)
    else:
        # The array may be one its creator keeps for backward (the output of max, exp,
        # ...): overwriting it would break that backward, so write into a copy then.
        creator = self._node.creator_node
        saved = creator._saved_outputs if creator is not None else None
        copy = saved is not None and any(a is data for a in saved)
    if type(value) in _SCALARS:
        out = SetItem(key, value, copy).apply((self,))[0]
    else:
        out = SetItem(key, None, copy).apply((self, value))[0]
    _rebind(self, out)


def inplace(op: Any, name: str) -> Any:
    def method(self: Variable, other: Any) -> Variable:
        _check_leaf(self, name, other)
        _rebind(self, op(self, other))
        return self

    method.__name__ = name
    return method
