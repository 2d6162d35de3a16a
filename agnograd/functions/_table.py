"""agnograd's differentiable namespace: the array API, bound to one backend.

Every name resolves through one of three tables: differentiable functions (with a
rule), non-differentiable ones (their results require no gradient) and the
backend's constants and dtypes, which pass through unchanged. A name in none of
them is an ``AttributeError`` that says so, never a silently non-differentiable
fallback.
"""

from __future__ import annotations

from typing import Any

from agnograd._variable import Variable
from agnograd.functions import _elementwise as E
from agnograd.functions import _linalg, _manipulation, _searching, _statistical
from agnograd.functions._core import constant, nondifferentiable

DIFFERENTIABLE: dict[str, Any] = {
    # elementwise
    "abs": E.absolute,
    "add": E.add,
    "cos": E.cos,
    "divide": E.divide,
    "exp": E.exp,
    "log": E.log,
    "multiply": E.multiply,
    "negative": E.negative,
    "pow": E.pow,
    "sin": E.sin,
    "sqrt": E.sqrt,
    "square": E.square,
    "subtract": E.subtract,
    "tanh": E.tanh,
    # statistical
    "mean": _statistical.mean,
    "sum": _statistical.sum,
    # manipulation
    "astype": _manipulation.astype,
    "broadcast_to": _manipulation.broadcast_to,
    "concat": _manipulation.concat,
    "expand_dims": _manipulation.expand_dims,
    "permute_dims": _manipulation.permute_dims,
    "reshape": _manipulation.reshape,
    "squeeze": _manipulation.squeeze,
    "stack": _manipulation.stack,
    # searching
    "where": _searching.where,
    # linear algebra
    "matmul": _linalg.matmul,
    "matrix_transpose": _manipulation.matrix_transpose,
}

NON_DIFFERENTIABLE = {
    "equal",
    "floor_divide",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "sign",
    "isnan",
    "isinf",
    "isfinite",
    "argmax",
    "argmin",
    "argsort",
    "all",
    "any",
}

CREATION_LIKE = {"zeros_like", "ones_like", "empty_like", "full_like"}
CREATION = {"zeros", "ones", "empty", "full", "arange", "eye", "linspace"}
PASSTHROUGH = {
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "e",
    "inf",
    "nan",
    "newaxis",
    "pi",
    "isdtype",
    "finfo",
    "iinfo",
    "result_type",
    "can_cast",
    "__array_api_version__",
}


class Namespace:
    """The differentiable array API namespace of one backend.

    Obtain it with ``x.__array_namespace__()`` on a Variable, or
    :func:`agnograd.namespace` for a backend namespace or array.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([0.5, 1.0]))
    >>> y = xp.sum(xp.exp(x) * xp.ones_like(x))
    >>> y.backward(); x.grad
    array([1.64872127, 2.71828183])
    """

    def __init__(self, raw_namespace: Any) -> None:
        self._raw = raw_namespace
        # array-api-compat tells namespaces apart by __name__.
        self.__name__ = f"agnograd.namespace({raw_namespace.__name__})"

    def __repr__(self) -> str:
        from agnograd._backend import backend_name

        return f"<agnograd namespace for {backend_name(self._raw)}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name != "__array_api_version__":
            raise AttributeError(name)
        if name in DIFFERENTIABLE:
            value = DIFFERENTIABLE[name]
        elif name in NON_DIFFERENTIABLE or name in CREATION_LIKE:
            value = nondifferentiable(name, f"{name} of the backend; the result has no gradient.")
        elif name in CREATION:
            value = _creation(getattr(self._raw, name))
        elif name == "asarray":
            value = self._asarray
        elif name in PASSTHROUGH:
            value = getattr(self._raw, name)
        else:
            raise AttributeError(
                f"agnograd's namespace has no function {name!r} yet; it is neither "
                "differentiable nor listed as non-differentiable"
            )
        setattr(self, name, value)  # cache: later lookups skip __getattr__
        return value

    def _asarray(self, obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None) -> Any:
        if isinstance(obj, Variable):
            if dtype is not None and dtype != obj.dtype:
                return _manipulation.astype(obj, dtype)
            return obj
        return constant(self._raw.asarray(obj, dtype=dtype, device=device, copy=copy))


def _creation(fn: Any) -> Any:
    def apply(*args: Any, **kwargs: Any) -> Variable:
        return constant(fn(*args, **kwargs))

    apply.__name__ = getattr(fn, "__name__", "function")
    apply.__doc__ = f"{apply.__name__} of the backend, as a constant Variable."
    return apply


__all__ = ["DIFFERENTIABLE", "NON_DIFFERENTIABLE", "Namespace"]
