"""Forward mode: tangents pushed through each operation as it runs, in one pass.

While :func:`jvp` runs its function, a *level* sits among the function hooks
(``FunctionNode.FORWARD_MODE``), which sends every operation off the fast paths into
``FunctionNode.apply``; ``apply`` hands the node to the level, which runs it and
computes the tangents of its outputs from those of its inputs. No backward runs. The
tangent of a Variable lives in the level's table, keyed by its graph node (which a
reverse graph may give Variables anew: double backprop's retained inputs) and dropped
with it; a Variable without one has a zero tangent, which is never allocated.

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
- anything else: its backward, transposed, for that node alone (see
  :func:`_transposed`).

Tangents are raw arrays, and rules run with the raw namespace, unless something
watches the tangents: an outer jvp (forward over forward) or a reverse graph (the
inputs or the tangents require a gradient: forward over reverse, reverse over
forward). Then the rules run on Variables with the differentiable namespace, as
backward does under ``enable_double_backprop``, and the outer level sees them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.backends._backend import dtype_name, is_array, raw_namespace
from agnograd.core._config import FORWARD_MODE, MODE, LevelHooks, force_backprop_mode
from agnograd.core._engine import grad as _grad
from agnograd.core._function import FunctionNode
from agnograd.core._hooks import FunctionHook
from agnograd.core._variable import Variable, _new_variable
from agnograd.functions import _misc
from agnograd.functions._arithmetic import Operator, WithScalar
from agnograd.functions._core import Binary, Unary, conjugate, is_complex
from agnograd.functions._namespace import namespace_of
from agnograd.transforms._arguments import split_aux
from agnograd.transforms._transforms import (
    is_floating,
)
from agnograd.transforms._trees import _tree_arrays, _tree_leaves, _tree_unflatten

#: A tangent rule: ``rule(level, func, inputs, outputs, tangents, xp)`` gives one
#: tangent per output (None for a zero), of arrays or Variables as the inputs are.
TangentRule = Callable[..., Sequence[Any]]


class _Level(FunctionHook):
    """One running jvp: what runs each node, and sets the tangents of its outputs.

    A function hook, so that its place among the hooks turns the fast paths off (but
    for :meth:`push1` and :meth:`push2`), and so that a backward run inside the jvp
    (forward over reverse) calls its (empty) callbacks as it does any hook's.

    A Variable's tangents live on its graph node (which a reverse graph may give
    Variables anew: double backprop's retained inputs), in the slot ``_tangent``: a
    chain of ``(level, tangent, next)``, innermost level first, dropped with the node.
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
        entry = getattr(x._node, "_tangent", None)
        while entry is not None:
            if entry[0] is self:
                return entry[1]
            entry = entry[2]
        return None

    def set(self, x: Variable, t: Any) -> None:
        node = x._node
        entry = getattr(node, "_tangent", None)
        if entry is not None and entry[0] is self:
            entry = entry[2]
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
        out = _new_variable(y, False, None, 0)
        entry = getattr(x._node, "_tangent", None)
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
            out._node._tangent = (self, ty, None)
        return out

    def push2(self, func: FunctionNode, x1: Variable, x2: Variable, y: Any) -> Variable:
        """As :meth:`push1`, for ``func`` applied to ``x1`` and ``x2``."""
        out = _new_variable(y, False, None, 0)
        e1 = getattr(x1._node, "_tangent", None)
        e2 = getattr(x2._node, "_tangent", None)
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
            out._node._tangent = (self, ty, None)
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
                xp = func.xp
            result = rule(func if pristine is None else pristine, xs, ys, ts, xp, watched)
        finally:
            MODE.reset(token)
        for y, t in zip(outputs, result, strict=True):
            if t is not None:
                if not watched and t.__class__ is not y._data.__class__:
                    t = xp.asarray(t)  # NumPy gives a scalar for a 0-d result
                self.set(y, t)
        return outputs


def _constant(x: Any) -> Variable:
    return Variable._new(x, False)


# -- the rules ------------------------------------------------------------------------


