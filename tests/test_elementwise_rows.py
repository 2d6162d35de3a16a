"""The elementwise rows (agnograd/functions/_rows.py) and what is derived from them.

Each function of the standard's elementwise chapter is one row of ``_unary.py`` or
``_binary.py``, or written out in ``_elementwise.py`` and declared there. From the
rows come the node classes, the public functions and their docstrings, the
chapter's tables, the ``__all__`` of the modules and of ``agnograd.functions``, and
the testing kit's input domains. Extras of ``agnograd.functions`` (``softplus``) are
rows too: the namespace tests do not know them, so they are checked here, against
central differences on their domain, on each backend.
"""

from __future__ import annotations

import itertools
import sys
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.functions import (
    _arithmetic,
    _binary,
    _core,
    _elementwise,
    _linalg_inverse,
    _manipulation,
    _rows,
    _standard,
    _table,
    _unary,
)
from agnograd.testing import backend_namespace, check_backward, check_double_backward
from agnograd.testing import strategies as ags

MODULES = [_unary, _binary, _arithmetic, _elementwise]
ROWS = [(module, row) for module in MODULES for row in module.ROWS.rows.values()]
EXTRAS = [row for _, row in ROWS if not row.standard]
#: Every module of agnograd.functions that declares rows: the chapters and the extras.
DECLARING = [
    module
    for module in vars(F).values()
    if isinstance(module, ModuleType) and isinstance(getattr(module, "ROWS", None), _rows.Rows)
]
#: Their tables, and agnograd.functions' own (``copy``, written out in a higher layer).
TABLES = [module.ROWS for module in DECLARING] + [F._ROWS]


def _ids(value: Any) -> str:
    return getattr(value, "name", None) or value.__name__.rpartition(".")[2]


def _identity(xp: Any, x: Any, y: Any, g: Any) -> Any:
    return g


# -- the chapter, its tables and the exports --------------------------------------------


def test_the_chapter_is_its_rows() -> None:
    extras = {row.name for row in EXTRAS}
    assert set(_elementwise.CHAPTER) - extras == set(_standard.ELEMENTWISE)
    # The namespace's function of a row: the standard's own where agnograd.functions'
    # extends its signature (Chainer's add of any number of arrays).
    standard = {row.name: row.namespace or row.function for _, row in ROWS if row.standard}
    assert standard == {**_elementwise.DIFFERENTIABLE, **_elementwise.NON_DIFFERENTIABLE}
    assert not extras & set(_elementwise.DIFFERENTIABLE)  # not in the namespace
    assert not hasattr(agnograd.namespace(np), "softplus")


def test_a_name_is_declared_once() -> None:
    rows = _rows.Rows("probe")
    rows.unary("exp", "", _identity, None, "Probe.", {})
    with pytest.raises(ValueError, match="probe: 'exp' is declared twice"):
        rows.unary("exp", "", _identity, None, "Probe.", {})
    with pytest.raises(ValueError, match=r"probe: \['exp'\] already declared in the chapter"):
        _rows.chapter(_unary.ROWS, rows)


def test_every_row_is_exported_under_one_public_name() -> None:
    for module in MODULES:
        functions = [getattr(module, name) for name in module.__all__]
        assert sorted(id(f) for f in functions) == sorted(
            id(row.function) for row in module.ROWS.rows.values()
        )
        assert set(module.__all__) <= set(F.__all__)
        for name in module.__all__:
            assert getattr(F, name) is getattr(module, name)
    assert "absolute" in F.__all__  # bound to the name, declared as the standard's "abs"
    assert "abs" not in F.__all__


def test_a_row_left_unbound_is_refused() -> None:
    rows = _rows.Rows("probe")
    cube = rows.unary("cube", "x", _identity, None, "Probe.", {}, compute=lambda xp, x: x)
    assert rows.exports({"cube": cube}) == ["cube"]
    with pytest.raises(RuntimeError, match=r"probe: bind each of \['cube'\] to one public name"):
        rows.exports({"_cube": cube})
    with pytest.raises(RuntimeError, match=r"bind each of \['cube'\]"):
        rows.exports({"cube": cube, "cubed": cube})


# -- every module's rows: the namespace's tables and agnograd.functions' exports ----------


def test_agnograd_functions_exports_what_the_rows_say() -> None:
    # The functions with a gradient outside the extensions (linalg., fft.), the
    # elementwise ones (with a gradient or not) and the extras, each under one name.
    elementwise = set(_elementwise.CHAPTER)
    wanted: dict[int, bool] = {}
    for table in TABLES:
        for row in table.rows.values():
            if row.function is None:
                continue
            exported = (
                not row.standard
                or row.name in elementwise
                or (row.differentiable and "." not in row.name)
            )
            wanted[id(row.function)] = wanted.get(id(row.function), False) or exported
    assert {id(getattr(F, name)) for name in F.__all__} == {k for k, v in wanted.items() if v}
    assert len(set(F.__all__)) == len(F.__all__)
    for module in DECLARING:
        for name in module.__all__:
            assert getattr(F, name) is getattr(module, name)
    exported = set(F.__all__)
    assert {"flip", "matrix_transpose", "transpose", "copy", "get_item", "linear"} <= exported
    assert {"identity", "softmax", "where", "sort", "astype", "ceil", "absolute"} <= exported
    assert not {"argmax", "argsort", "nonzero", "broadcast_shapes", "zeros"} & exported
    assert not {"unique_all", "inv", "fft", "abs", "Flip"} & exported


