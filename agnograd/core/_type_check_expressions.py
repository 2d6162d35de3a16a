"""The conditions of :mod:`agnograd.type_check`: expressions over the input types
(:class:`Expr` and its operators), and :class:`InvalidType`, raised when one does not
hold."""

from __future__ import annotations

import contextvars
import operator
from collections.abc import Callable, Sequence
from typing import Any

# The function whose inputs are being checked, named in InvalidType's message.
_function: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "agnograd.type_check.function", default=None
)


class InvalidType(ValueError):  # noqa: N818 - Chainer's name
    """A condition of a type check does not hold.

    Parameters
    ----------
    expect : str
        The condition, as written (``in_types[0].ndim >= 2``).
    actual : str
        What was found instead (``1 < 2``).
    msg : str, optional
        The whole message; by default the two above, headed by the function being
        checked when there is one.

    Examples
    --------
    >>> from agnograd.type_check import InvalidType
    >>> print(InvalidType("x.ndim == 2", "1 != 2"))
    Expect: x.ndim == 2
    Actual: 1 != 2
    """

    # Tracebacks name it where users import it from, as Chainer's do.
    __module__ = "agnograd.type_check"

    def __init__(self, expect: str, actual: str, msg: str | None = None) -> None:
        if msg is None:
            msg = f"Expect: {expect}\nActual: {actual}"
            function = _function.get()
            if function is not None:
                msg = f"\nInvalid operation is performed in: {function.label} (Forward)\n\n{msg}"
        super().__init__(msg)
        self.expect = expect
        self.actual = actual

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.expect, self.actual, self.args[0]))


# -- expressions ---------------------------------------------------------------------

#: Binding strength of names, constants, attribute access, indexing and calls; the
#: operators bind less, as in Python (``**`` 7, unary 6, ``*`` 5, ``+`` 4, shifts 3,
#: ``&`` 2, ``^`` 1, ``|`` 0, comparisons -1). It decides where ``str`` puts brackets.
ATOM = 8


def _priority(x: Any) -> int:
    return x.priority if isinstance(x, Expr) else ATOM


def _eval(x: Any) -> Any:
    """The value of ``x``: an expression evaluated, lists and tuples item by item."""
    if isinstance(x, Expr):
        return x.eval()
    if isinstance(x, list):
        return [_eval(item) for item in x]
    if isinstance(x, tuple):
        return tuple([_eval(item) for item in x])
    return x


def _repr(x: Any) -> str:
    """``x`` as written in a condition: an expression as itself, anything else by repr."""
    if isinstance(x, Expr):
        return str(x)
    if isinstance(x, list):
        return "[" + ", ".join(_repr(item) for item in x) + "]"
    if isinstance(x, tuple):
        if len(x) == 1:
            return f"({_repr(x[0])},)"
        return "(" + ", ".join(_repr(item) for item in x) + ")"
    return repr(x)


def _bracketed(x: Any, bracket: bool) -> str:
    return f"({_repr(x)})" if bracket else _repr(x)


def _index(key: Any) -> str:
    """A subscript as written between brackets: ``1:2``, ``...``, ``0, 1``."""
    if isinstance(key, tuple):
        return ", ".join(_index(k) for k in key)
    if isinstance(key, slice):
        text = ":".join("" if p is None else _repr(p) for p in (key.start, key.stop))
        return text if key.step is None else f"{text}:{_repr(key.step)}"
    if key is Ellipsis:
        return "..."
    return _repr(key)


class Expr:
    """An expression over the input types, evaluated when asked (:meth:`eval`).

    Operators, attribute access, indexing and calls on an ``Expr`` build larger
    expressions instead of computing, so that a failed condition can be written
    out as it was stated. An ``Expr`` has no truth value: compare it inside
    :func:`expect`, or call :meth:`eval`.
    """

    def __init__(self, priority: int) -> None:
        self.priority = priority

    def eval(self) -> Any:
        """The value of the expression."""
        raise NotImplementedError

    def __bool__(self) -> bool:
        raise RuntimeError(
            f"the type-check expression {self} has no truth value; state conditions with "
            "type_check.expect(...), or evaluate the expression with .eval()"
        )

    def __getattr__(self, name: str) -> GetAttr:
        if name.startswith("_"):  # copy, pickle and friends probe for these
            raise AttributeError(name)
        return GetAttr(self, name)

    def __getitem__(self, key: Any) -> GetItem:
        return GetItem(self, key)

    def __call__(self, *args: Any) -> Call:
        return Call(self, args)

    __hash__ = None  # type: ignore[assignment]  # == builds an expression


