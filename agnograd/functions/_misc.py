"""``identity``: outputs that share the inputs' arrays, with a graph link (an extra of
``agnograd.functions``, declared as a row: see ``_rows.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)


class Identity(FunctionNode):
    linear = True  # forward mode: applied to the tangents

    linear = True  # forward mode: applied to the tangents

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return inputs

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple([grad_outputs[i] for i in indexes])


@ROWS.declare("identity", standard=False)
def identity(*inputs: Any) -> Variable | tuple[Variable, ...]:
    """Return new Variables holding the same arrays, linked to the inputs in the graph.

    One input gives one Variable, several give a tuple (Chainer's convention).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> a = np.ones(2)
    >>> F.identity(a).array is a
    True
    """
    outputs = Identity().apply(inputs)
    return outputs[0] if len(outputs) == 1 else outputs


class AsArrayCopy(FunctionNode):
    """``asarray(x, copy=True)``: a new array; the gradient passes through unchanged."""

    linear = True  # forward mode: applied to the tangents

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.asarray(inputs[0], copy=True),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return grad_outputs


# Derived from the rows. Type checkers cannot evaluate it and take the module's public
# names instead.
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
