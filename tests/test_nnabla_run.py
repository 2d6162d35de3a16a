"""nnabla's ways of running a graph: function hooks given to one call, and ``recompute``.

``y.forward(function_pre_hook=f, function_post_hook=g)``, the same options of
``y.backward`` and of ``agnograd.forward_all`` call ``f(func)`` and ``g(func)`` with
each FunctionNode around its forward (or backward), as nnabla's do. A Variable marked
``recompute`` (``x.recompute = True``, or made inside ``agnograd.recompute()``) has
its data freed in forward, with what functions kept of it for backward, and
computed again in backward when a function's backward reads it: the gradients are
those of the same graph without it, bit for bit, at a lower peak memory.

Each test runs on every host backend, walked (``compile_after=None``) and with
compiled plans made at the first run (``compile_after=0``), which must give what the
walk gives or leave the run to it.
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.static import _replay


@pytest.fixture(params=[None, 0], ids=["walk", "plan"])
def compile_after(request: pytest.FixtureRequest) -> Iterator[int | None]:
    """Walk the graph, or compile it at its first run."""
    with agnograd.using_config("compile_after", request.param):
        yield request.param


def planned(y: Variable) -> bool:
    """Whether the next ``y.forward()`` runs a plan."""
    state = _replay._replays.get(y._node)
    return state is not None and any(plan.current() for plan in state.plans.values())


def assert_same(backend: Any, compile_after: int | None, got: Any, expected: Any) -> None:
    """Equal bit for bit; to rounding where JAX ran a plan (XLA fuses the plan's
    program, see "Compiled re-runs" in the define-then-run guide)."""
    if expected is None:
        assert got is None
    elif backend.name == "jax" and compile_after is not None:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, expected)


def labels_of(calls: list[Any]) -> list[str]:
    return [f.label for f in calls]


# -- function hooks given to one call --------------------------------------------------


def small_graph(backend: Any) -> tuple[Variable, Variable, Variable]:
    x = Variable(backend.asarray([0.5, -1.0, 2.0]), requires_grad=True)
    with agnograd.auto_forward(False):
        h = F.exp(x) * 2.0
        y = F.sum(F.tanh(h))
    return x, h, y


@pytest.mark.parametrize(
    "options", [{}, {"clear_no_need_grad": True}, {"clear_buffer": True}], ids=str
)
def test_forward_calls_the_hooks_around_each_function(
    backend: Any, compile_after: int | None, options: dict[str, Any]
) -> None:
    x, _h, y = small_graph(backend)
    for _ in range(3):  # walks, then (compile_after=0) what a plan would run
        y.forward()
    pre: list[Any] = []
    post: list[tuple[Any, Any]] = []

    def after(func: Any) -> None:  # the outputs hold their new arrays already
        (ref,) = func.outputs
        post.append((func, backend.to_numpy(ref().data).copy()))

    x.d = backend.asarray([1.0, 0.0, -1.0])
    y.forward(**options, function_pre_hook=pre.append, function_post_hook=after)
    assert labels_of(pre) == ["Exp", "MulConstant", "Tanh", "Sum"]
    assert [f for f, _ in post] == pre
    assert pre[-1] is y.parent
    eager = backend.xp.exp(backend.asarray([1.0, 0.0, -1.0])) * 2.0
    np.testing.assert_array_equal(post[1][1], backend.to_numpy(eager))
    np.testing.assert_array_equal(post[-1][1], backend.to_numpy(y.d))
    # Every run calls them, plans or not.
    pre.clear()
    y.forward(**options, function_pre_hook=pre.append)
    assert labels_of(pre) == ["Exp", "MulConstant", "Tanh", "Sum"]


def test_backward_calls_the_hooks_around_each_backward(
    backend: Any, compile_after: int | None
) -> None:
    x, _, y = small_graph(backend)
    reference: Any = None
    for step in range(4):
        x.cleargrad()
        y.forward()
        if step < 2:
            y.backward()
            reference = backend.to_numpy(x.grad).copy()
            continue
        pre: list[Any] = []
        post: list[Any] = []
        y.backward(function_pre_hook=pre.append, function_post_hook=post.append)
        assert labels_of(pre) == ["Sum", "Tanh", "MulConstant", "Exp"]
        assert post == pre
        assert_same(backend, compile_after, backend.to_numpy(x.grad), reference)
    assert compile_after is None or planned(y)  # the hooks leave the plans alone


def test_backward_hooks_after_eager_computation(backend: Any) -> None:
    x = Variable(backend.asarray([0.5, 1.5]), requires_grad=True)
    y = F.sum(F.sin(x) * x)
    seen: list[str] = []
    grads: list[Any] = []

    def record(func: Any) -> None:
        seen.append(func.label)
        grads.append(x.grad)

    y.backward(function_pre_hook=record, retain_grad=True)
    assert seen == ["Sum", "Mul", "Sin"]
    assert grads[0] is None  # before any backward reached the leaf
    seen.clear()
    y.backward(function_post_hook=record)
    assert seen == ["Sum", "Mul", "Sin"]
    expected = 2 * (np.cos([0.5, 1.5]) * [0.5, 1.5] + np.sin([0.5, 1.5]))
    backend.assert_close(x.grad, expected)


def test_forward_all_calls_the_hooks_once_per_function(
    backend: Any, compile_after: int | None
) -> None:
    x = Variable(backend.asarray([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    with agnograd.auto_forward(False):
        a, b = F.unstack(x * 2.0)
        ya, yb = F.exp(a), F.sin(b)
    seen: list[str] = []
    agnograd.forward_all([ya, yb], function_pre_hook=lambda f: seen.append(f.label))
    assert sorted(seen) == ["Exp", "MulConstant", "Sin", "Unstack"]
    after: list[str] = []
    agnograd.forward_all(
        [ya, yb], clear_buffer=True, function_post_hook=lambda f: after.append(f.label)
    )
    assert after == seen
    backend.assert_close(ya, np.exp([2.0, 4.0]))
    backend.assert_close(yb, np.sin([6.0, 8.0]))


def test_hooks_that_compute_are_not_called_for_their_own_operations(backend: Any) -> None:
    _x, _, y = small_graph(backend)
    sums: list[float] = []

    def total(func: Any) -> None:  # computes with agnograd: no hook call for that
        (ref,) = func.outputs
        sums.append(float(F.sum(Variable(ref().data) * 1.0).array))

    y.forward(function_post_hook=total)
    y.backward(function_pre_hook=total)
    assert len(sums) == 8


@pytest.mark.parametrize("call", ["forward", "backward", "forward_all"])
def test_a_hook_that_is_not_callable_is_refused(call: str) -> None:
    x = Variable(np.ones(2), requires_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(x * 2.0)
    y.forward()
    run: dict[str, Callable[[], None]] = {
        "forward": lambda: y.forward(function_pre_hook=3),  # type: ignore[arg-type]
        "backward": lambda: y.backward(function_post_hook="print"),  # type: ignore[arg-type]
        "forward_all": lambda: agnograd.forward_all([y], function_pre_hook=3),  # type: ignore[arg-type]
    }
    with pytest.raises(TypeError, match=rf"^{call}: function_(pre|post)_hook must be a callable"):
        run[call]()
    assert not agnograd.config.function_hooks  # nothing left registered


def test_a_hook_that_raises_leaves_nothing_registered(backend: Any) -> None:
    _x, _, y = small_graph(backend)

    def fail(func: Any) -> None:
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        y.forward(function_pre_hook=fail)
    assert not agnograd.config.function_hooks
    y.forward()
    with pytest.raises(ValueError, match="stop"):
        y.backward(function_post_hook=fail)
    assert not agnograd.config.function_hooks


# -- recompute ----------------------------------------------------------------------


def test_recompute_flag_and_context(backend: Any) -> None:
    x = Variable(backend.asarray([1.0, 2.0]), requires_grad=True)
    assert x.recompute is False
    with agnograd.auto_forward(False):
        a = F.sin(x)
        with agnograd.recompute():
            b = F.sin(a)
            with agnograd.recompute(False):
                c = F.sin(b)
            d = F.sin(c)
            u = d.unlinked()
        e = F.sin(d)
    assert [v.recompute for v in (a, b, c, d, u, e)] == [False, True, False, True, True, False]
    a.recompute = True
    b.recompute = False
    assert (a.recompute, b.recompute) == (True, False)

    @agnograd.recompute()  # nnabla's recompute_fn
    def block(v: Variable) -> Variable:
        return F.exp(v)

    with agnograd.auto_forward(False):
        assert block(x).recompute is True
    assert agnograd.config.recompute is False


def chain(backend: Any, marks: str, values: list[float]) -> tuple[Variable, list[Variable]]:
    """``x -> sin -> x1 -> sin -> x2 ...``, ``x_i`` marked recompute where ``marks[i-1]``
    is ``r``."""
    x = Variable(backend.asarray(values), requires_grad=True)
    nodes = [x]
    with agnograd.auto_forward(False):
        for mark in marks:
            nodes.append(F.sin(nodes[-1]))
            nodes[-1].recompute = mark == "r"
    return x, nodes


@pytest.mark.parametrize(
    "options", [{}, {"clear_no_need_grad": True}, {"clear_buffer": True}], ids=str
)
def test_forward_frees_the_data_of_recompute_variables(
    backend: Any, compile_after: int | None, options: dict[str, Any]
) -> None:
    _, (x0, x1, x2, x3, x4) = chain(backend, "rrrr", [0.5, 1.0])
    x2.persistent = True  # kept
    x0.recompute = True  # a leaf: kept
    for _ in range(3):
        x4.forward(**options)  # x4, the output asked for: kept
        assert x0.d is not None
        assert x2.d is not None
        assert x4.d is not None
        assert x1.d is None
        assert x3.d is None
        assert not planned(x4)


def test_forward_drops_what_functions_kept_of_a_freed_array(
    backend: Any, compile_after: int | None
) -> None:
    _, (_, x1, x2) = chain(backend, "r.", [0.5, 1.0])
    refs: list[Any] = []

    def keep_ref(func: Any) -> None:
        (ref,) = func.outputs
        if ref() is x1._node:
            refs.append(weakref.ref(ref().data))

    x2.forward(function_post_hook=keep_ref)
    gc.collect()
    assert refs
    assert refs[0]() is None
    x2.backward()
    assert x1.d is not None  # recomputed for Sin(x1)'s backward, and kept (nnabla)


def test_recomputed_data_is_the_forward_data(backend: Any, compile_after: int | None) -> None:
    """nnabla's test_recomputed_data_value."""
    rng = np.random.default_rng(313)
    a0 = Variable(backend.asarray(rng.normal(size=(2, 3))), requires_grad=True)
    b0 = Variable(backend.asarray(rng.normal(size=(2, 3))), requires_grad=True)
    with agnograd.auto_forward(False):
        with agnograd.recompute():
            a1 = F.sin(a0)
        a3 = F.sin(F.sin(a1))
        b1 = F.sin(b0)
        with agnograd.recompute():
            b2 = F.sin(b1)
        b3 = F.sin(b2)
        with agnograd.recompute():
            c0 = a3 * b3
        c1 = F.sin(c0)
    marked = {a1._node, b2._node, c0._node}
    forward_data: list[Any] = []
    backward_data: list[Any] = []

    def outputs(func: Any) -> None:
        for ref in func.outputs:
            if ref() in marked:
                forward_data.append(backend.to_numpy(ref().data).copy())

    def inputs(func: Any) -> None:
        for node in func.inputs:
            if node in marked:
                backward_data.append(backend.to_numpy(node.data).copy())

    c1.forward(function_post_hook=outputs)
    assert a1.d is None
    assert b2.d is None
    assert c0.d is None
    c1.backward(function_pre_hook=inputs)
    assert len(forward_data) == len(backward_data) == 3
    for got, expected in zip(backward_data[::-1], forward_data, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_recomputation_stops_at_checkpoints(backend: Any, compile_after: int | None) -> None:
    """nnabla's test_checkpoint: data is recomputed from the nearest unmarked result,
    when the backward that needs it comes."""
    _, xs = chain(backend, "rr.rr.rr", [0.25, 0.5, 1.0])
    x8 = xs[8]
    x8.forward(clear_no_need_grad=True)
    freed: list[tuple[bool, bool]] = []
    x8.backward(function_post_hook=lambda f: freed.append((xs[2].d is None, xs[5].d is None)))
    assert freed == [
        (True, True),  # after the backward of sin(x7)
        (True, True),  # sin(x6)
        (True, False),  # sin(x5): x5 was recomputed, from x3, for it
        (True, False),
        (True, False),
        (False, False),  # sin(x2): recomputed from x0
        (False, False),
        (False, False),
    ]


def network(
    backend: Any, marked: bool, need: tuple[bool, bool] = (True, True)
) -> tuple[list[Variable], Variable]:
    """Blocks of marked results between unmarked ones, with a matrix product, a
    broadcast, a branch, a function that keeps its output (exp, tanh) and one that
    keeps its inputs (mul), from the same seed each time."""
    rng = np.random.default_rng(7)
    x = Variable(backend.asarray(rng.normal(size=(4, 3))), requires_grad=need[0])
    w = Variable(backend.asarray(rng.normal(size=(3, 3)) / 2), requires_grad=need[1])
    b = Variable(backend.asarray(rng.normal(size=(3,))), requires_grad=True)
    with agnograd.auto_forward(False):
        h = x
        for _ in range(3):
            with agnograd.recompute(marked):
                a = F.tanh(h @ w + b)
                e = F.exp(a) * F.sin(h)
                h = e - a * 0.5
            h = F.tanh(h)
        y = F.sum(h * h) + F.sum(F.exp(a))
    return [x, w, b], y


def grads(leaves: list[Variable], backend: Any) -> list[Any]:
    return [None if v.grad is None else backend.to_numpy(v.grad).copy() for v in leaves]


@pytest.mark.parametrize(
    ("forward_options", "backward_options"),
    [
        ({}, {}),
        ({"clear_no_need_grad": True}, {"clear_buffer": True}),
        ({}, {"clear_buffer": True}),
        ({"clear_no_need_grad": True}, {}),
    ],
    ids=["plain", "clear_both", "clear_backward", "clear_forward"],
)
@pytest.mark.parametrize("need", [(True, True), (False, True), (True, False)], ids=str)
def test_gradients_equal_those_without_recompute_bit_for_bit(
    backend: Any,
    compile_after: int | None,
    forward_options: dict[str, Any],
    backward_options: dict[str, Any],
    need: tuple[bool, bool],
) -> None:
    plain_leaves, plain = network(backend, False, need)
    leaves, y = network(backend, True, need)
    for step in range(3):  # new data each step; with compile_after=0 `plain` runs plans
        for p, r in zip(plain_leaves, leaves, strict=True):
            p.d = p.d * 1.0 + step
            r.d = r.d * 1.0 + step
            p.cleargrad()
            r.cleargrad()
        plain.forward(**forward_options)
        y.forward(**forward_options)
        assert_same(backend, compile_after, backend.to_numpy(y.d), backend.to_numpy(plain.d))
        plain.backward(**backward_options)
        y.backward(**backward_options)
        for got, expected in zip(grads(leaves, backend), grads(plain_leaves, backend), strict=True):
            assert_same(backend, compile_after, got, expected)
    assert not planned(y)
    assert compile_after is None or planned(plain)


def test_a_second_backward_uses_what_the_first_recomputed(
    backend: Any, compile_after: int | None
) -> None:
    leaves, y = network(backend, True)
    plain_leaves, plain = network(backend, False)
    y.forward(clear_no_need_grad=True)
    plain.forward(clear_no_need_grad=True)
    for _ in range(2):
        y.backward()
        plain.backward()
    for got, expected in zip(grads(leaves, backend), grads(plain_leaves, backend), strict=True):
        assert_same(backend, compile_after, got, expected)


@pytest.mark.parametrize(
    "twice",
    [lambda h: h * h, lambda h: h @ h, lambda h: F.maximum(h, h)],
    ids=["mul", "matmul", "maximum"],
)
@pytest.mark.parametrize("options", [{}, {"clear_no_need_grad": True}], ids=str)
def test_a_recomputed_variable_that_one_function_reads_twice(
    backend: Any,
    compile_after: int | None,
    twice: Callable[[Variable], Variable],
    options: dict[str, Any],
) -> None:
    """The function keeps the marked array at two places of its saved inputs: both
    are computed again."""
    rng = np.random.default_rng(3)
    data = rng.normal(size=(3, 3))
    results = []
    for marked in (False, True):
        x = Variable(backend.asarray(data), requires_grad=True)
        with agnograd.auto_forward(False):
            h = F.tanh(x)
            h.recompute = marked
            y = F.sum(twice(h))
        for _ in range(2):  # with compile_after=0, the second run is the plan's
            x.cleargrad()
            y.forward(**options)
            y.backward()
        results.append(backend.to_numpy(x.grad).copy())
    assert_same(backend, compile_after, results[1], results[0])


def test_grad_and_double_backprop_recompute(backend: Any, compile_after: int | None) -> None:
    (x, w, _b), y = network(backend, True)
    (px, pw, _pb), plain = network(backend, False)
    y.forward(clear_no_need_grad=True)
    plain.forward(clear_no_need_grad=True)
    (gw,) = agnograd.grad([y], [w], enable_double_backprop=True)
    (pgw,) = agnograd.grad([plain], [pw], enable_double_backprop=True)
    assert gw is not None
    assert pgw is not None
    assert_same(backend, compile_after, backend.to_numpy(gw.array), backend.to_numpy(pgw.array))
    (ggx,) = agnograd.grad([F.sum(gw * gw)], [x])
    (pggx,) = agnograd.grad([F.sum(pgw * pgw)], [px])
    assert ggx is not None
    assert pggx is not None
    assert_same(backend, compile_after, backend.to_numpy(ggx.array), backend.to_numpy(pggx.array))


def test_recomputation_runs_no_hook(backend: Any, compile_after: int | None) -> None:
    _, xs = chain(backend, "rr.", [0.5, 1.0])
    xs[-1].forward()
    forwards: list[str] = []

    class Count(agnograd.FunctionHook):
        name = "count recomputations"

        def forward_preprocess(self, function: Any, in_data: Any) -> None:
            forwards.append(function.label)

    with Count():
        xs[-1].backward()
    assert forwards == []
    assert xs[1].d is not None  # recomputed all the same


def test_new_input_data_before_backward_is_refused(backend: Any, compile_after: int | None) -> None:
    x, xs = chain(backend, "rr.", [0.5, 1.0])
    xs[-1].forward()
    x.d = backend.asarray([2.0, 3.0])
    with pytest.raises(RuntimeError, match=r"given another array or written in place since"):
        xs[-1].backward()
    xs[-1].forward()  # a new forward makes it right
    x.cleargrad()
    xs[-1].backward()
    expected = np.cos(np.sin(np.sin([2.0, 3.0])))
    expected = expected * np.cos(np.sin([2.0, 3.0])) * np.cos([2.0, 3.0])
    backend.assert_close(x.grad, expected)


def test_compiled_plan_of_a_graph_with_recompute_walks(backend: Any) -> None:
    _, xs = chain(backend, "r.", [0.5, 1.0])
    plan = agnograd.compile(xs[-1])
    plan.forward()
    assert xs[1].d is None  # what the walk leaves
    plan.backward()
    first = backend.to_numpy(xs[0].grad).copy()
    xs[0].cleargrad()
    xs[1].recompute = False  # an edit: the plan is made again, and runs itself
    plan.run()
    np.testing.assert_array_equal(backend.to_numpy(xs[0].grad), first)
    xs[1].recompute = True
    xs[0].cleargrad()
    plan.forward()
    assert xs[1].d is None
    plan.backward()
    np.testing.assert_array_equal(backend.to_numpy(xs[0].grad), first)


def test_replay_compiles_again_once_recompute_is_unset(backend: Any) -> None:
    _, xs = chain(backend, "r.", [0.5, 1.0])
    y = xs[-1]
    with agnograd.using_config("compile_after", 0):
        y.forward()
        assert not planned(y)
        assert xs[1].d is None
        xs[1].recompute = False
        for _ in range(3):
            y.forward()
        assert planned(y)
        assert xs[1].d is not None


def test_recompute_lowers_the_peak_memory() -> None:
    """A chain of 64 sin-and-scale layers on 1 MB arrays, every eighth result unmarked:
    forward keeps the eight checkpoints instead of every layer's input."""

    def run(marked: bool) -> tuple[int, Any]:
        x = Variable(np.linspace(0.0, 1.0, 125_000), requires_grad=True)
        h = x
        with agnograd.auto_forward(False):
            for i in range(64):
                with agnograd.recompute(marked and (i + 1) % 8 != 0):
                    h = F.sin(h) * 1.5
            y = F.sum(h)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            y.forward(clear_no_need_grad=True)
            y.backward(clear_buffer=True)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        return peak, x.grad

    with agnograd.using_config("compile_after", None):
        without, expected = run(False)
        with_recompute, got = run(True)
    np.testing.assert_array_equal(got, expected)
    assert with_recompute < 0.4 * without, (with_recompute, without)
