"""Forward mode's tangent rules, read from each node class's declaration (see
agnograd.transforms._forward, whose levels run them).

A general rule ``rule(func, inputs, outputs, tangents, xp, watched)`` gives one
tangent per output, on raw arrays with the raw namespace, or on Variables with the
differentiable one where something ``watched`` the tangents; the raw rules of
``_raw1`` and ``_raw2`` are the fast path's, on raw arrays of one or two inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from agnograd.core._config import force_backprop_mode
from agnograd.core._engine import grad as _grad
from agnograd.core._fast import real_dtypes
from agnograd.core._variable import Variable
from agnograd.functions._arithmetic import Operator, WithScalar
from agnograd.functions._core import Binary, Unary, conjugate, is_complex
from agnograd.functions._namespace import namespace_of

#: A tangent rule: ``rule(level, func, inputs, outputs, tangents, xp)`` gives one
#: tangent per output (None for a zero), of arrays or Variables as the inputs are.
TangentRule = Callable[..., Sequence[Any]]


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


# The real dtype met last, by class of array: a rule's tangent needs no conjugation
# (the fast paths of agnograd's own functions read it too).
_real_dtype = real_dtypes


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
    for name in (
        "_node_in0",
        "_node_in1",
        "_node_ins",
        "_node_outs",
        "_saved_inputs",
        "_saved_outputs",
        "_saved_versions",
    ):
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
