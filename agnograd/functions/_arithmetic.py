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
from agnograd.core._link import kept_inputs
from agnograd.core._variable import Variable
from agnograd.functions._core import conjugate, is_complex
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

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


class Operator(FunctionNode):
    """The node of ``x1 {symbol} x2``, a Python operator between two arrays."""

    broadcasts = True
    #: The operator, which the fast path writes into the function of the node.
    symbol: str
    _operator: Callable[[Any, Any], Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._operator = staticmethod(_OPERATORS[cls.symbol])

    def _forward2(self, xp: Any, x1: Any, x2: Any) -> Any:
        return self._operator(x1, x2)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._operator(inputs[0], inputs[1]),)


def sum_of_tangents(xp: Any, tangents: Any, y: Any, negated: tuple[int, ...] = ()) -> Any:
    """The sum of ``tangents`` (less those at ``negated``) in ``y``'s shape: forward
    mode's rule of ``+`` and ``-`` (an input without a tangent, None, adds nothing)."""
    total = None
    for i, t in enumerate(tangents):
        if t is not None:
            t = -t if i in negated else t
            total = t if total is None else total + t
    if total is not None and tuple(total.shape) != tuple(y.shape):
        total = xp.broadcast_to(total, tuple(y.shape))
    return total


class Add(Operator):
    symbol = "+"

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        t1, t2 = tangents
        if t1 is not None and t2 is not None:
            return (t1 + t2,)  # the common case at once: broadcast as the inputs were
        return (sum_of_tangents(xp, tangents, outputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return grad_outputs * len(indexes)


class WithScalar(FunctionNode):
    """The node of ``x {symbol} value`` (``value {symbol} x`` where ``reflected``), a
    Python operator between an array and the Python scalar ``value``."""

    __slots__ = ("value",)
    symbol: str
    reflected = False
    # The 0-d array that the eager forward took for ``value`` (agnograd.core._fast's
    # specialise_operator), or None where it took the number: see _times.
    _operand: Any = None

    def _times(self, gy: Any) -> Any:
        """What the backward multiplies ``gy`` by (or divides it by): the forward's
        0-d array for ``value`` where it has ``gy``'s dtype (its own conjugate, the
        number being real), else the number's conjugate (another run of the node,
        say with float64 data after float32, may have kept another dtype's)."""
        operand = self._operand
        if operand is not None and operand.dtype is gy.dtype:
            return operand
        return self.value.conjugate()

    _gradients_fit = True  # elementwise, of one array
    _operator: Callable[[Any, Any], Any]

    def __init__(self, value: Any) -> None:
        self.value = value

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._operator = staticmethod(_OPERATORS[cls.symbol])

    def _forward1(self, xp: Any, x: Any) -> Any:
        return self._operator(self.value, x) if self.reflected else self._operator(x, self.value)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._forward1(self.xp, inputs[0]),)


class AddConstant(WithScalar):
    symbol = "+"

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        return tuple(tangents)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return grad_outputs


class Sub(Operator):
    symbol = "-"

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        t1, t2 = tangents
        if t1 is not None and t2 is not None:
            return (t1 - t2,)  # as Add's
        return (sum_of_tangents(xp, tangents, outputs[0], (1,)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return tuple([gy if i == 0 else -gy for i in indexes])


class SubConstant(WithScalar):
    symbol = "-"

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        return tuple(tangents)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return grad_outputs


class SubFromConstant(WithScalar):
    symbol = "-"
    reflected = True

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        return (-tangents[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (-grad_outputs[0],)


class Mul(Operator):
    symbol = "*"
    bilinear = True  # forward mode: t1 * x2 + x1 * t2
    _retain_in = (0, 1)
    _gradient_reads = ((1,), (0,))  # each operand's gradient reads the other

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x0, x1 = kept_inputs(self, indexes)
        (gy,) = grad_outputs
        if is_complex(gy):
            xp = namespace_of(gy)
            x0 = None if x0 is None else conjugate(xp, x0)  # (None: not kept, not read)
            x1 = None if x1 is None else conjugate(xp, x1)
        if indexes == (0, 1):  # the common case written out: a comprehension costs a frame
            return (gy * x1, gy * x0)
        return tuple([gy * (x1 if i == 0 else x0) for i in indexes])


class MulConstant(WithScalar):
    symbol = "*"
    linear = True  # forward mode: applied to the tangent

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        gy = grad_outputs[0]
        return (gy * self._times(gy),)


class MulFromConstant(MulConstant):
    """``value * x``: NumPy's complex product differs from ``x * value`` in the sign
    of a zero (an underflow)."""

    reflected = True


class Div(Operator):
    symbol = "/"
    _retain_in = (0, 1)
    _gradient_reads = ((1,), (0, 1))  # x0's gradient reads x1 alone

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        # d(x0 / x1) = (t0 - y t1) / x1
        (t0, t1), x1, y = tangents, inputs[1], outputs[0]
        top = t0 if t1 is None else -y * t1 if t0 is None else t0 - y * t1
        return (sum_of_tangents(xp, (top / x1,), y),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x0, x1 = kept_inputs(self, indexes)
        (gy,) = grad_outputs
        if is_complex(gy):
            xp = namespace_of(gy)
            x0 = None if x0 is None else conjugate(xp, x0)  # (None: not kept, not read)
            x1 = None if x1 is None else conjugate(xp, x1)
        gx0 = gy / x1
        return tuple([gx0 if i == 0 else -gx0 * x0 / x1 for i in indexes])


class DivConstant(WithScalar):
    symbol = "/"
    linear = True  # forward mode: applied to the tangent

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        gy = grad_outputs[0]
        return (gy / self._times(gy),)


class DivFromConstant(WithScalar):
    symbol = "/"
    reflected = True
    _retain_in = (0,)
    _retain_out = (0,)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        return (-tangents[0] * (outputs[0] / inputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        (y,) = self.get_retained_outputs()
        gy = grad_outputs[0]
        return (-gy * conjugate(namespace_of(gy), y / x),)


class Pow(Operator):
    symbol = "**"
    _retain_in = (0, 1)

    @staticmethod
    def _derivative(xp: Any, x0: Any, x1: Any, i: int, complex_: bool) -> Any:
        """``d(x0 ** x1)/dx_i``, which backward conjugates and forward mode takes."""
        if i == 0:
            if complex_:
                return x1 * x0 ** (x1 - 1)
            # The gradient of 0 ** 0 is 0, where the formula gives 0 * inf: a base
            # of 1 there makes it 0 * 1. Only there: masking all of x1 == 0 would
            # lose the second derivative d2/dx0dx1 = 1 / x0 at x0 != 0.
            base = xp.where(xp.logical_and(x1 == 0, x0 == 0), 1.0, x0)
            return x1 * base ** (x1 - 1)
        if complex_:
            return x0**x1 * xp.log(x0)
        # 0 ** x1 is flat for x1 >= 0, where the formula gives 0 * -inf: a
        # base of 1 there makes it 1 * log(1) = 0.
        base = xp.where(xp.logical_and(x0 == 0, x1 >= 0), 1.0, x0)
        return base**x1 * xp.log(base)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        x0, x1 = inputs
        complex_ = is_complex(outputs[0])
        terms = [
            t * self._derivative(xp, x0, x1, i, complex_)
            for i, t in enumerate(tangents)
            if t is not None
        ]
        return (sum_of_tangents(xp, terms, outputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x0, x1 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        complex_ = is_complex(gy)
        return tuple(
            [gy * conjugate(xp, self._derivative(xp, x0, x1, i, complex_)) for i in indexes]
        )


class PowConstant(WithScalar):
    symbol = "**"
    _retain_in = (0,)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (x,), (t,), c = inputs, tangents, self.value
        if c == 2:
            return (t * 2 * x,)
        if c == 0:
            return (xp.zeros_like(t),)
        return (t * (c * x ** (c - 1)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        gy = grad_outputs[0]
        c = self.value
        if c == 2:
            return (gy * 2 * conjugate(namespace_of(gy), x),)
        if c == 0:
            return (namespace_of(gy).zeros_like(gy),)
        return (gy * conjugate(namespace_of(gy), c * x ** (c - 1)),)


class PowFromConstant(WithScalar):
    symbol = "**"
    reflected = True

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        if value == 0:
            # 0 ** x is flat for x >= 0: the rule needs x to say where.
            self._retain_in = (0,)

    _retain_out = (0,)

    def _log_value(self) -> Any:
        value = self.value
        if type(value) is complex:
            return cmath.log(value)
        return math.log(value) if value > 0 else math.nan

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        (t,) = tangents
        if self.value == 0:
            return (xp.where(inputs[0] >= 0, 0.0, -math.inf * t),)
        return (t * outputs[0] * self._log_value(),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (y,) = self.get_retained_outputs()
        gy = grad_outputs[0]
        xp = namespace_of(gy)
        if self.value == 0:
            (x,) = self.get_retained_inputs()
            return (xp.where(x >= 0, 0.0, -math.inf * gy),)
        return (gy * conjugate(xp, y) * self._log_value().conjugate(),)


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
    )


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
