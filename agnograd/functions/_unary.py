"""Elementwise functions of one array: a row each (see ``_rows.py``).

A row gives the name; what the rule reads (the input ``x``, the output ``y``); the
rule ``(xp, x, y, gy) -> gx``; the domain where the testing kit draws ``x``; the
summary of the docstring; its example and the output it prints. Complex rules
follow PyTorch's conjugate Wirtinger convention (``conjugate`` in ``_core.py``); the
conventions where a derivative is undefined are listed in ``_elementwise.py``.

Rules keep Python scalars on the right of an array (``x + 1``, not ``1 + x``): a
reflected operation costs several times an array's own on PyTorch tensors, and the
engine runs every rule at every backward.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from agnograd.functions._core import conjugate, held, is_complex
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _abs_rule(xp: Any, x: Any, y: Any, g: Any) -> Any:
    if is_complex(x):
        # d|z| / d(conj z) in PyTorch's convention is z / |z|; 0 at 0, where z is 0 too.
        return g * x / xp.where(y == 0, 1.0, y)
    return g * xp.sign(x)


# fmt: off
exp = ROWS.unary("exp", "y", lambda xp, x, y, g: g * conjugate(xp, y), (-2.0, 2.0),
    "Elementwise exponential.",
    {"F.exp(np.array([0.0, 1.0]))": "variable([1.        , 2.71828183])"})
expm1 = ROWS.unary("expm1", "y", lambda xp, x, y, g: g * conjugate(xp, y + 1), (-2.0, 2.0),
    "Elementwise ``exp(x) - 1``, accurate for small ``x``.",
    {"F.expm1(np.array([0.0, 1e-10]))": "variable([0.e+00, 1.e-10])"})
log = ROWS.unary("log", "x", lambda xp, x, y, g: g / conjugate(xp, x), (0.5, 3.0),
    "Elementwise natural logarithm.",
    {"F.log(np.array([1.0]))": "variable([0.])"})
log1p = ROWS.unary("log1p", "x", lambda xp, x, y, g: g / conjugate(xp, x + 1), (-0.5, 2.0),
    "Elementwise ``log(1 + x)``, accurate for small ``x``.",
    {"F.log1p(np.array([0.0, 1e-10]))": "variable([0.e+00, 1.e-10])"})
log2 = ROWS.unary("log2", "x", lambda xp, x, y, g: g / conjugate(xp, x * _LN2), (0.5, 3.0),
    "Elementwise base-2 logarithm.",
    {"F.log2(np.array([1.0, 8.0]))": "variable([0., 3.])"})
log10 = ROWS.unary("log10", "x", lambda xp, x, y, g: g / conjugate(xp, x * _LN10), (0.5, 3.0),
    "Elementwise base-10 logarithm.",
    {"F.log10(np.array([1.0, 100.0]))": "variable([0., 2.])"})
sin = ROWS.unary("sin", "x", lambda xp, x, y, g: g * conjugate(xp, xp.cos(x)), (-3.0, 3.0),
    "Elementwise sine.",
    {"F.sin(np.array([0.0]))": "variable([0.])"})
cos = ROWS.unary("cos", "x", lambda xp, x, y, g: -g * conjugate(xp, xp.sin(x)), (-3.0, 3.0),
    "Elementwise cosine.",
    {"F.cos(np.array([0.0]))": "variable([1.])"})
tan = ROWS.unary("tan", "y", lambda xp, x, y, g: g * conjugate(xp, y * y + 1), (-1.2, 1.2),
    "Elementwise tangent.",
    {"F.tan(np.array([0.0]))": "variable([0.])"})
sinh = ROWS.unary("sinh", "x", lambda xp, x, y, g: g * conjugate(xp, xp.cosh(x)), (-2.0, 2.0),
    "Elementwise hyperbolic sine.",
    {"F.sinh(np.array([0.0]))": "variable([0.])"})
cosh = ROWS.unary("cosh", "x", lambda xp, x, y, g: g * conjugate(xp, xp.sinh(x)), (-2.0, 2.0),
    "Elementwise hyperbolic cosine.",
    {"F.cosh(np.array([0.0]))": "variable([1.])"})
tanh = ROWS.unary("tanh", "y", lambda xp, x, y, g: g - g * conjugate(xp, y * y), (-3.0, 3.0),
    "Elementwise hyperbolic tangent.",
    {"F.tanh(np.array([0.0]))": "variable([0.])"})
asin = ROWS.unary("asin", "x", lambda xp, x, y, g: g / conjugate(xp, xp.sqrt(1 - x * x)),
    (-0.8, 0.8),
    "Elementwise inverse sine; the gradient is infinite at -1 and 1.",
    {"F.asin(np.array([0.0, 1.0]))": "variable([0.        , 1.57079633])"})
acos = ROWS.unary("acos", "x", lambda xp, x, y, g: -g / conjugate(xp, xp.sqrt(1 - x * x)),
    (-0.8, 0.8),
    "Elementwise inverse cosine; the gradient is infinite at -1 and 1.",
    {"F.acos(np.array([1.0, 0.0]))": "variable([0.        , 1.57079633])"})
atan = ROWS.unary("atan", "x", lambda xp, x, y, g: g / conjugate(xp, x * x + 1), (-2.0, 2.0),
    "Elementwise inverse tangent.",
    {"F.atan(np.array([0.0, 1.0]))": "variable([0.        , 0.78539816])"})
asinh = ROWS.unary("asinh", "x", lambda xp, x, y, g: g / conjugate(xp, xp.sqrt(x * x + 1)),
    (-2.0, 2.0),
    "Elementwise inverse hyperbolic sine.",
    {"F.asinh(np.array([0.0]))": "variable([0.])"})
# sqrt(x - 1) * sqrt(x + 1) rather than sqrt(x * x - 1): the same for real x >= 1, and
# the principal branch for complex x.
acosh = ROWS.unary("acosh", "x",
    lambda xp, x, y, g: g / conjugate(xp, xp.sqrt(x - 1) * xp.sqrt(x + 1)), (1.2, 3.0),
    "Elementwise inverse hyperbolic cosine; the gradient is infinite at 1.",
    {"F.acosh(np.array([1.0]))": "variable([0.])"})
atanh = ROWS.unary("atanh", "x", lambda xp, x, y, g: g / conjugate(xp, 1 - x * x), (-0.8, 0.8),
    "Elementwise inverse hyperbolic tangent; the gradient is infinite at -1 and 1.",
    {"F.atanh(np.array([0.0]))": "variable([0.])"})
sqrt = ROWS.unary("sqrt", "y", lambda xp, x, y, g: g / conjugate(xp, 2 * y), (0.5, 3.0),
    "Elementwise square root; the gradient is infinite at 0.",
    {"F.sqrt(np.array([4.0]))": "variable([2.])"})
square = ROWS.unary("square", "x", lambda xp, x, y, g: 2 * g * conjugate(xp, x), (-2.0, 2.0),
    "Elementwise square.",
    {"F.square(np.array([3.0]))": "variable([9.])"})
reciprocal = ROWS.unary("reciprocal", "y", lambda xp, x, y, g: -g * conjugate(xp, y * y),
    (0.5, 2.0, True),
    "Elementwise ``1 / x``.",
    {"F.reciprocal(np.array([4.0]))": "variable([0.25])"})
negative = ROWS.unary("negative", "", lambda xp, x, y, g: -g, (-2.0, 2.0),
    "Elementwise negation (``-x``).",
    {"F.negative(np.array([3.0]))": "variable([-3.])"})
positive = ROWS.unary("positive", "", lambda xp, x, y, g: g, (-2.0, 2.0),
    "Elementwise ``+x`` (a copy of ``x``).",
    {"F.positive(np.array([-3.0]))": "variable([-3.])"})
absolute = ROWS.unary("abs", "xy", _abs_rule, (0.1, 2.0, True),
    "Elementwise absolute value (``abs(x)``); the gradient at 0 is 0.\n\n"
    "For complex ``x`` the result is real and the gradient is ``gy * x / abs(x)``.",
    {"F.absolute(np.array([-3.0]))": "variable([3.])",
     "F.absolute(np.array([3 + 4j]))": "variable([5.])"})
conj = ROWS.unary("conj", "", lambda xp, x, y, g: conjugate(xp, g), "complex",
    "Elementwise complex conjugate (the identity for real ``x``).",
    {"F.conj(np.array([1 + 2j]))": "variable([1.-2.j])"})
# The engine casts the real gradient to the complex dtype of x.
real = ROWS.unary("real", "", lambda xp, x, y, g: g, "complex",
    "Elementwise real part (the identity for real ``x``).",
    {"F.real(np.array([1 + 2j]))": "variable([1.])"})
# y = (z - conj z) / 2i, so dy/d(conj z) in PyTorch's convention is 1j.
imag = ROWS.unary("imag", "", lambda xp, x, y, g: g * 1j, "complex",
    "Elementwise imaginary part of a complex array.",
    {"F.imag(np.array([1 + 2j]))": "variable([2.])"})

# -- without a gradient
ceil = ROWS.no_gradient("ceil", 1, "Elementwise ceiling",
    {"F.ceil(np.array([0.5, -0.5]))": "variable([ 1., -0.])"})
floor = ROWS.no_gradient("floor", 1, "Elementwise floor",
    {"F.floor(np.array([0.5, -0.5]))": "variable([ 0., -1.])"})
round = ROWS.no_gradient("round", 1,  # noqa: A001 - the standard's name
    "Elementwise rounding to the nearest integer, halves to even",
    {"F.round(np.array([0.5, 1.5]))": "variable([0., 2.])"})
trunc = ROWS.no_gradient("trunc", 1, "Elementwise rounding towards zero",
    {"F.trunc(np.array([-1.5]))": "variable([-1.])"})
sign = ROWS.no_gradient("sign", 1, "Elementwise sign",
    {"F.sign(np.array([-3.0, 0.0]))": "variable([-1.,  0.])"})
signbit = ROWS.no_gradient("signbit", 1, "Elementwise test of the sign bit",
    {"F.signbit(np.array([-0.0, 1.0]))": "variable([ True, False])"})
isfinite = ROWS.no_gradient("isfinite", 1, "Elementwise test for finite values",
    {"F.isfinite(np.array([1.0, np.inf]))": "variable([ True, False])"})
isinf = ROWS.no_gradient("isinf", 1, "Elementwise test for infinities",
    {"F.isinf(np.array([1.0, -np.inf]))": "variable([False,  True])"})
isnan = ROWS.no_gradient("isnan", 1, "Elementwise test for NaN",
    {"F.isnan(np.array([1.0, np.nan]))": "variable([False,  True])"})
logical_not = ROWS.no_gradient("logical_not", 1, "Elementwise logical NOT",
    {"F.logical_not(np.array([True, False]))": "variable([False,  True])"})
bitwise_invert = ROWS.no_gradient("bitwise_invert", 1, "Elementwise bitwise NOT",
    {"F.bitwise_invert(np.array([0]))": "variable([-1])"})

# -- extras of agnograd.functions, not in the standard: the row gives the forward too
# The tanh form of the sigmoid never overflows, unlike 1 / (1 + exp(-x)).
sigmoid = ROWS.unary("sigmoid", "y", lambda xp, x, y, g: g * y * (1 - y), (-3.0, 3.0),
    "Logistic sigmoid ``1 / (1 + exp(-x))``, computed without overflow.",
    {"F.sigmoid(np.array([0.0]))": "variable([0.5])"},
    compute=lambda xp, x: xp.tanh(x * 0.5) * 0.5 + 0.5)
# The gradient at the kink is 0, as in PyTorch and JAX; the mask is read from the raw
# output, a constant for double backprop (in a gradient graph not run yet, a node of it).
relu = ROWS.unary("relu", "y", lambda xp, x, y, g: xp.where(held(y) > 0, g, xp.zeros_like(g)),
    (0.1, 2.0, True),
    "Rectified linear unit ``max(x, 0)``; the gradient at 0 is 0.",
    {"F.relu(np.array([-1.0, 2.0]))": "variable([0., 2.])"},
    compute=lambda xp, x: xp.where(x > 0, x, xp.zeros_like(x)))
# log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)), which never overflows; the gradient
# is sigmoid(x), in the tanh form that never overflows either.
softplus = ROWS.unary("softplus", "x", lambda xp, x, y, g: g * (xp.tanh(x * 0.5) * 0.5 + 0.5),
    (-3.0, 3.0),
    "Softplus ``log(1 + exp(x))``, computed without overflow; its gradient is sigmoid(x).",
    {"F.softplus(np.array([-1.0, 0.0, 1.0]))": "variable([0.31326169, 0.69314718, 1.31326169])",
     "F.softplus(np.array([-1000.0, 1000.0]))": "variable([   0., 1000.])"},
    compute=lambda xp, x: (x + xp.abs(x)) * 0.5 + xp.log1p(xp.exp(-xp.abs(x))))
# fmt: on

# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead: these functions, and ROWS and the helpers imported here.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
