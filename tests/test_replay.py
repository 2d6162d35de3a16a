"""``y.forward()`` and ``y.backward()`` compile a graph run often enough (agnograd.static._replay).

After ``config.compile_after`` walks of an unchanged graph (none in these tests),
``y.forward()`` runs a compiled plan, and a plain ``y.backward()`` after it runs
the plan's backward. The results, and what the graph keeps afterwards, must be the
walk's: these tests run the same graph both ways, bit for bit, and change it
between runs.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.function_hooks import FunctionHook
from agnograd.static import _replay


@pytest.fixture(autouse=True)
def compile_at_once() -> Iterator[None]:
    """Plans made at the first run."""
    with agnograd.using_config("compile_after", 0):
        yield


def planned(y: Variable) -> bool:
    """Whether the next ``y.forward()`` runs a plan."""
    state = _replay._replays.get(y._node)
    return state is not None and any(plan.current() for plan in state.plans.values())


def net(x: Variable, w: Variable) -> tuple[Variable, Variable]:
    """A small network with a broadcast, a reduction and a generic node (matmul)."""
    h = F.tanh(x @ w + 0.5)
    return h, F.sum(F.exp(h) * h - x[0, 1:3])


def graph(need_x: bool = True) -> tuple[Variable, Variable, Variable, Variable]:
    rng = np.random.default_rng(0)
    x = Variable(rng.normal(size=(3, 4)), requires_grad=need_x)
    w = Variable(rng.normal(size=(4, 2)))
    with agnograd.auto_forward(False):
        h, y = net(x, w)
    return x, w, h, y


def walked(
    x: Variable, w: Variable, feed: Callable[[], None] = lambda: None
) -> tuple[Any, Any, Any, Any]:
    """The values and gradients that walking a fresh copy of the graph gives."""
    x2 = Variable(x.d.copy(), requires_grad=x.requires_grad)
    w2 = Variable(w.d.copy())
    with agnograd.using_config("compile_after", None), agnograd.auto_forward(False):
        h2, y2 = net(x2, w2)
        y2.forward()
        y2.backward()
    return y2.d, h2.d, x2.g, w2.g


def run(x: Variable, w: Variable, y: Variable, **forward: bool) -> None:
    x.cleargrad()
    w.cleargrad()
    y.forward(**forward)
    y.backward()


def same(got: Any, want: Any) -> None:
    if want is None:
        assert got is None
    else:
        np.testing.assert_array_equal(got, want, strict=True)


def test_second_run_is_the_plans_and_equals_the_walk_bit_for_bit():
    x, w, h, y = graph()
    run(x, w, y)
    assert planned(y)
    for _ in range(3):
        run(x, w, y)
        want = walked(x, w)
        for got, expected in zip((y.d, h.d, x.g, w.g), want, strict=True):
            same(got, expected)
        x.d = x.d + 1.0  # new data, same shape: the same plan
    assert planned(y)


def test_every_node_keeps_its_array_and_every_function_what_it_retains():
    x, w, h, y = graph()
    run(x, w, y)
    run(x, w, y)
    del h
    # A Variable rebuilt from a node has the array forward computed.
    inner = y.creator.inputs[0].get_variable()
    assert inner.d is not None
    # The engine, not the plan, can run backward after the plan's forward.
    y.forward()
    x.cleargrad()
    w.cleargrad()
    y.backward(retain_grad=True)
    same(x.g, walked(x, w)[2])
    assert inner.grad is not None


def test_clearing_options_leave_the_graph_as_the_walk_does():
    x, w, h, y = graph()
    run(x, w, y, clear_no_need_grad=True)
    x.cleargrad()
    w.cleargrad()
    y.forward(clear_no_need_grad=True)
    assert planned(y)
    assert h.d is None
    assert y.d is not None
    y.backward(clear_buffer=True)
    same(x.g, walked(x, w)[2])
    assert y.creator._saved_inputs is None
    # Switching to no option gives the intermediate arrays back; clear_buffer frees them.
    run(x, w, y)
    run(x, w, y)
    assert h.d is not None
    y.forward(clear_buffer=True)
    y.forward(clear_buffer=True)
    assert planned(y)
    assert h.d is None
    with pytest.raises(RuntimeError, match="freed"):
        y.backward()


def test_an_edited_graph_is_walked_again_then_compiled_later():
    x, w, _h, y = graph()
    run(x, w, y)
    assert planned(y)
    x.need_grad = False  # the plan computed x's gradient: it no longer fits
    assert not planned(y)
    run(x, w, y)
    assert x.grad is None
    same(w.g, walked(x, w)[3])
    state = _replay._replays[y._node]
    assert state.threshold == 2
    assert not state.plans
    run(x, w, y)
    run(x, w, y)
    assert planned(y)


def test_rewiring_the_input_is_seen():
    x, w, _h, y = graph()
    run(x, w, y)
    with agnograd.auto_forward(False):
        z = Variable(np.full((3, 4), 0.25))
        x_new = z * 2.0
    x.rewire_on(x_new)
    assert not planned(y)
    w.cleargrad()
    y.forward()
    y.backward()
    np.testing.assert_array_equal(x.d, np.full((3, 4), 0.5))
    assert z.grad is not None


def test_new_input_shapes_are_walked():
    x, w, h, y = graph()
    run(x, w, y)
    x.d = np.ones((5, 4))
    assert not planned(y)
    run(x, w, y)
    assert h.shape == (5, 2)
    same(x.g, walked(x, w)[2])


def test_another_forward_in_between_sends_backward_to_the_engine():
    x, w, h, y = graph()
    run(x, w, y)
    y.forward()
    x.d = x.d * 2.0
    agnograd.forward_all([h])  # h's function now keeps the new arrays
    x.cleargrad()
    w.cleargrad()
    y.backward()  # the engine, over what the nodes keep: the walk's result
    with agnograd.using_config("compile_after", None):
        x2, w2 = Variable(x.d.copy()), Variable(w.d.copy())
        x2.d = x.d / 2.0
        with agnograd.auto_forward(False):
            h2, y2 = net(x2, w2)
        y2.forward()
        x2.d = x.d
        agnograd.forward_all([h2])
        y2.backward()
    same(x.g, x2.g)


class Count(FunctionHook):
    name = "count"

    def __init__(self) -> None:
        self.calls = 0

    def backward_preprocess(self, function: Any, in_data: Any, out_grad: Any) -> None:
        self.calls += 1


def test_hooks_set_after_the_forward_see_the_backward():
    x, w, _h, y = graph()
    run(x, w, y)
    y.forward()
    hook = Count()
    with hook:
        y.backward()
    assert hook.calls > 0


def test_graphs_that_write_in_place_are_never_compiled():
    x = Variable(np.arange(3.0))
    with agnograd.auto_forward(False):
        h = x * 2.0
        h[0] = 5.0
        y = F.sum(h * h)
    for _ in range(3):
        x.cleargrad()
        y.forward()
        y.backward()
        same(x.g, np.array([0.0, 8.0, 16.0]))
    assert not planned(y)


def test_compile_after_none_never_compiles():
    with agnograd.using_config("compile_after", None):
        x, w, _h, y = graph()
        for _ in range(3):
            run(x, w, y)
        assert not planned(y)


def test_a_plan_does_not_keep_its_output_alive():
    x, w, _h, y = graph()
    run(x, w, y)
    run(x, w, y)
    ref = weakref.ref(y._node)
    gc.disable()
    try:
        del y
        assert ref() is None  # freed by reference counting, without the collector
    finally:
        gc.enable()


def test_persistent_nodes_keep_their_arrays_under_clear_buffer():
    x, w, h, y = graph()
    h.persistent = True
    for _ in range(3):  # walk, compile, plan
        y.forward(clear_buffer=True)
        np.testing.assert_array_equal(h.d, walked(x, w)[1])
    assert planned(y)
    h.persistent = False  # an edit: the plan no longer fits
    assert not planned(y)
    y.forward(clear_buffer=True)
    assert h.d is None


def test_compile_after_counts_the_walks_before_the_plan():
    with agnograd.using_config("compile_after", 2):
        x, w, _h, y = graph()
        run(x, w, y)
        run(x, w, y)
        assert not planned(y)  # two walks
        run(x, w, y)  # compiled, then run
        assert planned(y)
        same(x.g, walked(x, w)[2])


@pytest.mark.parametrize("explicit", [False, True])
def test_a_plan_made_before_any_forward_infers_the_shapes_the_inputs_have_now(explicit):
    x = Variable(shape=(2, 3), need_grad=True)
    w = Variable(np.ones((3, 4)), need_grad=True)
    with agnograd.auto_forward(False):
        h = F.tanh(x @ w)
        y = F.sum(h * 2.0)
    x.d = np.full((5, 3), 0.5)  # another batch size than the graph was built with
    if explicit:
        agnograd.compile(y).run()
    else:
        y.forward()  # compiled at once (compile_after=0)
        assert planned(y)
        y.backward()
    assert h.shape == (5, 4)
    np.testing.assert_allclose(w.g, np.full((3, 4), 5 * 0.5 * 2 / np.cosh(1.5) ** 2))


@pytest.mark.parametrize("backend", ["numpy", "array_api_strict", "torch"])
def test_every_backend_gets_the_walks_results_bit_for_bit(backend):
    if backend == "numpy":
        to, back = (lambda a: a), np.asarray
    else:
        lib = pytest.importorskip(backend)
        if backend == "torch":
            to, back = lib.from_numpy, (lambda a: a.numpy())
        else:
            to, back = lib.asarray, np.asarray
    rng = np.random.default_rng(1)
    x0, w0 = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))

    def results(compile_after: int | None) -> list[np.ndarray]:
        with agnograd.using_config("compile_after", compile_after):
            x, w = Variable(to(x0.copy())), Variable(to(w0.copy()))
            with agnograd.auto_forward(False):
                h, y = net(x, w)
            got = []
            for step in range(3):  # the plan's runs, with new data in between
                x.d = to(x0 + step)
                run(x, w, y)
                got += [back(v) for v in (y.d, h.d, x.grad, w.grad)]
            assert planned(y) == (compile_after is not None)
            return got

    for got, want in zip(results(0), results(None), strict=True):
        np.testing.assert_array_equal(got, want, strict=True)
