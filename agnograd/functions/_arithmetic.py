"""The arithmetic of the elementwise chapter: ``add``, ``subtract``, ``multiply``,
``divide`` and ``pow``, the functions that Variable's operators call.

Each is a node of two arrays (:class:`Operator`) with a node of its own for a Python
scalar operand (:class:`WithScalar`), so that ``x - 0`` or ``2.0 * z`` computes the
expression it stands for, as the library would; the fast path writes each node's
operator into its function (agnograd.core._fast). The conventions where a
derivative is undefined are listed in ``_elementwise.py``.
"""

from __future__ import annotations

import cmath
import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agnograd.backends._backend import SCALARS
from agnograd.core._fast import apply1, specialise_operator
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import conjugate, is_complex
from agnograd.functions._operator_rows import operator_backward, scalar_backward
from agnograd.functions._rows import Rows
from agnograd.functions._rule_source import written_in

ROWS = Rows(__name__)


# -- binary arithmetic (the operators' functions) -----------------------------------

# A Python operator's symbol -> the operator.
_OPERATORS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "**": operator.pow,
}
_REFLECTED = {
    "+": "__radd__",
    "-": "__rsub__",
    "*": "__rmul__",
    "/": "__rtruediv__",
    "**": "__rpow__",
}


# -- the rules: per operand, d(x1 op x2)/dx_k times gy (conjugated: PyTorch's convention),
# in the form of the binary rows (_core.Binary), with what each reads. A node with a
# Python scalar takes its array operand's, the scalar in the other's place.


def _gy(xp: Any, x1: Any, x2: Any, y: Any, gy: Any) -> Any:
    return gy


def _minus_gy(xp: Any, x1: Any, x2: Any, y: Any, gy: Any) -> Any:
    return -gy


def _times_x2(xp: Any, x1: Any, x2: Any, y: Any, gy: Any) -> Any:
    return gy * conjugate(xp, x2)


def _times_x1(xp: Any, x1: Any, x2: Any, y: Any, gy: Any) -> Any:
    return gy * conjugate(xp, x1)


def _over_x2(xp: Any, x1: Any, x2: Any, y: Any, gy: Any) -> Any:
    return gy / conjugate(xp, x2)


def _divisor(xp: Any, x1: Any, x2: Any, y: Any, gy: Any) -> Any:
    x2 = conjugate(xp, x2)
    return -(gy / x2) * conjugate(xp, x1) / x2


def _pow_derivative(xp: Any, x1: Any, x2: Any, i: int, complex_: bool) -> Any:
    """``d(x1 ** x2)/dx_i``."""
    if i == 0:
        if complex_:
            return x2 * x1 ** (x2 - 1)
        # The gradient of 0 ** 0 is 0, where the formula gives 0 * inf: a base
        # of 1 there makes it 0 * 1. Only there: masking all of x2 == 0 would
        # lose the second derivative d2/dx1dx2 = 1 / x1 at x1 != 0.
        base = xp.where(xp.logical_and(x2 == 0, x1 == 0), 1.0, x1)
        return x2 * base ** (x2 - 1)
    if complex_:
        return x1**x2 * xp.log(x1)
    # 0 ** x2 is flat for x2 >= 0, where the formula gives 0 * -inf: a
    # base of 1 there makes it 1 * log(1) = 0.
    base = xp.where(xp.logical_and(x1 == 0, x2 >= 0), 1.0, x1)
    return base**x2 * xp.log(base)


def _pow_base(xp: Any, x1: Any, x2: Any, y: Any, gy: Any) -> Any:
    return gy * conjugate(xp, _pow_derivative(xp, x1, x2, 0, is_complex(gy)))


def _pow_exponent(xp: Any, x1: Any, x2: Any, y: Any, gy: Any) -> Any:
    return gy * conjugate(xp, _pow_derivative(xp, x1, x2, 1, is_complex(gy)))


def _pow_constant(xp: Any, x: Any, c: Any, y: Any, gy: Any) -> Any:
    # x ** 2 and x ** 0 exactly (the formula gives 2 * x ** 1, and 0 * inf at 0).
    if c == 2:
        return gy * 2 * conjugate(xp, x)
    if c == 0:
        return xp.zeros_like(gy)
    return gy * conjugate(xp, c * x ** (c - 1))


def _log(value: Any) -> Any:
    if type(value) is complex:
        return cmath.log(value)
    return math.log(value) if value > 0 else math.nan


def _pow_from_constant(xp: Any, c: Any, x: Any, y: Any, gy: Any) -> Any:
    if c == 0:  # 0 ** x is flat for x >= 0
        return xp.where(x >= 0, 0.0, -math.inf * gy)
    return gy * conjugate(xp, y) * _log(c).conjugate()


