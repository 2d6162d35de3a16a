"""The names of the array API standard (2025.12), by chapter of the specification.

The namespace's tables must account for every one of them: differentiable,
non-differentiable, unsupported with a reason, or passed through from the backend
(dtypes, constants, dtype queries). ``tests/test_namespace_coverage.py`` checks it.
"""

from __future__ import annotations

import ast
import functools
import inspect

#: The version of the standard agnograd's namespace implements.
VERSION = "2025.12"

CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")
DATA_TYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
)  # fmt: skip
DATA_TYPE_FUNCTIONS = ("astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type")
INSPECTION = ("__array_namespace_info__",)
CREATION = (
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
)  # fmt: skip
ELEMENTWISE = (
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "ceil", "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1",
    "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf",
    "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round",
    "sign", "signbit", "sin", "sinh", "sqrt", "square", "subtract", "tan", "tanh", "trunc",
)  # fmt: skip
INDEXING = ("take", "take_along_axis")
LINEAR_ALGEBRA = ("matmul", "matrix_transpose", "tensordot", "vecdot")
MANIPULATION = (
    "broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "expand_dims", "flip",
    "moveaxis", "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile",
    "unstack",
)  # fmt: skip
SEARCHING = ("argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where")
SET = ("isin", "unique_all", "unique_counts", "unique_inverse", "unique_values")
SORTING = ("argsort", "sort")
STATISTICAL = (
    "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var",
)  # fmt: skip
UTILITY = ("all", "any", "diff")
# fmt: off
LINALG = tuple(
    "linalg." + name
    for name in (
        "cholesky",
        "cross",
        "det",
        "diagonal",
        "eig",  # 2025.12
        "eigh",
        "eigvals",  # 2025.12
        "eigvalsh",
        "inv",
        "matmul",
        "matrix_norm",
        "matrix_power",
        "matrix_rank",
        "matrix_transpose",
        "outer",
        "pinv",
        "qr",
        "slogdet",
        "solve",
        "svd",
        "svdvals",
        "tensordot",
        "trace",
        "vecdot",
        "vector_norm",
    )
)
FFT = tuple(
    "fft." + name
    for name in (
        "fft",
        "fftfreq",
        "fftn",
        "fftshift",
        "hfft",
        "ifft",
        "ifftn",
        "ifftshift",
        "ihfft",
        "irfft",
        "irfftn",
        "rfft",
        "rfftfreq",
        "rfftn",
    )
)

ALL = (
    CONSTANTS + DATA_TYPES + DATA_TYPE_FUNCTIONS + INSPECTION + CREATION + ELEMENTWISE
    + INDEXING + LINEAR_ALGEBRA + MANIPULATION + SEARCHING + SET + SORTING + STATISTICAL
    + UTILITY + LINALG + FFT
)  # fmt: skip


# The standard's parameter lists of the functions agnograd forwards to the backend
# without writing them out (its own functions spell their signatures in Python, and
# the elementwise ones without a gradient take theirs from their row: see _rows).
# ``signature(name)`` turns them into what ``inspect.signature`` reports and what the
# forwarding wrapper checks each call against.
_REDUCTION = "x, /, *, axis=None, keepdims=False"
_LIKE = "x, /, *, dtype=None, device=None"
_FILLED = "shape, *, dtype=None, device=None"
SIGNATURES = {
    **dict.fromkeys(("all", "any", "argmax", "argmin", "count_nonzero"), _REDUCTION),
    **dict.fromkeys(("empty_like", "ones_like", "zeros_like"), _LIKE),
    **dict.fromkeys(("empty", "ones", "zeros"), _FILLED),
    "arange": "start, /, stop=None, step=1, *, dtype=None, device=None",
    "eye": "n_rows, n_cols=None, /, *, k=0, dtype=None, device=None",
    "full": "shape, fill_value, *, dtype=None, device=None",
    "full_like": "x, /, fill_value, *, dtype=None, device=None",
    "linspace": "start, stop, /, num, *, dtype=None, device=None, endpoint=True",
    "can_cast": "from_, to, /",
    "finfo": "type, /",
    "iinfo": "type, /",
    "result_type": "*arrays_and_dtypes",
    "searchsorted": "x1, x2, /, *, side='left', sorter=None",
    "argsort": "x, /, *, axis=-1, descending=False, stable=True",
    "unique_values": "x, /",
    "isin": "x1, x2, /, *, invert=False",  # 2025.12
}  # fmt: skip


def signature(name: str) -> inspect.Signature:
    """The standard's signature of ``name``, from :data:`SIGNATURES`.

    Examples
    --------
    >>> from agnograd.functions._standard import signature
    >>> signature("argsort")
    <Signature (x, /, *, axis=-1, descending=False, stable=True)>
    """
    return parse_signature(SIGNATURES[name])


@functools.cache
def parse_signature(text: str) -> inspect.Signature:
    """The signature of the parameter list ``text``, written as in the standard.

    Examples
    --------
    >>> from agnograd.functions._standard import parse_signature
    >>> parse_signature("x1, x2, /")
    <Signature (x1, x2, /)>
    """
    param = inspect.Parameter
    kind: inspect._ParameterKind = param.POSITIONAL_OR_KEYWORD
    params: list[inspect.Parameter] = []
    for item in text.split(", "):
        if item == "/":
            params = [p.replace(kind=param.POSITIONAL_ONLY) for p in params]
        elif item == "*":
            kind = param.KEYWORD_ONLY
        elif item.startswith("*"):
            params.append(param(item[1:], param.VAR_POSITIONAL))
            kind = param.KEYWORD_ONLY
        else:
            pname, _, default = item.partition("=")
            value = ast.literal_eval(default) if default else param.empty
            params.append(param(pname, kind, default=value))
    return inspect.Signature(params)