def _fit(xp: Any, t: Any, y: Any) -> Any:
    """The tangent ``t`` of an elementwise result broadcast to its output ``y``'s shape
    (an input that was broadcast gives a smaller one)."""
    if tuple(t.shape) != tuple(y.shape):
        return xp.broadcast_to(t, tuple(y.shape))
    return t


def _by_rule(rule: Any, xp: Any, complex_in: bool, y: Any, t: Any, *args: Any) -> Any:
    """``rule(xp, *args, t)``, an elementwise gradient rule with the tangent in place
    of the gradient: the tangent of a real function; of a holomorphic one (whose rule
    multiplies by ``conj(f'(z))``) conjugated, and its real part where the result is
    real (PyTorch's rule of a real function of a complex ``z`` multiplies a real
    gradient by ``2 conj(df/dz)``)."""
    if not complex_in:
        return rule(xp, *args, t)
    ty = conjugate(xp, rule(xp, *args, conjugate(xp, t)))
    return ty if is_complex(y) else xp.real(ty)


def _unary(func: Any, xs: Any, ys: Any, ts: Any, xp: Any, watched: bool) -> tuple[Any]:
    x, y = xs[0], ys[0]
    if x.dtype is _real_dtype.get(x.__class__):  # the common case, at once
        return (func.rule(xp, x, y, ts[0]),)
    complex_in = is_complex(x)
    if not complex_in:
        _real_dtype[x.__class__] = x.dtype
    return (_by_rule(func.rule, xp, complex_in, y, ts[0], x, y),)


# The real dtype met last, by class of array: a rule's tangent needs no conjugation.
_real_dtype: dict[type, Any] = {}


def _binary(func: Any, xs: Any, ys: Any, ts: Any, xp: Any, watched: bool) -> tuple[Any]:
    x1, x2 = func._fill(xs)
    y = ys[0]
    total = None
    for i, t in enumerate(ts):
        rule = func.rules[func.which[i]]
        if t is None or rule is None:
            continue
        # (A real operand of a complex result, x * 1j, has the complex rule too.)
        complex_in = is_complex(xs[i]) or is_complex(y)
        if not complex_in:
            _real_dtype[xs[i].__class__] = xs[i].dtype
        ty = _by_rule(rule, xp, complex_in, y, t, x1, x2, y)
        total = ty if total is None else total + ty
    return (None if total is None else _fit(xp, total, y),)


def _filled(xp: Any, xs: Any, ts: Any) -> list[Any]:
    """The tangents, with a zero for a floating input without one and the input
    itself for one that is not floating (indices, masks: not differentiated)."""
    filled = []
    for x, t in zip(xs, ts, strict=True):
        if t is not None:
            filled.append(t)
        elif xp.isdtype(x.dtype, ("real floating", "complex floating")):
            filled.append(xp.zeros_like(x))
        else:
            filled.append(x)
    return filled


def _run(func: Any, args: Sequence[Any], watched: bool) -> tuple[Any, ...]:
    """``func``'s outputs for ``args``: through a fresh copy's ``apply`` where the
    tangents are watched (so that the outer levels and the reverse graph see it), else
    its forward on raw arrays (a linear node's forward depends on its inputs alone)."""
    if watched:
        return copy.copy(func).apply(tuple(args))
    return tuple(func.forward(tuple(args)))


def _linear(func: Any, xs: Any, ys: Any, ts: Any, xp: Any, watched: bool) -> tuple[Any, ...]:
    return _run(func, _filled(xp, xs, ts), watched)


def _bilinear(func: Any, xs: Any, ys: Any, ts: Any, xp: Any, watched: bool) -> tuple[Any]:
    (x1, x2), (t1, t2) = xs, ts
    first = None if t1 is None else _run(func, (t1, x2), watched)[0]
    second = None if t2 is None else _run(func, (x1, t2), watched)[0]
    if first is None:
        return (second,)
    return (first if second is None else first + second,)


def _formula(func: Any, xs: Any, ys: Any, ts: Any, xp: Any, watched: bool) -> Sequence[Any]:
    return func._jvp(xp, xs, ys, ts)


