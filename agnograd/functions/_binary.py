"""Elementwise functions of two arrays, either of them a Python scalar: a row each
(see ``_rows.py``).

A row gives the name; what the rules read (the inputs ``x``, the output ``y``; or,
where they differ, what each operand's rule reads, so that a node keeps only what
the gradients it computes read); the rule ``(xp, x1, x2, y, gy) -> gx`` of each
operand (None: it gets no gradient); the domains where the testing kit draws ``x1``
and ``x2``; the summary of the docstring; its example and the output it prints. The
operators' arithmetic (``add``, ..., ``pow``) has its nodes written out in
``_elementwise.py``, which also lists the conventions where a derivative is undefined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


def _loses(xp: Any, loses: Any, x1: Any, x2: Any, g: Any) -> Any:
    # maximum and minimum: the operand that does not win gets 0, a tie splits evenly.
    return xp.where(loses, 0.0, xp.where(x1 == x2, g / 2, g))


_ANY = (-2.0, 2.0)

# fmt: off
atan2 = ROWS.binary("atan2", "x", (
        lambda xp, x1, x2, y, g: g / (x1 * x1 + x2 * x2) * x2,
        lambda xp, x1, x2, y, g: -g / (x1 * x1 + x2 * x2) * x1,
    ), (_ANY, (0.5, 2.0, True)),
    "Elementwise angle of the point ``(x2, x1)``; either side may be a Python scalar.",
    {"F.atan2(np.array([1.0, 0.0]), 1.0)": "variable([0.78539816, 0.        ])"})
copysign = ROWS.binary("copysign", ("x1 y", ""), (
        lambda xp, x1, x2, y, g: g * (xp.sign(x1) * xp.sign(y)),
        None,  # the result depends on x2's sign only
    ), ((0.1, 2.0, True), (0.1, 2.0, True)),
    "Elementwise ``abs(x1)`` with the sign of ``x2``; either side may be a Python scalar.\n\n"
    "``x1`` gets ``+-gy`` (0 where ``x1`` is 0, as in PyTorch); ``x2`` gets no gradient.",
    {"F.copysign(np.array([1.0, -2.0]), -1.0)": "variable([-1., -2.])"})
# y is 0 only where both operands are, and the gradient is 0 there.
hypot = ROWS.binary("hypot", ("x1 y", "x2 y"), (
        lambda xp, x1, x2, y, g: g * x1 / xp.where(y == 0, 1.0, y),
        lambda xp, x1, x2, y, g: g * x2 / xp.where(y == 0, 1.0, y),
    ), ((0.5, 2.0, True), (0.5, 2.0, True)),
    "Elementwise ``sqrt(x1**2 + x2**2)``; either side may be a Python scalar.\n\n"
    "The gradient at ``(0, 0)`` is 0.",
    {"F.hypot(np.array([3.0]), 4.0)": "variable([5.])"})
logaddexp = ROWS.binary("logaddexp", ("x1 y", "x2 y"), (
        lambda xp, x1, x2, y, g: g * xp.exp(x1 - y),
        lambda xp, x1, x2, y, g: g * xp.exp(x2 - y),
    ), (_ANY, _ANY),
    "Elementwise ``log(exp(x1) + exp(x2))``; either side may be a Python scalar.",
    {"F.logaddexp(np.array([0.0]), 0.0)": "variable([0.69314718])"})
maximum = ROWS.binary("maximum", "x", (
        lambda xp, x1, x2, y, g: _loses(xp, x1 < x2, x1, x2, g),
        lambda xp, x1, x2, y, g: _loses(xp, x1 > x2, x1, x2, g),
    ), (_ANY, _ANY),
    "Elementwise larger of ``x1`` and ``x2``; either side may be a Python scalar.\n\n"
    "At a tie each operand gets half the gradient (PyTorch's convention).",
    {"x = agnograd.Variable(np.array([-1.0, 0.0, 2.0]))": "",
     "y = F.maximum(x, 0.0)": "",
     "y": "variable([0., 0., 2.])",
     "F.sum(y).backward(); x.grad": "array([0. , 0.5, 1. ])"})
minimum = ROWS.binary("minimum", "x", (
        lambda xp, x1, x2, y, g: _loses(xp, x1 > x2, x1, x2, g),
        lambda xp, x1, x2, y, g: _loses(xp, x1 < x2, x1, x2, g),
    ), (_ANY, _ANY),
    "Elementwise smaller of ``x1`` and ``x2``; either side may be a Python scalar.\n\n"
    "At a tie each operand gets half the gradient (PyTorch's convention).",
    {"F.minimum(np.array([-1.0, 2.0]), 0.0)": "variable([-1.,  0.])"})
# remainder(x1, x2) = x1 - floor(x1 / x2) * x2, with the floor held constant.
remainder = ROWS.binary("remainder", ("", "x1 x2"), (
        lambda xp, x1, x2, y, g: g,
        lambda xp, x1, x2, y, g: -g * (x1 // x2),
    ), (_ANY, (0.5, 2.0, True)),
    "Elementwise remainder of ``x1 / x2`` with the sign of ``x2``; scalars allowed.\n\n"
    "The gradient is 1 for ``x1`` and ``-floor(x1 / x2)`` for ``x2`` (PyTorch's); the\n"
    "jumps where ``x1 / x2`` is an integer are ignored.",
    {"F.remainder(np.array([3.5, -3.5]), 2.0)": "variable([1.5, 0.5])"})

# -- without a gradient
nextafter = ROWS.no_gradient("nextafter", 2,
    "Elementwise next floating-point value after ``x1`` towards ``x2``",
    {"F.nextafter(np.array([1.0]), 2.0) > 1.0": "variable([ True])"})
floor_divide = ROWS.no_gradient("floor_divide", 2, "Elementwise ``x1 // x2``",
    {"F.floor_divide(np.array([7.0]), 2)": "variable([3.])"})
equal = ROWS.no_gradient("equal", 2, "Elementwise ``x1 == x2``",
    {"F.equal(np.array([1.0, 2.0]), 2.0)": "variable([False,  True])"})
not_equal = ROWS.no_gradient("not_equal", 2, "Elementwise ``x1 != x2``",
    {"F.not_equal(np.array([1.0, 2.0]), 2.0)": "variable([ True, False])"})
less = ROWS.no_gradient("less", 2, "Elementwise ``x1 < x2``",
    {"F.less(np.array([1.0, 2.0]), 2.0)": "variable([ True, False])"})
less_equal = ROWS.no_gradient("less_equal", 2, "Elementwise ``x1 <= x2``",
    {"F.less_equal(np.array([1.0, 3.0]), 2.0)": "variable([ True, False])"})
greater = ROWS.no_gradient("greater", 2, "Elementwise ``x1 > x2``",
    {"F.greater(np.array([1.0, 3.0]), 2.0)": "variable([False,  True])"})
greater_equal = ROWS.no_gradient("greater_equal", 2, "Elementwise ``x1 >= x2``",
    {"F.greater_equal(np.array([1.0, 2.0]), 2.0)": "variable([False,  True])"})
logical_and = ROWS.no_gradient("logical_and", 2, "Elementwise logical AND",
    {"F.logical_and(np.array([True, True]), np.array([True, False]))": "variable([ True, False])"})
logical_or = ROWS.no_gradient("logical_or", 2, "Elementwise logical OR",
    {"F.logical_or(np.array([False, False]), np.array([True, False]))": "variable([ True, False])"})
logical_xor = ROWS.no_gradient("logical_xor", 2, "Elementwise logical XOR",
    {"F.logical_xor(np.array([True, True]), np.array([True, False]))": "variable([False,  True])"})
bitwise_and = ROWS.no_gradient("bitwise_and", 2, "Elementwise bitwise AND",
    {"F.bitwise_and(np.array([12]), 10)": "variable([8])"})
bitwise_or = ROWS.no_gradient("bitwise_or", 2, "Elementwise bitwise OR",
    {"F.bitwise_or(np.array([12]), 10)": "variable([14])"})
bitwise_xor = ROWS.no_gradient("bitwise_xor", 2, "Elementwise bitwise XOR",
    {"F.bitwise_xor(np.array([12]), 10)": "variable([6])"})
bitwise_left_shift = ROWS.no_gradient("bitwise_left_shift", 2, "Elementwise ``x1 << x2``",
    {"F.bitwise_left_shift(np.array([1]), 3)": "variable([8])"})
bitwise_right_shift = ROWS.no_gradient("bitwise_right_shift", 2, "Elementwise ``x1 >> x2``",
    {"F.bitwise_right_shift(np.array([8]), 3)": "variable([1])"})
# fmt: on

# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead: these functions, and ROWS and the helpers imported here.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
