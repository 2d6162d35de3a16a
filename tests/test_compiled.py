"""Compiled re-runs of define-then-run graphs (``agnograd.static._compiled.compile``).

A compiled plan must give what ``y.forward(); y.backward()`` gives, and what the same
program run eagerly gives, bit for bit: it runs the same array operations in the same
order. Programs are drawn by hypothesis from a broad sample of the differentiable
namespace (elementwise functions and arithmetic, reductions over an axis, manipulation,
indexing, ``where``, ``astype``, linear algebra) over float64 and float32 leaves, a
boolean mask and integer indices, and checked on NumPy, array-api-strict and PyTorch;
each op also runs once on its own whatever hypothesis draws.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.function_hooks import FunctionHook
from agnograd.static._compiled import CompiledGraph
from agnograd.static._compiled import compile as compile_graph

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


# -- a program of namespace functions, built into a define-then-run graph ------------

# The leaves: x (3, 4), b (4,) and m (4, 4) float64, c (3, 1) float32 (mixing the two
# float dtypes makes the engine cast gradients to their leaf's dtype), a boolean mask
# (3, 4) and integer indices (3,), which take no gradient. Every value a program
# computes has a shape that broadcasts to (3, 4), so that every drawn program builds.
FLOATS = {"x": ((3, 4), "float64"), "b": ((4,), "float64"), "c": ((3, 1), "float32")}
M = ((4, 4), "float64")
AXES = (0, 1, None)


@dataclass
class Graph:
    """What an op may use besides its operands: the namespace and the other leaves."""

    xp: Any
    m: Variable
    mask: Variable
    idx: Variable

    def full(self, a: Variable) -> Variable:
        """``a`` broadcast to (3, 4), the shape the manipulations take."""
        return a if a.shape == (3, 4) else self.xp.broadcast_to(a, (3, 4))

    def other_float(self, a: Variable) -> Any:
        return self.xp.float32 if a.dtype == self.xp.float64 else self.xp.float64


Op = Callable[[Graph, Variable, Variable, int], Variable]


def reduction(f: Callable[[Any], Callable[..., Variable]]) -> Op:
    """An op reducing its operand, broadcast to (3, 4), over an axis chosen by ``k``:
    to (1, 4), (3, 1), (), (4,) or (3,), the last made (3, 1) by ``expand_dims``."""

    def op(g: Graph, a: Variable, b: Variable, k: int) -> Variable:
        axis, keepdims = ((0, True), (1, True), (None, False), (0, False), (1, False))[k % 5]
        v = f(g.xp)(g.full(a), axis=axis, keepdims=keepdims)
        return g.xp.expand_dims(v, axis=-1) if v.shape == (3,) else v

    return op


# name -> op(graph, a, b, k): operands a and b, and k, a small integer choosing an axis,
# a shift or a slice. The first group gets lines of its own in the plan; most others
# run their node's forward and backward (generic steps).
OPS: dict[str, Op] = {
    "tanh": lambda g, a, b, k: g.xp.tanh(a),
    "sin": lambda g, a, b, k: g.xp.sin(a),
    "exp_tanh": lambda g, a, b, k: g.xp.exp(g.xp.tanh(a)),
    "add": lambda g, a, b, k: a + b,
    "subtract": lambda g, a, b, k: a - b,
    "multiply": lambda g, a, b, k: a * b,
    "add_scalar": lambda g, a, b, k: a + 0.25,
    "mul_scalar": lambda g, a, b, k: a * 0.5,
    "rsub_scalar": lambda g, a, b, k: 1.0 - a,
    "div_scalar": lambda g, a, b, k: a / 3.0,
    # Elementwise, on safe domains.
    "divide": lambda g, a, b, k: g.xp.divide(a, b * b + 1.0),
    "pow": lambda g, a, b, k: g.xp.pow(a * a + 0.5, b),
    "sqrt": lambda g, a, b, k: g.xp.sqrt(a * a + 0.25),
    "log": lambda g, a, b, k: g.xp.log(a * a + 0.5),
    "logaddexp": lambda g, a, b, k: g.xp.logaddexp(a, b),
    "maximum": lambda g, a, b, k: g.xp.maximum(a, b),
    "minimum": lambda g, a, b, k: g.xp.minimum(a, b),
    "clip": lambda g, a, b, k: g.xp.clip(a, -0.5, 0.5),
    "where": lambda g, a, b, k: g.xp.where(g.mask, a, b),
    "astype": lambda g, a, b, k: g.xp.astype(a, g.other_float(a)),
    # Statistical.
    "sum": reduction(lambda xp: xp.sum),
    "mean": reduction(lambda xp: xp.mean),
    "prod": reduction(lambda xp: xp.prod),
    "max": reduction(lambda xp: xp.max),
    "min": reduction(lambda xp: xp.min),
    "std": reduction(lambda xp: xp.std),
    "var": reduction(lambda xp: xp.var),
    "vector_norm": reduction(lambda xp: xp.linalg.vector_norm),
    "vector_norm_1": reduction(lambda xp: functools.partial(xp.linalg.vector_norm, ord=1)),
    "cumulative_sum": lambda g, a, b, k: g.xp.cumulative_sum(g.full(a), axis=k % 2),
    # Manipulation and indexing, each brought back to (3, 4).
    "broadcast_to": lambda g, a, b, k: g.xp.broadcast_to(a, (3, 4)),
    "reshape_permute": lambda g, a, b, k: g.xp.permute_dims(
        g.xp.reshape(g.full(a), (4, 3)), (1, 0)
    ),
    "flip": lambda g, a, b, k: g.xp.flip(g.full(a), axis=AXES[k % 3]),
    "roll": lambda g, a, b, k: g.xp.roll(g.full(a), k % 5 - 2, axis=AXES[k % 3]),
    "expand_squeeze": lambda g, a, b, k: g.xp.squeeze(
        g.xp.expand_dims(g.full(a), axis=k % 3), axis=k % 3
    ),
    "concat_slice": lambda g, a, b, k: g.xp.concat([g.full(a), g.full(b)])[k % 4 : k % 4 + 3],
    "stack_max": lambda g, a, b, k: g.xp.max(
        g.xp.stack([g.full(a), g.full(b)], axis=k % 3), axis=k % 3
    ),
    "tile_slice": lambda g, a, b, k: g.xp.tile(g.full(a), (1, 2))[:, k % 5 : k % 5 + 4],
    "slices": lambda g, a, b, k: g.xp.concat([g.full(a)[:, 1:3], g.full(a)[:, ::2]], axis=1),
    "take": lambda g, a, b, k: g.xp.take(g.full(a), g.idx, axis=0),
    # Linear algebra, with the (4, 4) leaf m.
    "matmul": lambda g, a, b, k: g.xp.matmul(g.full(a), g.m),
    "matvec": lambda g, a, b, k: g.xp.expand_dims(g.xp.matmul(g.full(a), g.m[k % 4]), axis=-1),
    "tensordot": lambda g, a, b, k: (
        g.xp.tensordot(g.full(a), g.m, axes=1)
        if k % 2
        else g.xp.tensordot(g.full(a), g.full(b), axes=2)
    ),
}

# One op: (name, operand a, operand b, k), operands as indexes into the values so far.
op = st.tuples(
    st.sampled_from(sorted(OPS)), st.integers(0, 30), st.integers(0, 30), st.integers(0, 11)
)
Program = list[tuple[str, int, int, int]]


@dataclass
class Leaves:
    floats: list[Variable]  # x, b, c and m
    mask: Variable
    idx: Variable

    @property
    def all(self) -> list[Variable]:
        return [*self.floats, self.mask, self.idx]


def data(seed: int) -> list[np.ndarray]:
    """Arrays for x, b, c, m, the mask and the indices."""
    rng = np.random.default_rng(seed)
    floats = [rng.uniform(-1.0, 1.0, s).astype(t) for s, t in [*FLOATS.values(), M]]
    return [*floats, rng.uniform(size=(3, 4)) < 0.5, rng.permutation(3)]


def make_leaves(to: Callable[[np.ndarray], Any], need: tuple[bool, ...]) -> Leaves:
    arrays = [to(a) for a in data(0)]
    floats = [Variable(a, requires_grad=n) for a, n in zip(arrays[:4], need, strict=True)]
    mask, idx = (Variable(a, requires_grad=False) for a in arrays[4:])
    return Leaves(floats, mask, idx)


def feed(to: Callable[[np.ndarray], Any], leaves: Leaves, seed: int) -> None:
    for leaf, a in zip(leaves.all, data(seed), strict=True):
        leaf.d = to(a)


def build(program: Program, leaves: Leaves) -> Variable:
    """The program's graph, its output the sum of every value computed (so that every
    branch reaches the output): deferred under ``auto_forward(False)``, else eager."""
    x, b, c, m = leaves.floats
    g = Graph(agnograd.namespace(x), m, leaves.mask, leaves.idx)
    values = [x, b, c]
    for name, i, j, k in program:
        values.append(OPS[name](g, values[i % len(values)], values[j % len(values)], k))
    out = values[3]
    for v in values[4:]:
        out = out + v
    return g.xp.sum(out)


def reference(y: Variable, params: list[Variable]) -> tuple[Any, list[Any]]:
    """``y.forward(); y.backward()`` from cleared gradients: the value and gradients."""
    for p in params:
        p.cleargrad()
    y.forward()
    y.backward()
    return y.d, [p.g for p in params]


def eager(program: Program, leaves: Leaves) -> tuple[Any, list[Any]]:
    """The program run eagerly, then backward: the value and gradients."""
    for p in leaves.floats:
        p.cleargrad()
    y = build(program, leaves)
    y.backward()
    return y.d, [p.g for p in leaves.floats]


def check_equal(back: Callable[[Any], np.ndarray], got: Any, want: Any) -> None:
    """Equal bit for bit, NaN where NaN (``assert_array_equal`` matches NaNs)."""
    if want is None:
        assert got is None
        return
    np.testing.assert_array_equal(back(got), back(want), strict=True)


def check_all(
    back: Callable[[Any], np.ndarray], got: tuple[Any, list[Any]], want: tuple[Any, list[Any]]
) -> None:
    check_equal(back, got[0], want[0])
    for g, w in zip(got[1], want[1], strict=True):
        check_equal(back, g, w)


def check_program(
    conv: tuple[Callable[..., Any], Callable[..., Any]], program: Program, need: tuple[bool, ...]
) -> None:
    """The compiled plan of ``program`` against eager and ``y.forward(); y.backward()``,
    bit for bit: ``run()``, ``forward()`` alone then ``backward()``, new data fed
    between runs, and gradients accumulating over two runs."""
    to, back = conv
    leaves = make_leaves(to, need)
    params = leaves.floats
    # A program may overflow or reach 0 / 0; the results, NaNs included, must still
    # be equal, but NumPy's warnings (errors under filterwarnings) would stop it.
    with np.errstate(all="ignore"):
        with agnograd.auto_forward(False):
            y = build(program, leaves)
        want = reference(y, params)
        check_all(back, eager(program, leaves), want)
        plan = compile_graph(y)
        for p in params:
            p.cleargrad()
        plan.run()
        check_all(back, (y.d, [p.g for p in params]), want)

        feed(to, leaves, 1)
        want = reference(y, params)
        for p in params:
            p.cleargrad()
        plan.forward()
        check_equal(back, y.d, want[0])
        plan.backward()
        check_all(back, (y.d, [p.g for p in params]), want)

        feed(to, leaves, 2)
        want_y, _ = reference(y, params)
        y.backward()
        want = (want_y, [p.g for p in params])
        for p in params:
            p.cleargrad()
        plan.run()
        plan.run()
        check_all(back, (y.d, [p.g for p in params]), want)


# -- tests ----------------------------------------------------------------------------


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    program=st.lists(op, min_size=1, max_size=16),
    need=st.tuples(*[st.booleans()] * 4),
)
def test_equals_eager_and_static_bit_for_bit(
    conv: tuple[Callable[..., Any], Callable[..., Any]],
    program: Program,
    need: tuple[bool, bool, bool, bool],
) -> None:
    check_program(conv, program, need)


@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_bit_for_bit(
    conv: tuple[Callable[..., Any], Callable[..., Any]], name: str
) -> None:
    """Every op at least once, whatever hypothesis draws: on the leaves, on each other's
    results, with each choice of axis."""
    program = [(name, i, i + 1, i) for i in range(5)]
    check_program(conv, program, (True, True, True, True))


def test_equals_eager_with_a_subgraph_without_gradient() -> None:
    """Eager records no node for ``b * 2.0`` (b needs no gradient): define-then-run
    does, and must rank it as eager would, so that backward adds x's three gradients
    in the same order."""
    rng = np.random.default_rng(0)
    x = Variable(rng.uniform(-1.0, 1.0, 5), requires_grad=True)
    b = Variable(rng.uniform(-1.0, 1.0, 5), requires_grad=False)
    xp = agnograd.namespace(x)

    def f() -> Variable:
        return xp.sum(xp.sin(x) + xp.tanh(x) + xp.exp(x * (b * 2.0)))

    f().backward()
    want = x.grad
    x.cleargrad()
    with agnograd.auto_forward(False):
        y = f()
    compile_graph(y).run()
    np.testing.assert_array_equal(x.grad, want)


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


class _Twice(agnograd.FunctionNode):
    """A user's node, ``2 x``, whose backward hands its gradient to ``convert``."""

    def __init__(self) -> None:
        self.convert: Callable[[Any], Any] = lambda g: g

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] * 2,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.convert(grad_outputs[0] * 2),)