def _users(func: Any, xs: Any, ys: Any, ts: Any, xp: Any, watched: bool) -> Sequence[Any]:
    result = func.jvp(tuple(xs), tuple(ts))
    if not isinstance(result, tuple | list) or len(result) != len(ys):
        raise TypeError(
            f"jvp of {func.label} returned {type(result).__name__}; it must return a tuple "
            f"with one tangent (an array, a Variable or None) per output ({len(ys)})"
        )
    return result


def _transposed(func: Any, xs: Any, ys: Any, ts: Any, xp: Any, watched: bool) -> Sequence[Any]:
    """The tangents of a node without a jvp, from its backward, which is linear in the
    output gradients ``u``: with ``v(u)`` the gradients of the inputs, the tangents are
    the gradient of ``<v(u), t>`` with respect to ``u`` (PyTorch's complex convention
    makes ``v`` the adjoint of the jvp for the real inner product ``Re(conj(a) b)``).
    A second pass for this node alone: its forward again, on fresh leaves, its backward
    with ``u`` as Variables, and the backward of that."""
    if watched:
        raise NotImplementedError(
            f"jvp: {func.label} defines no jvp, and the fallback (its backward, "
            "transposed) gives tangents that cannot be differentiated again (in a jvp "
            "nested in another, or of inputs or tangents that require a gradient); define "
            "jvp(self, inputs, tangents) on it"
        )
    node = _fresh(func)
    with force_backprop_mode():
        leaves = [Variable(x, requires_grad=t is not None) for x, t in zip(xs, ts, strict=True)]
        outputs = node.apply(tuple(leaves))
        seeds = [Variable(xp.zeros_like(y), requires_grad=True) for y in ys]
        wanted = [leaf for leaf, t in zip(leaves, ts, strict=True) if t is not None]
        given = [t for t in ts if t is not None]
        gxs = _grad(list(outputs), wanted, grad_outputs=seeds, enable_double_backprop=True)
        total: Any = None
        for g, t in zip(gxs, given, strict=True):
            if g is None:
                continue
            dxp = namespace_of(g)
            product = conjugate(dxp, g) * t
            if is_complex(product):
                product = dxp.real(product)
            term = dxp.sum(product)
            total = term if total is None else total + term
        if total is None:
            return (None,) * len(ys)
        tys = _grad([total], seeds)
    return tuple(None if t is None else t._data for t in tys)


def _fresh(func: Any) -> Any:
    """A copy of ``func`` as it was before it ran: not linked into any graph."""
    node = copy.copy(func)
    for name in ("inputs", "outputs", "_saved_inputs", "_saved_outputs", "_saved_versions"):
        node.__dict__.pop(name, None)
    return node


def _unary1(func: Any, xp: Any, x: Any, y: Any, t: Any) -> Any:
    if x.dtype is _real_dtype.get(x.__class__):  # as _unary, without the tuples
        return func.rule(xp, x, y, t)
    return _unary(func, (x,), (y,), (t,), xp, False)[0]


def _linear1(func: Any, xp: Any, x: Any, y: Any, t: Any) -> Any:
    return func._forward1(xp, t)


def _formula1(func: Any, xp: Any, x: Any, y: Any, t: Any) -> Any:
    return func._jvp(xp, (x,), (y,), (t,))[0]


def _bilinear2(func: Any, xp: Any, x1: Any, x2: Any, y: Any, t1: Any, t2: Any) -> Any:
    if t1 is None:
        return func._forward2(xp, x1, t2)
    first = func._forward2(xp, t1, x2)
    return first if t2 is None else first + func._forward2(xp, x1, t2)


def _binary1(func: Any, xp: Any, x: Any, y: Any, t: Any) -> Any:
    if x.dtype is _real_dtype.get(x.__class__) and y.dtype is x.dtype:  # as _unary1
        rule = func.rules[func.which[0]]
        return None if rule is None else rule(xp, *func._fill((x,)), y, t)
    return _binary(func, (x,), (y,), (t,), xp, False)[0]