def test_the_namespace_tables_come_from_the_rows_of_every_chapter() -> None:
    assert _rows.chapter(*(module.ROWS for module in _table.CHAPTERS)) == _table.DECLARED
    assert _rows.namespace_tables(_table.DECLARED) == (
        _table.DIFFERENTIABLE,
        _table.NON_DIFFERENTIABLE,
    )
    assert _rows.unsupported_table(_table.DECLARED) == _table.UNSUPPORTED
    # A function declared under several names (the standard's and the extension's).
    assert _table.DIFFERENTIABLE["linalg.matmul"] is _table.DIFFERENTIABLE["matmul"] is F.matmul
    assert _table.DIFFERENTIABLE["linalg.matrix_transpose"] is F.matrix_transpose
    assert _table.DIFFERENTIABLE["linalg.inv"] is _linalg_inverse.inv
    # Extras are agnograd.functions' only; forwarded and bound rows the namespace's only.
    namespace = {*_table.DIFFERENTIABLE, *_table.NON_DIFFERENTIABLE}
    assert not {"transpose", "get_item", "linear", "copy", "softplus"} & namespace
    assert _table.NON_DIFFERENTIABLE["argmax"].__module__ == "agnograd.functions._searching"
    assert isinstance(_table.NON_DIFFERENTIABLE["zeros"], _core.Bound)
    assert isinstance(_table.NON_DIFFERENTIABLE["fft.fftfreq"], _core.Bound)
    for name in ("copy", "identity", "linear", "softmax", "transpose", "get_item"):
        row = next(table.rows[name] for table in TABLES if name in table.rows)
        assert not row.standard, name
        assert row.function is getattr(F, name), name


def test_a_name_declared_in_two_modules_is_refused() -> None:
    rows = _rows.Rows("probe")
    rows.unsupported("flip", "declared twice")
    with pytest.raises(ValueError, match=r"probe: \['flip'\] already declared in the chapter"):
        _rows.chapter(_manipulation.ROWS, rows)
    with pytest.raises(ValueError, match="probe: 'flip' is declared twice"):
        rows.declare("flip")(lambda x: x)


def test_declared_functions_aliases_and_those_without_a_gradient() -> None:
    rows = _rows.Rows("probe")

    @rows.declare("half", "linalg.half")
    def half(x: Any) -> Any:
        return x * 0.5

    @rows.declare("count", differentiable=False)
    def count(x: Any) -> Any:
        return x

    assert rows.exports({"half": half}) == ["half"]  # count is the namespace's only
    assert rows.exports({"half": half, "count": count}) == ["half"]
    with pytest.raises(RuntimeError, match=r"bind each of \['half'\] to one public name"):
        rows.exports({"_half": half})
    assert _rows.namespace_tables(rows.rows) == (
        {"half": half, "linalg.half": half},
        {"count": count},
    )


def test_forwarded_and_bound_rows() -> None:
    rows = _rows.Rows("probe")
    argmax = rows.nondifferentiable("argmax")
    assert argmax.__module__ == "probe"
    assert argmax.__doc__ == "``argmax`` of the backend; the result has no gradient."
    y = argmax(np.array([1.0, 3.0, 2.0]))
    assert int(y.array) == 1
    assert not y.requires_grad
    zeros = rows.bound("zeros", lambda raw: lambda n: raw.zeros(n))
    assert isinstance(zeros, _core.Bound)
    np.testing.assert_array_equal(zeros.factory(np)(2), [0.0, 0.0])
    assert rows.exports({"argmax": argmax, "zeros": zeros}) == []
    assert _rows.namespace_tables(rows.rows) == ({}, {"argmax": argmax, "zeros": zeros})


def test_an_unsupported_row_is_refused_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows.Rows("probe")
    rows.unsupported("frobnicate", "no rule yet")
    assert _rows.unsupported_table(rows.rows) == {"frobnicate": "no rule yet"}
    assert _rows.namespace_tables(rows.rows) == ({}, {})
    assert rows.exports({}) == []
    # The namespace refuses what _table.UNSUPPORTED (the rows') holds, with the reason.
    monkeypatch.setitem(_table.UNSUPPORTED, "frobnicate", "no rule yet")
    with pytest.raises(AttributeError, match="does not support 'frobnicate': no rule yet"):
        _ = agnograd.namespace(np).frobnicate


# -- what each row makes ---------------------------------------------------------------


