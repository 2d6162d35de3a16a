"""Elementwise functions of the array API standard and their gradient rules.

Every function of the standard's elementwise chapter is here: the differentiable
ones with a rule, the others (comparisons, rounding, ``sign``, ``signbit``, the
``is*`` tests, bitwise and logical functions, ``nextafter``, ``floor_divide``) as
nodes whose results require no gradient.

Where a derivative is undefined the rules follow PyTorch, the oracle of the tests:

- ``abs``: 0 at 0 (for complex ``z``: ``z / |z|``, and 0 at 0).
- ``maximum`` and ``minimum``: at a tie each operand gets half the gradient.
- ``clip``: ``x`` gets the gradient where ``min <= x <= max`` (bounds included) and
  0 elsewhere; an array ``min`` gets it where ``x < min`` (and ``min < max``), an
  array ``max`` where ``x > max`` (or ``max < min``).
- ``copysign``: ``x1`` gets ``+-1`` (0 where ``x1`` is 0); ``x2`` gets nothing.
- ``remainder``: ``d/dx1 = 1``, ``d/dx2 = -floor(x1 / x2)``; the jumps are ignored.
- ``pow``: ``x1`` gets 0 where ``x1 == x2 == 0``; ``x2`` gets 0 where ``x1 == 0``
  and ``x2 >= 0`` (real dtypes). PyTorch masks all of ``x2 == 0`` for ``x1``: the
  same at first order, but its mixed second derivative ``d2/dx1dx2`` is then 0
  there instead of ``1 / x1``.
- ``hypot``: 0 at ``(0, 0)`` (PyTorch gives nan there).

Complex inputs follow PyTorch's conjugate Wirtinger convention: for a real loss
``L``, ``x.grad`` is ``dL/d(conj x)`` as PyTorch computes it, so the rule of a
holomorphic ``f`` multiplies the upstream gradient by ``conj(f'(z))``. The
conjugation is skipped for real dtypes.
"""

from __future__ import annotations

import cmath
import math
from collections.abc import Callable
from typing import Any

from agnograd._backend import SCALARS
from agnograd._function import FunctionNode
from agnograd._namespace import namespace_of
from agnograd._variable import Variable
from agnograd.functions._core import ARRAY, nondifferentiable, unary

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

# id(dtype) -> (dtype, is it complex): rules ask on every call. Keyed by identity,
# which needs no hashing (NumPy hashes a dtype anew each time) and never compares
# dtypes of two libraries (array_api_strict warns when compared with NumPy's).
_complex_dtypes: dict[int, tuple[Any, bool]] = {}


def _is_complex(a: Any) -> bool:
    """Whether the array or Variable ``a`` has a complex dtype."""
    dtype = a.dtype
    known = _complex_dtypes.get(id(dtype))
    if known is not None and known[0] is dtype:
        return known[1]
    result = bool(namespace_of(a).isdtype(dtype, "complex floating"))
    if len(_complex_dtypes) > 1024:  # dtype objects made per array: keep it bounded
        _complex_dtypes.clear()
    _complex_dtypes[id(dtype)] = (dtype, result)
    return result


def _c(xp: Any, a: Any) -> Any:
    """``conj(a)`` for complex arrays, ``a`` itself for real ones and Python scalars."""
    if type(a) in SCALARS:
        return a.conjugate()
    # Every rule calls this: the cache of _is_complex is read here without a call.
    dtype = a.dtype
    known = _complex_dtypes.get(id(dtype))
    if known is not None and known[0] is dtype:
        return xp.conj(a) if known[1] else a
    return xp.conj(a) if _is_complex(a) else a


# -- unary functions: name, what the rule reads, rule(xp, x, y, gy) ----------------