# The Operator class of each symbol, whose rules its nodes with a scalar take.
_BY_SYMBOL: dict[str, type[Operator]] = {}


class Operator(FunctionNode):
    """The node of ``x1 {symbol} x2``, a Python operator between two arrays: a row of
    two operands, whose ``rules`` (and what each ``reads``) give what it keeps, its
    backward (agnograd.functions._operator_rows), its tangents and a plan's lines."""

    broadcasts = True
    #: The operator, which the fast path writes into the function of the node.
    symbol: str
    rules: tuple[Any, Any]
    reads: tuple[str, str]
    which = (0, 1)  # the operands that are inputs (as Binary's)
    _row_backward: Callable[..., tuple[Any, ...]]  # the backward its rules made
    _operator: Callable[[Any, Any], Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._operator = staticmethod(_OPERATORS[cls.symbol])
        operands = [tuple(k for k in (0, 1) if f"x{k + 1}" in r.split()) for r in cls.reads]
        cls._retain_in = tuple(sorted(set().union(*operands)))
        cls._retain_out = (0,) if any("y" in r.split() for r in cls.reads) else ()
        if any(r != cls._retain_in for r in operands):  # each keeps what its gradient reads
            cls._gradient_reads = tuple(operands)
        if "backward" not in vars(cls):  # (a subclass's own stays)
            cls.backward = cls._row_backward = operator_backward(cls)  # type: ignore[method-assign]
        _BY_SYMBOL[cls.symbol] = cls

    def _fill(self, arrays: Any) -> Any:
        return arrays

    def _forward2(self, xp: Any, x1: Any, x2: Any) -> Any:
        return self.forward((x1, x2))[0]

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x1, x2 = inputs
        try:
            return (self._operator(x1, x2),)
        except TypeError:
            # array-api-strict's operators raise for an operand they do not know (vmap's
            # batched array) where Python's protocol returns NotImplemented, which would
            # ask the other operand's reflected operator: ask it here.
            reflected = getattr(type(x2), _REFLECTED[self.symbol], None)
            out = NotImplemented if reflected is None else reflected(x2, x1)
            if out is NotImplemented:
                raise
            return (out,)


def sum_of_tangents(xp: Any, tangents: Any, y: Any, negated: tuple[int, ...] = ()) -> Any:
    """The sum of ``tangents`` (less those at ``negated``) in ``y``'s shape: forward
    mode's rule of a sum (an input without a tangent, None, adds nothing)."""
    total = None
    for i, t in enumerate(tangents):
        if t is not None:
            t = -t if i in negated else t
            total = t if total is None else total + t
    if total is not None and tuple(total.shape) != tuple(y.shape):
        total = xp.broadcast_to(total, tuple(y.shape))
    return total


class WithScalar(FunctionNode):
    """The node of ``x {symbol} value`` (``value {symbol} x`` where ``reflected``), a
    Python operator between an array and the Python scalar ``value``: the rule of
    its operator's operand that is the array, ``value`` the other (see Operator)."""

    __slots__ = ("value",)
    symbol: str
    reflected = False
    rules: tuple[Any, Any]
    reads: tuple[str, str]
    which: tuple[int]
    _row_backward: Callable[..., tuple[Any, ...]]  # the backward its rule made
    # The 0-d array that the eager forward took for ``value`` (agnograd.core._fast's
    # specialise_operator), or None where it took the number: the backward reads it
    # in place of the number where it has the gradient's dtype.
    _operand: Any = None

    _gradients_fit = True  # elementwise, of one array
    _operator: Callable[[Any, Any], Any]

    def __init__(self, value: Any) -> None:
        self.value = value

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._operator = staticmethod(_OPERATORS[cls.symbol])
        if "rules" not in vars(cls):
            cls.rules, cls.reads = _BY_SYMBOL[cls.symbol].rules, _BY_SYMBOL[cls.symbol].reads
        k = 1 if cls.reflected else 0
        cls.which = (k,)
        reads = cls.reads[k].split()
        if "_retain_in" not in vars(cls):
            cls._retain_in = (0,) if f"x{k + 1}" in reads else ()
        cls._retain_out = (0,) if "y" in reads else ()
        if "backward" not in vars(cls):  # (a subclass's own stays)
            cls.backward = cls._row_backward = scalar_backward(cls)  # type: ignore[method-assign]

    def _fill(self, arrays: Any) -> Any:
        return (self.value, arrays[0]) if self.reflected else (arrays[0], self.value)

    def _forward1(self, xp: Any, x: Any) -> Any:
        return self._operator(self.value, x) if self.reflected else self._operator(x, self.value)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._forward1(self.xp, inputs[0]),)


