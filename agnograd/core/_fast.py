"""The fast path of agnograd's own nodes of one or two array inputs and one output.

``apply1(node, x)`` is ``node.apply((x,))[0]`` and ``apply2(node, x1, x2)`` is
``node.apply((x1, x2))[0]``, for a fresh node of one output, which computes it with
``_forward1(xp, x)`` (or ``_forward2(xp, x1, x2)``: its own, or ``FunctionNode``'s,
which calls ``forward``). Where the inputs are Variables of one library, functions
run eagerly, no hook is registered and no write in place since they were computed
can have changed them, they check, compute and link in one call; anything else (raw
arrays, define-then-run, hooks, debug mode, inputs computed before a write in place,
type checks) goes through ``apply``, the general path.
``set_enabled(False)`` sends every call there.

The two are made from one template each, with the linking of
:data:`agnograd.core._link.LINK` in their bodies. :func:`specialise1` and
:func:`specialise_operator` make from the same templates
the function of one node class whose forward is one expression (``xp.tanh(x)``,
``x * value``), written into its body: such a function makes its node only when it
links one, and calls nothing but the computation, the node's constructor and
``_new_variable`` on the way.
"""

from __future__ import annotations

import builtins
import textwrap
from typing import Any

import numpy

from agnograd.backends._backend import (
    NUMBERS,
    NUMPY_SCALARS,
    SCALARS,
    _namespaces,
    scalar_operand,
    scalar_operands,
)
from agnograd.core import _link
from agnograd.core._config import MODE, LevelHooks
from agnograd.core._function import FunctionNode
from agnograd.core._function_checks import _forward_failed, _output_tuple
from agnograd.core._variable import Variable, _new_variable

#: Whether the fast paths run (see :func:`set_enabled`).
enabled = True

# The globals of each function _render made: each reads ``enabled`` from its own.
_rendered: list[dict[str, Any]] = []


def set_enabled(on: bool) -> None:
    """Run agnograd's own nodes through the fast paths (the default) or, with False,
    through ``FunctionNode.apply`` alone, as user-defined nodes run."""
    global enabled
    enabled = bool(on)
    for namespace in _rendered:
        namespace["enabled"] = enabled


# Whether the input Variable ``{0}`` may skip the general path's check that no write
# in place changed it since it was computed (agnograd.core._versions.check_inputs),
# while some memory written in place is alive: it is a leaf, or was computed after
# the last such write. Only Variables computed before a write take the general path.
# (A Variable without a node is of no graph: it has no creator.)
_FRESH = "({0}._n is None or {0}._n.version == _graph_clock[0] or {0}._n._creator is None)"

# Whether either input of _TWO requires a gradient (one of no graph has no node).
_WANTED2 = "(n1 is not None and n1.requires_grad or n2 is not None and n2.requires_grad)"

# A Variable of no graph around ``y``, without a call: agnograd.core._variable's
# _plain_variable, whose ``y`` is never NumPy's scalar here (see _ONE).
_PLAIN = """\
var = _object_new(Variable)
var._data = y
var._grad_var = None
var._n = var._t = None
return var"""
_PLAIN_IN_PUSH = textwrap.indent(_PLAIN, " " * 4)  # (under an ``if`` of _PUSH1, _PUSH2)

# The body of a function of one array ``x``. ``{make}`` gives the node, ``{compute}``
# the output ``y`` from ``data`` (of namespace ``xp``); ``{ready}`` and
# ``{differentiable}`` check a node given as the argument ``func`` (a node class's own
# function knows their answers), ``{before}`` prepares to compute, ``{made}`` makes
# the node that links, where none was given, and ``{setup}`` tells it what its
# backward reads besides what it keeps.
_ONE = """\
if x.__class__ is Variable and enabled{ready} and (not _graph_writes or {fresh}):
    backprop, auto_forward, hooks = MODE.get()
    data = x._data
    node = x._n
    try:
        xp = _namespaces[data.__class__]
    except KeyError:  # (a class not seen yet: the general path)
        xp = None
    if (
        auto_forward
        and xp is not None
        and (
            not hooks
            or hooks.__class__ is LevelHooks{differentiable}
            and not (backprop and node is not None and node.requires_grad)
        )
    ):
        {before}
        try:
            y = {compute}
        except Exception as error:
            _forward_failed(error, {make}, (data,))
            raise
        if y.__class__ is not data.__class__:
            _output_tuple({make}, (y,))  # a NumPy scalar passes; no array is refused
            if y.__class__ in _NUMPY_SCALARS:  # a 0-d result: hold a 0-d array
                y = _numpy_asarray(y)
        if hooks:  # a jvp's level, alone: it links no graph, and pushes the tangent
{push}
        if backprop and node is not None and node.requires_grad{differentiable}:
            {made}
            {setup}
            nodes = (node,)
            arrays = (data,)
            rank = node.rank
{link}
{plain}
return {make}.apply((x,))[0]
"""

