# ruff: noqa: A004 - the standard's names (sum, pow, round) shadow builtins on purpose
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

from agnograd._transfer import copy
from agnograd.functions import _binary, _elementwise, _rows, _unary
from agnograd.functions._binary import *  # noqa: F403 - the functions of its rows
from agnograd.functions._creation import meshgrid, tril, triu
from agnograd.functions._elementwise import *  # noqa: F403 - the functions of its rows
from agnograd.functions._indexing import get_item, take, take_along_axis
from agnograd.functions._linalg import linear, matmul, tensordot, vecdot
from agnograd.functions._manipulation import (
    astype,
    broadcast_arrays,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    matrix_transpose,
    moveaxis,
    permute_dims,
    repeat,
    reshape,
    roll,
    squeeze,
    stack,
    tile,
    transpose,
    unstack,
)
from agnograd.functions._misc import identity
from agnograd.functions._nn import (
    log_softmax,
    mean_squared_error,
    softmax,
    softmax_cross_entropy,
)
from agnograd.functions._searching import where
from agnograd.functions._sorting import sort
from agnograd.functions._statistical import (
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from agnograd.functions._unary import *  # noqa: F403 - the functions of its rows
from agnograd.functions._utility import diff

__all__ = [
    *_rows.exported(_unary, _binary, _elementwise),  # the functions of their rows
    "astype",
    "broadcast_arrays",
    "broadcast_to",
    "concat",
    "copy",
    "cumulative_prod",
    "cumulative_sum",
    "diff",
    "expand_dims",
    "flip",
    "get_item",
    "identity",
    "linear",
    "log_softmax",
    "matmul",
    "matrix_transpose",
    "max",
    "mean",
    "mean_squared_error",
    "meshgrid",
    "min",
    "moveaxis",
    "permute_dims",
    "prod",
    "repeat",
    "reshape",
    "roll",
    "softmax",
    "softmax_cross_entropy",
    "sort",
    "squeeze",
    "stack",
    "std",
    "sum",
    "take",
    "take_along_axis",
    "tensordot",
    "tile",
    "transpose",
    "tril",
    "triu",
    "unstack",
    "var",
    "vecdot",
    "where",
]
