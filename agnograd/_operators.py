"""The operators and conversion dunders of ``Variable``, installed on import.

They live here rather than in ``_variable.py`` because they call the function
modules, which themselves build on ``Variable``.
"""

from __future__ import annotations

from typing import Any

from agnograd import functions as F
from agnograd._backend import is_array
from agnograd._config import no_backprop_mode
from agnograd._inplace import inplace, setitem
from agnograd._variable import Variable
from agnograd.functions import _elementwise as E
from agnograd.functions._core import apply_nondifferentiable

_SCALARS = (bool, int, float, complex)


def _comparison(name: str, op: Any) -> Any:
    def compute(xp: Any, a: Any, b: Any) -> Any:
        return op(a, b)

    compute.__name__ = name

    def compare(self: Variable, other: Any) -> Any:
        if not isinstance(other, Variable) and type(other) not in _SCALARS and not is_array(other):
            return NotImplemented
        return apply_nondifferentiable(compute, (self, other), {})

    return compare


def _reshape(self: Variable, *shape: Any, unlink: bool = False) -> Variable:
    """Return a Variable of the same elements in a new shape (a tuple, ints, ``-1``).

    With ``unlink=True`` (nnabla) the result shares the data but has no creator, so
    no gradient flows back through it.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.Variable(np.arange(6.0)).reshape(2, -1).shape
    (2, 3)
    >>> agnograd.Variable(np.arange(6.0)).reshape((3, 2), unlink=True).creator is None
    True
    """
    if len(shape) == 1 and isinstance(shape[0], tuple | list):
        shape = tuple(shape[0])
    if unlink:
        with no_backprop_mode():
            out = F.reshape(self, shape)
        if out.creator_node is None:  # eager: no link, so the flag is harmless
            out.requires_grad = self.requires_grad
        return out
    return F.reshape(self, shape)


def _transpose(self: Variable, *axes: Any) -> Variable:
    """Permute the axes (reverse them when none are given).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> agnograd.Variable(np.zeros((1, 2, 3))).transpose(2, 0, 1).shape
    (3, 1, 2)
    """
    if len(axes) == 1 and isinstance(axes[0], tuple | list):
        axes = tuple(axes[0])
    return F.transpose(self, axes or None)


def _scalar(convert: Any) -> Any:
    def method(self: Variable) -> Any:
        if self._data is None:
            raise RuntimeError(
                f"{convert.__name__}() of a Variable without data: with auto-forward off, "
                "call forward() first"
            )
        return convert(self._data)

    return method


#: The operators of Variable that call a node directly (`x * 2` is the hottest path).
_ARITHMETIC = {
    "__add__": E._add,
    "__radd__": E._add,
    "__sub__": E._sub,
    "__mul__": E._mul,
    "__rmul__": E._mul,
    "__truediv__": E._div,
}


def install() -> None:
    # Any: the methods are set on the class at runtime (Variable declares them for
    # type checkers), which mypy would otherwise refuse as assignments to methods.
    cls: Any = Variable
    for name, method in _ARITHMETIC.items():
        setattr(cls, name, method)
    cls.__rsub__ = lambda self, other: F.subtract(other, self)
    cls.__rtruediv__ = lambda self, other: F.divide(other, self)
    cls.__floordiv__ = _comparison("floor_divide", lambda a, b: a // b)
    cls.__rfloordiv__ = _comparison("floor_divide", lambda a, b: b // a)
    cls.__pow__ = E._pow
    cls.__rpow__ = lambda self, other: F.pow(other, self)
    cls.__matmul__ = F.matmul
    cls.__rmatmul__ = lambda self, other: F.matmul(other, self)
    cls.__neg__ = F.negative
    cls.__pos__ = lambda self: self
    cls.__abs__ = F.absolute
    cls.__getitem__ = F.get_item
    cls.__eq__ = _comparison("equal", lambda a, b: a == b)
    cls.__ne__ = _comparison("not_equal", lambda a, b: a != b)
    cls.__lt__ = _comparison("less", lambda a, b: a < b)
    cls.__le__ = _comparison("less_equal", lambda a, b: a <= b)
    cls.__gt__ = _comparison("greater", lambda a, b: a > b)
    cls.__ge__ = _comparison("greater_equal", lambda a, b: a >= b)
    cls.__bool__ = _scalar(bool)
    cls.__float__ = _scalar(float)
    cls.__int__ = _scalar(int)
    cls.__complex__ = _scalar(complex)
    cls.__index__ = _scalar(lambda a: a.__index__())
    cls.reshape = _reshape
    cls.transpose = _transpose
    cls.T = property(lambda self: F.transpose(self), doc="Transposition (axes reversed).")
    cls.mT = property(F.matrix_transpose, doc="Transposition of the last two axes.")
    cls.__hash__ = object.__hash__  # hashable by identity though == is elementwise
    cls.__setitem__ = setitem
    cls.__mod__ = lambda self, other: _by_name("remainder")(self, other)
    cls.__rmod__ = lambda self, other: _by_name("remainder")(other, self)
    for op, fn in (
        ("and", "bitwise_and"),
        ("or", "bitwise_or"),
        ("xor", "bitwise_xor"),
        ("lshift", "bitwise_left_shift"),
        ("rshift", "bitwise_right_shift"),
    ):
        setattr(cls, f"__{op}__", _named(fn, reflected=False))
        setattr(cls, f"__r{op}__", _named(fn, reflected=True))
    cls.__invert__ = lambda self: _by_name("bitwise_invert")(self)
    for op, method in (("add", cls.__add__), ("sub", cls.__sub__), ("mul", cls.__mul__),
                       ("truediv", cls.__truediv__), ("floordiv", cls.__floordiv__),
                       ("pow", cls.__pow__), ("matmul", cls.__matmul__), ("mod", cls.__mod__),
                       ("and", cls.__and__), ("or", cls.__or__), ("xor", cls.__xor__),
                       ("lshift", cls.__lshift__), ("rshift", cls.__rshift__)):  # fmt: skip
        setattr(cls, f"__i{op}__", inplace(method, f"__i{op}__"))
    cls.__dlpack__ = _dlpack
    cls.__dlpack_device__ = lambda self: self._data.__dlpack_device__()


def _dlpack(
    self: Any,
    /,
    *,
    stream: Any = None,
    max_version: tuple[int, int] | None = None,
    dl_device: Any = None,
    copy: bool | None = None,
) -> Any:
    """The data's DLPack capsule (the standard's ``__dlpack__``).

    Only the arguments given are passed on, so libraries that predate the newer
    ones (``max_version``, ``dl_device``, ``copy``) still answer.
    """
    given = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
    return self._data.__dlpack__(**{k: v for k, v in given.items() if v is not None})


def _by_name(name: str) -> Any:
    """The namespace function of the standard called ``name`` (its table entry)."""
    from agnograd.functions._table import DIFFERENTIABLE, NON_DIFFERENTIABLE

    fn = DIFFERENTIABLE.get(name) or NON_DIFFERENTIABLE.get(name)
    if fn is None:
        raise TypeError(f"agnograd does not support {name} on Variables yet")
    return fn


def _named(name: str, reflected: bool) -> Any:
    if reflected:
        return lambda self, other: _by_name(name)(other, self)
    return lambda self, other: _by_name(name)(self, other)


install()
