"""The arithmetic operators are rows: each derivative is written once, as a rule per
operand of the operator's node, and the node's backward, a compiled plan's lines and
forward mode's tangents all come from it (none restates it)."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import agnograd
from agnograd.functions import _arithmetic as A
from agnograd.functions._operator_rows import operator_backward, scalar_backward
from agnograd.static import _compiled_steps
from agnograd.static._compiled import compile as compile_graph
from agnograd.testing import backend_namespace
from agnograd.testing._assertions import to_numpy

OPERATORS = [A.Add, A.Sub, A.Mul, A.Div, A.Pow]
SCALARS = [
    A.AddConstant,
    A.SubConstant,
    A.SubFromConstant,
    A.MulConstant,
    A.MulFromConstant,
    A.DivConstant,
    A.DivFromConstant,
    A.PowConstant,
    A.PowFromConstant,
]


@pytest.mark.parametrize("cls", OPERATORS + SCALARS, ids=lambda c: c.__name__)
def test_backward_is_made_from_the_rules(cls: Any) -> None:
    make = operator_backward if cls in OPERATORS else scalar_backward
    assert inspect.getsource(cls.backward) == inspect.getsource(make(cls))
    assert not hasattr(cls, "_jvp")  # forward mode reads the rules (or a linear tag)


def test_the_plan_restates_no_derivative() -> None:
    # No case of its own for any operator's class: it reads their rules.
    for cls in OPERATORS + SCALARS:
        assert cls not in vars(_compiled_steps).values(), cls.__name__
    source = inspect.getsource(_compiled_steps)
    assert "gy * {c}" not in source
    assert '"-gy"' not in source


def _doubled(rule: Any) -> Any:
    return None if rule is None else lambda xp, x1, x2, y, gy: rule(xp, x1, x2, y, gy) * 2.0


# (function, the class whose rules it uses, whether forward mode reads them)
CASES = [
    (lambda a, b: a + b, A.Add, True),
    (lambda a, b: a - b, A.Sub, True),
    (lambda a, b: a * b, A.Mul, False),  # bilinear: forward mode applies the product
    (lambda a, b: a / b, A.Div, True),
    (lambda a, b: a - 3.0, A.SubConstant, True),
    (lambda a, b: 3.0 - a, A.SubFromConstant, True),
    (lambda a, b: a * 3.0, A.MulConstant, False),  # linear
    (lambda a, b: 3.0 / a, A.DivFromConstant, True),
]


@pytest.mark.parametrize(("f", "cls", "tangents"), CASES, ids=[c[1].__name__ for c in CASES])
def test_a_changed_rule_changes_eager_plan_and_tangents(
    monkeypatch: pytest.MonkeyPatch, f: Any, cls: Any, tangents: bool
) -> None:
    a0, b0 = np.array([0.5, 1.5, -2.0]), np.array([1.25, -0.75, 2.5])

    def gradients() -> tuple[list[Any], list[Any], Any]:
        a, b = agnograd.Variable(a0.copy()), agnograd.Variable(b0.copy())
        f(a, b).backward()
        eager = [a.grad, b.grad]
        a, b = agnograd.Variable(a0.copy()), agnograd.Variable(b0.copy())
        with agnograd.auto_forward(False):
            y = f(a, b)
        y.grad = np.ones(3)
        compile_graph(y).run()
        planned = [a.grad, b.grad]
        _, t = agnograd.func.jvp(lambda a, b: f(a, b), (a0, b0), (np.ones(3), np.ones(3)))
        return eager, planned, t

    eager, planned, t = gradients()
    for old, old_planned in zip(eager, planned, strict=True):
        assert (old is None and old_planned is None) or np.array_equal(old_planned, old)
    make = operator_backward if cls in OPERATORS else scalar_backward
    monkeypatch.setattr(cls, "rules", tuple(_doubled(r) for r in cls.rules))
    monkeypatch.setattr(cls, "backward", make(cls))
    monkeypatch.setattr(cls, "_row_backward", cls.backward)
    eager2, planned2, t2 = gradients()
    for old, new, new_planned in zip(eager, eager2, planned2, strict=True):
        if old is None:
            assert new is None
            assert new_planned is None
            continue
        np.testing.assert_array_equal(new, 2 * old)
        np.testing.assert_array_equal(new_planned, new)  # the plan traces the same rule
    np.testing.assert_allclose(t2, 2 * t if tangents else t)


class _General(agnograd.FunctionHook):
    """A hook: while it is on, every operation takes the general path (apply)."""

    name = "General"


OPERATOR_FORMS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": lambda a, b: a**b,
}


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict", "torch"])
@pytest.mark.parametrize("symbol", list(OPERATOR_FORMS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_operators_jvp_fast_path_gives_the_general_paths_bits(
    backend: str, symbol: str, dtype: str
) -> None:
    # The operators' functions push a jvp's tangents with their rules written in
    # (agnograd.core._fast); with a hook on, the level's general rule computes them.
    # Both operands with tangents, one without (a constant), broadcasting, 0-d
    # results, and a scalar on either side.
    xp = backend_namespace(backend)
    dt = getattr(xp, dtype)
    a = xp.asarray([[0.5, 1.5, 2.25]], dtype=dt)
    b = xp.asarray([[1.25], [0.75]], dtype=dt)
    s = xp.asarray(1.75, dtype=dt)
    op = OPERATOR_FORMS[symbol]
    ca, cb = agnograd.Variable(a, requires_grad=False), agnograd.Variable(b, requires_grad=False)
    cases = [
        (lambda a, b: op(a, b), (a, b)),
        (lambda a: op(a, cb), (a,)),
        (lambda b: op(ca, b), (b,)),
        (lambda a: op(op(a, 3.0), 0.5) + op(2.5, a), (a,)),
        (lambda s: op(s, s) + op(s, 2.0) + op(2.0, s), (s,)),
    ]
    for f, primals in cases:
        tangents = tuple(xp.ones_like(p) * 0.625 for p in primals)
        fast = agnograd.func.jvp(f, primals, tangents)
        with _General():
            general = agnograd.func.jvp(f, primals, tangents)
        for got, expected in zip(fast, general, strict=True):
            assert type(got) is type(expected)
            np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))
