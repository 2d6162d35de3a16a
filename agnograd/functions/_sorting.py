"""Sorting functions of the array API standard and their rules.

``sort`` is differentiable through its permutation: it gathers ``x`` at
``argsort(x)`` (a stable sort, so ties keep their order and each element's
gradient goes back to where it came from). ``argsort`` has no gradient.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.core._variable import Variable
from agnograd.functions._core import shape_of
from agnograd.functions._indexing import take_along_axis
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)

argsort = ROWS.nondifferentiable(
    "argsort",
    """Indices that sort ``x`` along ``axis``; the result has no gradient.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.namespace(np).argsort(np.array([3.0, 1.0, 2.0]))
    variable([1, 2, 0])
    """,
)


@ROWS.declare("sort")
def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Variable:
    """Sort ``x`` along ``axis``; the gradient goes back through the permutation.

    The sort is always stable (``stable=False`` is allowed but not needed), so tied
    elements keep their order and the gradient assignment at ties is reproducible.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([3.0, 1.0, 2.0]))
    >>> y = xp.sort(x, descending=True)
    >>> y
    variable([3., 2., 1.])
    >>> F.sum(y * np.array([1.0, 10.0, 100.0])).backward(); x.grad
    array([  1., 100.,  10.])
    """
    ndim = len(shape_of(x))
    if not -ndim <= axis < ndim:
        raise ValueError(f"sort: axis {axis} is out of range for an array of {ndim} dimensions")
    order = argsort(x, axis=axis, descending=descending, stable=True)
    return take_along_axis(x, order, axis=axis)


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
