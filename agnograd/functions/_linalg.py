"""Linear algebra: ``matmul`` (with the standard's 1-D rules) and ``linear``."""

from __future__ import annotations

from typing import Any

from agnograd._function import FunctionNode
from agnograd._namespace import namespace_of
from agnograd._variable import Variable
from agnograd.functions._core import shape_of
from agnograd.functions._manipulation import matrix_transpose


class MatMul(FunctionNode):
    _retain_in = (0, 1)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.xp.matmul(inputs[0], inputs[1]),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        a, b = self.get_retained_inputs()
        (g,) = grad_outputs
        xp = namespace_of(g)
        # Treat 1-D operands as matrices (a row on the left, a column on the right),
        # as the standard defines matmul, and drop the added axis again afterwards.
        a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
        if a_vec:
            a = xp.reshape(a, (1, a.shape[0]))
            g = xp.reshape(g, (*g.shape[:-1], 1, g.shape[-1]) if not b_vec else (1, 1))
        if b_vec:
            b = xp.reshape(b, (b.shape[0], 1))
            if not a_vec:
                g = xp.reshape(g, (*g.shape, 1))
        result = []
        for i in indexes:
            if i == 0:
                ga = xp.matmul(g, xp.matrix_transpose(b))
                if a_vec:
                    ga = xp.reshape(ga, (*ga.shape[:-2], ga.shape[-1]))
                result.append(ga)
            else:
                gb = xp.matmul(xp.matrix_transpose(a), g)
                if b_vec:
                    gb = xp.reshape(gb, gb.shape[:-1])
                result.append(gb)
        return tuple(result)


def matmul(x1: Any, x2: Any, /) -> Variable:
    """Matrix product with broadcasting over leading (batch) axes.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> a = agnograd.Variable(np.array([[1.0, 2.0]]))
    >>> y = F.matmul(a, np.array([[3.0], [4.0]]))
    >>> y
    variable([[11.]])
    >>> y.backward(); a.grad
    array([[3., 4.]])
    """
    for name, x in (("x1", x1), ("x2", x2)):
        shape = shape_of(x)
        if len(shape) == 0:
            raise ValueError(f"matmul: {name} is 0-d; matmul needs at least one dimension")
    return MatMul().apply((x1, x2))[0]


def linear(x: Any, W: Any, b: Any = None) -> Variable:  # noqa: N803 - Chainer's name
    """Affine map ``x @ W.T + b`` with ``W`` of shape ``(out, in)`` (Chainer's layout).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> F.linear(np.ones((1, 2)), np.array([[1.0, 2.0]]), np.array([0.5]))
    variable([[3.5]])
    """
    y = matmul(x, matrix_transpose(W))
    return y if b is None else y + b


DIFFERENTIABLE = {"matmul": matmul, "matrix_transpose": matrix_transpose}
NON_DIFFERENTIABLE: dict[str, object] = {}
UNSUPPORTED: dict[str, str] = {}