class Add(Operator):
    symbol = "+"
    rules = (_gy, _gy)
    reads = ("", "")


class AddConstant(WithScalar):
    symbol = "+"


class Sub(Operator):
    symbol = "-"
    rules = (_gy, _minus_gy)
    reads = ("", "")


class SubConstant(WithScalar):
    symbol = "-"


class SubFromConstant(WithScalar):
    symbol = "-"
    reflected = True


class Mul(Operator):
    symbol = "*"
    bilinear = True  # forward mode: t1 * x2 + x1 * t2 (no conjugation of complex tangents)
    rules = (_times_x2, _times_x1)
    reads = ("x2", "x1")


class MulConstant(WithScalar):
    symbol = "*"
    linear = True  # forward mode: applied to the tangent


class MulFromConstant(MulConstant):
    """``value * x``: NumPy's complex product differs from ``x * value`` in the sign
    of a zero (an underflow)."""

    reflected = True


class Div(Operator):
    symbol = "/"
    rules = (_over_x2, _divisor)
    reads = ("x2", "x1 x2")


class DivConstant(WithScalar):
    symbol = "/"
    linear = True  # forward mode: applied to the tangent


class DivFromConstant(WithScalar):
    symbol = "/"
    reflected = True


class Pow(Operator):
    symbol = "**"
    rules = (_pow_base, _pow_exponent)
    reads = ("x1 x2", "x1 x2")


class PowConstant(WithScalar):
    symbol = "**"
    rules = (_pow_constant, None)
    reads = ("x1", "")


class PowFromConstant(WithScalar):
    symbol = "**"
    reflected = True
    rules = (None, _pow_from_constant)
    reads = ("", "x2 y")
    # Its rule reads x only where value is 0 (0 ** x is flat for x >= 0): kept there.
    _retain_in: tuple[int, ...] = ()

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        if value == 0:
            self._retain_in = (0,)


def _operator(
    name: str,
    node: type[Operator],
    scalar_node: type[WithScalar],
    *,
    operand: bool = True,
) -> Any:
    """The function ``name(x1, x2)`` that applies ``node``, or ``scalar_node(x2)``
    when ``x2`` is a Python scalar, on the fast path with their operators written in
    (agnograd.core._fast). A reflected ``scalar_node`` makes the function of the
    reflected operator (``__rmul__``): ``x2 * x1``, as the library computes it."""
    scalar = f"data {node.symbol} operand"
    if scalar_node.reflected:
        scalar = f"operand {node.symbol} data"
    return specialise_operator(
        name,
        node,
        f"a1 {node.symbol} a2",
        scalar_node,
        scalar,
        operand,
        reflected=scalar_node.reflected,
        scalar_tangent=_tangent_of(scalar_node, scalar, "Scalar"),
        tangents=_tangent_of(node, f"a1 {node.symbol} a2", "Node"),
        **{f"_Node{k}": rule for k, rule in enumerate(node.rules)},
        **{f"_Scalar{k}": rule for k, rule in enumerate(scalar_node.rules)},
    )


def _tangent_of(cls: Any, compute: str, name: str) -> Any:
    """The source of forward mode's tangent of the node class ``cls`` on real arrays,
    for the fast path (agnograd.core._fast), whose forward is ``compute``, read from
    its declaration as agnograd.transforms._tangent_rules reads it: a ``linear``
    class's forward of the tangent ``t``; a ``bilinear`` one's terms ``f(t1, a2)`` and
    ``f(a1, t2)``; else its ``rules`` with the tangent for the gradient (None where
    one is missing: the level's general rule then runs). The rules are read from the
    class, bound as ``name`` where the function runs, as its backward reads them."""
    if issubclass(cls, WithScalar):
        if getattr(cls, "linear", False):
            return compute.replace("data", "t").replace("operand", "value")
        k = int(cls.reflected)
        args = "value, data" if k else "data, value"
        return None if cls.rules[k] is None else _applied(cls, name, k, args, "t")
    if getattr(cls, "bilinear", False):
        return compute.replace("a1", "t1"), compute.replace("a2", "t2")
    if None in cls.rules:
        return None
    return _applied(cls, name, 0, "a1, a2", "t1"), _applied(cls, name, 1, "a1, a2", "t2")


def _applied(cls: Any, name: str, k: int, args: str, t: str) -> str:
    """The tangent of operand ``k`` by the rule of ``cls`` (bound as ``name``), of
    ``args`` and ``t``, read as the function runs: a rule of one expression written
    in (that of ``+``, which passes the gradient as it is, passes the tangent)."""
    rule = cls.rules[k]
    return written_in(f"{name}.rules[{k}]", rule, f"_{name}{k}", f"xp, {args}, y, {t}")


