"""Chainer's type checking of a function's inputs: ``check_type_forward`` and ``expect``.

A :class:`~agnograd.FunctionNode` (or old-style :class:`~agnograd.Function`) that
defines ``check_type_forward(in_types)`` has it called by ``apply`` before
``forward``, with one entry per input. The check states what must hold with
:func:`expect`; when something does not, ``apply`` raises :class:`InvalidType`
saying what was expected and what was found::

    def check_type_forward(self, in_types):
        x_type, w_type = in_types
        type_check.expect(x_type.dtype.kind == "f", x_type.ndim == 2,
                          x_type.shape[1] == w_type.shape[0])

The check runs twice only when it fails: first on the arrays themselves (each
comparison a plain ``bool``, so a passing check costs little), then on
expressions (:class:`Expr`) that remember how each value was obtained, to write
the message (``Expect: in_types[0].ndim == 2`` / ``Actual: 1 != 2``).

Whatever the array library, ``dtype`` is given as a NumPy dtype where the library's
dtype has a NumPy counterpart of the same name (``torch.float32`` is seen as
``numpy.float32``), so a check written for Chainer (``x.dtype == numpy.float32``,
``x.dtype.kind == "f"``) runs unchanged on every backend.

Examples
--------
>>> import numpy as np, agnograd
>>> from agnograd import type_check
>>> class Linear(agnograd.FunctionNode):
...     def check_type_forward(self, in_types):
...         x, w = in_types
...         type_check.expect(x.ndim == 2, x.shape[1] == w.shape[0])
...     def forward(self, inputs):
...         x, w = inputs
...         return (x @ w,)
>>> try:
...     Linear().apply((np.ones((2, 3)), np.ones((4, 5))))
... except type_check.InvalidType as error:
...     print(error)
<BLANKLINE>
Invalid operation is performed in: Linear (Forward)
<BLANKLINE>
Expect: in_types[0].shape[1] == in_types[1].shape[0]
Actual: 3 != 4
"""

from agnograd.core._type_check import (
    LightTypeInfoTuple,
    TypeInfo,
    TypeInfoTuple,
    argname,
    eval,  # noqa: A004 - Chainer's name
    expect,
    get_function_check_context,
    get_light_types,
    get_types,
    in_light_mode,
    light_mode,
    make_variable,
    prod,
    same_types,
)
from agnograd.core._type_check_expressions import (
    BinaryOperator,
    BoolBinaryOperator,
    Call,
    Constant,
    Expr,
    GetAttr,
    GetItem,
    InvalidType,
    Testable,
    UnaryOperator,
    Variable,
)

__all__ = [
    "BinaryOperator",
    "BoolBinaryOperator",
    "Call",
    "Constant",
    "Expr",
    "GetAttr",
    "GetItem",
    "InvalidType",
    "LightTypeInfoTuple",
    "Testable",
    "TypeInfo",
    "TypeInfoTuple",
    "UnaryOperator",
    "Variable",
    "argname",
    "eval",
    "expect",
    "get_function_check_context",
    "get_light_types",
    "get_types",
    "in_light_mode",
    "light_mode",
    "make_variable",
    "prod",
    "same_types",
]
