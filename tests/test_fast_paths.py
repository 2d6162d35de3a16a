"""agnograd's own nodes of one or two inputs run through a fast path
(``agnograd.core._fast``) that must be indistinguishable from ``FunctionNode.apply``.

Each elementwise row, operator and scalar operator is run both ways on the same
inputs (hypothesis draws shapes and values): the outputs, the graph recorded (node
class, rank, inputs, what is kept for backward) and the first- and second-order
gradients must be the same. Every case the fast path leaves to ``apply`` (hooks,
debug mode, define-then-run, in-place writes, type checks, raw arrays, mixed
libraries) is checked to still get ``apply``'s behaviour. ``test_core_on_the_
general_path`` checks that the core's own tests also run with the fast paths off
(conftest.py runs them twice).
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _session import fast_paths
from hypothesis import given, settings
from hypothesis import strategies as st

# The calls of every differentiable function of the namespace, with their inputs.
from test_shape_changes import BUILT, CASES, Case, _id
from test_shape_changes import eager as run_eagerly

import agnograd
import agnograd.functions as F
from agnograd.core import _fast
from agnograd.functions import _binary, _unary
from agnograd.type_check import InvalidType

ROOT = Path(__file__).resolve().parent.parent

UNARY = {
    name: (row.function, row.domain[0])
    for name, row in _unary.ROWS.rows.items()
    if row.differentiable and isinstance(row.domain, tuple)
}
BINARY = {
    name: (row.function, row.domain)
    for name, row in _binary.ROWS.rows.items()
    if row.differentiable and isinstance(row.domain, tuple)
}
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": lambda a, b: a**b,
}


def _values(interval: Any, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.uniform(interval.low, interval.high, shape)
    if interval.both_signs:
        v *= rng.choice([-1.0, 1.0], shape)
    return v


def _graph(y: agnograd.Variable) -> tuple[Any, ...]:
    """What the graph recorded for ``y``: its node's class, ranks and kept arrays."""
    f = y.creator_node
    if f is None:
        return (None, y.node.rank, y.requires_grad)
    kept = tuple(np.asarray(a).tolist() for a in (f._saved_inputs or ()) + (f._saved_outputs or ()))
    return (type(f), f.rank, y.node.rank, tuple(n.rank for n in f.inputs), kept, f.xp)


def _run_both(make: Callable[[], tuple[list[Any], Any]]) -> list[tuple[Any, ...]]:
    """``make()`` (leaves, output) on each path: what each path gives, to compare."""
    results = []
    for enabled in (True, False):
        with fast_paths(enabled):
            leaves, y = make()
            record = [np.asarray(y.array).tolist(), _graph(y)]
            gs = agnograd.grad([F.sum(y * y)], leaves, enable_double_backprop=True)
            record.append([None if g is None else np.asarray(g.array).tolist() for g in gs])
            second = [g for g in gs if g is not None and g.requires_grad]
            if second:
                g2 = agnograd.grad([F.sum(sum(second[1:], second[0]))], leaves)
                record.append([None if g is None else np.asarray(g.array).tolist() for g in g2])
        results.append(tuple(str(r) for r in record))
    return results


shapes = st.sampled_from([(), (1,), (3,), (2, 3)])


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=3, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_unary_rows_are_the_same_on_both_paths(
    backend: Any, name: str, shape: tuple[int, ...], seed: int
) -> None:
    function, interval = UNARY[name]
    values = _values(interval, shape, seed)

    def make() -> tuple[list[Any], Any]:
        x = backend.variable(values, "float64")
        return [x], function(x)

    fast, general = _run_both(make)
    assert fast == general


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=3, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16), scalar=st.sampled_from([None, 0, 1]))
def test_binary_rows_are_the_same_on_both_paths(
    backend: Any,
    name: str,
    shape: tuple[int, ...],
    seed: int,
    scalar: int | None,
) -> None:
    function, (d1, d2) = BINARY[name]
    v1, v2 = _values(d1, shape, seed), _values(d2, shape, seed + 1)

    def make() -> tuple[list[Any], Any]:
        x1 = backend.variable(v1, "float64")
        x2 = backend.variable(v2, "float64")
        if scalar is None:
            return [x1, x2], function(x1, x2)
        if scalar == 0:  # a Python scalar on the left
            return [x2], function(float(v1.flat[0]), x2)
        return [x1], function(x1, float(v2.flat[0]))

    fast, general = _run_both(make)
    assert fast == general


@pytest.mark.parametrize("op", sorted(OPERATORS))
@pytest.mark.parametrize("other", ["variable", "scalar", "constant", "broadcast"])
def test_operators_are_the_same_on_both_paths(backend: Any, op: str, other: str) -> None:
    apply = OPERATORS[op]
    a = np.array([[0.5, 1.5, 2.0], [1.25, 0.75, 1.0]])

    def make() -> tuple[list[Any], Any]:
        x = backend.variable(a, "float64")
        if other == "scalar":
            return [x], apply(x, 1.5)
        if other == "broadcast":
            w = backend.variable(a[0] + 0.5, "float64")
            return [x, w], apply(x, w)
        w = backend.variable(a + 0.5, "float64", requires_grad=other == "variable")
        return [x, w], apply(x, w)

    fast, general = _run_both(make)
    assert fast == general