def _binary(symbol: str, priority: int, func: Callable[[Any, Any], Any], right: bool) -> Any:
    def method(self: Expr, other: Any) -> BinaryOperator:
        return BinaryOperator(priority, self, other, symbol, func, right)

    def reflected(self: Expr, other: Any) -> BinaryOperator:
        return BinaryOperator(priority, other, self, symbol, func, right)

    return method, reflected


def _unary(symbol: str, func: Callable[[Any], Any]) -> Any:
    def method(self: Expr) -> UnaryOperator:
        return UnaryOperator(6, self, symbol, func)

    return method


def _comparison(symbol: str, inverse: str, func: Callable[[Any, Any], Any]) -> Any:
    def method(self: Expr, other: Any) -> BoolBinaryOperator:
        return BoolBinaryOperator(self, other, symbol, inverse, func)

    return method


# name, symbol, priority, function, right-associative
_BINARY = [
    ("add", "+", 4, operator.add, False),
    ("sub", "-", 4, operator.sub, False),
    ("mul", "*", 5, operator.mul, False),
    ("truediv", "/", 5, operator.truediv, False),
    ("floordiv", "//", 5, operator.floordiv, False),
    ("mod", "%", 5, operator.mod, False),
    ("pow", "**", 7, operator.pow, True),
    ("lshift", "<<", 3, operator.lshift, False),
    ("rshift", ">>", 3, operator.rshift, False),
    ("and", "&", 2, operator.and_, False),
    ("xor", "^", 1, operator.xor, False),
    ("or", "|", 0, operator.or_, False),
]
_UNARY: list[tuple[str, str, Callable[[Any], Any]]] = [
    ("neg", "-", operator.neg),
    ("pos", "+", operator.pos),
    ("invert", "~", operator.invert),
]
# name, symbol, the opposite symbol (to say what was found), function
_COMPARISONS = [
    ("eq", "==", "!=", operator.eq),
    ("ne", "!=", "==", operator.ne),
    ("lt", "<", ">=", operator.lt),
    ("le", "<=", ">", operator.le),
    ("gt", ">", "<=", operator.gt),
    ("ge", ">=", "<", operator.ge),
]
for _name, _symbol, _level, _func, _right in _BINARY:
    _method, _reflected = _binary(_symbol, _level, _func, _right)
    setattr(Expr, f"__{_name}__", _method)
    setattr(Expr, f"__r{_name}__", _reflected)
for _uname, _usymbol, _ufunc in _UNARY:
    setattr(Expr, f"__{_uname}__", _unary(_usymbol, _ufunc))
for _cname, _csymbol, _inverse, _cfunc in _COMPARISONS:
    setattr(Expr, f"__{_cname}__", _comparison(_csymbol, _inverse, _cfunc))


class Constant(Expr):
    """A value, written as its ``repr``.

    Examples
    --------
    >>> from agnograd.type_check import Constant
    >>> c = Constant(10)
    >>> str(c), c.eval()
    ('10', 10)
    """

    def __init__(self, value: Any) -> None:
        super().__init__(ATOM)
        self.value = value

    def eval(self) -> Any:
        return self.value

    def __str__(self) -> str:
        return _repr(self.value)


class Variable(Expr):
    """A value under a name (``in_types[0]``), written as the name.

    Examples
    --------
    >>> from agnograd.type_check import Variable
    >>> n = Variable(3, "n")
    >>> str(n * 2 + 1), (n * 2 + 1).eval()
    ('n * 2 + 1', 7)
    """

    def __init__(self, value: Any, name: str) -> None:
        super().__init__(ATOM)
        self.value = value
        self.name = name

    def eval(self) -> Any:
        return self.value

    def __str__(self) -> str:
        return self.name


