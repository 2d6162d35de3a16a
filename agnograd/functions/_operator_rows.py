"""The backward of the arithmetic nodes (``+``, ``-``, ``*``, ``/``, ``**`` and their
forms with a Python scalar), made from their rules: the rows of the operators.

An operator's class declares, per operand, the rule of its gradient in the form of
the binary rows (``rule(xp, x1, x2, y, gy)``, see ``_core.Binary``) and what it
reads (``"x1"``, ``"x2"``, ``"y"``); a node with a Python scalar takes the rule of
its array operand, the scalar in the other's place. From that one declaration come
what the node keeps, its backward (here), forward mode's tangents (the rule with the
tangent in place of ``gy``, ``agnograd.transforms._forward``) and a compiled plan's
lines (the rule traced, ``agnograd.static._compiled_steps``).

The backward is the rule traced once, when the class is made, into straight-line
code for real arrays (``gy * x2``: no call of the rule, as fast as a backward
written by hand); complex arrays, and rules the tracer cannot follow (that branch on
the scalar's value), call the rule.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from agnograd.core._link import kept_inputs, render
from agnograd.functions import _core
from agnograd.functions._core import is_complex
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rule_trace import trace


class _Dtype:
    """The dtype of the arrays a rule is traced with when its class is made."""

    def __init__(self, complex_: bool) -> None:
        self.complex = complex_


class _Function:
    """A function of the namespace, written ``xp.name`` in the traced lines."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Called on no traced array (the tracer writes down the calls on them).
        raise TypeError(f"xp.{self.name} of constants alone")


class _Generic:
    """The namespace a rule is traced with when its class is made: the one of ``gy``
    at run time (``namespace_of(gy)``), which answers dtype questions for ``dtype``."""

    def __init__(self, dtype: _Dtype) -> None:
        self.dtype = dtype

    def isdtype(self, dtype: Any, kind: Any) -> bool:
        kinds = kind if isinstance(kind, tuple) else (kind,)
        return "complex floating" in kinds if dtype.complex else "real floating" in kinds

    def __getattr__(self, name: str) -> _Function:
        return _Function(name)


_REAL, _COMPLEX = _Dtype(False), _Dtype(True)


def _traced(rule: Any, args: tuple[Any, ...], dtype: _Dtype, names: dict[str, Any]) -> Any:
    """The lines of ``rule(xp, *args, gy)`` for arrays of ``dtype`` (None where the
    tracer cannot follow it), the constants it binds put into ``names``."""
    counter = itertools.count(len(names))
    # is_complex answers from its table (the namespace of a traced array is not
    # known to the backends while they load).
    _core._complex_dtypes[id(dtype)] = (dtype, dtype.complex)

    def bind(value: Any) -> str:
        if isinstance(value, _Function):
            names["_uses_xp"] = True
            return f"xp.{value.name}"
        name = f"_k{next(counter)}"
        names[name] = value
        return name

    return trace(rule, _Generic(dtype), args, dtype, bind)


def _renamed(lines: list[str], name: str) -> list[str]:
    """Traced ``lines`` with their result ``gx`` named ``name``."""
    return [f"{name} = {line[5:]}" if line.startswith("gx = ") else line for line in lines]


# Whether ``gy`` is complex: the real dtype met last first, without a call.
_IS_COMPLEX = "gy.dtype is not _core._last_real and is_complex(gy)"


def operator_backward(cls: Any) -> Any:
    """The backward of the operator class ``cls`` (two array inputs): its ``rules``
    traced, each read from what the node kept."""
    rules, reads = cls.rules, cls.reads
    read = set().union(*map(str.split, reads))
    args = tuple(f"x{k}" if f"x{k}" in read else "None" for k in (1, 2))
    y = "y" if any("y" in r.split() for r in reads) else "None"
    names: dict[str, Any] = {}
    real: list[Any] = []
    complex_: list[Any] = []
    for rule in rules:
        complex_.append(_traced(rule, (*args, y), _COMPLEX, dict(names)))
        real.append(_traced(rule, (*args, y), _REAL, names))
    head = ["gy = grad_outputs[0]"]
    if args != ("None", "None"):
        head.append("x1, x2 = kept_inputs(self, indexes)")
    if y != "None":
        head.append("y = self.get_retained_outputs()[0]")
    call = f"tuple([rules[i](namespace_of(gy), {args[0]}, {args[1]}, {y}, gy) for i in indexes])"
    if None in real:  # untraceable: the rules are called
        return _render(cls, head, [f"return {call}"], names)
    if real != complex_:  # complex arrays: the rules are called
        head += [f"if {_IS_COMPLEX}:", f"    return {call}"]
    if names.pop("_uses_xp", False):
        head.append("xp = namespace_of(gy)")
    body = []
    for which in ((0, 1), (0,), (1,)):
        lines = [line for i in which for line in _renamed(real[i], f"g{i}")]
        result = "".join(f"g{i}, " for i in which)
        body += [f"if indexes == {which}:", *["    " + line for line in lines]]
        body.append(f"    return ({result})")
    return _render(cls, head, body, names)


def scalar_backward(cls: Any) -> Any:
    """The backward of the class ``cls`` of an array and a Python scalar: the rule of
    its array operand, the scalar (``value``) in the other's place."""
    (k,) = cls.which
    rule, reads = cls.rules[k], cls.reads[k].split()
    x = "x" if f"x{k + 1}" in reads else "None"
    c = "c"  # the scalar, which the lines may read
    y = "y" if "y" in reads else "None"
    names: dict[str, Any] = {"rule": rule}
    args = (x, c) if k == 0 else (c, x)
    complex_ = _traced(rule, (*args, y), _COMPLEX, dict(names))
    real = _traced(rule, (*args, y), _REAL, names)
    head = ["gy = grad_outputs[0]"]
    if x != "None":
        head.append("x = self.get_retained_inputs()[0] if self._retain_in else None")
    if y != "None":
        head.append("y = self.get_retained_outputs()[0]")
    given = (x, "self.value") if k == 0 else ("self.value", x)
    call = f"(rule(namespace_of(gy), {given[0]}, {given[1]}, {y}, gy),)"
    if real is None:  # untraceable (it branches on the scalar, say): the rule is called
        return _render(cls, head, [f"return {call}"], names)
    if real == ["gx = gy"]:
        return _render(cls, [], ["return grad_outputs"], names)
    if real != complex_:  # complex arrays: the rule is called
        head += [f"if {_IS_COMPLEX}:", f"    return {call}"]
    if any(re.search(r"\bc\b", line) for line in real):
        # The 0-d array that the forward took for the number, where it has gy's
        # dtype (the number being real, its own conjugate): faster than the number.
        head += [
            "c = self._operand",
            "if c is None or c.dtype is not gy.dtype:",
            "    c = self.value",
        ]
    if names.pop("_uses_xp", False):
        head.append("xp = namespace_of(gy)")
    return _render(cls, head, [*real, "return (gx,)"], names)


def _render(cls: Any, head: list[str], body: list[str], names: dict[str, Any]) -> Any:
    source = "\n".join(
        ["def backward(self, indexes, grad_outputs):", *["    " + line for line in head + body]]
    )
    namespace = {
        "_core": _core,
        "is_complex": is_complex,
        "kept_inputs": kept_inputs,
        "namespace_of": namespace_of,
        "rules": cls.rules,
        **names,
    }
    return render(source, namespace, f"{cls.__name__}.backward")
