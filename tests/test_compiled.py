"""Compiled re-runs of define-then-run graphs (``agnograd._compiled.compile``).

A compiled plan must give what ``y.forward(); y.backward()`` gives, bit for bit:
it runs the same array operations in the same order. Graphs are drawn by hypothesis
from a handful of namespace functions (unary functions, arithmetic with arrays and
Python scalars, broadcasting, ``sum``, ``matmul``) and checked on NumPy,
array-api-strict and PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd._compiled import CompiledGraph
from agnograd._compiled import compile as compile_graph
from agnograd.function_hooks import FunctionHook

# -- backends -----------------------------------------------------------------------


def _numpy() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    return (lambda a: a), np.asarray


def _strict() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    xp = pytest.importorskip("array_api_strict")
    return (lambda a: xp.asarray(a)), (lambda a: np.asarray(a))


def _torch() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    torch = pytest.importorskip("torch")
    return torch.from_numpy, (lambda a: a.numpy())


BACKENDS = {"numpy": _numpy, "array_api_strict": _strict, "torch": _torch}


@pytest.fixture(params=list(BACKENDS))
def conv(request: pytest.FixtureRequest) -> tuple[Callable[..., Any], Callable[..., Any]]:
    return BACKENDS[request.param]()


# -- a program of operations, built into a define-then-run graph ---------------------

UNARY = ["tanh", "sin", "exp_tanh"]
BINARY = ["add", "subtract", "multiply"]
SCALAR = ["add_scalar", "mul_scalar", "rsub_scalar", "div_scalar"]

# One op: (kind, operand a, operand b) with operands as indexes into the values so far.
op = st.tuples(
    st.sampled_from(UNARY + BINARY + SCALAR + ["sum", "matmul"]),
    st.integers(0, 30),
    st.integers(0, 30),
)


def build(program: list[tuple[str, int, int]], leaves: list[Variable], m: Variable) -> Variable:
    """The program's graph over ``leaves`` (shapes (3, 4), (4,), (3, 1)), its output
    the sum of every value computed (so that every branch reaches the output)."""
    values: list[Variable] = list(leaves)
    with agnograd.auto_forward(False):
        for kind, i, j in program:
            a, b = values[i % len(values)], values[j % len(values)]
            if kind == "tanh":
                v = F.tanh(a)
            elif kind == "sin":
                v = F.sin(a)
            elif kind == "exp_tanh":
                v = F.exp(F.tanh(a))
            elif kind == "add":
                v = a + b
            elif kind == "subtract":
                v = a - b
            elif kind == "multiply":
                v = a * b
            elif kind == "add_scalar":
                v = a + 0.25
            elif kind == "mul_scalar":
                v = a * 0.5
            elif kind == "rsub_scalar":
                v = 1.0 - a
            elif kind == "div_scalar":
                v = a / 3.0
            elif kind == "sum":
                v = F.sum(a, axis=0, keepdims=True)
            else:  # matmul with a (4, 4) leaf: the last axis is always 4 or 1
                v = F.matmul(a, m) if a.shape[-1] == 4 else a * 1.5  # type: ignore[index]
            values.append(v)
        out = values[len(leaves)] if len(values) > len(leaves) else values[0] * 1.0
        for v in values[len(leaves) + 1 :]:
            out = out + v
        return F.sum(out)


def make_leaves(
    to: Callable[[np.ndarray], Any], seed: int, need: tuple[bool, bool, bool]
) -> tuple[list[Variable], Variable]:
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (4,), (3, 1)]
    leaves = [
        Variable(to(rng.uniform(-1.0, 1.0, s)), requires_grad=n)
        for s, n in zip(shapes, need, strict=True)
    ]
    m = Variable(to(rng.uniform(-0.5, 0.5, (4, 4))), requires_grad=True)
    return leaves, m


def reference(y: Variable, params: list[Variable]) -> tuple[Any, list[Any]]:
    """``y.forward(); y.backward()`` from cleared gradients: the value and gradients."""
    for p in params:
        p.cleargrad()
    y.forward()
    y.backward()
    return y.d, [p.g for p in params]


def check_equal(back: Callable[[Any], np.ndarray], got: Any, want: Any) -> None:
    if want is None:
        assert got is None
        return
    np.testing.assert_array_equal(back(got), back(want), strict=True)


# -- tests ----------------------------------------------------------------------------


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    program=st.lists(op, min_size=1, max_size=12),
    need=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_equals_forward_backward_bit_for_bit(
    conv: tuple[Callable[..., Any], Callable[..., Any]],
    program: list[tuple[str, int, int]],
    need: tuple[bool, bool, bool],
) -> None:
    to, back = conv
    leaves, m = make_leaves(to, 0, need)
    params = [*leaves, m]
    y = build(program, leaves, m)
    want_y, want_g = reference(y, params)
    plan = compile_graph(y)
    for p in params:
        p.cleargrad()
    plan.run()
    check_equal(back, y.d, want_y)
    for got, want in zip([p.g for p in params], want_g, strict=True):
        check_equal(back, got, want)
    # New data, fed between runs, and gradients accumulating over two runs.
    rng = np.random.default_rng(1)
    for leaf in leaves:
        leaf.d = to(rng.uniform(-1.0, 1.0, leaf.shape))
    want_y, want_g = reference(y, params)
    y.backward()
    want_g = [p.g for p in params]
    for p in params:
        p.cleargrad()
    plan.run()
    plan.run()
    check_equal(back, y.d, want_y)
    for got, want in zip([p.g for p in params], want_g, strict=True):
        check_equal(back, got, want)


def chain(x: Variable, w: Variable, blocks: int) -> Variable:
    h = x
    with agnograd.auto_forward(False):
        for _ in range(blocks):
            a = F.tanh(h)
            b = a * 0.5
            c = F.exp(b)
            d = c - 1.0
            e = d * w
            f = e + x
            g = F.sin(f)
            h = g + b
    return h


def test_chain_and_new_data(conv: tuple[Callable[..., Any], Callable[..., Any]]) -> None:
    to, back = conv
    rng = np.random.default_rng(0)
    x = Variable(to(rng.uniform(-1, 1, 8)), requires_grad=True)
    w = Variable(to(rng.uniform(0.5, 1.5, 8)), requires_grad=True)
    y = chain(x, w, 5)
    y.grad = to(np.ones(8))
    plan = compile_graph(y)
    for _ in range(2):
        want_y, want_g = reference(y, [x, w])
        x.cleargrad()
        w.cleargrad()
        plan.run()
        check_equal(back, y.d, want_y)
        check_equal(back, x.g, want_g[0])
        check_equal(back, w.g, want_g[1])
        x.d = to(rng.uniform(-1, 1, 8))


def test_forward_alone_and_intermediates_alive() -> None:
    x = Variable(np.array([0.5, 1.0]), requires_grad=True)
    with agnograd.auto_forward(False):
        a = F.exp(x)
        y = F.sum(a * 3.0)
    plan = compile_graph(y)
    x.d = np.array([0.0, 2.0])
    plan.forward()
    # An intermediate Variable alive at compile time receives its data, as in forward.
    np.testing.assert_array_equal(a.d, np.exp(np.array([0.0, 2.0])))
    assert float(y.d) == float(np.sum(np.exp(np.array([0.0, 2.0])) * 3.0))
    plan.backward()
    np.testing.assert_array_equal(x.g, np.exp(np.array([0.0, 2.0])) * 3.0)


def test_need_grad_prunes_and_leaves_no_gradient() -> None:
    x = Variable(np.array([1.0, 2.0]), requires_grad=True)
    w = Variable(np.array([3.0, 4.0]), requires_grad=False)
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x) * w + F.sin(w))
    plan = compile_graph(y)
    plan.run()
    assert w.grad is None
    np.testing.assert_array_equal(x.g, (1 - np.tanh([1.0, 2.0]) ** 2) * np.array([3.0, 4.0]))
    # Backward steps for add, multiply and tanh (sum runs its own): none for sin(w),
    # whose gradient nothing needs.
    assert plan.source.split("def backward")[1].count("gy = g[") == 3


def test_new_input_shape_recompiles() -> None:
    x = Variable(np.ones((2, 3)), requires_grad=True)
    b = Variable(np.ones(3), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x) + b)
    plan = compile_graph(y)
    plan.run()
    x.d = np.full((4, 3), 0.5)
    x.cleargrad()
    b.cleargrad()
    plan.run()
    np.testing.assert_array_equal(b.g, np.full(3, 4.0))
    assert x.g.shape == (4, 3)
    assert float(y.d) == float(np.sum(np.tanh(np.full((4, 3), 0.5)) + 1.0))


def test_several_outputs() -> None:
    x = Variable(np.array([0.1, 0.2, 0.3]), requires_grad=True)
    with agnograd.auto_forward(False):
        a = F.sum(F.exp(x))
        b = F.sum(x * x)
    plan = compile_graph([a, b])
    agnograd.forward_all([a, b])
    agnograd.backward([a, b])
    want = [a.d, b.d, x.g]
    x.cleargrad()
    plan.run()
    for got, w in zip([a.d, b.d, x.g], want, strict=True):
        np.testing.assert_array_equal(got, w)


def test_hooks_fall_back_to_the_engine() -> None:
    x = Variable(np.array([0.5, 1.0]), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x) * 2.0)
    plan = compile_graph(y)
    calls: list[str] = []

    class Hook(FunctionHook):
        name = "count"

        def backward_preprocess(self, function: Any, in_data: Any, out_grad: Any) -> None:
            calls.append(function.label)

    with Hook():
        plan.run()
    assert calls  # the hook saw the nodes: the graph ran through the engine
    np.testing.assert_array_equal(x.g, (1 - np.tanh([0.5, 1.0]) ** 2) * 2.0)


def test_refuses_an_input_without_data() -> None:
    x = Variable(shape=(2,), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(x))
    x.d = np.zeros(2)
    plan = compile_graph(y)
    assert isinstance(plan, CompiledGraph)
    x.d = None
    with pytest.raises(RuntimeError, match=r"have no data; feed them first"):
        plan.forward()


def test_refuses_what_is_not_a_variable() -> None:
    with pytest.raises(TypeError, match=r"outputs\[0\] must be a Variable"):
        compile_graph([np.zeros(2)])  # type: ignore[list-item]


def test_source_is_straight_line_code() -> None:
    x = Variable(np.ones(3), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(x) * 2.0)
    plan = compile_graph(y)
    assert "for " not in plan.source.split("def backward")[0]
    assert plan.source.startswith("def forward(buf):")


def test_rewired_graph_recompiles() -> None:
    xa = Variable(np.array([1.0, 2.0]), requires_grad=True)
    with agnograd.auto_forward(False):
        ya = F.sum(xa * 3.0)
        xb = Variable(np.array([0.0, 1.0]), requires_grad=True)
        yb = F.exp(xb)
    plan = compile_graph(ya)
    plan.run()
    assert float(ya.d) == 9.0
    xa.rewire_on(yb)
    plan.run()
    assert float(ya.d) == float(np.sum(np.exp([0.0, 1.0]) * 3.0))
    np.testing.assert_array_equal(xb.g, np.exp([0.0, 1.0]) * 3.0)


def test_rules_are_inlined() -> None:
    x = Variable(np.ones(3), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x))
    backward = compile_graph(y).source.split("def backward")[1]
    # tanh's rule, g * (1 - y * y), written out: no call of the rule or conjugate.
    assert backward.count(" * ") == 2
    assert " - " in backward


def test_leaves_get_arrays_of_their_own() -> None:
    a = Variable(np.array([1.0, 2.0]), requires_grad=True)
    b = Variable(np.array([3.0, 4.0]), requires_grad=True)
    with agnograd.auto_forward(False):
        y = a + b
    y.grad = np.ones(2)
    plan = compile_graph(y)
    plan.run()
    assert a.grad is not b.grad
    assert a.grad is not y.grad
    assert b.grad is not y.grad
    plan.run()  # accumulates
    np.testing.assert_array_equal(a.grad, np.full(2, 2.0))
    np.testing.assert_array_equal(b.grad, np.full(2, 2.0))
    np.testing.assert_array_equal(y.grad, np.ones(2))


def test_a_second_backward_needs_a_forward() -> None:
    x = agnograd.Variable(np.ones(3), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x) * x)
    plan = agnograd.compile(y)
    with pytest.raises(RuntimeError, match=r"CompiledGraph.backward: run forward\(\) first"):
        plan.backward()
    plan.run()
    with pytest.raises(RuntimeError, match=r"CompiledGraph.backward: run forward\(\) first"):
        plan.backward()
