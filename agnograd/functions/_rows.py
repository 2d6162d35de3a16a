"""The functions of agnograd.functions declared as the rows of a table, one statement
each, next to the function.

An elementwise row gives the function's name, what its rule reads, the rule, the
domain where the testing kit draws its inputs, and its docstring: a summary and a
doctest example written out with its output; the row makes the node class (reported
as the declaring module's) and the public function. A function written out is
declared by a decorator (:meth:`Rows.declare`), one forwarded to the backend without
a gradient by :meth:`Rows.nondifferentiable`, one the namespace makes per backend by
:meth:`Rows.bound`, and a name the namespace refuses by :meth:`Rows.unsupported`.
Everything else is derived from the rows: the namespace's ``DIFFERENTIABLE``,
``NON_DIFFERENTIABLE`` and ``UNSUPPORTED`` tables (:mod:`agnograd.functions._table`),
each module's ``__all__`` (and so ``agnograd.functions``'), and the input domains of
:mod:`agnograd.testing`.

Examples
--------
>>> import numpy as np
>>> from agnograd.functions._rows import Rows, unsupported_table
>>> ROWS = Rows("example")
>>> cube = ROWS.unary("cube", "x", lambda xp, x, y, g: 3 * g * x * x, (-2.0, 2.0),
...     "Elementwise cube.", {"F.cube(np.array([2.0]))": "variable([8.])"},
...     compute=lambda xp, x: x * x * x)
>>> cube(np.array([2.0])), cube.node, ROWS.rows["cube"].domain
(variable([8.]), <class 'example.Cube'>, (Interval(low=-2.0, high=2.0, both_signs=False),))
>>> cube.__doc__.splitlines()[-3:]
['>>> import numpy as np, agnograd.functions as F', '>>> F.cube(np.array([2.0]))', 'variable([8.])']
>>> @ROWS.declare("twice", standard=False)  # an extra, written out
... def twice(x):
...     return x + x
>>> ROWS.unsupported("thrice", "no rule yet")
>>> ROWS.exports({"cube": cube, "twice": twice}), unsupported_table(ROWS.rows)
(['cube', 'twice'], {'thrice': 'no rule yet'})
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Literal, NamedTuple, TypeVar

from agnograd.core._variable import Variable
from agnograd.functions._core import BinaryRule, Bound, Rule, binary, nondifferentiable, unary

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
    """One declared function (or a name of the standard the namespace refuses)."""

    name: str  #: the standard's name (``abs``, ``linalg.inv``), or an extra's (``softplus``)
    #: the function; a :class:`~agnograd.functions._core.Bound` where the namespace
    #: makes it per backend (``zeros``); None for an unsupported name
    function: Any
    differentiable: bool
    domain: Domain
    standard: bool  #: False for an extra: in agnograd.functions, not in the namespace
    #: whether agnograd.functions exports the function: those with a gradient outside
    #: the extensions (``linalg.``, ``fft.``), the extras, and the elementwise ones
    exported: bool = True
    reason: str = ""  #: why the namespace refuses an unsupported name
    #: the namespace's function where agnograd.functions' extends the standard's
    #: signature (Chainer's ``add`` of any number of arrays): the standard's own;
    #: None where the namespace's is ``function``
    namespace: Any = None


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
        reads: str | tuple[str, str],
        rules: tuple[BinaryRule | None, BinaryRule | None],
        domain: tuple[Span, Span],
        doc: str,
        example: Example,
    ) -> Callable[[Any, Any], Variable]:
        """``name(x1, x2)`` of the standard, either side a Python scalar; ``rules``
        holds ``rule(xp, x1, x2, y, gy)`` for each operand (None: no gradient).

        ``reads`` says whether the rules read the inputs (``"x"``) and the output
        (``"y"``); or, where they read different operands, what each operand's rule
        reads of ``x1``, ``x2`` and ``y`` (``("x1 y", "x2 y")``), so that a node keeps
        only what the rules of the operands that require a gradient read.
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
        self,
        name: str,
        *aliases: str,
        domain: Span | tuple[Span, Span] | None = None,
        arity: int = 2,
        differentiable: bool = True,
        standard: bool = True,
        namespace: Callable[..., Any] | None = None,
    ) -> Callable[[Fn], Fn]:
        """Decorator: a function written out, with its own node classes (``add``,
        ``flip``), the standard's ``name`` and any ``aliases`` it also goes by
        (``"linalg.matmul"``); ``standard=False`` for an extra of agnograd.functions
        (``transpose``). Without a gradient (``differentiable=False``), it is the
        namespace's only (``nonzero``), as are the functions of the extensions.

        Where agnograd.functions' function takes calls the standard's signature
        cannot express (Chainer's ``add(*xs)``), the namespace gets ``namespace``,
        the standard's own, instead of the decorated function."""

        def decorate(fn: Fn) -> Fn:
            for each in (name, *aliases):
                exported = differentiable and "." not in each
                spans = _domain(domain, arity)
                self._add(each, fn, differentiable, spans, standard, exported, namespace=namespace)
            return fn

        return decorate

    def nondifferentiable(self, name: str, doc: str | None = None) -> Callable[..., Variable]:
        """``name`` of the standard forwarded to the backend as a node whose result
        requires no gradient (``argmax``); the namespace's only."""
        doc = f"``{name}`` of the backend; the result has no gradient." if doc is None else doc
        fn = nondifferentiable(name, doc, module=self.module)
        return self._add(name, fn, False, None, exported=False)

    def bound(self, name: str, factory: Callable[[Any], Any]) -> Bound:
        """``name`` of the standard made per backend, ``factory(raw_namespace)``: a
        function with no array argument to tell the backend (``zeros``); its result
        requires no gradient. The namespace's only."""
        return self._add(name, Bound(factory), False, None, exported=False)

    def unsupported(self, name: str, reason: str) -> None:
        """``name`` of the standard, which the namespace refuses, saying ``reason``."""
        self._add(name, None, False, None, exported=False, reason=reason)

    def _add(
        self,
        name: str,
        fn: Any,
        differentiable: bool,
        domain: Domain,
        standard: bool = True,
        exported: bool = True,
        reason: str = "",
        namespace: Any = None,
    ) -> Any:
        if name in self.rows:
            raise ValueError(f"{self.module}: {name!r} is declared twice")
        row = Row(name, fn, differentiable, domain, standard, exported, reason, namespace)
        self.rows[name] = row
        return fn

    def exports(self, namespace: Mapping[str, Any]) -> list[str]:
        """The names ``namespace`` (the module's globals) binds the exported functions
        of the rows to: the module's ``__all__``. Each must be bound to one public name
        (the others may be bound or not: ``argsort`` is, for ``sort``)."""
        exported = {id(row.function) for row in self.rows.values() if row.exported}
        names = [k for k, v in namespace.items() if id(v) in exported and not k.startswith("_")]
        bound = Counter(id(namespace[k]) for k in names)
        wrong = sorted(
            row.name for row in self.rows.values() if row.exported and bound[id(row.function)] != 1
        )
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
    standard = [row for row in rows.values() if row.standard and row.function is not None]
    return (
        {row.name: _namespaces(row) for row in standard if row.differentiable},
        {row.name: _namespaces(row) for row in standard if not row.differentiable},
    )


def _namespaces(row: Row) -> Any:
    """The function the namespace gives for ``row``: the standard's own where
    agnograd.functions' extends its signature."""
    return row.function if row.namespace is None else row.namespace


def unsupported_table(rows: Mapping[str, Row]) -> dict[str, str]:
    """The ``UNSUPPORTED`` table of a chapter: the names it refuses, with the reason."""
    return {row.name: row.reason for row in rows.values() if row.function is None}


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