def _dask(g: Any) -> Any:
    return pytest.importorskip("dask.array").from_array(g)


@pytest.mark.parametrize(
    ("graph", "convert", "other"),
    [
        ("numpy", _dask, "dask.array"),  # NumPy's dtypes: nothing else would notice
        ("array_api_strict", np.from_dlpack, "numpy"),
        ("torch", lambda g: g.numpy(), "numpy"),
    ],
)
def test_a_gradient_of_another_library_is_refused_as_the_engine_refuses_it(
    graph: str, convert: Callable[[Any], Any], other: str
) -> None:
    # A plan calls a node's own backward and checks what it returns as the engine
    # does, rather than hand the leaf an array of another library.
    to_graph = BACKENDS[graph]()[0]
    x = Variable(to_graph(np.array([1.0, 2.0])))
    node = _Twice()
    with agnograd.auto_forward(False):
        y = F.sum(node.apply((x,))[0])
    plan = compile_graph(y)
    plan.run()
    node.convert = convert
    x.cleargrad()
    message = rf"backward of _Twice returned a {other} array as the gradient of input 0"
    with pytest.raises(TypeError, match=message):
        plan.run()
    eager = _Twice()
    eager.convert = convert
    with pytest.raises(TypeError, match=message):  # the engine's words
        F.sum(eager.apply((x,))[0]).backward()


@pytest.mark.parametrize("start", ["array_api_strict", "numpy"])
def test_a_leaf_moved_after_the_forward_gets_its_gradient_where_its_data_is(start: str) -> None:
    # As the engine moves each gradient of a moved leaf to where its data is now, a
    # plan moves the sum of the leaf's gradients, of its own steps (exp, *) and of
    # the nodes that run their own backward (sum) alike.
    xs = pytest.importorskip("array_api_strict")
    device = xs.Device("device1")
    x = Variable(BACKENDS[start]()[0](np.array([1.0, 2.0])))
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(x) * x) + F.sum(x)
    plan = compile_graph(y)
    plan.run()
    x.cleargrad()
    plan.forward()
    x.to_device(device if start == "array_api_strict" else "@array_api_strict:device1")
    plan.backward()
    assert x.grad.device == device
    values = np.array([1.0, 2.0])
    np.testing.assert_allclose(np.from_dlpack(x.grad), np.exp(values) * (1 + values) + 1)
