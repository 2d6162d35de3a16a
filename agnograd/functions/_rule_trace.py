"""Gradient rules traced into straight-line code: a compiled plan's lines
(:mod:`agnograd.static._compiled_steps`) and the arithmetic nodes' backward
(:mod:`agnograd.functions._operator_rows`).

A rule of the elementwise rows (``rule(xp, x, y, gy)``, or of an operand of two,
``rule(xp, x1, x2, y, gy)``: those of ``+``, ``-``, ``*``, ``/`` and ``**`` too) is
called once with a namespace that writes down each array operation instead of
running it; the plan then runs those lines, the same operations in the same order,
without the calls of the rule and its helpers. A Python scalar among the arguments
(the constant of ``x * 2.0``) is passed as it is: the lines read it as a bound name.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from typing import Any


class _UntraceableError(Exception):
    """A rule did something the tracer cannot write down (it is then called instead)."""


class _Sym:
    """An array of a traced rule: a name in the generated code, with the dtype of
    the arrays it stands for (rules branch on dtypes, which the plan fixes)."""

    def __init__(self, tracer: _Tracer, name: str, dtype: Any) -> None:
        self._tracer, self.name, self.dtype = tracer, name, dtype

    def __array_namespace__(self, api_version: Any = None) -> _Tracer:
        return self._tracer

    def __bool__(self) -> bool:
        raise _UntraceableError("a rule branches on values")

    def _op(self, other: Any, op: str, reflected: bool = False) -> _Sym:
        a, b = self.name, self._tracer.operand(other)
        return self._tracer.emit(f"{b} {op} {a}" if reflected else f"{a} {op} {b}")

    def __add__(self, other: Any) -> _Sym:
        return self._op(other, "+")

    def __radd__(self, other: Any) -> _Sym:
        return self._op(other, "+", True)

    def __sub__(self, other: Any) -> _Sym:
        return self._op(other, "-")

    def __rsub__(self, other: Any) -> _Sym:
        return self._op(other, "-", True)

    def __mul__(self, other: Any) -> _Sym:
        return self._op(other, "*")

    def __rmul__(self, other: Any) -> _Sym:
        return self._op(other, "*", True)

    def __truediv__(self, other: Any) -> _Sym:
        return self._op(other, "/")

    def __rtruediv__(self, other: Any) -> _Sym:
        return self._op(other, "/", True)

    def __pow__(self, other: Any) -> _Sym:
        return self._op(other, "**")

    def __rpow__(self, other: Any) -> _Sym:
        return self._op(other, "**", True)

    def __neg__(self) -> _Sym:
        return self._tracer.emit(f"-{self.name}")

    def _compared(self, other: Any) -> Any:
        # Without these, Python would compare identities and answer False.
        raise _UntraceableError("a rule compares arrays")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _compared
    __hash__ = None  # type: ignore[assignment]


class _Tracer:
    """The namespace a traced rule gets: each array function it calls on traced
    arrays becomes a line; dtype queries and the like pass through to ``xp``."""

    def __init__(self, xp: Any, dtype: Any, bind: Callable[[Any], str]) -> None:
        self._xp, self._dtype, self._bind = xp, dtype, bind
        self.lines: list[str] = []

    def operand(self, value: Any) -> str:
        if isinstance(value, _Sym):
            return value.name
        if type(value) in (int, float, complex, bool):
            return self._bind(value)
        raise _UntraceableError(f"operand {type(value).__name__}")

    def emit(self, expression: str) -> _Sym:
        name = f"t{len(self.lines)}"
        self.lines.append(f"{name} = {expression}")
        return _Sym(self, name, self._dtype)

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._xp, name)
        if not callable(fn):
            return fn

        def call(*args: Any, **kwargs: Any) -> Any:
            if not any(isinstance(a, _Sym) for a in (*args, *kwargs.values())):
                return fn(*args, **kwargs)  # isdtype, finfo, ...: no array involved
            if kwargs:
                raise _UntraceableError("keyword arguments")
            return self.emit(f"{self._bind(fn)}({', '.join(self.operand(a) for a in args)})")

        return call


def trace_rule(
    rule: Any, xp: Any, x: str, y: str, dtype: Any, bind: Callable[[Any], str]
) -> list[str] | None:
    """The lines of ``rule(xp, x, y, gy)`` as straight-line code computing ``gx``: the
    same array operations in the same order, without the calls of the rule and its
    helpers (``conjugate`` of a real array is no operation). None if the rule does
    something else than elementwise arithmetic and namespace calls, or nothing."""
    lines = trace(rule, xp, (x, y), dtype, bind)
    return None if lines is None or lines == ["gx = gy"] else lines


def trace(
    rule: Any, xp: Any, args: tuple[Any, ...], dtype: Any, bind: Callable[[Any], str]
) -> list[str] | None:
    """The lines of ``rule(xp, *args, gy)`` computing ``gx`` (see :func:`trace_rule`),
    where each of ``args`` is the name of an array of ``dtype`` in the lines, ``"None"``
    (the rule does not read it) or a Python scalar, passed as it is; ``gx = gy`` where
    the rule gives ``gy`` itself. None if the rule cannot be traced."""
    tracer = _Tracer(xp, dtype, bind)
    try:
        values = [
            a if not isinstance(a, str) else None if a == "None" else _Sym(tracer, a, dtype)
            for a in args
        ]
        gx = rule(tracer, *values, _Sym(tracer, "gy", dtype))
    except Exception:  # anything the tracer cannot follow: the rule is called instead
        return None
    if not isinstance(gx, _Sym) or (gx.name != "gy" and not tracer.lines):
        return None
    if gx.name == "gy":
        return ["gx = gy"]
    return _inlined(tracer.lines, gx.name)


_TEMPORARY = re.compile(r"\bt\d+\b")


def _inlined(lines: list[str], result: str) -> list[str]:
    """``lines`` (``tK = expression``) and ``gx = result``, with each temporary used
    once written into the expression that uses it: a temporary then dies as soon as
    it is used, not when the generated function returns (the same operations on the
    same values: the results are the same bit for bit). One used more than once is
    kept, and dropped after the last line."""
    exprs = dict(line.split(" = ", 1) for line in lines)
    uses = collections.Counter(_TEMPORARY.findall(" ".join([*exprs.values(), result])))
    kept: dict[str, str] = {}  # the temporaries left as lines, with their expressions
    inline: dict[str, str] = {}  # those written into their user

    def expand(expr: str) -> str:
        return _TEMPORARY.sub(lambda m: inline.get(m.group(), m.group()), expr)

    for name, expr in exprs.items():
        expr = expand(expr)
        if uses[name] == 1:
            inline[name] = f"({expr})"
        else:
            kept[name] = expr
    out = [f"{name} = {expr}" for name, expr in kept.items()]
    out.append(f"gx = {expand(result)}")
    if kept:
        out.append(" = ".join([*kept, "None"]))
    return out