@pytest.mark.parametrize(("module", "row"), ROWS, ids=_ids)
def test_functions_and_nodes_report_the_declaring_module(module: Any, row: Any) -> None:
    assert row.function.__module__ == module.__name__
    node = getattr(row.function, "node", None)
    if node is not None:
        assert node.__module__ == module.__name__
        assert node.__qualname__ == node.__name__


def test_every_generated_node_reports_its_module() -> None:
    nodes = [
        node
        for base in (_core.Unary, _core.Binary)
        for node in base.__subclasses__()
        if node.__module__.startswith("agnograd.")
    ]
    assert len(nodes) >= 35
    for node in nodes:
        assert node.__module__ != _core.__name__, node
        module = vars(sys.modules[node.__module__])
        assert any(getattr(v, "node", None) is node for v in module.values()), node
    assert F.relu.node.__module__ == F.sigmoid.node.__module__ == "agnograd.functions._unary"


@pytest.mark.parametrize(("module", "row"), ROWS, ids=_ids)
def test_every_row_has_a_doctest_example(module: Any, row: Any) -> None:
    # --doctest-modules runs them: the functions report their module.
    lines = [line.strip() for line in row.function.__doc__.splitlines()]
    assert "Examples" in lines
    pairs = itertools.pairwise(lines)
    shown = [b for a, b in pairs if a.startswith(">>> ") and b[:3] not in ("", ">>>")]
    assert shown, f"the example of {row.name} shows no output"


def test_the_docstring_of_a_row() -> None:
    assert F.exp.__doc__ == (
        "Elementwise exponential.\n\nExamples\n--------\n"
        ">>> import numpy as np, agnograd.functions as F\n"
        ">>> F.exp(np.array([0.0, 1.0]))\nvariable([1.        , 2.71828183])\n"
    )
    assert F.ceil.__doc__.startswith("Elementwise ceiling (no gradient: the result requires none).")


# -- the testing kit's domains ---------------------------------------------------------


def test_the_testing_kit_registers_the_rows_domains() -> None:
    registered = set(ags.registered_domains())
    domains = {row.name for _, row in ROWS if row.standard and row.differentiable and row.domain}
    assert domains <= registered
    assert {"conj", "real", "imag"} <= domains  # "complex"
    # The kit checks every domain against the library's own function: no extras.
    assert not {row.name for row in EXTRAS} & registered


@pytest.mark.parametrize("name", ["log", "reciprocal", "divide", "atan2"])
@settings(max_examples=5, deadline=None, database=None)
@given(data=st.data())
def test_the_testing_kit_draws_inside_the_rows_domains(name: str, data: Any) -> None:
    case = data.draw(ags.function_inputs(np, name))
    intervals = _elementwise.CHAPTER[name].domain
    assert isinstance(intervals, tuple)
    for x, interval in zip(case.inputs, intervals, strict=True):
        values = np.abs(x) if interval.both_signs else np.asarray(x)
        assert np.all((interval.low <= values) & (values <= interval.high)), (x, interval)


# -- extras: gradients on every backend ------------------------------------------------


def elements(interval: Any) -> st.SearchStrategy[float]:
    inside = st.floats(interval.low, interval.high, allow_nan=False, allow_subnormal=False)
    return inside | inside.map(lambda v: -v) if interval.both_signs else inside


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict", "torch"])
@pytest.mark.parametrize("row", EXTRAS, ids=_ids)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_extras_match_central_differences(row: Any, backend: str, data: Any) -> None:
    pytest.importorskip(backend)
    xp = backend_namespace(backend)
    (interval,) = row.domain
    shape = data.draw(ags.shapes(max_dims=3, max_side=3))
    x = data.draw(hnp.arrays(np.float64, shape, elements=elements(interval)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    gy, ggx = (xp.asarray(rng.uniform(-1.0, 1.0, shape)) for _ in range(2))
    check_backward(row.function, (xp.asarray(x),), gy, eps=1e-4, atol=1e-6, rtol=1e-5)
    check_double_backward(
        row.function, (xp.asarray(x),), gy, (ggx,), eps=1e-4, atol=1e-5, rtol=1e-4
    )


def test_softplus_is_stable_and_its_gradient_is_the_sigmoid() -> None:
    values = np.array([-1000.0, -30.0, -1.0, -1e-8, 0.0, 1e-8, 1.0, 30.0, 1000.0])
    x = Variable(values)
    y = F.softplus(x)
    np.testing.assert_allclose(y.array, np.logaddexp(0.0, values), rtol=1e-14, atol=0)
    F.sum(y).backward()
    np.testing.assert_allclose(x.grad, F.sigmoid(values).array, rtol=1e-15, atol=0)


def test_softplus_runs_deferred() -> None:
    values = np.array([[-2.0, 0.5], [1.0, 3.0]], dtype=np.float32)
    with agnograd.auto_forward(False):
        deferred = F.softplus(Variable(values))
    assert (deferred.shape, deferred.dtype) == ((2, 2), np.float32)
    deferred.forward()
    np.testing.assert_array_equal(deferred.array, F.softplus(values).array)
