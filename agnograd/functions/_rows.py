"""Elementwise functions declared as the rows of a table, one statement each.

A row gives the function's name, what its rule reads, the rule, the domain where
the testing kit draws its inputs, and its docstring: a summary and a doctest example
written out with its output. Everything else is derived from the rows: the node
class (reported as the declaring module's), the public function, the chapter's
``DIFFERENTIABLE`` and ``NON_DIFFERENTIABLE`` tables, the module's ``__all__`` (and
so ``agnograd.functions``'), and the input domains of :mod:`agnograd.testing`.

Examples
--------
>>> import numpy as np
>>> from agnograd.functions._rows import Rows
>>> ROWS = Rows("example")
>>> cube = ROWS.unary("cube", "x", lambda xp, x, y, g: 3 * g * x * x, (-2.0, 2.0),
...     "Elementwise cube.", {"F.cube(np.array([2.0]))": "variable([8.])"},
...     compute=lambda xp, x: x * x * x)
>>> cube(np.array([2.0])), cube.node, ROWS.rows["cube"].domain
(variable([8.]), <class 'example.Cube'>, (Interval(low=-2.0, high=2.0, both_signs=False),))
>>> cube.__doc__.splitlines()[-3:]
['>>> import numpy as np, agnograd.functions as F', '>>> F.cube(np.array([2.0]))', 'variable([8.])']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Literal, NamedTuple, TypeVar

from agnograd._variable import Variable
from agnograd.functions._core import BinaryRule, Rule, binary, nondifferentiable, unary

Fn = TypeVar("Fn", bound=Callable[..., Any])


class Interval(NamedTuple):
    """Where the testing kit draws one operand: values in ``[low, high]``, or with
    ``both_signs`` values ``v`` of either sign with ``low <= |v| <= high``."""

    low: float
    high: float
    both_signs: bool = False


#: An operand's domain as a row writes it: ``(low, high)`` or ``(low, high, both_signs)``.
Span = tuple[float, float] | tuple[float, float, bool]

#: A function's domain: an :class:`Interval` per operand; ``"complex"`` for complex
#: inputs only; None where the testing kit writes the domain out (``clip``).
Domain = tuple[Interval, ...] | Literal["complex"] | None

#: A doctest example: each statement and what it prints ("" for nothing).
Example = Mapping[str, str]


class Row(NamedTuple):
    """One declared function."""

    name: str  #: the standard's name (``abs``), or an extra's (``softplus``)
    function: Callable[..., Any]
    differentiable: bool
    domain: Domain
    standard: bool  #: False for an extra: in agnograd.functions, not in the namespace


class Rows:
    """The table of one module: each declaration makes a function, records its
    :class:`Row` and returns the function, for the module to bind to its name."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.rows: dict[str, Row] = {}

    def unary(
        self,
        name: str,
        reads: str,
        rule: Rule,
        domain: Span | Literal["complex"] | None,
        doc: str,
        example: Example,
        *,
        compute: Callable[[Any, Any], Any] | None = None,
    ) -> Callable[[Any], Variable]:
        """``name(x)``, whose gradient is ``rule(xp, x, y, gy)``.

        The rule reads the input ``x`` and/or the output ``y`` (``reads``: ``"x"``,
        ``"y"``, ``"xy"`` or ``""``); what it does not read is None and never kept
        alive by the graph. A standard function is the namespace's own ``name``; an
        extra of ``agnograd.functions`` gives its forward, ``compute(xp, x)``.
        """
        doc = docstring(doc, example)
        fn = unary(name, reads, rule, doc, compute, module=self.module)
        return self._add(name, fn, True, _domain(domain, 1), standard=compute is None)

    def binary(
        self,
        name: str,
        reads: str,
        rules: tuple[BinaryRule | None, BinaryRule | None],
        domain: tuple[Span, Span],
        doc: str,
        example: Example,
    ) -> Callable[[Any, Any], Variable]:
        """``name(x1, x2)`` of the standard, either side a Python scalar; ``rules``
        holds ``rule(xp, x1, x2, y, gy)`` for each operand (None: no gradient).

        ``reads`` says whether the rules read the inputs (``"x"``) and the output
        (``"y"``).
        """
        doc = docstring(doc, example)
        fn = binary(name, reads, rules, doc, module=self.module)
        return self._add(name, fn, True, _domain(domain, 2))

    def no_gradient(
        self, name: str, arity: int, doc: str, example: Example
    ) -> Callable[..., Variable]:
        """``name`` of the standard, a function of ``arity`` arrays whose result
        requires no gradient (comparisons, rounding, bitwise functions)."""
        params = "x, /" if arity == 1 else "x1, x2, /"
        doc = docstring(f"{doc} (no gradient: the result requires none).", example)
        fn = nondifferentiable(name, doc, params=params, module=self.module)
        return self._add(name, fn, False, None)

    def declare(
        self, name: str, *, domain: Span | tuple[Span, Span] | None = None, arity: int = 2
    ) -> Callable[[Fn], Fn]:
        """Decorator: a function written out, with its own node classes (``add``)."""

        def decorate(fn: Fn) -> Fn:
            self._add(name, fn, True, _domain(domain, arity))
            return fn

        return decorate

    def _add(
        self, name: str, fn: Any, differentiable: bool, domain: Domain, standard: bool = True
    ) -> Any:
        if name in self.rows:
            raise ValueError(f"{self.module}: {name!r} is declared twice")
        self.rows[name] = Row(name, fn, differentiable, domain, standard)
        return fn

    def exports(self, namespace: Mapping[str, Any]) -> list[str]:
        """The names ``namespace`` (the module's globals) binds the functions of the
        rows to: the module's ``__all__``. Each must be bound to one public name."""
        declared = {id(row.function): row.name for row in self.rows.values()}
        names = [k for k, v in namespace.items() if id(v) in declared and not k.startswith("_")]
        bound = [declared[id(namespace[k])] for k in names]
        wrong = sorted(n for n in self.rows if bound.count(n) != 1)
        if wrong:
            raise RuntimeError(f"{self.module}: bind each of {wrong} to one public name")
        return names