# The body of a function of two arrays ``x1`` and ``x2``: as _ONE, ``{compute}`` from
# ``a1`` and ``a2``.
_TWO = """\
if (
    x1.__class__ is Variable
    and x2.__class__ is Variable
    and enabled{ready}
    and (not _graph_writes or {fresh1} and {fresh2})
):
    backprop, auto_forward, hooks = MODE.get()
    a1 = x1._data
    a2 = x2._data
    n1 = x1._n
    n2 = x2._n
    try:
        xp = _namespaces[a1.__class__]
    except KeyError:  # (see _ONE)
        xp = None
    if (
        auto_forward
        and xp is not None
        and (a2.__class__ is a1.__class__ or _namespaces.get(a2.__class__) is xp)
        and (
            not hooks
            or hooks.__class__ is LevelHooks{differentiable}
            and not (backprop and {wanted})
        )
    ):
        {before}
        try:
            y = {compute}
        except Exception as error:
            _forward_failed(error, {make}, (a1, a2))
            raise
        if y.__class__ is not a1.__class__:
            _output_tuple({make}, (y,))
            if y.__class__ in _NUMPY_SCALARS:
                y = _numpy_asarray(y)
        if hooks:  # a jvp's level, alone: see _ONE
{push}
        if backprop and {wanted}{differentiable}:
            {made}
            if n1 is None:  # (an input of no graph yet)
                n1 = x1._node
            if n2 is None:
                n2 = x2._node
            nodes = (n1, n2)
            arrays = (a1, a2)
            rank = n1.rank if n1.rank > n2.rank else n2.rank
            rank = rank if rank > 0 else 0  # as apply: at least 0 for several inputs
{link}
{plain}
return {make}.apply((x1, x2))[0]
"""

# How a node class's own function pushes its output's tangent when a jvp's level is
# the only hook (``hooks`` a LevelHooks): what the level's push1 computes for a real
# input at that level, with the class's gradient rule written in as ``{tangent}`` (of
# ``t``; ``{fits}`` what else the rule needs); anything else (a complex or another
# real dtype, a tangent of an outer level or a Variable) goes to push1.
_PUSH1 = """\
level = hooks.level
entry = x._t if node is None else getattr(node, "_tangent", None)
if entry is None:  # a constant
{plain}
t = entry[1]
if (
    entry[0] is level
    and t.__class__ is data.__class__
    and data.dtype is _real_dtypes.get(data.__class__){fits}
):
    ty = {tangent}
    if ty.__class__ is not y.__class__:
        ty = xp.asarray(ty)
    var = _object_new(Variable)
    var._data = y
    var._grad_var = None
    var._n = None
    var._t = (level, ty, None)
    return var
{made}
return level.push1(func, x, y)"""

# As _PUSH1, for two arrays: the sum of the operands' tangents ``{tangent1}`` of
# ``t1`` and ``{tangent2}`` of ``t2`` (push2's).
_PUSH2 = """\
level = hooks.level
e1 = x1._t if n1 is None else getattr(n1, "_tangent", None)
e2 = x2._t if n2 is None else getattr(n2, "_tangent", None)
if e1 is None and e2 is None:  # constants
{plain}
real = _real_dtypes.get(a1.__class__)
if (
    (e1 is None or e1[0] is level and e1[1].__class__ is a1.__class__)
    and (e2 is None or e2[0] is level and e2[1].__class__ is a2.__class__)
    and a1.dtype is real
    and a2.dtype is real
):
    if e1 is not None and e2 is not None:
        t1 = e1[1]
        t2 = e2[1]
        ty = {tangent1} + {tangent2}  # (of each operand's shape at least: y's)
    else:
        if e1 is not None:
            t1 = e1[1]
            ty = {tangent1}
        else:
            t2 = e2[1]
            ty = {tangent2}
        if ty.shape != y.shape:  # its operand was broadcast
            ty = xp.broadcast_to(ty, tuple(y.shape))
    if ty.__class__ is not y.__class__:
        ty = xp.asarray(ty)
    var = _object_new(Variable)
    var._data = y
    var._grad_var = None
    var._n = None
    var._t = (level, ty, None)
    return var
{made}
return level.push2(func, x1, x2, y)"""