@pytest.mark.parametrize("library", ["numpy", "array_api_strict", "torch"])
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_namespace_function_is_the_same_on_both_paths(case: Case, library: str) -> None:
    """Reductions, manipulation, linear algebra, ...: the functions whose nodes take
    the fast path by their forward give what ``apply`` gives, bit for bit."""
    arrays = case.arrays(library, BUILT)
    results = []
    for enabled in (True, False):
        with fast_paths(enabled):
            results.append(run_eagerly(case, arrays))
    (fast, n_fast), (general, n_general) = results
    assert n_fast == n_general
    for a, b in zip(fast, general, strict=True):
        if b is None:
            assert a is None
        else:
            np.testing.assert_array_equal(a, b)


def test_the_fast_path_runs_and_can_be_switched_off(backend: Any, monkeypatch: Any) -> None:
    calls = []
    apply = agnograd.FunctionNode.apply

    def counting(self: Any, inputs: Any) -> Any:
        calls.append(type(self).__name__)
        return apply(self, inputs)

    monkeypatch.setattr(agnograd.FunctionNode, "apply", counting)
    x = backend.variable([1.0, 2.0])
    F.tanh(x) * 2.0 + x
    assert calls == []  # three nodes, none through apply
    with fast_paths(False):
        F.tanh(x) * 2.0 + x
    assert calls == ["Tanh", "MulConstant", "Add"]


class _Recorder(agnograd.FunctionHook):
    name = "Recorder"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def forward_preprocess(self, function: Any, in_data: Any) -> None:
        self.seen.append(function.label)


def test_hooks_see_every_node(backend: Any) -> None:
    x = backend.variable([1.0, 2.0])
    with _Recorder() as hook:
        F.exp(F.tanh(x) * 2.0 + x) - 1.0
    assert hook.seen == ["Tanh", "MulConstant", "Add", "Exp", "SubConstant"]


def test_debug_mode_still_checks_the_outputs(backend: Any) -> None:
    x = backend.variable([np.nan, 4.0])
    with agnograd.using_config("debug", True), pytest.raises(RuntimeError, match="NaN"):
        F.tanh(x)


def test_define_then_run_defers_the_nodes(backend: Any) -> None:
    x = backend.variable([1.0, 2.0])
    with agnograd.auto_forward(False):
        y = F.tanh(x) * 2.0 + x
    assert y.array is None
    y.forward()
    backend.assert_close(y, np.tanh([1.0, 2.0]) * 2 + [1.0, 2.0])


def test_no_backprop_mode_records_nothing(backend: Any) -> None:
    x = backend.variable([1.0, 2.0])
    with agnograd.no_backprop_mode():
        y = F.tanh(x) * 2.0 + x
    assert y.creator_node is None
    assert not y.requires_grad


def test_a_write_in_place_is_still_caught(backend: Any) -> None:
    if backend.name == "jax":
        pytest.skip("JAX arrays are immutable: a write makes a new array, nothing is shared")
    x = backend.variable([1.0, 2.0, 3.0])
    h = x * 1.0
    a = h[0:2]
    h[1] = 10.0  # a write into a's memory through its base: a's graph no longer holds
    with pytest.raises(RuntimeError, match="changed by a write"):
        F.exp(a)


def test_errors_are_the_same_on_both_paths(backend: Any) -> None:
    a = backend.variable([1.0, 2.0, 3.0])
    b = backend.variable([1.0, 2.0, 3.0, 4.0])
    other = agnograd.Variable(np.ones(3) if backend.name != "numpy" else _strict_ones(3))
    messages = []
    for enabled in (True, False):
        with fast_paths(enabled):
            with pytest.raises((InvalidType, RuntimeError, ValueError, TypeError)) as info:
                a + b
            messages.append(f"{type(info.value).__name__}: {info.value}")
            with pytest.raises(TypeError, match=r"different array libraries|mix") as mixed:
                a * other
            messages.append(str(mixed.value))
    assert messages[:2] == messages[2:]


def test_generated_code_shows_in_tracebacks_and_inspect() -> None:
    # Each generated function's source is its own "file" in linecache.
    assert "xp.tanh(data)" in inspect.getsource(F.tanh)
    assert "rule(self.xp, x, y, grad_outputs[0])" in inspect.getsource(F.tanh.node.backward)
    assert F.tanh.__code__.co_filename != F.sin.__code__.co_filename
    with pytest.raises(TypeError) as info:
        F.sqrt(agnograd.Variable(np.array(["a"])))
    shown = "".join(traceback.format_tb(info.tb))
    assert "<agnograd: sqrt #" in shown
    assert "y = xp.sqrt(data)" in shown


def _strict_ones(n: int) -> Any:
    return pytest.importorskip("array_api_strict").ones(n)