class GetAttr(Expr):
    """``obj.name``."""

    def __init__(self, obj: Any, name: Any) -> None:
        super().__init__(ATOM)
        self.obj = obj
        self.name = name

    def eval(self) -> Any:
        return getattr(_eval(self.obj), _eval(self.name))

    def __str__(self) -> str:
        name = self.name
        if isinstance(name, Constant):
            name = name.value
        obj = _bracketed(self.obj, _priority(self.obj) < ATOM)
        if isinstance(name, str):
            return f"{obj}.{name}"
        return f"getattr({_repr(self.obj)}, {_repr(self.name)})"


class GetItem(Expr):
    """``obj[key]``."""

    def __init__(self, obj: Any, key: Any) -> None:
        super().__init__(ATOM)
        self.obj = obj
        self.key = key

    def eval(self) -> Any:
        return _eval(self.obj)[_eval(self.key)]

    def __str__(self) -> str:
        return f"{_bracketed(self.obj, _priority(self.obj) < ATOM)}[{_index(self.key)}]"


class Call(Expr):
    """``obj(*args)``."""

    def __init__(self, obj: Any, args: Sequence[Any]) -> None:
        super().__init__(ATOM)
        self.obj = obj
        self.args = tuple(args)

    def eval(self) -> Any:
        return _eval(self.obj)(*[_eval(a) for a in self.args])

    def __str__(self) -> str:
        args = ", ".join(_repr(a) for a in self.args)
        return f"{_bracketed(self.obj, _priority(self.obj) < ATOM)}({args})"


class UnaryOperator(Expr):
    """A prefix operator (``-x``) of binding strength ``priority``."""

    def __init__(self, priority: int, term: Any, exp: str, func: Callable[[Any], Any]) -> None:
        super().__init__(priority)
        self.term = term
        self.exp = exp
        self.func = func

    def eval(self) -> Any:
        return self.func(_eval(self.term))

    def __str__(self) -> str:
        return self.exp + _bracketed(self.term, _priority(self.term) < self.priority)


class BinaryOperator(Expr):
    """An infix operator (``x + y``) of binding strength ``priority``; ``**`` groups to
    the right, the others to the left, which decides where ``str`` puts brackets."""

    def __init__(
        self,
        priority: int,
        lhs: Any,
        rhs: Any,
        exp: str,
        func: Callable[[Any, Any], Any],
        right_associative: bool = False,
    ) -> None:
        super().__init__(priority)
        self.lhs = lhs
        self.rhs = rhs
        self.exp = exp
        self.func = func
        self.right_associative = right_associative

    def eval(self) -> Any:
        return self.func(_eval(self.lhs), _eval(self.rhs))

    def __str__(self) -> str:
        p, right = self.priority, self.right_associative
        lp, rp = _priority(self.lhs), _priority(self.rhs)
        lhs = _bracketed(self.lhs, lp < p or (right and lp == p))
        rhs = _bracketed(self.rhs, rp < p or (not right and rp == p))
        return f"{lhs} {self.exp} {rhs}"


class Testable:
    """A condition that :func:`expect` can test."""

    def expect(self) -> None:
        """Raise :class:`InvalidType` unless the condition holds."""
        raise NotImplementedError


class BoolBinaryOperator(Expr, Testable):
    """A comparison (``x.ndim == 2``): ``inv`` is the opposite operator, with which a
    failure reports what was found (``1 != 2``)."""

    def __init__(
        self, lhs: Any, rhs: Any, exp: str, inv: str, func: Callable[[Any, Any], Any]
    ) -> None:
        super().__init__(-1)
        self.lhs = lhs
        self.rhs = rhs
        self.exp = exp
        self.inv = inv
        self.func = func

    def eval(self) -> Any:
        return self.func(_eval(self.lhs), _eval(self.rhs))

    def expect(self) -> None:
        left, right = _eval(self.lhs), _eval(self.rhs)
        if not self.func(left, right):
            raise InvalidType(str(self), f"{left} {self.inv} {right}")

    def __str__(self) -> str:
        return f"{_repr(self.lhs)} {self.exp} {_repr(self.rhs)}"
