"""Differentiable functions (``import agnograd.functions as F``).

Each takes Variables or raw arrays of any array API library and returns Variables.
The names of the array API standard (``exp``, ``permute_dims``, ``concat``, ...)
come with Chainer's neural-network functions (``relu``, ``softmax``, ``linear``,
``softmax_cross_entropy``, ...).

Examples
--------
>>> import numpy as np, agnograd, agnograd.functions as F
>>> x = agnograd.Variable(np.array([[1.0, -2.0]]))
>>> loss = F.sum(F.relu(x) * 3)
>>> loss.backward(); x.grad
array([[3., 0.]])
"""

from agnograd.functions._elementwise import (
    absolute,
    add,
    cos,
    divide,
    equal,
    exp,
    floor_divide,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    multiply,
    negative,
    not_equal,
    pow,
    sign,
    sin,
    sqrt,
    square,
    subtract,
    tanh,
)
from agnograd.functions._indexing import get_item
from agnograd.functions._linalg import linear, matmul
from agnograd.functions._manipulation import (
    astype,
    broadcast_to,
    concat,
    expand_dims,
    matrix_transpose,
    permute_dims,
    reshape,
    squeeze,
    stack,
    transpose,
)
from agnograd.functions._misc import identity
from agnograd.functions._nn import (
    log_softmax,
    mean_squared_error,
    relu,
    sigmoid,
    softmax,
    softmax_cross_entropy,
)
from agnograd.functions._searching import where
from agnograd.functions._statistical import mean, sum

__all__ = [
    "absolute",
    "add",
    "astype",
    "broadcast_to",
    "concat",
    "cos",
    "divide",
    "equal",
    "exp",
    "expand_dims",
    "floor_divide",
    "get_item",
    "greater",
    "greater_equal",
    "identity",
    "less",
    "less_equal",
    "linear",
    "log",
    "log_softmax",
    "matmul",
    "matrix_transpose",
    "mean",
    "mean_squared_error",
    "multiply",
    "negative",
    "not_equal",
    "permute_dims",
    "pow",
    "relu",
    "reshape",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "softmax_cross_entropy",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "subtract",
    "sum",
    "tanh",
    "transpose",
    "where",
]