def test_raw_arrays_and_parameters_take_the_general_path() -> None:
    p = agnograd.Parameter(np.array([1.0, 2.0]))
    raw = np.array([3.0, 4.0])
    y = F.tanh(p) * raw + raw
    y.grad = np.ones(2)
    y.backward()
    np.testing.assert_allclose(p.grad, raw * (1 - np.tanh([1.0, 2.0]) ** 2))


def test_a_subclass_with_a_type_check_is_checked() -> None:
    class Checked(F.tanh.node):  # type: ignore[name-defined,misc]
        def check_type_forward(self, in_types: Any) -> None:
            agnograd.type_check.expect(in_types[0].ndim == 2)

    x = agnograd.Variable(np.ones(3))
    with pytest.raises(InvalidType, match="ndim == 2"):
        agnograd.core._fast.apply1(Checked(), x)


def test_core_on_the_general_path() -> None:
    """The core's tests run a second time with every node going through
    ``FunctionNode.apply``: conftest.py gives each test of its GENERAL_PATH_FILES a
    ``[general]`` run under ``path_of_run("general")``, which is checked here."""
    from _session import GENERAL_PATH_FILES, path_of_run

    assert all((ROOT / "tests" / name).is_file() for name in GENERAL_PATH_FILES)
    real = agnograd.FunctionNode.apply
    applied: list[str] = []

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        applied.append(type(self).__name__)
        return real(self, *args, **kwargs)

    x = agnograd.Variable(np.array([1.0, 2.0]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(agnograd.FunctionNode, "apply", counted)
        with path_of_run("fast"):
            F.tanh(x) * x
        assert applied == []
        with path_of_run("general"):
            F.tanh(x) * x
        assert len(applied) == 2, applied
    assert _fast.enabled  # switched back


def test_a_rerun_with_other_shapes_gets_their_gradients() -> None:
    # What a node learnt of its shapes when it was made eagerly is not taken for
    # given when the graph runs again with other data.
    x1 = agnograd.Variable(np.array([2.0]))
    a = agnograd.Variable(np.ones(1))
    x2 = a * 1.0
    y = x1 * x2
    x1.array = np.array([1.0, 2.0, 3.0])
    y.forward()
    (g,) = agnograd.grad([y], [x2], grad_outputs=[np.ones(3)])
    np.testing.assert_array_equal(g.array, [6.0])


def test_an_array_reshaped_in_place_gives_outputs_of_its_shape() -> None:
    a = np.arange(1.0, 4.0)
    x = agnograd.Variable(a, requires_grad=False)
    a.shape = (3, 1)  # behind agnograd's back
    y = F.exp(x)
    assert y.node.shape == (3, 1)
    w = agnograd.Variable(np.ones(3))
    F.sum(y * (w * 1.0)).backward()
    np.testing.assert_allclose(w.grad, np.full(3, np.exp([1.0, 2.0, 3.0]).sum()))


# What each operand's gradient reads, as the declarations say, and what a node keeps
# where only one operand requires a gradient: the inputs that gradient reads.
KEEPS = {
    "*": (lambda a, b: a * b, (1,), (0,)),
    "/": (lambda a, b: a / b, (1,), (0, 1)),
    "hypot": (F.hypot, (0,), (1,)),
    "logaddexp": (F.logaddexp, (0,), (1,)),
    "copysign": (F.copysign, (0,), ()),
    "remainder": (F.remainder, (), (0, 1)),
    "atan2": (F.atan2, (0, 1), (0, 1)),
}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "apply"])
@pytest.mark.parametrize("name", list(KEEPS))
def test_a_node_keeps_what_the_gradients_of_the_inputs_that_require_one_read(fast, name):
    # As torch's mul keeps other only where self requires a gradient: the same on
    # both paths, and the gradients those inputs get are the same as with both kept.
    f, first, second = KEEPS[name]
    a, b = np.array([1.5, -2.0]), np.array([0.5, 3.0])
    for needs, kept in (((True, False), first), ((False, True), second)):
        with fast_paths(fast):
            x1 = agnograd.Variable(a.copy(), requires_grad=needs[0])
            x2 = agnograd.Variable(b.copy(), requires_grad=needs[1])
            y = f(x1, x2)
        node = y.creator_node
        assert node._retain_in == kept, needs
        arrays = (x1.array, x2.array)
        assert all(s is arrays[j] for s, j in zip(node._saved_inputs or (), kept, strict=True))
        F.sum(y).backward()
        x1_both, x2_both = agnograd.Variable(a.copy()), agnograd.Variable(b.copy())
        F.sum(f(x1_both, x2_both)).backward()
        got, want = (x1, x1_both) if needs[0] else (x2, x2_both)
        np.testing.assert_array_equal(got.grad, want.grad)


def test_an_input_that_required_no_gradient_when_the_node_ran_says_so():
    c = agnograd.Variable(np.array([2.0, 3.0]), requires_grad=False)
    w = agnograd.Variable(np.array([0.5, 1.0]))
    y = F.sum(c * w)  # keeps c alone: w's gradient reads c
    c.requires_grad = True
    with pytest.raises(RuntimeError, match=r"Mul: input 0 required no gradient when Mul ran"):
        y.backward()