#: The real dtype met last, by class of array: forward mode's tangent of a real input
#: is its gradient rule with the tangent in place of the gradient (no conjugation).
#: agnograd.transforms._tangent_rules fills it in; the functions' _PUSH1 read it.
real_dtypes: dict[type, Any] = {}

# How a scalar node's function finds ``operand``, what its library's operator takes
# for the Python scalar ``value``: a 0-d array made once per number and dtype where
# that gives the same result faster (agnograd.backends._backend.scalar_operand).
_OPERAND = """\
operand = value
cache = _scalar_operands.get(xp)
if cache is not False and value.__class__ in _NUMBERS:
    made = None if cache is None else cache.get((value, data.dtype))
    if made is None:
        made = _scalar_operand(xp, data, value)
    if made is not False:
        operand = made"""

# What the bodies read besides their arguments and the names given to _render.
_NAMES: dict[str, Any] = {
    "LevelHooks": LevelHooks,
    "MODE": MODE,
    "SCALARS": SCALARS,
    "Variable": Variable,
    "_forward_failed": _forward_failed,
    "_namespaces": _namespaces,
    "_new_variable": _new_variable,
    "_object_new": object.__new__,
    "_NUMPY_SCALARS": NUMPY_SCALARS,
    "_numpy_asarray": numpy.asarray,
    "_output_tuple": _output_tuple,
    "_scalar_operands": scalar_operands,
    "_scalar_operand": scalar_operand,
    "_NUMBERS": NUMBERS,
    "_real_dtypes": real_dtypes,
    **{name: getattr(_link, name) for name in _link.LINK_NAMES},
}


def _body(
    template: str,
    compute: str,
    make: str = "func",
    setup: str = "pass",
    before: str = "pass",
    keeps: _link.Keeps | None = None,
    push: str | None = None,
) -> str:
    """``template`` filled in: for the node given as the argument ``func``, or, with
    ``make``, for a node class's own function that makes its node with ``make`` (the
    class must check no types and be differentiable: see _own), which ``keeps`` what
    it keeps written in (see agnograd.core._link.link_source) and hands a jvp's level
    its result with ``push`` (_PUSH1 or _PUSH2 filled in; by default the level's own
    push1 or push2 takes the node)."""
    given = make == "func"
    made = "pass" if given else f"func = {make}\nfunc.xp = xp"
    if push is None:
        call = "push1(func, x, y)" if template is _ONE else "push2(func, x1, x2, y)"
        push = f"{made}\nreturn hooks.level.{call}"
    return template.format(
        compute=compute,
        setup=setup,
        make=make,
        ready=" and not func._checks_types" if given else "",
        fresh=_FRESH.format("x"),
        fresh1=_FRESH.format("x1"),
        fresh2=_FRESH.format("x2"),
        differentiable=" and func.differentiable" if given else "",
        before="func.xp = xp" if given else before.replace("\n", "\n" + " " * 8),
        made=made.replace("\n", "\n" + " " * 12),
        push=textwrap.indent(push.format(made=made, plain=_PLAIN_IN_PUSH), " " * 12),
        link=textwrap.indent(_link.link_source(keeps, record_output=False), " " * 12),
        plain=textwrap.indent(_PLAIN, " " * 8),
        wanted=_WANTED2,
    )


def _render(signature: str, body: str, **names: Any) -> Any:
    """The function ``def {signature}: {body}``, whose globals are ``names``, what
    all bodies read (_NAMES) and :data:`enabled` (which :func:`set_enabled` sets in
    them). Globals, not a closure's cells, which a call copies into its frame and
    releases on return (a few percent of an operation)."""
    namespace = {**_NAMES, **names, "enabled": enabled, "__builtins__": builtins}
    _rendered.append(namespace)
    source = f"def {signature}:\n" + textwrap.indent(body, "    ")
    return _link.render(source, namespace)


#: ``apply1(func, x)``: ``func.apply((x,))[0]``, in one call where it can.
apply1 = _render("apply1(func, x)", _body(_ONE, "func._forward1(xp, data)"))
#: ``apply2(func, x1, x2)``: ``func.apply((x1, x2))[0]``, in one call where it can.
apply2 = _render(
    "apply2(func, x1, x2)",
    _body(_TWO, "func._forward2(xp, a1, a2)"),
)


