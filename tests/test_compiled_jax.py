"""Compiled plans lowered to XLA on JAX (``agnograd.static._compiled_jax``).

A lowered plan must give what the graph's walk gives (``forward_all``, then the
engine's ``backward``) on the same graph. The walk runs each operation as a program
of its own; XLA simplifies and fuses the lowered program as a whole, which changes
some roundings: the values agree to rounding, not bit for bit (float64, relative
1e-12 of the largest entry; float32, 1e-5).
Graphs are drawn by hypothesis from a handful of functions: some get lines of the
plan's own (unary functions, arithmetic with arrays and Python scalars), the others
run their node's ``forward`` and ``backward`` (reductions, ``matmul``, ``maximum``,
manipulations).

Float64 runs inside ``jax.enable_x64(True)`` blocks (the ``x64`` fixture), never a
global switch: other tests share the process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.core._graph import functions_of
from agnograd.function_hooks import FunctionHook
from agnograd.static._compiled import compile as compile_graph
from agnograd.static._compiled_jax import Lowered, lower

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


# -- a program of operations, built into a define-then-run graph ----------------------

# Leaves x (3, 4), b (4,), c (3, 1) and m (4, 4): every value below broadcasts to (3, 4).
OPS: dict[str, Callable[[Variable, Variable, Variable], Variable]] = {
    "tanh": lambda a, b, m: F.tanh(a),
    "exp_sin": lambda a, b, m: F.exp(F.sin(a)),
    "add": lambda a, b, m: a + b,
    "subtract": lambda a, b, m: a - b,
    "multiply": lambda a, b, m: a * b,
    "scalars": lambda a, b, m: (1.0 - a * 0.5) / 3.0 + 0.25,
    "sum": lambda a, b, m: F.sum(a, axis=0, keepdims=True),
    "mean": lambda a, b, m: F.mean(F.broadcast_to(a, (3, 4)), axis=1, keepdims=True),
    "maximum": lambda a, b, m: F.maximum(a, b),
    "matmul": lambda a, b, m: F.matmul(F.broadcast_to(a, (3, 4)), m),
    "transpose": lambda a, b, m: F.permute_dims(
        F.reshape(F.broadcast_to(a, (3, 4)), (4, 3)), (1, 0)
    ),
}
# One op: (name, operand a, operand b), operands as indexes into the values so far.
op = st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 30), st.integers(0, 30))


def make_leaves(need: tuple[bool, bool, bool], seed: int = 0) -> list[Variable]:
    """x, b and c (each requiring a gradient or not, as ``need`` says) and m."""
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (4,), (3, 1), (4, 4)]
    return [
        Variable(jnp.asarray(rng.uniform(-1.0, 1.0, s)), requires_grad=n)
        for s, n in zip(shapes, [*need, True], strict=True)
    ]


def build(program: list[tuple[str, int, int]], leaves: list[Variable]) -> Variable:
    """The program's graph, its output the sum of every value computed (so that
    every branch reaches it)."""
    values, m = leaves[:3], leaves[3]
    with agnograd.auto_forward(False):
        for name, i, j in program:
            values.append(OPS[name](values[i % len(values)], values[j % len(values)], m))
        out = values[3] * 1.0
        for v in values[4:]:
            out = out + v
        return F.sum(out)


@pytest.fixture
def x64() -> Iterator[None]:
    with jax.enable_x64(True):
        yield


def walk(ys: Variable | list[Variable], params: list[Variable]) -> tuple[Any, list[Any]]:
    """The graph's walk from cleared gradients: the first output's value, the gradients."""
    ys = ys if isinstance(ys, list) else [ys]
    for p in params:
        p.cleargrad()
    agnograd.forward_all(ys)
    agnograd.backward(ys)
    return ys[0].d, [p.g for p in params]


def check_close(got: Any, want: Any, rtol: float = 1e-12) -> None:
    if want is None:
        assert got is None
        return
    assert isinstance(got, jax.Array)
    got, want = np.asarray(got), np.asarray(want)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    atol = rtol * float(np.max(np.abs(want), initial=0.0))  # entries near zero
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def lowered_plan(y: Variable | list[Variable]) -> Lowered:
    lowered = lower(compile_graph(y))
    assert lowered is not None
    return lowered


def tracers_in(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return any(tracers_in(v) for v in value)
    if isinstance(value, dict):
        return any(tracers_in(v) for v in value.values())
    return isinstance(value, jax.core.Tracer)


def assert_no_tracer(y: Variable) -> None:
    """No function or node of the graph behind ``y`` holds a tracer."""
    for func in functions_of([y._node]):
        assert not tracers_in(vars(func)), func.label
        for node in [*(func.inputs or ()), *[r() for r in func.outputs or ()]]:
            if node is not None:
                assert not tracers_in(node._data), func.label
                var = node._variable()
                if var is not None:
                    grad = None if var._grad_var is None else var._grad_var._data
                    assert not tracers_in((var._data, grad)), func.label


class Cube(agnograd.FunctionNode):
    """x ** 3 with a hand-written backward, keeping its input on itself."""

    def forward(self, inputs: Any) -> Any:
        (x,) = inputs
        self.retain_inputs((0,))
        return (x * x * x,)

    def backward(self, indexes: Any, grad_outputs: Any) -> Any:
        (x,) = self.get_retained_inputs()
        return (3 * x * x * grad_outputs[0],)


class ScaleByMax(agnograd.FunctionNode):
    """x / max(x), the maximum read in Python: a node JAX cannot trace."""

    def forward(self, inputs: Any) -> Any:
        (x,) = inputs
        self.scale = float(x.__array_namespace__().max(x))
        return (x / self.scale,)

    def backward(self, indexes: Any, grad_outputs: Any) -> Any:
        return (grad_outputs[0] / self.scale,)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        return ((tuple(inputs[0].shape), inputs[0].dtype),)


def cube(x: Any) -> Variable:
    return Cube().apply((x,))[0]


# -- tests ----------------------------------------------------------------------------


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    program=st.lists(op, min_size=1, max_size=8),
    need=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_equals_the_walk(
    x64: None, program: list[tuple[str, int, int]], need: tuple[bool, bool, bool]
) -> None:
    params = make_leaves(need)
    y = build(program, params)
    want_y, want_g = walk(y, params)
    lowered = lowered_plan(y)
    for p in params:
        p.cleargrad()
    lowered.run()
    check_close(y.d, want_y)
    for p, want in zip(params, want_g, strict=True):
        check_close(p.g, want)
    # New data, and gradients accumulating over two runs.
    for leaf, new in zip(params, make_leaves(need, seed=1), strict=True):
        leaf.d = new.d
    want_y, want_g = walk(y, params)
    for p in params:
        p.cleargrad()
    lowered.run()
    lowered.run()
    check_close(y.d, want_y)
    for p, want in zip(params, want_g, strict=True):
        check_close(p.g, None if want is None else want * 2)
    # forward() then backward(): two programs, the arrays handed between them.
    for p in params:
        p.cleargrad()
    lowered.forward()
    check_close(y.d, want_y)
    lowered.backward()
    for p, want in zip(params, want_g, strict=True):
        check_close(p.g, want)
    assert lowered.eager_because is None
    assert_no_tracer(y)


def chain(x: Variable, w: Variable, blocks: int) -> Variable:
    h = x
    with agnograd.auto_forward(False):
        for _ in range(blocks):
            a = F.tanh(h)
            b = a * 0.5
            h = F.sin((F.exp(b) - 1.0) * w + x) + b
    return h


def test_chain_with_a_seed_in_float32() -> None:
    rng = np.random.default_rng(0)
    x = Variable(jnp.asarray(rng.uniform(-1, 1, 8), dtype=jnp.float32), requires_grad=True)
    w = Variable(jnp.asarray(rng.uniform(0.5, 1.5, 8), dtype=jnp.float32), requires_grad=True)
    y = chain(x, w, 5)
    y.grad = jnp.linspace(0.5, 1.5, 8, dtype=jnp.float32)
    want_y, want_g = walk(y, [x, w])
    lowered = lowered_plan(y)
    x.cleargrad()
    w.cleargrad()
    lowered.run()
    check_close(y.d, want_y, 1e-5)
    check_close(x.g, want_g[0], 1e-5)
    check_close(w.g, want_g[1], 1e-5)
    assert x.g.dtype == jnp.float32


def test_user_function_node_forward_then_backward(x64: None) -> None:
    x = Variable(jnp.asarray([0.5, -1.0, 2.0]), requires_grad=True)
    w = Variable(jnp.asarray([1.5, 0.25, -0.5]), requires_grad=True)
    with agnograd.auto_forward(False):
        a = cube(F.tanh(x) * w)  # alive: it receives its array
        y = F.sum(F.matmul(a, w) + cube(x))
    want_y, want_g = walk(y, [x, w])
    want_a = a.d
    lowered = lowered_plan(y)
    x.cleargrad()
    w.cleargrad()
    lowered.forward()
    assert_no_tracer(y)
    check_close(a.d, want_a)
    check_close(y.d, want_y)
    # Cube's retained input crossed from the forward's program to the backward's.
    assert any(name == "_saved_inputs" for _, name, *_ in lowered._state)
    lowered.backward()
    assert_no_tracer(y)
    check_close(x.g, want_g[0])
    check_close(w.g, want_g[1])
    with pytest.raises(RuntimeError, match=r"run forward\(\) first"):
        lowered.backward()
    x.cleargrad()
    w.cleargrad()
    lowered.run()
    assert_no_tracer(y)
    check_close(x.g, want_g[0])
    assert lowered.eager_because is None


def test_ones_for_a_scalar_output_and_refusal_for_others(x64: None) -> None:
    x = Variable(jnp.asarray([0.1, 0.2]), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(x))
        z = F.exp(x)
    lowered = lowered_plan(y)
    lowered.run()
    check_close(y.grad, jnp.ones(()))  # kept in y.grad, as the engine does
    check_close(x.g, jnp.exp(x.d))
    x.cleargrad()
    lowered.run()
    check_close(x.g, jnp.exp(x.d))
    assert lowered._jitted["run"]._cache_size() == 1  # the ones it made: no new program
    y.grad = jnp.asarray(2.0)
    x.cleargrad()
    lowered.run()
    check_close(x.g, 2 * jnp.exp(x.d))
    x.cleargrad()
    lowered_plan(z).run()  # seeded with ones, as nnabla's backward() is
    check_close(x.g, jnp.exp(x.d))


def test_several_outputs(x64: None) -> None:
    x = Variable(jnp.asarray([0.1, 0.2, 0.3]), requires_grad=True)
    with agnograd.auto_forward(False):
        a = F.sum(F.exp(x))
        b = F.sum(x * x)
    want_a, want_g = walk([a, b], [x])
    want_b = b.d
    lowered = lowered_plan([a, b])
    x.cleargrad()
    lowered.run()
    check_close(a.d, want_a)
    check_close(b.d, want_b)
    check_close(x.g, want_g[0])


def test_new_input_shape_is_lowered_again(x64: None) -> None:
    x = Variable(jnp.ones((2, 3)), requires_grad=True)
    b = Variable(jnp.ones(3), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x) + b)
    plan = compile_graph(y)
    first = lower(plan)
    assert first is not None
    first.run()
    x.d = jnp.full((4, 3), 0.5)
    plan.forward()  # rebuilds the plan for the new shape
    lowered = lower(plan)
    assert lowered is not None
    x.cleargrad()
    b.cleargrad()
    lowered.run()
    check_close(b.g, jnp.full(3, 4.0))
    assert x.g.shape == (4, 3)
    check_close(y.d, jnp.sum(jnp.tanh(jnp.full((4, 3), 0.5)) + 1.0))
    assert lowered._jitted["run"]._cache_size() == 1


def test_untraceable_node_runs_without_jit(x64: None) -> None:
    x = Variable(jnp.asarray([1.0, 2.0, 4.0]), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(ScaleByMax().apply((x,))[0]))
    want_y, want_g = walk(y, [x])
    lowered = lowered_plan(y)
    x.cleargrad()
    lowered.run()
    assert lowered.eager_because is not None
    assert "Concretization" in lowered.eager_because
    assert_no_tracer(y)
    check_close(y.d, want_y)
    check_close(x.g, want_g[0])


def test_not_lowered() -> None:
    x = Variable(np.ones(2), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(x))
    assert lower(compile_graph(y)) is None  # NumPy arrays
    devices = jax.devices()
    if len(devices) < 2:
        return
    a = Variable(jax.device_put(jnp.ones(2), devices[0]), requires_grad=True)
    b = Variable(jax.device_put(jnp.ones(2), devices[1]), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(a) * 2.0) + F.sum(F.exp(b))
    assert lower(compile_graph(y)) is None  # two devices


def test_a_write_into_memory_of_another_library_leaves_run_one_program(
    x64: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # JAX arrays are never written in place: a NumPy intermediate written in place and
    # alive elsewhere changes nothing the plan reads, and its run() stays one program.
    x = Variable(jnp.full((2, 3), 0.3), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x) * 2.0)
    plan = compile_graph(y)
    written = Variable(np.ones(3)) * 1.0
    written[0:2] = 5.0
    separately: list[str] = []
    forward = Lowered.forward
    monkeypatch.setattr(
        Lowered, "forward", lambda self: separately.append("forward") or forward(self)
    )
    want_y, want_g = walk(y, [x])
    x.cleargrad()
    plan.run()
    assert separately == []
    check_close(y.d, want_y)
    check_close(x.g, want_g[0])


def test_the_plan_runs_its_lowering(x64: None) -> None:
    x = Variable(jnp.full((2, 3), 0.3), requires_grad=True)
    b = Variable(jnp.ones(3), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(cube(F.tanh(x) * b) + F.sum(x, axis=0))
    plan = compile_graph(y)
    if getattr(plan, "_lowered", None) is None:
        pytest.skip("CompiledGraph does not lower its plans to XLA yet (issue 20)")
    for shape in [(2, 3), (4, 3)]:
        x.d = jnp.full(shape, 0.3)
        want_y, want_g = walk(y, [x, b])
        for p in (x, b):
            p.cleargrad()
        plan.run()
        lowered = plan._lowered  # a new one for the new shape
        assert lowered._jitted["run"]._cache_size() == 1
        check_close(y.d, want_y)
        check_close(x.g, want_g[0])
        check_close(b.g, want_g[1])
        for p in (x, b):
            p.cleargrad()
        plan.forward()
        plan.backward()
        assert lowered._jitted["backward"]._cache_size() == 1
        check_close(x.g, want_g[0])
        check_close(b.g, want_g[1])
        assert lowered.eager_because is None
    # Function hooks: the plan runs the graph's walk, which calls them.
    calls: list[str] = []

    class Hook(FunctionHook):
        name = "count"

        def backward_preprocess(self, function: Any, in_data: Any, out_grad: Any) -> None:
            calls.append(function.label)

    x.cleargrad()
    with Hook():
        plan.run()
    assert "Cube" in calls
    check_close(x.g, want_g[0])
    assert_no_tracer(y)
