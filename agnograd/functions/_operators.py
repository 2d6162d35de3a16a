"""The functions behind ``Variable``'s operators and conversion dunders.

``Variable`` defines its operators itself (see ``agnograd.core._variable_operators``);
each one calls the function of the same name here, through the core's extension
point, because these call the differentiable functions, which build on
``Variable``.
"""

from __future__ import annotations

import sys
from typing import Any

from agnograd import functions as F
from agnograd.backends._backend import SCALARS, is_array
from agnograd.core import _extension
from agnograd.core._config import no_backprop_mode
from agnograd.core._variable import Variable
from agnograd.core._variable_operators import bind
from agnograd.functions import _arithmetic as E
from agnograd.functions._core import apply_nondifferentiable
from agnograd.functions._inplace import inplace, setitem  # noqa: F401 - setitem is an operator
from agnograd.functions._table import DIFFERENTIABLE, NON_DIFFERENTIABLE


def _comparison(name: str, op: Any) -> Any:
    def compute(xp: Any, a: Any, b: Any) -> Any:
        return op(a, b)

    compute.__name__ = name

    def compare(self: Variable, other: Any) -> Any:
        if not isinstance(other, Variable) and type(other) not in SCALARS and not is_array(other):
            return NotImplemented
        return apply_nondifferentiable(compute, (self, other), {})

    return compare


def _named(name: str, reflected: bool = False) -> Any:
    """The namespace function of the standard called ``name`` (its table entry)."""
    fn = DIFFERENTIABLE.get(name) or NON_DIFFERENTIABLE.get(name)
    assert fn is not None, name
    if reflected:
        return lambda self, other: fn(other, self)
    return lambda self, other: fn(self, other)


def _scalar(convert: Any) -> Any:
    def method(self: Variable) -> Any:
        return convert(self._values(f"{convert.__name__}()"))

    return method


# -- arithmetic (`x * 2` is the hottest path of all: the node is made directly)
add = radd = E._add
sub = E._sub
mul = E._mul
rmul = E._rmul
truediv = E._div
pow_ = E._pow
matmul = F.matmul
mod = _named("remainder")
floordiv = _comparison("floor_divide", lambda a, b: a // b)


def rsub(self: Variable, other: Any) -> Variable:
    return F.subtract(other, self)


def rtruediv(self: Variable, other: Any) -> Variable:
    return F.divide(other, self)


def rpow(self: Variable, other: Any) -> Variable:
    return F.pow(other, self)


def rmatmul(self: Variable, other: Any) -> Variable:
    return F.matmul(other, self)


rmod = _named("remainder", reflected=True)
rfloordiv = _comparison("floor_divide", lambda a, b: b // a)
neg = F.negative
abs_ = F.absolute


def pos(self: Variable) -> Variable:
    return self


# -- bitwise
and_ = _named("bitwise_and")
rand = _named("bitwise_and", reflected=True)
or_ = _named("bitwise_or")
ror = _named("bitwise_or", reflected=True)
xor = _named("bitwise_xor")
rxor = _named("bitwise_xor", reflected=True)
lshift = _named("bitwise_left_shift")
rlshift = _named("bitwise_left_shift", reflected=True)
rshift = _named("bitwise_right_shift")
rrshift = _named("bitwise_right_shift", reflected=True)
invert = DIFFERENTIABLE.get("bitwise_invert") or NON_DIFFERENTIABLE["bitwise_invert"]

# -- in place: a new Variable of the left operand's dtype and shape (see
# agnograd.functions._inplace)
iadd = inplace(add, "+", "__iadd__")
isub = inplace(sub, "-", "__isub__")
imul = inplace(mul, "*", "__imul__")
itruediv = inplace(truediv, "/", "__itruediv__")
ifloordiv = inplace(floordiv, "//", "__ifloordiv__")
ipow = inplace(pow_, "**", "__ipow__")
imatmul = inplace(matmul, "@", "__imatmul__")
imod = inplace(mod, "%", "__imod__")
iand = inplace(and_, "&", "__iand__")
ior = inplace(or_, "|", "__ior__")
ixor = inplace(xor, "^", "__ixor__")
ilshift = inplace(lshift, "<<", "__ilshift__")
irshift = inplace(rshift, ">>", "__irshift__")

# -- comparisons: Variables of bools, without a gradient
eq = _comparison("equal", lambda a, b: a == b)
ne = _comparison("not_equal", lambda a, b: a != b)
lt = _comparison("less", lambda a, b: a < b)
le = _comparison("less_equal", lambda a, b: a <= b)
gt = _comparison("greater", lambda a, b: a > b)
ge = _comparison("greater_equal", lambda a, b: a >= b)

# -- indexing and conversions
getitem = F.get_item
bool_ = _scalar(bool)
float_ = _scalar(float)
int_ = _scalar(int)
complex_ = _scalar(complex)
index = _scalar(lambda a: a.__index__())


def reshape(self: Variable, shape: tuple[Any, ...], unlink: bool) -> Variable:
    if unlink:
        with no_backprop_mode():
            out = F.reshape(self, shape)
        if out.creator_node is None:  # eager: no link, so the flag is harmless
            out.requires_grad = self.requires_grad
        return out
    return F.reshape(self, shape)


def transpose(self: Variable, axes: tuple[int, ...] | None) -> Variable:
    return F.transpose(self, axes)


def matrix_transpose(self: Variable) -> Variable:
    return F.matrix_transpose(self)


_extension.operators = sys.modules[__name__]
# The arithmetic operators call their functions without the extension point.
bind(__add__=add, __radd__=radd, __sub__=sub, __mul__=mul, __rmul__=rmul, __truediv__=truediv)
