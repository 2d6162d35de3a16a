"""Searching functions: ``where`` (differentiable in its branches); ``argmax``,
``argmin``, ``count_nonzero``, ``nonzero`` and ``searchsorted`` return indices or
counts and have no gradient."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.backends._backend import SCALARS
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import held
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows
from agnograd.functions._set import apply_nondifferentiable_tuple

ROWS = Rows(__name__)


class Where(FunctionNode):
    """``where(condition, x1, x2)``: the condition is input 0 and gets no gradient;
    Python-scalar branches are kept in the node."""

    def __init__(self, x1: Any, x2: Any) -> None:
        self.scalars = (x1, x2)  # the Python scalar operands; None where an array is given

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        # Linear in the branches: where(condition, t1, t2), a zero for a Python scalar
        # or a branch without a tangent.
        it = iter(tangents[1:])
        t1, t2 = (next(it) if s is None else None for s in self.scalars)
        if t1 is None and t2 is None:
            return (None,)
        y = outputs[0]
        t1 = xp.zeros_like(y) if t1 is None else t1
        t2 = xp.zeros_like(y) if t2 is None else t2
        return (xp.where(inputs[0], t1, t2),)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        it = iter(inputs)
        condition = next(it)
        x1, x2 = (next(it) if s is None else s for s in self.scalars)
        return (self.xp.where(condition, x1, x2),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        condition = held(self.get_retained_inputs()[0])
        zero = xp.zeros_like(gy)
        branches = [None, *(i for i, s in enumerate(self.scalars) if s is None)]
        result: list[Any] = []
        for i in indexes:
            if branches[i] is None:
                result.append(None)
            elif branches[i] == 0:
                result.append(xp.where(condition, gy, zero))
            else:
                result.append(xp.where(condition, zero, gy))
        return tuple(result)

    _retain_in = (0,)


@ROWS.declare("where")
def where(condition: Any, x1: Any, x2: Any, /) -> Variable:
    """Elements of ``x1`` where ``condition`` holds, else of ``x2``.

    Either of ``x1`` and ``x2`` may be a Python scalar; ``condition`` gets no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> x = agnograd.Variable(np.array([-1.0, 2.0]))
    >>> y = F.where(x > 0, x, 0.0)
    >>> y
    variable([0., 2.])
    >>> F.sum(y).backward(); x.grad
    array([0., 1.])
    """
    scalars = tuple(x if type(x) in SCALARS else None for x in (x1, x2))
    arrays = tuple(x for x in (x1, x2) if type(x) not in SCALARS)
    if not arrays:
        raise TypeError("where: x1 and x2 are both Python scalars; make one of them an array")
    return Where(*scalars).apply((condition, *arrays))[0]


@ROWS.declare("nonzero", differentiable=False)
def nonzero(x: Any, /) -> tuple[Variable, ...]:
    """Indices of the nonzero elements of ``x``, one integer array per axis; no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).nonzero(np.array([[0.0, 2.0], [3.0, 0.0]]))
    (variable([0, 1]), variable([1, 0]))
    """

    def compute(xp: Any, a: Any) -> Any:
        return xp.nonzero(a)

    compute.__name__ = "nonzero"
    return apply_nondifferentiable_tuple(compute, (x,), {})


# -- without a gradient, forwarded to the backend
ROWS.nondifferentiable("argmax")
ROWS.nondifferentiable("argmin")
ROWS.nondifferentiable("count_nonzero")
ROWS.nondifferentiable("searchsorted")


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