exp = unary(
    "exp",
    "y",
    lambda xp, x, y, g: g * _c(xp, y),
    """Elementwise exponential.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.exp(np.array([0.0, 1.0]))
    variable([1.        , 2.71828183])
    """,
)
expm1 = unary(
    "expm1",
    "y",
    lambda xp, x, y, g: g * _c(xp, y + 1),
    """Elementwise ``exp(x) - 1``, accurate for small ``x``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.expm1(np.array([0.0, 1e-10]))
    variable([0.e+00, 1.e-10])
    """,
)
log = unary(
    "log",
    "x",
    lambda xp, x, y, g: g / _c(xp, x),
    """Elementwise natural logarithm.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.log(np.array([1.0]))
    variable([0.])
    """,
)
log1p = unary(
    "log1p",
    "x",
    lambda xp, x, y, g: g / _c(xp, 1 + x),
    """Elementwise ``log(1 + x)``, accurate for small ``x``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.log1p(np.array([0.0, 1e-10]))
    variable([0.e+00, 1.e-10])
    """,
)
log2 = unary(
    "log2",
    "x",
    lambda xp, x, y, g: g / _c(xp, x * _LN2),
    """Elementwise base-2 logarithm.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.log2(np.array([1.0, 8.0]))
    variable([0., 3.])
    """,
)
log10 = unary(
    "log10",
    "x",
    lambda xp, x, y, g: g / _c(xp, x * _LN10),
    """Elementwise base-10 logarithm.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.log10(np.array([1.0, 100.0]))
    variable([0., 2.])
    """,
)
sin = unary(
    "sin",
    "x",
    lambda xp, x, y, g: g * _c(xp, xp.cos(x)),
    """Elementwise sine.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.sin(np.array([0.0]))
    variable([0.])
    """,
)
cos = unary(
    "cos",
    "x",
    lambda xp, x, y, g: -g * _c(xp, xp.sin(x)),
    """Elementwise cosine.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.cos(np.array([0.0]))
    variable([1.])
    """,
)
tan = unary(
    "tan",
    "y",
    lambda xp, x, y, g: g * _c(xp, 1 + y * y),
    """Elementwise tangent.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.tan(np.array([0.0]))
    variable([0.])
    """,
)
sinh = unary(
    "sinh",
    "x",
    lambda xp, x, y, g: g * _c(xp, xp.cosh(x)),
    """Elementwise hyperbolic sine.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.sinh(np.array([0.0]))
    variable([0.])
    """,
)
cosh = unary(
    "cosh",
    "x",
    lambda xp, x, y, g: g * _c(xp, xp.sinh(x)),
    """Elementwise hyperbolic cosine.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.cosh(np.array([0.0]))
    variable([1.])
    """,
)
tanh = unary(
    "tanh",
    "y",
    lambda xp, x, y, g: g * _c(xp, 1 - y * y),
    """Elementwise hyperbolic tangent.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.tanh(np.array([0.0]))
    variable([0.])
    """,
)
asin = unary(
    "asin",
    "x",
    lambda xp, x, y, g: g / _c(xp, xp.sqrt(1 - x * x)),
    """Elementwise inverse sine; the gradient is infinite at -1 and 1.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.asin(np.array([0.0, 1.0]))
    variable([0.        , 1.57079633])
    """,
)
acos = unary(
    "acos",
    "x",
    lambda xp, x, y, g: -g / _c(xp, xp.sqrt(1 - x * x)),
    """Elementwise inverse cosine; the gradient is infinite at -1 and 1.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.acos(np.array([1.0, 0.0]))
    variable([0.        , 1.57079633])
    """,
)
atan = unary(
    "atan",
    "x",
    lambda xp, x, y, g: g / _c(xp, 1 + x * x),
    """Elementwise inverse tangent.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.atan(np.array([0.0, 1.0]))
    variable([0.        , 0.78539816])
    """,
)
asinh = unary(
    "asinh",
    "x",
    lambda xp, x, y, g: g / _c(xp, xp.sqrt(x * x + 1)),
    """Elementwise inverse hyperbolic sine.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.asinh(np.array([0.0]))
    variable([0.])
    """,
)
acosh = unary(
    "acosh",
    "x",
    # sqrt(x - 1) * sqrt(x + 1) rather than sqrt(x * x - 1): the same for real x >= 1,
    # and the principal branch for complex x.
    lambda xp, x, y, g: g / _c(xp, xp.sqrt(x - 1) * xp.sqrt(x + 1)),
    """Elementwise inverse hyperbolic cosine; the gradient is infinite at 1.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.acosh(np.array([1.0]))
    variable([0.])
    """,
)
atanh = unary(
    "atanh",
    "x",
    lambda xp, x, y, g: g / _c(xp, 1 - x * x),
    """Elementwise inverse hyperbolic tangent; the gradient is infinite at -1 and 1.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.atanh(np.array([0.0]))
    variable([0.])
    """,
)
sqrt = unary(
    "sqrt",
    "y",
    lambda xp, x, y, g: g / _c(xp, 2 * y),
    """Elementwise square root; the gradient is infinite at 0.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.sqrt(np.array([4.0]))
    variable([2.])
    """,
)
square = unary(
    "square",
    "x",
    lambda xp, x, y, g: 2 * g * _c(xp, x),
    """Elementwise square.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.square(np.array([3.0]))
    variable([9.])
    """,
)
reciprocal = unary(
    "reciprocal",
    "y",
    lambda xp, x, y, g: -g * _c(xp, y * y),
    """Elementwise ``1 / x``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.reciprocal(np.array([4.0]))
    variable([0.25])
    """,
)
negative = unary(
    "negative",
    "",
    lambda xp, x, y, g: -g,
    """Elementwise negation (``-x``).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.negative(np.array([3.0]))
    variable([-3.])
    """,
)
positive = unary(
    "positive",
    "",
    lambda xp, x, y, g: g,
    """Elementwise ``+x`` (a copy of ``x``).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.positive(np.array([-3.0]))
    variable([-3.])
    """,
)


