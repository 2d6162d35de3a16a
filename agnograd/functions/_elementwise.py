"""Elementwise functions of the array API standard and their gradient rules.

Conventions at kinks (documented in docs/concepts.md): ``abs`` has gradient 0 at 0
(the subgradient PyTorch uses); functions with no derivative anywhere useful
(``floor_divide``, comparisons, ``sign``) return Variables that require no gradient.
"""

from __future__ import annotations

import math
from typing import Any

from agnograd._function import FunctionNode
from agnograd._namespace import namespace_of
from agnograd._variable import Variable
from agnograd.functions._core import nondifferentiable, unary

_SCALARS = (bool, int, float, complex)

# -- unary functions: name, what the rule reads, rule(xp, x, y, gy) ----------------

exp = unary(
    "exp",
    "y",
    lambda xp, x, y, g: g * y,
    """Elementwise exponential.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.exp(np.array([0.0, 1.0]))
    variable([1.        , 2.71828183])
    """,
)
log = unary(
    "log",
    "x",
    lambda xp, x, y, g: g / x,
    """Elementwise natural logarithm.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.log(np.array([1.0]))
    variable([0.])
    """,
)
sin = unary(
    "sin",
    "x",
    lambda xp, x, y, g: g * xp.cos(x),
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
    lambda xp, x, y, g: -g * xp.sin(x),
    """Elementwise cosine.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.cos(np.array([0.0]))
    variable([1.])
    """,
)
tanh = unary(
    "tanh",
    "y",
    lambda xp, x, y, g: g * (1 - y * y),
    """Elementwise hyperbolic tangent.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.tanh(np.array([0.0]))
    variable([0.])
    """,
)
sqrt = unary(
    "sqrt",
    "y",
    lambda xp, x, y, g: g / (2 * y),
    """Elementwise square root.

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
    lambda xp, x, y, g: 2 * g * x,
    """Elementwise square.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.square(np.array([3.0]))
    variable([9.])
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
absolute = unary(
    "abs",
    "x",
    lambda xp, x, y, g: g * xp.sign(x),
    """Elementwise absolute value (``abs(x)``); the gradient at 0 is 0.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.absolute(np.array([-3.0]))
    variable([3.])
    """,
)
sign = nondifferentiable(
    "sign",
    """Elementwise sign; piecewise constant, so the result requires no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.sign(np.array([-3.0, 0.0]))
    variable([-1.,  0.])
    """,
)


# -- binary arithmetic ---------------------------------------------------------------


class Add(FunctionNode):
    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] + inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return grad_outputs * len(indexes)


class AddConstant(FunctionNode):
    def __init__(self, value: Any) -> None:
        self.value = value

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


class SubFromConstant(FunctionNode):
    """``value - x``."""

    def __init__(self, value: Any) -> None:
        self.value = value

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
        return tuple([gy * x1 if i == 0 else gy * x0 for i in indexes])


class MulConstant(FunctionNode):
    def __init__(self, value: Any) -> None:
        self.value = value

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] * self.value,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (grad_outputs[0] * self.value,)


class Div(FunctionNode):
    _retain_in = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] / inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x0, x1 = self.get_retained_inputs()
        gx0 = grad_outputs[0] / x1
        return tuple([gx0 if i == 0 else -gx0 * x0 / x1 for i in indexes])


class DivConstant(FunctionNode):
    """``x / value``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] / self.value,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (grad_outputs[0] / self.value,)


class DivFromConstant(FunctionNode):
    """``value / x``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    _retain_in = (0,)
    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.value / inputs[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        (y,) = self.get_retained_outputs()
        return (-grad_outputs[0] * y / x,)


class Pow(FunctionNode):
    _retain_in = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] ** inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        x0, x1 = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        result = []
        for i in indexes:
            if i == 0:
                result.append(gy * x1 * x0 ** (x1 - 1))
            else:
                result.append(gy * x0**x1 * xp.log(x0))
        return tuple(result)


class PowConstant(FunctionNode):
    """``x ** value``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    _retain_in = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] ** self.value,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        c = self.value
        if c == 2:
            return (grad_outputs[0] * 2 * x,)
        return (grad_outputs[0] * c * x ** (c - 1),)


class PowFromConstant(FunctionNode):
    """``value ** x``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    _retain_out = (0,)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.value ** inputs[0],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (y,) = self.get_retained_outputs()
        return (grad_outputs[0] * y * math.log(self.value),)


def _binary(node: type[FunctionNode], scalar_node: type[FunctionNode]) -> Any:
    def apply(x1: Any, x2: Any, /) -> Variable:
        if type(x2) in _SCALARS:
            return scalar_node(x2).apply((x1,))[0]
        return node().apply((x1, x2))[0]

    return apply


_add = _binary(Add, AddConstant)
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
    if type(x1) in _SCALARS:
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
    if type(x1) in _SCALARS:
        return SubFromConstant(x1).apply((x2,))[0]
    if type(x2) in _SCALARS:
        return AddConstant(-x2).apply((x1,))[0]
    return Sub().apply((x1, x2))[0]


def multiply(x1: Any, x2: Any, /) -> Variable:
    """Elementwise ``x1 * x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.multiply(np.array([1.5]), 2)
    variable([3.])
    """
    if type(x1) in _SCALARS:
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
    if type(x1) in _SCALARS:
        return DivFromConstant(x1).apply((x2,))[0]
    return _div(x1, x2)


def pow(x1: Any, x2: Any, /) -> Variable:  # noqa: A001 - the standard's name
    """Elementwise ``x1 ** x2``; either side may be a Python scalar.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.pow(np.array([3.0]), 2)
    variable([9.])
    """
    if type(x1) in _SCALARS:
        return PowFromConstant(x1).apply((x2,))[0]
    return _pow(x1, x2)


floor_divide = nondifferentiable(
    "floor_divide",
    """Elementwise ``x1 // x2``; piecewise constant, so the result requires no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.floor_divide(np.array([7.0]), 2)
    variable([3.])
    """,
)
equal = nondifferentiable("equal", "Elementwise ``x1 == x2`` (no gradient).")
not_equal = nondifferentiable("not_equal", "Elementwise ``x1 != x2`` (no gradient).")
less = nondifferentiable("less", "Elementwise ``x1 < x2`` (no gradient).")
less_equal = nondifferentiable("less_equal", "Elementwise ``x1 <= x2`` (no gradient).")
greater = nondifferentiable("greater", "Elementwise ``x1 > x2`` (no gradient).")
greater_equal = nondifferentiable("greater_equal", "Elementwise ``x1 >= x2`` (no gradient).")


DIFFERENTIABLE = {
    "abs": absolute,
    "add": add,
    "cos": cos,
    "divide": divide,
    "exp": exp,
    "log": log,
    "multiply": multiply,
    "negative": negative,
    "pow": pow,
    "sin": sin,
    "sqrt": sqrt,
    "square": square,
    "subtract": subtract,
    "tanh": tanh,
}
NON_DIFFERENTIABLE = {
    "equal": equal,
    "floor_divide": floor_divide,
    "greater": greater,
    "greater_equal": greater_equal,
    "less": less,
    "less_equal": less_equal,
    "not_equal": not_equal,
    "sign": sign,
}
UNSUPPORTED: dict[str, str] = {}