def _own(
    template: str, node: type[FunctionNode], compute: str, make: str = "Node()", **parts: Any
) -> str:
    """The body of the function of the node class ``node`` (made by ``make``), whose
    forward is ``compute`` (and ``parts``: ``setup``, ``before``, ``push``, see _body): the
    class must check no types and be differentiable, which its function takes for
    given, and its nodes keep what the class says (no ``__init__`` of it changes
    that), which the function writes in."""
    assert not node._checks_types, node
    assert node.differentiable, node
    for cls in node.__mro__:
        init = vars(cls).get("__init__")
        names = set(getattr(getattr(init, "__code__", None), "co_names", ()))
        assert not names & {"_retain_in", "_retain_out", "retain_inputs", "retain_outputs"}, cls
    inputs = 1 if template is _ONE else 2
    keeps = (node._retain_in, node._retain_out, inputs, node._gradient_reads)
    return _body(template, compute, make, keeps=keeps, **parts)


def _pushes(tangent: str | None, fits: str = "") -> str | None:
    """_PUSH1's ``push`` for the tangent expression ``tangent``; None for none."""
    if tangent is None:
        return None
    return _PUSH1.format(tangent=tangent, fits=fits, made="{made}", plain="{plain}")


def specialise1(
    name: str,
    node: type[FunctionNode],
    expression: str,
    tangent: str | None = None,
    **names: Any,
) -> Any:
    """The function ``name(x)`` that applies a new ``node()`` to ``x``, as ``apply1``
    does, with its forward written in: ``expression`` gives ``y`` from ``data`` and
    ``xp`` (and ``names``). With ``tangent``, the expression of the tangent of ``y``
    from that of a real ``data``, ``t`` (``Node`` is ``node``), a jvp's level gets
    it written in too (an elementwise row's: its gradient rule with the tangent in
    place of the gradient, read from the class as it runs).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.core._fast import specialise1
    >>> import agnograd.functions as F
    >>> tanh = specialise1("tanh", F.tanh.node, "xp.tanh(data)")
    >>> y = tanh(agnograd.Variable(np.zeros(2)))
    >>> y, type(y.creator_node).__name__
    (variable([0., 0.]), 'Tanh')
    """
    body = _own(_ONE, node, expression, push=_pushes(tangent))
    return _render(f"{name}(x, /)", body, Node=node, **names)


def specialise_operator(
    name: str,
    node: type[FunctionNode],
    compute: str,
    scalar_node: type[FunctionNode],
    scalar_compute: str,
    operand: bool = True,
    reflected: bool = False,
    scalar_tangent: str | None = None,
    tangents: tuple[str, str] | None = None,
    **names: Any,
) -> Any:
    """The function ``name(x1, x2)`` of a binary operator: ``node()`` applied to two
    arrays, whose forward is ``compute`` (of ``a1`` and ``a2``), or, where ``x2`` is
    a Python scalar, ``scalar_node(x2)`` applied to ``x1``, whose forward is
    ``scalar_compute`` of ``data`` and ``operand``: what the library's operator takes
    for the number ``value``, the number or a 0-d array that stands for it, which
    the node keeps as ``_operand`` (None for the number) for its backward. Without
    ``operand`` (``**``, which NumPy and PyTorch compute otherwise with a 0-d array:
    ``t ** 2.0`` squares), ``operand`` is ``value``. A ``reflected`` operator
    (``__rmul__``) has the Variable ``x1`` on the right: ``node()`` applies to
    ``(x2, x1)``, and ``scalar_compute`` reads the number on the left. With
    ``scalar_tangent`` (the expression of ``y``'s tangent from ``t``, that of a real
    ``data``) and ``tangents`` (the terms of ``t1`` and ``t2``, those of real ``a1``
    and ``a2``, whose sum is the tangent), a jvp's level gets them written in, as
    ``specialise1``'s ``tangent``; ``names`` are what those expressions read."""
    parts = {"before": _OPERAND, "setup": "func._operand = None if operand is value else operand"}
    scalar = _own(
        _ONE,
        scalar_node,
        scalar_compute,
        "Scalar(value)",
        push=_pushes(scalar_tangent, fits="\n    and y.dtype is data.dtype"),
        **(parts if operand else {"before": "operand = value"}),
    )
    push = None
    if tangents is not None:
        push = _PUSH2.format(
            tangent1=tangents[0], tangent2=tangents[1], made="{made}", plain="{plain}"
        )
    body = "if type(x2) in SCALARS:\n    x = x1\n    value = x2\n{}{}{}".format(
        textwrap.indent(scalar, "    "),
        "x1, x2 = x2, x1\n" if reflected else "",
        _own(_TWO, node, compute, push=push),
    )
    return _render(f"{name}(x1, x2, /)", body, Node=node, Scalar=scalar_node, **names)