def _abs_rule(xp: Any, x: Any, y: Any, g: Any) -> Any:
    if _is_complex(x):
        # d|z| / d(conj z) in PyTorch's convention is z / |z|; 0 at 0, where z is 0 too.
        return g * x / xp.where(y == 0, 1.0, y)
    return g * xp.sign(x)


absolute = unary(
    "abs",
    "xy",
    _abs_rule,
    """Elementwise absolute value (``abs(x)``); the gradient at 0 is 0.

    For complex ``x`` the result is real and the gradient is ``gy * x / abs(x)``.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.absolute(np.array([-3.0]))
    variable([3.])
    >>> F.absolute(np.array([3 + 4j]))
    variable([5.])
    """,
)
conj = unary(
    "conj",
    "",
    lambda xp, x, y, g: _c(xp, g),
    """Elementwise complex conjugate (the identity for real ``x``).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.conj(np.array([1 + 2j]))
    variable([1.-2.j])
    """,
)
real = unary(
    "real",
    "",
    # The engine casts the real gradient to the complex dtype of x.
    lambda xp, x, y, g: g,
    """Elementwise real part (the identity for real ``x``).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.real(np.array([1 + 2j]))
    variable([1.])
    """,
)
imag = unary(
    "imag",
    "",
    # y = (z - conj z) / 2i, so dy/d(conj z) in PyTorch's convention is 1j.
    lambda xp, x, y, g: g * 1j,
    """Elementwise imaginary part of a complex array.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.imag(np.array([1 + 2j]))
    variable([2.])
    """,
)


# -- binary arithmetic (the operators' functions) -----------------------------------


class Add(FunctionNode):
    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] + inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return grad_outputs * len(indexes)