# The operators of Variable call these directly (an array on the left, the hot path).
# Each computes the expression it stands for, as the library would: ``x - 0`` is not
# ``x + -0`` (the sign of a zero result differs), nor ``2.0 * z`` ``z * 2.0`` (NumPy's
# complex product is not commutative in the sign of an underflow).
_add = _operator("add", Add, AddConstant)
_sub = _operator("subtract", Sub, SubConstant)
_mul = _operator("multiply", Mul, MulConstant)
_rmul = _operator("rmultiply", Mul, MulFromConstant)
_div = _operator("divide", Div, DivConstant)
_pow = _operator("pow", Pow, PowConstant, operand=False)  # x ** 2.0 squares


class MultiAdd(FunctionNode):
    """The sum of any number of arrays, broadcast against each other (Chainer's)."""

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        return (sum_of_tangents(xp, tangents, outputs[0]),)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        if len(inputs) == 1:
            return inputs
        y = inputs[0] + inputs[1]
        for x in inputs[2:]:
            y = y + x
        return (y,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        # The engine sums each gradient back to its input's shape.
        return grad_outputs * len(indexes)


def _add_two(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 + x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).add(np.array([1.0]), 2.0)
    variable([3.])
    """
    if type(x1) in SCALARS:
        x1, x2 = x2, x1
    return _add(x1, x2)


# The namespace's add, under the standard's name.
_add_two.__name__ = _add_two.__qualname__ = "add"


@ROWS.declare("add", domain=((-2.0, 2.0), (-2.0, 2.0)), namespace=_add_two)
def add(*xs: Any) -> Variable:
    """Elementwise sum of the arrays ``xs``, broadcast against each other (Chainer's
    ``F.add``); of two, either may be a Python scalar.

    The namespace's ``add`` is the standard's, of two operands: ``add(x1, x2, /)``.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> F.add(np.array([1.0]), 2.0)
    variable([3.])
    >>> x = agnograd.Variable(np.array([1.0, 2.0]))
    >>> y = F.add(x, np.array([[10.0], [20.0]]), x)
    >>> y
    variable([[12., 14.],
              [22., 24.]])
    >>> F.sum(y).backward(); x.grad
    array([4., 4.])
    """
    if len(xs) == 2:
        return _add_two(*xs)
    if not xs:
        raise TypeError("add: no arrays to add; give at least one (F.add(x1, x2, ...))")
    scalars = [i for i, x in enumerate(xs) if type(x) in SCALARS]
    if scalars:
        raise TypeError(
            f"add: operand {scalars[0]} of {len(xs)} is a Python scalar; only a sum of two "
            "takes one: add it on its own (F.add(x1, x2, x3) + 2.0)"
        )
    return MultiAdd().apply(xs)[0]


@ROWS.declare("subtract", domain=((-2.0, 2.0), (-2.0, 2.0)))
def subtract(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 - x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.subtract(1.0, np.array([3.0]))
    variable([-2.])
    """
    if type(x1) in SCALARS:
        return apply1(SubFromConstant(x1), x2)
    return _sub(x1, x2)


@ROWS.declare("multiply", domain=((-2.0, 2.0), (-2.0, 2.0)))
def multiply(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 * x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.multiply(np.array([1.5]), 2)
    variable([3.])
    """
    if type(x1) in SCALARS:
        return _rmul(x2, x1)
    return _mul(x1, x2)


@ROWS.declare("divide", domain=((-2.0, 2.0), (0.5, 2.0, True)))
def divide(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 / x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.divide(1.0, np.array([4.0]))
    variable([0.25])
    """
    if type(x1) in SCALARS:
        return apply1(DivFromConstant(x1), x2)
    return _div(x1, x2)


@ROWS.declare("pow", domain=((0.5, 2.0), (-2.0, 2.0)))
def pow(x1: Any, x2: Any, /) -> Variable:  # noqa: A001 - the standard's name
    """Elementwise ``x1 ** x2``; either side may be a Python scalar.

    ``x1`` gets a zero gradient where ``x1 == x2 == 0``, and ``x2`` where ``x1 == 0``
    and ``x2 >= 0`` (as in PyTorch; the formulas give ``0 * inf`` there).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.pow(np.array([3.0]), 2)
    variable([9.])
    """
    if type(x1) in SCALARS:
        return apply1(PowFromConstant(x1), x2)
    return _pow(x1, x2)


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead: these functions, and ROWS and the helpers imported here.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
