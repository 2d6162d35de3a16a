"""Elementwise functions of the array API standard: the chapter and its tables.

Each function is declared once, as a row (see ``_rows.py``): those of one array in
``_unary.py``, those of two in ``_binary.py``; the operators' arithmetic (``add``,
``subtract``, ``multiply``, ``divide``, ``pow``) is written out in ``_arithmetic.py``,
and ``clip`` here; the chapter's tables gather the rows of the four modules. Functions
without a gradient (comparisons, rounding, ``sign``, ``signbit``, the ``is*`` tests,
bitwise and logical functions, ``nextafter``, ``floor_divide``) are nodes whose
results require none.

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

from typing import TYPE_CHECKING, Any

from agnograd.backends._abstract import register_elementwise
from agnograd.backends._backend import SCALARS
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._arithmetic import ROWS as ARITHMETIC_ROWS
from agnograd.functions._arithmetic import sum_of_tangents
from agnograd.functions._binary import ROWS as BINARY_ROWS
from agnograd.functions._core import ARRAY
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows, chapter, namespace_tables
from agnograd.functions._unary import ROWS as UNARY_ROWS

ROWS = Rows(__name__)

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

    def _where(self, xp: Any, arrays: Any, i: int) -> Any:
        """Where input ``i`` is the result (its derivative is 1 there, else 0); None
        for everywhere."""
        x, low, high = self._fill(arrays)
        role = self.roles[i]
        if role is None:  # x: 1 inside [min, max], bounds included
            if low is None and high is None:
                return None
            if low is None:
                return x <= high
            if high is None:
                return x >= low
            return xp.logical_and(x >= low, x <= high)
        if role == 0:  # min wins where x is below it (and below max)
            return x < low if high is None else xp.logical_and(x < low, low < high)
        # max wins where x is above it, and everywhere when max < min
        return x > high if low is None else xp.logical_or(x > high, high < low)

    def _jvp(self, xp: Any, inputs: Any, outputs: Any, tangents: Any) -> tuple[Any, ...]:
        terms = []
        for i, t in enumerate(tangents):
            if t is not None:
                where = self._where(xp, inputs, i)
                terms.append(t if where is None else xp.where(where, t, 0.0))
        return (sum_of_tangents(xp, terms, outputs[0]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        kept = self.get_retained_inputs()
        result = []
        for i in indexes:
            where = self._where(xp, kept, i)
            result.append(gy if where is None else xp.where(where, gy, 0.0))
        return tuple(result)


@ROWS.declare("clip", arity=1)  # its domain is written out in agnograd.testing
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


#: The rows of the chapter, by the standard's name (and the extras declared with them),
#: and its tables (the namespace's come from agnograd.functions._table, which gathers
#: every chapter's rows).
CHAPTER = chapter(UNARY_ROWS, BINARY_ROWS, ARITHMETIC_ROWS, ROWS)
# Define-then-run finds their results' shapes and dtypes by one rule (_abstract).
register_elementwise(*(name for name, row in CHAPTER.items() if row.standard))
DIFFERENTIABLE, NON_DIFFERENTIABLE = namespace_tables(CHAPTER)

# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead: these functions, and ROWS and the helpers imported here.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