def chapter(*tables: Rows) -> dict[str, Row]:
    """The rows of the modules of a chapter, by name; a name declared twice is refused."""
    rows: dict[str, Row] = {}
    for table in tables:
        twice = sorted(rows.keys() & table.rows.keys())
        if twice:
            raise ValueError(f"{table.module}: {twice} already declared in the chapter")
        rows.update(table.rows)
    return rows


def namespace_tables(rows: Mapping[str, Row]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``DIFFERENTIABLE`` and ``NON_DIFFERENTIABLE`` tables of a chapter: its
    functions of the standard, by name."""
    standard = [row for row in rows.values() if row.standard]
    return (
        {row.name: row.function for row in standard if row.differentiable},
        {row.name: row.function for row in standard if not row.differentiable},
    )


def docstring(doc: str, example: Example) -> str:
    """``doc`` with a numpydoc Examples section: each statement of ``example`` as a
    doctest, followed by its output as written."""
    names = "np, agnograd.functions as F"
    if any("agnograd." in statement for statement in example):
        names = "np, agnograd, agnograd.functions as F"
    lines = [doc, "", "Examples", "--------", f">>> import numpy as {names}"]
    for statement, output in example.items():
        lines += [f">>> {statement}", output] if output else [f">>> {statement}"]
    return "\n".join(lines) + "\n"


def _domain(domain: Any, arity: int) -> Domain:
    if domain is None or domain == "complex":
        return domain
    operands = (domain,) if arity == 1 else tuple(domain)
    if len(operands) != arity:
        raise ValueError(f"a domain of {arity} operands, one interval each; got {domain!r}")
    return tuple(Interval(*interval) for interval in operands)


def exported(*modules: ModuleType) -> list[str]:
    """The public names of the functions of the modules' rows (their ``__all__``)."""
    return [name for module in modules for name in module.ROWS.exports(vars(module))]