class WithScalar(FunctionNode):
    """The node of an operation between an array and the Python scalar ``value``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class AddConstant(WithScalar):
    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] + self.value,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return grad_outputs


class Sub(FunctionNode):
    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] - inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return tuple([gy if i == 0 else -gy for i in indexes])


class SubFromConstant(WithScalar):
    """``value - x``."""

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.value - inputs[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (-grad_outputs[0],)


class Mul(FunctionNode):
    _retain_in = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] * inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x0, x1 = self.get_retained_inputs()
        (gy,) = grad_outputs
        if _is_complex(gy):
            xp = namespace_of(gy)
            x0, x1 = _c(xp, x0), _c(xp, x1)
        if indexes == (0, 1):  # the common case written out: a comprehension costs a frame
            return (gy * x1, gy * x0)
        return tuple([gy * (x1 if i == 0 else x0) for i in indexes])


class MulConstant(WithScalar):
    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] * self.value,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (grad_outputs[0] * self.value.conjugate(),)


class Div(FunctionNode):
    _retain_in = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] / inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x0, x1 = self.get_retained_inputs()
        (gy,) = grad_outputs
        if _is_complex(gy):
            xp = namespace_of(gy)
            x0, x1 = _c(xp, x0), _c(xp, x1)
        gx0 = gy / x1
        return tuple([gx0 if i == 0 else -gx0 * x0 / x1 for i in indexes])


class DivConstant(WithScalar):
    """``x / value``."""

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] / self.value,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (grad_outputs[0] / self.value.conjugate(),)


class DivFromConstant(WithScalar):
    """``value / x``."""

    _retain_in = (0,)
    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.value / inputs[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        (y,) = self.get_retained_outputs()
        gy = grad_outputs[0]
        return (-gy * _c(namespace_of(gy), y / x),)


class Pow(FunctionNode):
    _retain_in = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] ** inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x0, x1 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        complex_ = _is_complex(gy)
        result = []
        for i in indexes:
            if i == 0:
                if complex_:
                    result.append(gy * _c(xp, x1 * x0 ** (x1 - 1)))
                    continue
                # The gradient of 0 ** 0 is 0, where the formula gives 0 * inf: a base
                # of 1 there makes it 0 * 1. Only there: masking all of x1 == 0 would
                # lose the second derivative d2/dx0dx1 = 1 / x0 at x0 != 0.
                base = xp.where(xp.logical_and(x1 == 0, x0 == 0), 1.0, x0)
                result.append(gy * (x1 * base ** (x1 - 1)))
            else:
                if complex_:
                    result.append(gy * _c(xp, x0**x1 * xp.log(x0)))
                    continue
                # 0 ** x1 is flat for x1 >= 0, where the formula gives 0 * -inf: a
                # base of 1 there makes it 1 * log(1) = 0.
                base = xp.where(xp.logical_and(x0 == 0, x1 >= 0), 1.0, x0)
                result.append(gy * (base**x1 * xp.log(base)))
        return tuple(result)


class PowConstant(WithScalar):
    """``x ** value``."""

    _retain_in = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] ** self.value,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        gy = grad_outputs[0]
        c = self.value
        if c == 2:
            return (gy * 2 * _c(namespace_of(gy), x),)
        if c == 0:
            return (namespace_of(gy).zeros_like(gy),)
        return (gy * _c(namespace_of(gy), c * x ** (c - 1)),)


class PowFromConstant(WithScalar):
    """``value ** x``."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        if value == 0:
            # 0 ** x is flat for x >= 0: the rule needs x to say where.
            self._retain_in = (0,)

    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.value ** inputs[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (y,) = self.get_retained_outputs()
        gy = grad_outputs[0]
        xp = namespace_of(gy)
        value = self.value
        if value == 0:
            (x,) = self.get_retained_inputs()
            return (xp.where(x >= 0, 0.0, -math.inf * gy),)
        if type(value) is complex:
            log_value = cmath.log(value)
        else:
            log_value = math.log(value) if value > 0 else math.nan
        return (gy * _c(xp, y) * log_value.conjugate(),)


def _binary(
    node: type[FunctionNode], scalar_node: Callable[[Any], FunctionNode], *, negate: bool = False
) -> Any:
    """The operator that applies ``node``, or ``scalar_node(x2)`` (``-x2`` with
    ``negate``) when ``x2`` is a Python scalar."""

    def apply(x1: Any, x2: Any, /) -> Variable:
        if type(x2) in SCALARS:
            return scalar_node(-x2 if negate else x2).apply((x1,))[0]
        return node().apply((x1, x2))[0]

    return apply


# The operators of Variable call these directly (an array on the left, the hot path).
_add = _binary(Add, AddConstant)
_sub = _binary(Sub, AddConstant, negate=True)
_mul = _binary(Mul, MulConstant)
_div = _binary(Div, DivConstant)
_pow = _binary(Pow, PowConstant)


def add(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 + x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.add(np.array([1.0]), 2.0)
    variable([3.])
    """
    if type(x1) in SCALARS:
        x1, x2 = x2, x1
    return _add(x1, x2)


def subtract(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 - x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.subtract(1.0, np.array([3.0]))
    variable([-2.])
    """
    if type(x1) in SCALARS:
        return SubFromConstant(x1).apply((x2,))[0]
    return _sub(x1, x2)


def multiply(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 * x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.multiply(np.array([1.5]), 2)
    variable([3.])
    """
    if type(x1) in SCALARS:
        x1, x2 = x2, x1
    return _mul(x1, x2)


def divide(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 / x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.divide(1.0, np.array([4.0]))
    variable([0.25])
    """
    if type(x1) in SCALARS:
        return DivFromConstant(x1).apply((x2,))[0]
    return _div(x1, x2)


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
        return PowFromConstant(x1).apply((x2,))[0]
    return _pow(x1, x2)


# -- other binary functions, Python scalars allowed on either side --------------------


class Binary(FunctionNode):
    """``fn(x1, x2)`` elementwise; a Python-scalar operand is kept in the node.

    ``rule(xp, x1, x2, y, gy, which)`` gives the gradient of operand ``which`` (0 or
    1, always an array); ``y`` is ``None`` unless the class sets ``saves_y``.
    """

    fn: str
    saves_y = False

    def __init__(self, s1: Any, s2: Any) -> None:
        self.operands = (s1, s2)  # ARRAY where an input goes, else the scalar itself
        self.which = tuple(k for k, s in enumerate(self.operands) if s is ARRAY)
        self._retain_in = tuple(range(len(self.which)))
        if self.saves_y:
            self._retain_out = (0,)

    def _fill(self, arrays: tuple[Any, ...]) -> list[Any]:
        it = iter(arrays)
        return [next(it) if s is ARRAY else s for s in self.operands]

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (getattr(self.xp, self.fn)(*self._fill(inputs)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        x1, x2 = self._fill(self.get_retained_inputs())
        y = self.get_retained_outputs()[0] if self.saves_y else None
        rule = type(self).rule
        return tuple([rule(xp, x1, x2, y, gy, self.which[i]) for i in indexes])

    @staticmethod
    def rule(xp: Any, x1: Any, x2: Any, y: Any, gy: Any, which: int) -> Any:
        raise NotImplementedError


def _binary_function(fn: str, rule: Any, doc: str, *, saves_y: bool = False) -> Any:
    """Define the node class of the binary ``fn`` and return the function applying it."""
    cls_name = "".join(part.capitalize() for part in fn.split("_"))
    node = type(cls_name, (Binary,), {"fn": fn, "rule": staticmethod(rule), "saves_y": saves_y})

    def apply(x1: Any, x2: Any, /) -> Variable:
        s1, s2 = (x if type(x) in SCALARS else ARRAY for x in (x1, x2))
        if s1 is not ARRAY and s2 is not ARRAY:
            raise TypeError(f"{fn}: x1 and x2 are both Python scalars; make one of them an array")
        arrays = tuple(x for x, s in ((x1, s1), (x2, s2)) if s is ARRAY)
        return node(s1, s2).apply(arrays)[0]

    apply.__name__ = apply.__qualname__ = fn
    apply.__doc__ = doc
    apply.node = node  # type: ignore[attr-defined]
    return apply


def _atan2_rule(xp: Any, x1: Any, x2: Any, y: Any, g: Any, which: int) -> Any:
    scale = g / (x1 * x1 + x2 * x2)
    return scale * x2 if which == 0 else -scale * x1


def _copysign_rule(xp: Any, x1: Any, x2: Any, y: Any, g: Any, which: int) -> Any:
    if which == 1:
        return None  # the result depends on x2's sign only
    return g * (xp.sign(x1) * xp.sign(y))


def _hypot_rule(xp: Any, x1: Any, x2: Any, y: Any, g: Any, which: int) -> Any:
    # y is 0 only where both operands are, and the gradient is 0 there.
    return g * (x1 if which == 0 else x2) / xp.where(y == 0, 1.0, y)


def _logaddexp_rule(xp: Any, x1: Any, x2: Any, y: Any, g: Any, which: int) -> Any:
    return g * xp.exp((x1 if which == 0 else x2) - y)


def _extremum_rule(larger: bool) -> Any:
    def rule(xp: Any, x1: Any, x2: Any, y: Any, g: Any, which: int) -> Any:
        # The operand that does not win gets 0, a tie splits the gradient evenly.
        loses = (x1 < x2) if (which == 0) == larger else (x1 > x2)
        return xp.where(loses, 0.0, xp.where(x1 == x2, g / 2, g))

    return rule


def _remainder_rule(xp: Any, x1: Any, x2: Any, y: Any, g: Any, which: int) -> Any:
    # remainder(x1, x2) = x1 - floor(x1 / x2) * x2, with the floor held constant.
    return g if which == 0 else -g * (x1 // x2)


atan2 = _binary_function(
    "atan2",
    _atan2_rule,
    """Elementwise angle of the point ``(x2, x1)``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.atan2(np.array([1.0, 0.0]), 1.0)
    variable([0.78539816, 0.        ])
    """,
)
copysign = _binary_function(
    "copysign",
    _copysign_rule,
    """Elementwise ``abs(x1)`` with the sign of ``x2``; either side may be a Python scalar.

    ``x1`` gets ``+-gy`` (0 where ``x1`` is 0, as in PyTorch); ``x2`` gets no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.copysign(np.array([1.0, -2.0]), -1.0)
    variable([-1., -2.])
    """,
    saves_y=True,
)
hypot = _binary_function(
    "hypot",
    _hypot_rule,
    """Elementwise ``sqrt(x1**2 + x2**2)``; either side may be a Python scalar.

    The gradient at ``(0, 0)`` is 0.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.hypot(np.array([3.0]), 4.0)
    variable([5.])
    """,
    saves_y=True,
)
logaddexp = _binary_function(
    "logaddexp",
    _logaddexp_rule,
    """Elementwise ``log(exp(x1) + exp(x2))``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.logaddexp(np.array([0.0]), 0.0)
    variable([0.69314718])
    """,
    saves_y=True,
)
maximum = _binary_function(
    "maximum",
    _extremum_rule(larger=True),
    """Elementwise larger of ``x1`` and ``x2``; either side may be a Python scalar.

    At a tie each operand gets half the gradient (PyTorch's convention).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([-1.0, 0.0, 2.0]))
    >>> y = xp.maximum(x, 0.0)
    >>> y
    variable([0., 0., 2.])
    >>> xp.sum(y).backward(); x.grad
    array([0. , 0.5, 1. ])
    """,
)
minimum = _binary_function(
    "minimum",
    _extremum_rule(larger=False),
    """Elementwise smaller of ``x1`` and ``x2``; either side may be a Python scalar.

    At a tie each operand gets half the gradient (PyTorch's convention).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.minimum(np.array([-1.0, 2.0]), 0.0)
    variable([-1.,  0.])
    """,
)
remainder = _binary_function(
    "remainder",
    _remainder_rule,
    """Elementwise remainder of ``x1 / x2`` with the sign of ``x2``; scalars allowed.

    The gradient is 1 for ``x1`` and ``-floor(x1 / x2)`` for ``x2`` (PyTorch's); the
    jumps where ``x1 / x2`` is an integer are ignored.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.remainder(np.array([3.5, -3.5]), 2.0)
    variable([1.5, 0.5])
    """,
)


# -- clip -----------------------------------------------------------------------------


class Clip(FunctionNode):
    """``clip(x, min, max)``; an array bound is an input after ``x``, else kept here."""

    def __init__(self, low: Any, high: Any) -> None:
        self.bounds = (low, high)  # ARRAY where an input goes, else a scalar or None
        self.roles = (None, *(k for k, b in enumerate(self.bounds) if b is ARRAY))
        self._retain_in = tuple(range(len(self.roles)))

    def _fill(self, arrays: tuple[Any, ...]) -> tuple[Any, Any, Any]:
        it = iter(arrays)
        x = next(it)
        low, high = (next(it) if b is ARRAY else b for b in self.bounds)
        return x, low, high

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x, low, high = self._fill(inputs)
        return (self.xp.clip(x, min=low, max=high),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        x, low, high = self._fill(self.get_retained_inputs())
        result = []
        for i in indexes:
            role = self.roles[i]
            if role is None:  # x: 1 inside [min, max], bounds included
                if low is None and high is None:
                    result.append(gy)
                    continue
                if low is None:
                    inside = x <= high
                elif high is None:
                    inside = x >= low
                else:
                    inside = xp.logical_and(x >= low, x <= high)
                result.append(xp.where(inside, gy, 0.0))
            elif role == 0:  # min wins where x is below it (and below max)
                wins = x < low if high is None else xp.logical_and(x < low, low < high)
                result.append(xp.where(wins, gy, 0.0))
            else:  # max wins where x is above it, and everywhere when max < min
                wins = x > high if low is None else xp.logical_or(x > high, high < low)
                result.append(xp.where(wins, gy, 0.0))
        return tuple(result)


def clip(x: Any, /, min: Any = None, max: Any = None) -> Variable:  # noqa: A002 - standard's names
    """Clamp ``x`` to ``[min, max]``; each bound is None, a Python scalar or an array.

    ``x`` gets the gradient where ``min <= x <= max`` (bounds included) and 0
    elsewhere; an array bound gets it where it is the result (PyTorch's ``clamp``).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([-2.0, -1.0, 0.5, 3.0]))
    >>> y = xp.clip(x, min=-1.0, max=1.0)
    >>> y
    variable([-1. , -1. ,  0.5,  1. ])
    >>> xp.sum(y).backward(); x.grad
    array([0., 1., 1., 0.])
    """
    low, high = (b if b is None or type(b) in SCALARS else ARRAY for b in (min, max))
    bounds = tuple(b for b, kind in ((min, low), (max, high)) if kind is ARRAY)
    return Clip(low, high).apply((x, *bounds))[0]


# -- functions without a gradient ---------------------------------------------------


def _no_gradient(name: str, summary: str, call: str, result: str) -> Any:
    doc = f"""{summary} (no gradient: the result requires none).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.{call}
    {result}
    """
    return nondifferentiable(name, doc)


ceil = _no_gradient(
    "ceil", "Elementwise ceiling", "ceil(np.array([0.5, -0.5]))", "variable([ 1., -0.])"
)
floor = _no_gradient(
    "floor", "Elementwise floor", "floor(np.array([0.5, -0.5]))", "variable([ 0., -1.])"
)
round = _no_gradient(  # noqa: A001 - the standard's name
    "round",
    "Elementwise rounding to the nearest integer, halves to even",
    "round(np.array([0.5, 1.5]))",
    "variable([0., 2.])",
)
trunc = _no_gradient(
    "trunc", "Elementwise rounding towards zero", "trunc(np.array([-1.5]))", "variable([-1.])"
)
sign = _no_gradient(
    "sign", "Elementwise sign", "sign(np.array([-3.0, 0.0]))", "variable([-1.,  0.])"
)
signbit = _no_gradient(
    "signbit",
    "Elementwise test of the sign bit",
    "signbit(np.array([-0.0, 1.0]))",
    "variable([ True, False])",
)
isfinite = _no_gradient(
    "isfinite",
    "Elementwise test for finite values",
    "isfinite(np.array([1.0, np.inf]))",
    "variable([ True, False])",
)
isinf = _no_gradient(
    "isinf",
    "Elementwise test for infinities",
    "isinf(np.array([1.0, -np.inf]))",
    "variable([False,  True])",
)
isnan = _no_gradient(
    "isnan",
    "Elementwise test for NaN",
    "isnan(np.array([1.0, np.nan]))",
    "variable([False,  True])",
)
nextafter = _no_gradient(
    "nextafter",
    "Elementwise next floating-point value after ``x1`` towards ``x2``",
    "nextafter(np.array([1.0]), 2.0) > 1.0",
    "variable([ True])",
)
floor_divide = _no_gradient(
    "floor_divide",
    "Elementwise ``x1 // x2``",
    "floor_divide(np.array([7.0]), 2)",
    "variable([3.])",
)
equal = _no_gradient(
    "equal",
    "Elementwise ``x1 == x2``",
    "equal(np.array([1.0, 2.0]), 2.0)",
    "variable([False,  True])",
)
not_equal = _no_gradient(
    "not_equal",
    "Elementwise ``x1 != x2``",
    "not_equal(np.array([1.0, 2.0]), 2.0)",
    "variable([ True, False])",
)
less = _no_gradient(
    "less", "Elementwise ``x1 < x2``", "less(np.array([1.0, 2.0]), 2.0)", "variable([ True, False])"
)
less_equal = _no_gradient(
    "less_equal",
    "Elementwise ``x1 <= x2``",
    "less_equal(np.array([1.0, 3.0]), 2.0)",
    "variable([ True, False])",
)
greater = _no_gradient(
    "greater",
    "Elementwise ``x1 > x2``",
    "greater(np.array([1.0, 3.0]), 2.0)",
    "variable([False,  True])",
)
greater_equal = _no_gradient(
    "greater_equal",
    "Elementwise ``x1 >= x2``",
    "greater_equal(np.array([1.0, 2.0]), 2.0)",
    "variable([False,  True])",
)
logical_and = _no_gradient(
    "logical_and",
    "Elementwise logical AND",
    "logical_and(np.array([True, True]), np.array([True, False]))",
    "variable([ True, False])",
)
logical_or = _no_gradient(
    "logical_or",
    "Elementwise logical OR",
    "logical_or(np.array([False, False]), np.array([True, False]))",
    "variable([ True, False])",
)
logical_xor = _no_gradient(
    "logical_xor",
    "Elementwise logical XOR",
    "logical_xor(np.array([True, True]), np.array([True, False]))",
    "variable([False,  True])",
)
logical_not = _no_gradient(
    "logical_not",
    "Elementwise logical NOT",
    "logical_not(np.array([True, False]))",
    "variable([False,  True])",
)
bitwise_and = _no_gradient(
    "bitwise_and", "Elementwise bitwise AND", "bitwise_and(np.array([12]), 10)", "variable([8])"
)
bitwise_or = _no_gradient(
    "bitwise_or", "Elementwise bitwise OR", "bitwise_or(np.array([12]), 10)", "variable([14])"
)
bitwise_xor = _no_gradient(
    "bitwise_xor", "Elementwise bitwise XOR", "bitwise_xor(np.array([12]), 10)", "variable([6])"
)
bitwise_invert = _no_gradient(
    "bitwise_invert", "Elementwise bitwise NOT", "bitwise_invert(np.array([0]))", "variable([-1])"
)
bitwise_left_shift = _no_gradient(
    "bitwise_left_shift",
    "Elementwise ``x1 << x2``",
    "bitwise_left_shift(np.array([1]), 3)",
    "variable([8])",
)
bitwise_right_shift = _no_gradient(
    "bitwise_right_shift",
    "Elementwise ``x1 >> x2``",
    "bitwise_right_shift(np.array([8]), 3)",
    "variable([1])",
)


DIFFERENTIABLE = {
    "abs": absolute,
    "acos": acos,
    "acosh": acosh,
    "add": add,
    "asin": asin,
    "asinh": asinh,
    "atan": atan,
    "atan2": atan2,
    "atanh": atanh,
    "clip": clip,
    "conj": conj,
    "copysign": copysign,
    "cos": cos,
    "cosh": cosh,
    "divide": divide,
    "exp": exp,
    "expm1": expm1,
    "hypot": hypot,
    "imag": imag,
    "log": log,
    "log1p": log1p,
    "log2": log2,
    "log10": log10,
    "logaddexp": logaddexp,
    "maximum": maximum,
    "minimum": minimum,
    "multiply": multiply,
    "negative": negative,
    "positive": positive,
    "pow": pow,
    "real": real,
    "reciprocal": reciprocal,
    "remainder": remainder,
    "sin": sin,
    "sinh": sinh,
    "sqrt": sqrt,
    "square": square,
    "subtract": subtract,
    "tan": tan,
    "tanh": tanh,
}
NON_DIFFERENTIABLE = {
    "bitwise_and": bitwise_and,
    "bitwise_invert": bitwise_invert,
    "bitwise_left_shift": bitwise_left_shift,
    "bitwise_or": bitwise_or,
    "bitwise_right_shift": bitwise_right_shift,
    "bitwise_xor": bitwise_xor,
    "ceil": ceil,
    "equal": equal,
    "floor": floor,
    "floor_divide": floor_divide,
    "greater": greater,
    "greater_equal": greater_equal,
    "isfinite": isfinite,
    "isinf": isinf,
    "isnan": isnan,
    "less": less,
    "less_equal": less_equal,
    "logical_and": logical_and,
    "logical_not": logical_not,
    "logical_or": logical_or,
    "logical_xor": logical_xor,
    "nextafter": nextafter,
    "not_equal": not_equal,
    "round": round,
    "sign": sign,
    "signbit": signbit,
    "trunc": trunc,
}
UNSUPPORTED: dict[str, str] = {}

# The functions made by _core's factories are not found by doctest's module search
# (their code lives in _core); list their docstrings so their examples run too.
__test__ = {
    name: fn.__doc__
    for name, fn in {**DIFFERENTIABLE, **NON_DIFFERENTIABLE}.items()
    if getattr(fn, "__globals__", globals()) is not globals() and fn.__doc__
}