def _binary2(func: Any, xp: Any, x1: Any, x2: Any, y: Any, t1: Any, t2: Any) -> Any:
    real = _real_dtype.get(x1.__class__)
    if x1.dtype is not real or x2.dtype is not real:
        return _binary(func, (x1, x2), (y,), (t1, t2), xp, False)[0]
    rule1, rule2 = func.rules  # as _binary, without the tuples and the complex cases
    total = None if t1 is None or rule1 is None else rule1(xp, x1, x2, y, t1)
    if t2 is not None and rule2 is not None:
        t = rule2(xp, x1, x2, y, t2)
        total = t if total is None else total + t
    if total is None or total.shape == y.shape:
        return total
    return _fit(xp, total, y)


def _formula2(func: Any, xp: Any, x1: Any, x2: Any, y: Any, t1: Any, t2: Any) -> Any:
    return func._jvp(xp, (x1, x2), (y,), (t1, t2))[0]


# The tangent rules of node classes of one input (two), on raw arrays with nothing
# watching (Level.push1 and push2): ``rule(func, xp, x, y, t)`` (``rule(func, xp,
# x1, x2, y, t1, t2)``) gives the tangent of ``y``. Made once per class by _raw1 and
# _raw2: a rule of their own for the common kinds, else the general rule.
_raw1s: dict[type, Callable[..., Any]] = {}
_raw2s: dict[type, Callable[..., Any]] = {}


def _raw1(cls: type) -> Callable[..., Any]:
    general = _rule_of(cls)

    def rule(func: Any, xp: Any, x: Any, y: Any, t: Any) -> Any:
        return general(func, (x,), (y,), (t,), xp, False)[0]

    own = {_unary: _unary1, _linear: _linear1, _formula: _formula1, _binary: _binary1}
    _raw1s[cls] = rule = own.get(general, rule)
    return rule


def _raw2(cls: type) -> Callable[..., Any]:
    general = _rule_of(cls)

    def rule(func: Any, xp: Any, x1: Any, x2: Any, y: Any, t1: Any, t2: Any) -> Any:
        return general(func, (x1, x2), (y,), (t1, t2), xp, False)[0]

    own = {_bilinear: _bilinear2, _formula: _formula2, _binary: _binary2}
    _raw2s[cls] = rule = own.get(general, rule)
    return rule


# The rules that apply the node again (to the tangents): a pristine copy is kept for
# them where the tangents are watched.
_REAPPLIED = (_linear, _bilinear)

_rules: dict[type, TangentRule] = {}


def _rule_of(cls: type) -> TangentRule:
    """The tangent rule of a node class, read from its declaration (once per class)."""
    rule = _rules.get(cls)
    if rule is None:
        if getattr(cls, "jvp", None) is not None and cls._defined_outside:  # type: ignore[attr-defined]
            rule = _users
        elif issubclass(cls, Unary):
            rule = _unary
        elif issubclass(cls, Binary):
            rule = _binary
        elif getattr(cls, "linear", False):
            rule = _linear
        elif getattr(cls, "bilinear", False):
            rule = _bilinear
        elif issubclass(cls, Operator | WithScalar):
            rule = _binary
        elif getattr(cls, "_jvp", None) is not None:
            rule = _formula
        elif getattr(cls, "jvp", None) is not None:
            rule = _users
        else:
            rule = _transposed
        _rules[cls] = rule
    return rule


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
    p_leaves = _tree_leaves(primals, "primals", op)
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
    raw = not any(isinstance(p, Variable) for p in p_leaves)
    level = _Level(hooks.get(FORWARD_MODE))
    # Fresh Variables, linked to Variable primals (through the outer levels), so that
    # the tangents are the arguments' alone, not those of the same arrays captured by
    # func from outside.
    args = [
        _misc.Identity().apply((p,))[0] if isinstance(p, Variable) else _constant(p)
        for p in p_leaves
    ]
    for arg, t in zip(args, t_leaves, strict=True):
        level.set(arg, _tangent_like(arg, t, op))
    token = MODE.set((backprop, auto_forward, level.hooks(hooks)))
    try:
        result = func(*_tree_unflatten(primals, iter(args)))
    finally:
        MODE.reset(token)
    result, aux = split_aux(result, has_aux, op)
    out_leaves = _tree_leaves(result, "the output of func", op)
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
    output = _tree_unflatten(result, iter(values))
    jvp_out = _tree_unflatten(result, iter(out_tangents))
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
