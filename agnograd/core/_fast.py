"""The fast path of agnograd's own nodes of one or two array inputs and one output.

``apply1(node, x)`` is ``node.apply((x,))[0]`` and ``apply2(node, x1, x2)`` is
``node.apply((x1, x2))[0]``, for a fresh node of one output, which computes it with
``_forward1(xp, x)`` (or ``_forward2(xp, x1, x2)``: its own, or ``FunctionNode``'s,
which calls ``forward``). Where the inputs are
Variables of one library, functions run eagerly, no hook is registered and nothing
was written in place, they check, compute and link in one call, sharing the linking
with :meth:`FunctionNode.apply <agnograd.FunctionNode.apply>`; anything else (raw
arrays, define-then-run, hooks, debug mode, in-place writes, type checks) goes
through ``apply``, the general path. ``set_enabled(False)`` sends every call there.
"""

from __future__ import annotations

from typing import Any

from agnograd.backends._backend import _namespaces
from agnograd.core import _versions
from agnograd.core._config import MODE
from agnograd.core._function import linked
from agnograd.core._function_checks import _forward_failed, _output_tuple
from agnograd.core._variable import Variable, _new_variable

_graph_writes = _versions.graph_writes
#: Whether the fast paths run (see :func:`set_enabled`).
enabled = True


def set_enabled(on: bool) -> None:
    """Run agnograd's own nodes through the fast paths (the default) or, with False,
    through ``FunctionNode.apply`` alone, as user-defined nodes run."""
    global enabled
    enabled = bool(on)


def apply1(func: Any, x: Any) -> Variable:
    """``func.apply((x,))[0]``, in one call where it can (see the module's docstring)."""
    if x.__class__ is Variable and not _graph_writes and not func._checks_types and enabled:
        backprop, auto_forward, hooks = MODE.get()
        data = x._data
        xp = _namespaces.get(data.__class__)
        if auto_forward and not hooks and xp is not None:
            func.xp = xp
            try:
                y = func._forward1(xp, data)
            except Exception as error:
                _forward_failed(error, func, (data,))
                raise
            if y.__class__ is not data.__class__:
                _output_tuple(func, (y,))  # a NumPy scalar passes; no array is refused
            node = x._node
            if backprop and node.requires_grad and func.differentiable:
                return linked(func, (node,), (data,), y, node.rank, xp)
            return _new_variable(y, False, None, 0)
    result: Variable = func.apply((x,))[0]
    return result


def apply2(func: Any, x1: Any, x2: Any) -> Variable:
    """``func.apply((x1, x2))[0]``, in one call where it can (see the module's docstring)."""
    if (
        x1.__class__ is Variable
        and x2.__class__ is Variable
        and not _graph_writes
        and not func._checks_types
        and enabled
    ):
        backprop, auto_forward, hooks = MODE.get()
        a1 = x1._data
        a2 = x2._data
        xp = _namespaces.get(a1.__class__)
        if auto_forward and not hooks and xp is not None and _namespaces.get(a2.__class__) is xp:
            func.xp = xp
            try:
                y = func._forward2(xp, a1, a2)
            except Exception as error:
                _forward_failed(error, func, (a1, a2))
                raise
            if y.__class__ is not a1.__class__:
                _output_tuple(func, (y,))
            n1 = x1._node
            n2 = x2._node
            if backprop and (n1.requires_grad or n2.requires_grad) and func.differentiable:
                rank = n1.rank if n1.rank > n2.rank else n2.rank
                # as apply: the largest input rank, at least 0 for several inputs
                return linked(func, (n1, n2), (a1, a2), y, rank if rank > 0 else 0, xp)
            return _new_variable(y, False, None, 0)
    result: Variable = func.apply((x1, x2))[0]
    return result
