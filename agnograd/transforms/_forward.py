"""Forward mode: tangents pushed through each operation as it runs, in one pass.

While :func:`jvp` runs its function, a *level* sits among the function hooks
(``FORWARD_MODE``), which sends every operation into ``FunctionNode.apply``, which
hands the node to the level, which runs it and computes the tangents of its outputs
from those of its inputs (agnograd.transforms._tangent_rules). No backward runs.
Where the level is the only hook and no jvp runs around it, the hooks are a
``LevelHooks``, and agnograd's own functions keep their fast path: they compute their
result as eagerly and hand it to the level's ``push1`` or ``push2``; the elementwise
rows and the operators push the tangents of real inputs themselves, with their rules
written in (agnograd.core._fast's ``_PUSH1``, ``_PUSH2``), as ``push1`` would. The tangents of
a Variable live on its graph node (which a reverse graph may give Variables anew:
double backprop's retained inputs) and die with it, or, on a Variable of no graph
whose node is not made yet, on the Variable; a Variable without one has a zero
tangent, which is never allocated.

Where a node's tangent rule comes from, read from its class (the declaration):

- an elementwise row of one or two arrays (``_core.Unary``, ``_core.Binary``, and the
  arithmetic operators' nodes, ``_arithmetic.Operator`` and ``WithScalar``): its
  gradient rule with the tangent in place of the gradient (no new code). Complex
  rules follow PyTorch's convention (the rule of a holomorphic ``f`` multiplies by
  ``conj(f'(z))``), so the tangent is ``conj(rule(conj(t)))``, and its real part
  where a complex input gives a real result (``abs``, ``real``, ``imag``);
- ``linear = True``: the node's forward applied to the tangents (a zero for an input
  without one, the input itself for an input that is not floating, such as indices);
- ``bilinear = True`` (two inputs): ``f(t1, x2) + f(x1, t2)``;
- a method ``_jvp(xp, inputs, outputs, tangents)``: a formula of its own;
- a user's node: its ``jvp(inputs, tangents)``;
- anything else: its backward, transposed, for that node alone
  (``_tangent_rules._transposed``).

Tangents are raw arrays, and rules run with the raw namespace, unless something
watches the tangents: an outer jvp (forward over forward), a reverse graph (the
inputs or the tangents require a gradient: forward over reverse, reverse over
forward) or a graph being built (define-then-run, :func:`agnograd.jit`'s tracing).
Then the rules run on Variables with the differentiable namespace, as backward does
under ``enable_double_backprop``, and the outer level or the graph sees them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import dtype_name, is_array, raw_namespace
from agnograd.core._config import FORWARD_MODE, MODE, LevelHooks
from agnograd.core._function import FunctionNode
from agnograd.core._function_checks import combined_namespace
from agnograd.core._hooks import FunctionHook
from agnograd.core._trees import unflatten_from
from agnograd.core._variable import Variable, _plain_variable
from agnograd.functions import _misc
from agnograd.functions._namespace import namespace_of
from agnograd.transforms._arguments import split_aux
from agnograd.transforms._tangent_rules import _REAPPLIED, _raw1, _raw1s, _raw2, _raw2s, _rule_of
from agnograd.transforms._transforms import (
    is_floating,
)
from agnograd.transforms._trees import _tree_arrays, _tree_flatten, _tree_leaves

_SCALARS = (bool, int, float, complex)


def _entry(x: Variable) -> Any:
    """The chain of tangents of the Variable ``x`` (see _Level), or None: on its node,
    or, while it has none, on itself (``Variable._node``)."""
    node = x._n
    return x._t if node is None else getattr(node, "_tangent", None)


class _Level(FunctionHook):
    """One running jvp: what runs each node, and sets the tangents of its outputs.

    A function hook, so that its place among the hooks turns the fast paths off (but
    for :meth:`push1` and :meth:`push2`), and so that a backward run inside the jvp
    (forward over reverse) calls its (empty) callbacks as it does any hook's.

    A Variable's tangents live on its graph node (which a reverse graph may give
    Variables anew: double backprop's retained inputs), in the slot ``_tangent``: a
    chain of ``(level, tangent, next)``, innermost level first, dropped with the node;
    a Variable of no graph holds its chain itself until its node is made (``_t``,
    see ``Variable._node``).
    """

    name = FORWARD_MODE

    def __init__(self, outer: _Level | None) -> None:
        self.outer = outer
        self._inside: Any = None
        self._outside: Any = None

    def tangent(self, x: Any) -> Any:
        """The tangent of ``x`` at this level, or None (a zero)."""
        if not isinstance(x, Variable):
            return None
        entry = _entry(x)
        while entry is not None:
            if entry[0] is self:
                return entry[1]
            entry = entry[2]
        return None

    def set(self, x: Variable, t: Any) -> None:
        entry = _entry(x)
        if entry is not None and entry[0] is self:
            entry = entry[2]
        node = x._n
        if node is None:
            x._t = (self, t, entry)
        else:
            node._tangent = (self, t, entry)

    def hooks(self, others: Any) -> Any:
        """The function hooks ``others`` with this level among them."""
        if not others and self.outer is None:
            return LevelHooks(self)
        return {**others, FORWARD_MODE: self}

    def outside(self, hooks: Any) -> Any:
        """``hooks`` with this level replaced by the one outside it (if any)."""
        if hooks is self._inside:
            return self._outside
        outside = {k: v for k, v in hooks.items() if k != FORWARD_MODE}
        if self.outer is not None:
            outside = self.outer.hooks(outside)
        self._inside, self._outside = hooks, outside
        return outside

    def push1(self, func: FunctionNode, x: Variable, y: Any) -> Variable:
        """The output of ``func`` applied to ``x``, whose array the fast path computed
        (``y``), with its tangent: no graph to link, no other hook or level."""
        out = _plain_variable(y)
        entry = _entry(x)
        if entry is None:
            return out  # a constant
        t = entry[1] if entry[0] is self else self.tangent(x)
        if t is None:
            return out
        data = x._data
        if t.__class__ is not data.__class__:
            return self.apply(func, (x,))[0]  # a Variable: maybe watched, the general way
        cls = func.__class__
        rule = _raw1s.get(cls) or _raw1(cls)
        y = out._data
        ty = rule(func, func.xp, data, y, t)
        if ty is not None:
            if ty.__class__ is not y.__class__:
                ty = func.xp.asarray(ty)  # NumPy gives a scalar for a 0-d result
            out._t = (self, ty, None)
        return out

    def push2(self, func: FunctionNode, x1: Variable, x2: Variable, y: Any) -> Variable:
        """As :meth:`push1`, for ``func`` applied to ``x1`` and ``x2``."""
        out = _plain_variable(y)
        e1 = _entry(x1)
        e2 = _entry(x2)
        t1 = None if e1 is None else e1[1] if e1[0] is self else self.tangent(x1)
        t2 = None if e2 is None else e2[1] if e2[0] is self else self.tangent(x2)
        if t1 is None and t2 is None:
            return out
        a1, a2 = x1._data, x2._data
        if (t1 is not None and t1.__class__ is not a1.__class__) or (
            t2 is not None and t2.__class__ is not a2.__class__
        ):
            return self.apply(func, (x1, x2))[0]  # see push1
        cls = func.__class__
        rule = _raw2s.get(cls) or _raw2(cls)
        y = out._data
        ty = rule(func, func.xp, a1, a2, y, t1, t2)
        if ty is not None:
            if ty.__class__ is not y.__class__:
                ty = func.xp.asarray(ty)
            out._t = (self, ty, None)
        return out

    def apply(self, func: FunctionNode, inputs: Sequence[Any]) -> tuple[Variable, ...]:
        """``func.apply(inputs)``, run outside this level, with the tangents of its
        outputs set from those of its inputs (``FunctionNode.apply`` calls this)."""
        ts: list[Any] | None = None
        requires_grad = False
        for i, x in enumerate(inputs):
            if not isinstance(x, Variable):
                continue
            if x._node.requires_grad:
                requires_grad = True
            t = self.tangent(x)
            if t is not None:
                if ts is None:
                    ts = [None] * len(inputs)
                ts[i] = t
                if t.__class__ is not x._data.__class__ and _requires_grad(t):
                    requires_grad = True
        backprop, auto_forward, hooks = MODE.get()
        token = MODE.set((backprop, auto_forward, self.outside(hooks)))
        try:
            if ts is None or not func.differentiable:
                return func.apply(inputs)
            rule = _rule_of(type(func))
            # (Under define-then-run, jit's tracing, the rules link their operations
            # into the graph as Variables: no array to compute them on.)
            watched = self.outer is not None or (backprop and requires_grad) or not auto_forward
            pristine = copy.copy(func) if watched and rule in _REAPPLIED else None
            outputs = func.apply(inputs)
            if watched:
                xs: Any = [x if isinstance(x, Variable) else _constant(x) for x in inputs]
                ys: Any = outputs
                ts = [t if t is None or isinstance(t, Variable) else _constant(t) for t in ts]
                xp = namespace_of(xs[0])
            else:
                xs = [x._data if isinstance(x, Variable) else x for x in inputs]
                ys = [y._data for y in outputs]
                ts = [t._data if isinstance(t, Variable) else t for t in ts]
                xp = _with_tangents(func, ts)
                if xp is not func.xp:  # a rule that reapplies the node: on the batch
                    pristine = copy.copy(func if pristine is None else pristine)
                    pristine.xp = xp
            result = rule(func if pristine is None else pristine, xs, ys, ts, xp, watched)
        finally:
            MODE.reset(token)
        for y, t in zip(outputs, result, strict=True):
            if t is not None:
                if not watched and t.__class__ is not y._data.__class__ and xp is func.xp:
                    t = xp.asarray(t)  # NumPy gives a scalar for a 0-d result
                self.set(y, t)
        return outputs


def _with_tangents(func: FunctionNode, ts: Sequence[Any]) -> Any:
    """The namespace of ``func``'s inputs and their tangents ``ts`` together: under
    ``vmap``, batched tangents of an unbatched point take the batching namespace, as
    a node meeting batched and unbatched inputs does."""
    xp = func.xp
    for t in ts:
        if t is not None and not isinstance(t, _SCALARS):
            other = raw_namespace(t)
            if other is not xp:
                xp = combined_namespace(func, xp, other)[0]
    return xp


def _constant(x: Any) -> Variable:
    return _plain_variable(x)


# -- the transform ----------------------------------------------------------------------


def jvp(
    func: Callable[..., Any],
    primals: Sequence[Any],
    tangents: Sequence[Any],
    has_aux: bool = False,
) -> Any:
    """``func``'s output at ``primals`` and its Jacobian-vector product with
    ``tangents``, in one forward pass (forward mode): ``(output, jvp_out)``, or
    ``(output, jvp_out, aux)`` with ``has_aux``, as ``torch.func.jvp`` returns them.

    Parameters
    ----------
    func
        A function of the primals that returns an array or Variable, or a tuple, list
        or dict of them (with ``has_aux``: a pair of that and anything else).
    primals, tangents
        Tuples (or lists) of the arguments and of their tangents, each an array of any
        array API library, a Variable, or a tuple, list or dict of them; a tangent has
        its primal's shape.
    has_aux
        Whether ``func`` returns ``(output, aux)``; ``aux`` is returned third, its
        Variables as arrays where the primals are raw arrays.

    Returns
    -------
    tuple
        The output and its tangent, of the structure ``func`` returns: raw arrays of
        the inputs' library where the primals are raw arrays, else Variables.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> from agnograd.func import jvp
    >>> y, t = jvp(F.sin, (np.array([0.0, 1.0]),), (np.array([1.0, 2.0]),))
    >>> y, t  # sin(x) and cos(x) * v
    (array([0.        , 0.84147098]), array([1.        , 1.08060461]))
    """
    return _jvp("jvp", func, primals, tangents, has_aux)


def _jvp(
    op: str,
    func: Callable[..., Any],
    primals: Sequence[Any],
    tangents: Sequence[Any],
    has_aux: bool,
) -> Any:
    """:func:`jvp` for the transform ``op`` (``jvp``, ``jacfwd``, ``linearize``), which
    its errors name."""
    if not isinstance(primals, tuple | list) or not isinstance(tangents, tuple | list):
        raise TypeError(
            f"{op}: primals and tangents must be tuples of arguments, got "
            f"{type(primals).__name__} and {type(tangents).__name__}; write (x,) for one"
        )
    p_leaves, p_structure = _tree_flatten(primals, "primals", op)
    t_leaves = _tree_leaves(tangents, "tangents", op)
    if len(p_leaves) != len(t_leaves):
        raise ValueError(
            f"{op}: {len(p_leaves)} primal arrays but {len(t_leaves)} tangents; give one "
            "tangent per primal, in the same structure"
        )
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves, strict=True)):
        if tuple(p.shape) != tuple(t.shape):
            raise ValueError(
                f"{op}: tangent {i} has shape {tuple(t.shape)}, its primal {tuple(p.shape)}; "
                "a tangent has its primal's shape"
            )
    backprop, auto_forward, hooks = MODE.get()
    level = _Level(hooks.get(FORWARD_MODE))
    # Fresh Variables, linked to Variable primals (through the outer levels), so that
    # the tangents are the arguments' alone, not those of the same arrays captured by
    # func from outside.
    raw = True
    args = []
    for p, t in zip(p_leaves, t_leaves, strict=True):
        if isinstance(p, Variable):
            raw = False
            arg = _misc.Identity().apply((p,))[0]
        else:
            arg = _constant(p)
        level.set(arg, _tangent_like(arg, t, op))
        args.append(arg)
    token = MODE.set((backprop, auto_forward, level.hooks(hooks)))
    try:
        result = func(*unflatten_from(p_structure, iter(args)))
    finally:
        MODE.reset(token)
    result, aux = split_aux(result, has_aux, op)
    out_leaves, structure = _tree_flatten(result, "the output of func", op)
    values, out_tangents = [], []
    for y in out_leaves:
        t = level.tangent(y) if isinstance(y, Variable) else None
        if t is None:
            data = y._data if isinstance(y, Variable) else y
            t = (
                namespace_of(y).zeros_like(y)
                if data is None
                else raw_namespace(data).zeros_like(data)
            )
        keep = not raw or level.outer is not None or _requires_grad(y) or _requires_grad(t)
        values.append(y if keep or not isinstance(y, Variable) else y._data)
        if keep:
            out_tangents.append(t if isinstance(t, Variable) else _constant(t))
        else:
            out_tangents.append(t._data if isinstance(t, Variable) else t)
    output = unflatten_from(structure, iter(values))
    jvp_out = unflatten_from(structure, iter(out_tangents))
    if not has_aux:
        return output, jvp_out
    # aux as the output: arrays where the primals are, unless something watches them.
    return output, jvp_out, _tree_arrays(aux) if raw and level.outer is None else aux


def _requires_grad(x: Any) -> bool:
    return isinstance(x, Variable) and x.requires_grad


def _tangent_like(primal: Variable, t: Any, op: str) -> Any:
    """The tangent ``t`` given for ``primal``, checked: a floating dtype, its primal's."""
    data = t._data if isinstance(t, Variable) else t
    if not is_array(data) and not isinstance(t, Variable):
        raise TypeError(f"{op}: a tangent must be an array or Variable, got {type(t).__name__}")
    if data is None:  # a Variable of a graph not run (jit's tracing)
        floating = namespace_of(t).isdtype(t.dtype, ("real floating", "complex floating"))
    else:
        floating = is_floating(data)
    if not floating:
        raise TypeError(
            f"{op}: a tangent must have a floating dtype, got {dtype_name(t.dtype)}; "
            "integer and boolean inputs take no tangent"
        )
    return t
