"""The code behind :mod:`agnograd.type_check` (its documentation is there): the types
of the inputs, and running a check; the conditions are in ``_type_check_expressions``."""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import numpy

from agnograd.backends._backend import adapter_for, dtype_name
from agnograd.core._type_check_expressions import (
    InvalidType,
    Testable,
    Variable,
    _eval,
    _function,
)

# Whether checks run on plain values (light mode) rather than expressions.
_light: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "agnograd.type_check.light", default=False
)


# -- the types of the inputs -----------------------------------------------------------

# A library's dtype -> the NumPy dtype of the same name (itself when there is none).
_numpy_dtypes: dict[Any, Any] = {}


def _numpy_dtype(dtype: Any) -> Any:
    if isinstance(dtype, numpy.dtype):
        return dtype
    try:
        return _numpy_dtypes[dtype]
    except (KeyError, TypeError):  # TypeError: an unhashable dtype
        pass
    try:
        found: Any = numpy.dtype(dtype_name(dtype))
    except TypeError:
        found = dtype  # no NumPy counterpart (torch.bfloat16, ...)
    with suppress(TypeError):  # an unhashable dtype is converted every time
        _numpy_dtypes[dtype] = found
    return found


class TypeInfo:
    """The type of one array: ``shape``, ``dtype`` (NumPy's where it has one), ``ndim``
    and ``size``."""

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape = tuple(shape)
        self.dtype = _numpy_dtype(dtype)
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)

    def __repr__(self) -> str:
        return f"TypeInfo(shape={self.shape}, dtype={self.dtype})"


class TypeInfoTuple(tuple[Any, ...]):
    """The input types as expressions (:class:`Variable` of :class:`TypeInfo`),
    named ``name[0]``, ``name[1]``, ..."""

    name: str = "in_types"

    def size(self) -> Variable:
        """The number of inputs, as an expression (``in_types.size``)."""
        return Variable(len(self), f"{self.name}.size")


class LightTypeInfoTuple(tuple[Any, ...]):
    """The input types as plain values, for the first, cheap run of a check."""

    def size(self) -> int:
        """The number of inputs."""
        return len(self)


def _type_info(array: Any) -> TypeInfo:
    return TypeInfo(tuple(array.shape), array.dtype)


def get_types(
    data: tuple[Any, ...], name: str, accept_none: bool, shapes: Sequence[Any] | None = None
) -> TypeInfoTuple:
    """The types of the arrays ``data`` as expressions named ``name[i]``.

    ``accept_none``: a ``None`` entry (a missing gradient) gets an empty type
    instead of failing. ``shapes`` replaces the arrays' shapes.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.type_check import get_types
    >>> (t,) = get_types((np.zeros((2, 3), np.float32),), "in_types", False)
    >>> str(t.shape[1]), t.shape[1].eval(), t.dtype.eval()
    ('in_types[0].shape[1]', 3, dtype('float32'))
    """
    if not isinstance(data, tuple):
        raise AssertionError(
            f"get_types: data must be a tuple of arrays, got {type(data).__name__}"
        )
    infos = []
    for i, array in enumerate(data):
        if array is None and accept_none:
            info = TypeInfo((), None)
        else:
            info = _type_info(array)
            if shapes is not None:
                info = TypeInfo(shapes[i], info.dtype)
        infos.append(Variable(info, f"{name}[{i}]"))
    types = TypeInfoTuple(infos)
    types.name = name
    return types


def get_light_types(
    data: tuple[Any, ...], shapes: Sequence[Any] | None = None
) -> LightTypeInfoTuple:
    """The types of the arrays ``data`` as plain values: the arrays themselves where
    their dtypes are NumPy's (NumPy, CuPy, JAX), a :class:`TypeInfo` otherwise."""
    if shapes is not None:
        return LightTypeInfoTuple(TypeInfo(s, a.dtype) for a, s in zip(data, shapes, strict=True))
    return LightTypeInfoTuple(
        a if isinstance(a.dtype, numpy.dtype) else _type_info(a) for a in data
    )


# -- checking ---------------------------------------------------------------------------


class _LightMode:
    """``with light_mode:``: conditions are plain values, tested without a message."""

    def __init__(self) -> None:
        self._tokens: list[contextvars.Token[bool]] = []

    def __enter__(self) -> None:
        self._tokens.append(_light.set(True))

    def __exit__(self, *exc_info: object) -> None:
        _light.reset(self._tokens.pop())


light_mode = _LightMode()


def in_light_mode() -> bool:
    """Whether checks run on plain values now (the first, cheap run of a check)."""
    return _light.get()


@contextmanager
def get_function_check_context(function: Any) -> Iterator[None]:
    """Name ``function`` in the messages of the checks made in the block."""
    token = _function.set(function)
    try:
        yield
    finally:
        _function.reset(token)


def expect(*bool_exprs: Any) -> None:
    """Raise :class:`InvalidType` unless every condition holds.

    Examples
    --------
    >>> from agnograd.type_check import Variable, expect
    >>> n = Variable(3, "n")
    >>> expect(n >= 1, n % 2 == 1)
    >>> expect(n == 2)
    Traceback (most recent call last):
    ...
    agnograd.type_check.InvalidType: Expect: n == 2
    Actual: 3 != 2
    """
    if _light.get():
        if not all(bool_exprs):
            raise InvalidType("", "")
        return
    for condition in bool_exprs:
        if isinstance(condition, Testable):
            condition.expect()
        elif isinstance(condition, bool | numpy.bool_):
            if not condition:
                raise InvalidType("True", "False")
        else:
            raise TypeError(
                f"type_check.expect: a condition must be a comparison of type-check "
                f"expressions (in_types[0].ndim == 2), got {type(condition).__name__}"
            )


def eval(exp: Any) -> Any:  # noqa: A001 - Chainer's name
    """The value of ``exp`` (an expression, or already a value in light mode)."""
    return exp if _light.get() else _eval(exp)


def make_variable(value: Any, name: str) -> Any:
    """``value`` as an expression named ``name`` (the value itself in light mode)."""
    return value if _light.get() else Variable(value, name)


def argname(in_types: Sequence[Any], names: Sequence[str]) -> None:
    """Name the input types in messages (``x.ndim`` instead of ``in_types[0].ndim``)."""
    if _light.get():
        return
    if len(in_types) != len(names):
        raise InvalidType(
            f"{len(names)} argument(s)",
            f"{len(in_types)} argument(s)",
            "Invalid number of arguments",
        )
    for in_type, name in zip(in_types, names, strict=True):
        if isinstance(in_type, Variable):
            in_type.name = name


def _product(xs: Any) -> Any:
    result = 1
    for x in xs:
        result *= x
    return result


_prod = Variable(_product, "prod")


def prod(xs: Any) -> Any:
    """The product of ``xs``, as an expression written ``prod(xs)``."""
    return _product(xs) if _light.get() else _prod(xs)


def same_types(*arrays: Any) -> bool:
    """Whether the arrays all belong to one array library."""
    libraries = {id(adapter_for(a)) for a in arrays}
    return len(libraries) <= 1


def check_types(function: Any, arrays: tuple[Any, ...]) -> None:
    """Run ``function.check_type_forward`` on the types of its input ``arrays``:
    first on plain values, then, if that fails, on expressions to say why."""
    try:
        with light_mode:
            function.check_type_forward(get_light_types(arrays))
        return
    except InvalidType:
        pass
    with get_function_check_context(function):
        function.check_type_forward(get_types(arrays, "in_types", False))
