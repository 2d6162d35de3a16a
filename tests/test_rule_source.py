"""Gradient rules written into forward mode's fast path (agnograd.functions._rule_source):
the expression written in computes what the rule computes, bit for bit; what cannot be
written in is called; a rule replaced on its class is followed."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agnograd.functions as F
from agnograd.func import jvp
from agnograd.functions import _rule_source
from agnograd.functions._core import Unary, conjugate
from agnograd.functions._rule_source import real_expression, written_in
from agnograd.testing import backend_namespace
from agnograd.testing._assertions import to_numpy


def _rows() -> list[type[Unary]]:
    rows, todo = [], list(Unary.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "rule" in vars(cls):
            rows.append(cls)
    return sorted(rows, key=lambda cls: cls.__name__)


#: The rows whose rule is written in, with its expression.
WRITTEN = {
    row: expression
    for row in _rows()
    if (expression := real_expression(row.rule, "xp", "data", "y", "t")) is not None
}


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict", "torch"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("row", WRITTEN, ids=lambda cls: cls.__name__)
def test_the_expression_computes_what_the_rule_computes(
    row: type[Unary], dtype: str, backend: str
) -> None:
    xp = backend_namespace(backend)
    rng = np.random.default_rng(0)
    data = xp.asarray(rng.uniform(0.1, 0.9, 7), dtype=getattr(xp, dtype))
    t = xp.asarray(rng.uniform(-1.0, 1.0, 7), dtype=getattr(xp, dtype))
    with np.errstate(all="ignore"):  # (acosh: nan below 1, alike on both sides)
        y = row.compute(xp, data) if row.compute is not None else getattr(xp, row.fn)(data)
        want = row.rule(xp, data, y, t)
        got = eval(WRITTEN[row], {"xp": xp, "data": data, "y": y, "t": t})
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(to_numpy(got), to_numpy(want))


def test_the_common_rows_are_written_in() -> None:
    # (the fast path's speed rests on these; a change that makes them calls shows here)
    assert len(WRITTEN) >= 20
    for f, expression in [
        (F.sin, "(t * xp.cos(data))"),
        (F.exp, "(t * y)"),
        (F.tanh, "(t - t * (y * y))"),
        (F.log, "(t / data)"),
    ]:
        assert real_expression(f.node.rule, "xp", "data", "y", "t") == expression
        assert expression in inspect.getsource(f)


def _defined(name: str) -> Any:
    return getattr(sys.modules[__name__], name)


def reads_a_global(xp: Any, x: Any, y: Any, g: Any) -> Any:
    return g * abs(x)


def conjugates_the_gradient(xp: Any, x: Any, y: Any, g: Any) -> Any:
    return conjugate(xp, g) * x


def complex_constant(xp: Any, x: Any, y: Any, g: Any) -> Any:
    return g * 1j


def two_statements(xp: Any, x: Any, y: Any, g: Any) -> Any:
    z = g * x
    return z


def a_default(xp: Any, x: Any, y: Any, g: Any, k: float = 2.0) -> Any:
    return g * k


def one_expression(xp: Any, x: Any, y: Any, g: Any) -> Any:
    """A docstring is not a statement."""
    return g * conjugate(xp, x * x) + 1


@pytest.mark.parametrize(
    "name",
    [
        "reads_a_global",
        "conjugates_the_gradient",
        "complex_constant",
        "two_statements",
        "a_default",
    ],
)
def test_what_cannot_be_written_in_is_called(name: str) -> None:
    assert real_expression(_defined(name), "xp", "data", "y", "t") is None
    assert written_in("R", _defined(name), "_r", "xp, data, y, t") == "R(xp, data, y, t)"


def test_a_function_of_one_return_is_written_in() -> None:
    assert real_expression(one_expression, "xp", "a", "b", "c") == "(c * (a * a) + 1)"
    assert real_expression(lambda xp, x, y, g: g + x, "xp", "a", "b", "c") == "(c + a)"
    assert real_expression(lambda xp, x, y, g: g, "xp", "a", "b") is None  # (4 parameters)


def test_a_source_edited_since_it_was_imported_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "edited_rule.py"
    path.write_text("def rule(xp, x, y, g):\n    return g * x\n")
    spec = importlib.util.spec_from_file_location("edited_rule", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert real_expression(module.rule, "xp", "x", "y", "g") == "(g * x)"
    path.write_text("def rule(xp, x, y, g):\n    return g / x\n")
    _rule_source._module_tree.cache_clear()
    assert real_expression(module.rule, "xp", "x", "y", "g") is None


@pytest.mark.parametrize("fast", [True, False])
def test_a_rule_replaced_on_its_class_is_followed(
    monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    x, v = np.array(0.5), np.array(-2.0)

    def tangent() -> Any:
        f = F.exp if fast else (lambda a: F.exp(a) * 1.0)
        return jvp(f, (x,), (v,))[1]

    before = tangent()
    np.testing.assert_array_equal(before, np.exp(x) * v)
    monkeypatch.setattr(F.exp.node, "rule", staticmethod(lambda xp, x, y, g: 2 * g * y))
    np.testing.assert_array_equal(tangent(), 2 * before)
