"""A compiled plan is a cache of the walk: it never gives another answer.

``y.forward()`` / ``y.backward()`` run a compiled plan once a graph has run
``config.compile_after`` times (at the first run in these tests). Each test changes,
between runs, something a user can change (the data, its shape, dtype or library,
the seed, which leaves are alive, the thread, an exception in the middle of a
backward) and compares what the plan gives with what eager computation gives on the
same inputs. JAX's plans run as XLA programs, which round differently: values are
compared to the float32 tolerance there.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable
from agnograd.core._graph import functions_of
from agnograd.static import _replay
from agnograd.static._compiled import compile as compile_graph


@pytest.fixture(autouse=True)
def compile_at_once() -> Iterator[None]:
    """Plans made at the first run."""
    with agnograd.using_config("compile_after", 0):
        yield


class Fuse(FunctionNode):
    """``2 x``, whose backward raises ``Fuse.error`` while it is set."""

    error: BaseException | None = None

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] * 2.0,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        if Fuse.error is not None:
            raise Fuse.error
        return (grad_outputs[0] * 2.0,)


class Accumulates(FunctionNode):
    """``3 x``, whose gradient ``backward_accumulate`` adds to what its input has so
    far; its ``backward``, which the engine does not call where
    ``backward_accumulate`` is defined, raises."""

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] * 3.0,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        raise AssertionError("Accumulates.backward: the engine calls backward_accumulate")

    def backward_accumulate(
        self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...], grad_inputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        (gy,), (g,) = grad_outputs, grad_inputs
        return (gy * 3.0 if g is None else g + gy * 3.0,)


def no_jax(backend: Any) -> None:
    if backend.name == "jax":
        pytest.skip("a plan's backward on JAX is an XLA program: no Python runs in it to raise")


@contextlib.contextmanager
def blowing(error: BaseException) -> Iterator[None]:
    """Every backward of a Fuse raises ``error`` in the block, which expects it."""
    Fuse.error = error
    try:
        with pytest.raises(type(error)):
            yield
    finally:
        Fuse.error = None


def mlp(x: Any, w1: Any, w2: Any) -> Any:
    """A small network with custom nodes between its layers: one that raises on
    request, and one that adds its gradient to what its input has from the branch
    beside it (``backward_accumulate``)."""
    h = F.tanh(x @ w1 + 0.5)
    (h,) = Fuse().apply((h,))
    (t,) = Accumulates().apply((h,))
    return F.sum(F.exp(F.tanh(t @ w2)) * h[:, :2])


def inputs(backend: Any, batch: int = 3, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) * 0.5 for s in ((batch, 4), (4, 5), (5, 2))]


def eager(backend: Any, arrays: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The value and gradients that eager computation gives."""
    vs = [backend.variable(a) for a in arrays]
    y = mlp(*vs)
    y.backward()
    return backend.to_numpy(y.array), [backend.to_numpy(v.grad) for v in vs]


def close(backend: Any, got: Any, want: np.ndarray) -> None:
    np.testing.assert_allclose(backend.to_numpy(got), want, rtol=1e-5, atol=1e-6)


def static(backend: Any, arrays: list[np.ndarray]) -> tuple[list[Variable], Variable]:
    vs = [backend.variable(a) for a in arrays]
    with agnograd.auto_forward(False):
        y = mlp(*vs)
    return vs, y


def step(vs: list[Variable], y: Variable) -> None:
    for v in vs:
        v.cleargrad()
    y.forward()
    y.backward()


def planned(y: Variable) -> bool:
    state = _replay._replays.get(y._node)
    return state is not None and bool(state.plans)


# -- an exception in the middle of a backward ----------------------------------------


@pytest.mark.parametrize("error", [ValueError("once"), KeyboardInterrupt()])
def test_a_backward_that_raises_leaves_no_partial_sum_for_the_next_step(backend, error):
    no_jax(backend)
    arrays = inputs(backend)
    vs, y = static(backend, arrays)
    step(vs, y)
    assert planned(y)
    for v in vs:
        v.cleargrad()
    y.forward()
    with blowing(error):
        y.backward()
    for _ in range(2):  # the next fresh steps are exact
        step(vs, y)
        value, grads = eager(backend, arrays)
        close(backend, y.d, value)
        for v, want in zip(vs, grads, strict=True):
            close(backend, v.grad, want)


def test_an_explicit_plan_that_raised_in_backward_runs_again_exactly(backend):
    arrays = inputs(backend)
    vs, y = static(backend, arrays)
    plan = compile_graph(y)
    plan.forward()
    with blowing(RuntimeError("in the middle")):
        plan.backward()
    with pytest.raises(RuntimeError, match="run forward"):  # its arrays are gone
        plan.backward()
    for v in vs:
        v.cleargrad()
    plan.run()
    value, grads = eager(backend, arrays)
    close(backend, y.d, value)
    for v, want in zip(vs, grads, strict=True):
        close(backend, v.grad, want)


def test_a_refused_seed_leaves_the_plans_forward_for_a_good_one(backend):
    vs, y = static(backend, inputs(backend))
    plan = compile_graph(y)
    plan.forward()
    with pytest.raises(TypeError, match=r"grad_outputs\[0\]"):
        plan.backward(["not an array"])
    plan.backward()
    close(backend, vs[0].grad, eager(backend, inputs(backend))[1][0])


# -- nodes that override backward_accumulate ------------------------------------------


class Marked(FunctionNode):
    """``x1 + 2 x2``, whose ``backward_accumulate`` adds 1000 to each gradient it
    returns, which its ``backward`` does not: the engine calls the first."""

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] + 2.0 * inputs[1],)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        return tuple([gy if i == 0 else 2.0 * gy for i in indexes])

    def backward_accumulate(
        self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...], grad_inputs: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        gxs = self.backward(indexes, grad_outputs)
        return tuple(
            [gx + 1000.0 if g is None else g + gx + 1000.0 for gx, g in zip(gxs, grad_inputs)]  # noqa: B905
        )


@pytest.mark.parametrize("path", ["eager", "walk", "plan", "compile"])
@pytest.mark.parametrize("twice", [False, True], ids=["x_and_w", "x_twice"])
def test_a_plan_calls_backward_accumulate_where_the_engine_does(backend, path, twice):
    """The gradient so far of ``x`` (from ``+ x``) goes into ``backward_accumulate``;
    given at two places, at the first only (as in Chainer)."""
    x = backend.variable([1.0, 2.0])
    w = backend.variable([0.5, -1.0])
    with (
        agnograd.auto_forward(path == "eager"),
        agnograd.using_config("compile_after", None if path == "walk" else 0),
    ):
        (u,) = Marked().apply((x, x if twice else w))
        y = F.sum(u * 3.0 + x)
        plan = compile_graph(y) if path == "compile" else None
        for _ in range(1 if path == "eager" else 3):  # with "plan", runs 2 and 3 run it
            x.cleargrad()
            w.cleargrad()
            if plan is not None:
                plan.run()
            elif path != "eager":
                y.forward()
                y.backward()
            else:
                y.backward()
            # x: 1 from "+ x", then 3 and 1000 added by backward_accumulate at the
            # first place, 6 and 1000 at the second
            close(backend, x.grad, np.full(2, 2010.0 if twice else 1004.0))
            if not twice:
                close(backend, w.grad, np.full(2, 1006.0))


# -- the engine after a plan's forward -------------------------------------------------


def test_the_engine_refuses_the_arrays_a_walk_left_after_a_plans_forward(backend):
    arrays = inputs(backend)
    vs, y = static(backend, arrays)
    with agnograd.using_config("compile_after", None):
        y.forward()  # a walk: every node keeps what its backward reads
    plan = compile_graph(y)
    vs[0].d = backend.asarray(arrays[0] + 1.0)
    plan.forward()
    # The walk's arrays are of the old input: the engine must not use them. Nodes
    # that run their own forward in the plan (all of them where the library counts
    # writes, as torch does) have the new ones.
    new = eager(backend, [arrays[0] + 1.0, *arrays[1:]])[1]
    try:
        y.backward()
        refused = ""
    except RuntimeError as error:
        refused = str(error)
    if refused:
        assert "no retained" in refused
    else:
        close(backend, vs[1].grad, new[1])
    # After another walk, the engine has the new input's arrays.
    with agnograd.using_config("compile_after", None):
        y.forward()
    for v in vs:
        v.cleargrad()
    y.backward()
    close(backend, vs[1].grad, new[1])


# -- leaves fetched back from the graph ------------------------------------------------


def test_a_leaf_fetched_back_from_the_graph_gets_its_gradient(backend):
    arrays = inputs(backend)
    x = backend.variable(arrays[0])

    def build() -> Variable:
        w1, w2 = (backend.variable(a) for a in arrays[1:])  # gone after the call
        with agnograd.auto_forward(False):
            return mlp(x, w1, w2)

    y = build()
    gc.collect()
    y.forward()
    y.backward()  # a plan made while w1 and w2 have no Variable
    assert planned(y)
    matmul = y.creator_node
    nodes, seen = [], set()
    stack = [matmul]
    while stack:  # the leaves w1 and w2, from the graph
        f = stack.pop()
        for n in f.inputs:
            if n.creator_node is None and n is not x._node and id(n) not in seen:
                seen.add(id(n))
                nodes.append(n)
            elif n.creator_node is not None:
                stack.append(n.creator_node)
    revived = [n.get_variable() for n in nodes]
    step([x], y)
    _, grads = eager(backend, arrays)
    got = sorted(backend.to_numpy(v.grad).shape for v in revived)
    assert got == sorted(g.shape for g in grads[1:])
    for v in revived:
        want = next(g for g in grads[1:] if g.shape == tuple(v.shape))
        close(backend, v.grad, want)


# -- seeds ------------------------------------------------------------------------------


def test_a_seed_of_another_dtype_is_cast_to_the_outputs(backend):
    narrow, wide = backend.narrow_and_wide()
    x = backend.variable([1.0, 2.0], dtype=wide)
    with agnograd.auto_forward(False):
        y = x * 3.0  # its gradient, the seed times 3, reaches x as it is
    for _ in range(3):  # the walk, then the plan
        x.cleargrad()
        y.forward()
        y.backward(grad=backend.asarray([0.5, 0.25], dtype=narrow))
        assert x.grad.dtype == backend.dtype(wide)
        close(backend, x.grad, np.array([1.5, 0.75]))


@pytest.mark.parametrize("path", ["eager", "walk", "plan"])
def test_a_complex_seed_of_a_real_output_keeps_the_parameters_real(path):
    x = Variable(np.array([1.0, 2.0]))
    with (
        agnograd.auto_forward(path == "eager"),
        agnograd.using_config("compile_after", None if path == "walk" else 0),
    ):
        y = x * 3.0
        for _ in range(2):
            x.cleargrad()
            y.forward()
            y.backward(grad=np.array([1.0 + 2.0j, 1.0]))
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


@pytest.mark.parametrize("path", ["eager", "walk", "plan"])
def test_a_seed_given_once_is_not_the_seed_of_later_backwards(path):
    x = Variable(np.array([1.0, 2.0]))
    with (
        agnograd.auto_forward(path == "eager"),
        agnograd.using_config("compile_after", None if path == "walk" else 0),
    ):
        y = F.sum(x * x)
        y.forward()
        y.backward(grad=np.asarray(0.5), retain_grad=True)
        np.testing.assert_array_equal(x.grad, [1.0, 2.0])
        assert float(y.grad) == 0.5  # kept, to be read
        for _ in range(2):
            x.cleargrad()
            y.forward()
            y.backward()
            np.testing.assert_array_equal(x.grad, [2.0, 4.0])
        y.grad = np.asarray(3.0)  # a seed the user sets is the seed
        x.cleargrad()
        y.backward()
        np.testing.assert_array_equal(x.grad, [6.0, 12.0])


def test_the_ones_backward_made_do_not_follow_the_data_to_another_library():
    torch = pytest.importorskip("torch")
    x = Variable(np.array([1.0, 2.0]))
    with agnograd.auto_forward(False):
        y = F.sum(F.sin(x * x) + x)
    for _ in range(2):  # the walk, then the plan
        x.cleargrad()
        y.forward()
        y.backward()
    for _ in range(2):
        x.cleargrad()
        x.d = torch.tensor([1.0, 3.0], dtype=torch.float64)
        y.forward()
        y.backward()
        assert isinstance(y.d, torch.Tensor)  # every function runs on torch now
        assert isinstance(x.grad, torch.Tensor)
        want = 2 * np.array([1.0, 3.0]) * np.cos(np.array([1.0, 9.0])) + 1
        np.testing.assert_allclose(x.grad.numpy(), want)


def test_retain_grad_keeps_no_seed_of_intermediates_for_later():
    x = Variable(np.array([1.0, 2.0]))
    h = x * 3.0
    y = F.sum(h * h)
    y.backward(retain_grad=True)
    np.testing.assert_array_equal(h.grad, [6.0, 12.0])
    x.cleargrad()
    h.backward()  # seeded with ones (nnabla's default), not with what it kept
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


# -- threads ----------------------------------------------------------------------------


def test_threads_sharing_one_graph_lose_no_update():
    x = Variable(np.ones((8, 4)))
    w = Variable(np.full((4, 3), 0.5))
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x @ w) * 2.0)
    runs, threads = 60, 4
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with agnograd.using_config("compile_after", 0):
                for _ in range(runs):
                    y.forward()
                    y.backward()
        except BaseException as error:  # reported below
            errors.append(error)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns within each run
    try:
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    xe, we = Variable(np.ones((8, 4))), Variable(np.full((4, 3), 0.5))
    F.sum(F.tanh(xe @ we) * 2.0).backward()
    np.testing.assert_allclose(w.grad, we.grad * runs * threads, rtol=1e-12)
    np.testing.assert_allclose(x.grad, xe.grad * runs * threads, rtol=1e-12)


def test_an_explicit_plan_refuses_a_second_thread_clearly():
    x = Variable(np.ones(3))
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(x))
    plan = compile_graph(y)
    plan.forward()
    caught: list[BaseException] = []

    def other() -> None:
        try:
            plan.backward()
        except RuntimeError as error:
            caught.append(error)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(caught) == 1
    assert "another thread" in str(caught[0])
    plan.backward()  # the thread of the forward still may
    np.testing.assert_allclose(x.grad, np.exp(np.ones(3)))


# -- what the cache keeps -----------------------------------------------------------------


def test_a_smaller_last_batch_keeps_the_plans_of_both_signatures():
    w = Variable(np.full((4, 2), 0.5))
    x = Variable(np.ones((5, 4)))
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(x @ w))
    with agnograd.using_config("compile_after", 2):
        for _ in range(4):  # epochs: three full batches, then a ragged one
            for batch in (5, 5, 5, 2):
                x.d = np.ones((batch, 4))
                x.cleargrad()
                y.forward()
                y.backward()
        state = _replay._replays[y._node]
        shapes = sorted(key[1][0][2] for key in state.plans)
        assert shapes == [(2, 4), (5, 4)]


def test_a_graph_larger_than_compiling_pays_for_is_walked(monkeypatch):
    monkeypatch.setattr(_replay, "LARGEST", 5)
    x = Variable(np.ones(3))
    with agnograd.auto_forward(False):
        y = x
        for _ in range(6):
            y = F.sin(y)
        y = F.sum(y)
    for _ in range(3):
        y.forward()
        y.backward()
    assert not planned(y)
    xe = Variable(np.ones(3))
    ye = xe
    for _ in range(6):
        ye = F.sin(ye)
    F.sum(ye).backward()
    np.testing.assert_allclose(x.grad, 3 * xe.grad)


# -- a sweep of mutations between runs -----------------------------------------------------


def _new_data(backend, vs, arrays, rng):
    arrays[0] = rng.normal(size=arrays[0].shape) * 0.5
    vs[0].d = backend.asarray(arrays[0])


def _new_batch(backend, vs, arrays, rng):
    arrays[0] = rng.normal(size=(int(rng.integers(1, 5)), 4)) * 0.5
    vs[0].d = backend.asarray(arrays[0])


def _write_in_place(backend, vs, arrays, rng):
    arrays[1] = arrays[1] * 0.9
    vs[1].d = backend.asarray(arrays[1])


MUTATIONS: dict[str, Callable[..., None]] = {
    "new data": _new_data,
    "new batch": _new_batch,
    "new weights": _write_in_place,
    "raise": None,  # in the middle of the backward
    "none": lambda *args: None,
}


@pytest.mark.parametrize("seed", range(4))
def test_random_mutations_between_runs_never_change_an_answer(backend, seed):
    rng = np.random.default_rng(seed)
    arrays = inputs(backend, seed=seed)
    vs, y = static(backend, arrays)
    # A plan's backward on JAX is an XLA program: no Python runs in it to raise.
    names = [name for name in MUTATIONS if backend.name != "jax" or name != "raise"]
    for _ in range(12):
        name = names[int(rng.integers(len(names)))]
        for v in vs:
            v.cleargrad()
        if name == "raise":
            y.forward()
            with blowing(KeyboardInterrupt()):
                y.backward()
            continue
        MUTATIONS[name](backend, vs, arrays, rng)
        y.forward()
        y.backward()
        value, grads = eager(backend, arrays)
        close(backend, y.d, value)
        for v, want in zip(vs, grads, strict=True):
            close(backend, v.grad, want)
    assert planned(y)


# -- hooks --------------------------------------------------------------------------------


class Calls(agnograd.function_hooks.FunctionHook):
    """Records the functions whose forward and backward it saw, by label."""

    name = "calls"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def forward_preprocess(self, function: Any, in_data: Any) -> None:
        self.seen.append(("forward", function.label))

    def forward_postprocess(self, function: Any, in_data: Any) -> None:
        self.seen.append(("forwarded", function.label))

    def backward_preprocess(self, function: Any, in_data: Any, out_grad: Any) -> None:
        self.seen.append(("backward", function.label))


@pytest.mark.parametrize("where", ["global", "local"])
def test_forward_hooks_run_when_a_static_graph_computes(where):
    x = Variable(np.array([1.0, 2.0]))
    with agnograd.auto_forward(False):
        h = F.exp(x)
        y = F.sum(h * 3.0)
    eager_hook = Calls()
    with eager_hook:
        F.sum(F.exp(x) * 3.0).backward()
    x.cleargrad()
    y.forward()
    y.backward()  # a plan of the graph, made before the hook was set
    hook = Calls()
    for _ in range(2):
        if where == "global":
            with hook:
                y.forward()
                y.backward()
        else:
            for f in (h.creator_node, y.creator_node, y.creator_node.inputs[0].creator_node):
                f.add_hook(hook)
            y.forward()
            y.backward()
            for f in (h.creator_node, y.creator_node, y.creator_node.inputs[0].creator_node):
                f.delete_hook(hook.name)
        assert hook.seen == eager_hook.seen
        hook.seen.clear()
    np.testing.assert_allclose(x.grad, 3 * 3 * np.exp([1.0, 2.0]))


def test_clear_buffer_frees_in_a_plan_what_it_frees_in_the_walk():
    def build() -> tuple[Variable, Variable, Variable, Variable]:
        x = Variable(np.ones((2, 3)))
        c = Variable(np.full((2, 3), 0.5), requires_grad=False)
        with agnograd.auto_forward(False):
            k = F.exp(c) * 2.0  # no gradient reaches this branch
            h = F.tanh(x)
            y = F.sum(h * k)
        return x, k, h, y

    kept = {}
    for after in (None, 0):
        with agnograd.using_config("compile_after", after):
            x, k, h, y = build()
            for _ in range(2):
                x.cleargrad()
                y.forward()
                y.backward(clear_buffer=True)
            kept[after] = (k.d is not None, h.d is not None)
            grad = x.grad
    assert kept[0] == kept[None] == (True, False)
    np.testing.assert_allclose(grad, 2 * np.exp(0.5) / np.cosh(1.0) ** 2 * np.ones((2, 3)))


@pytest.mark.parametrize("path", ["eager", "walk", "plan"])
def test_a_leafs_gradient_can_be_scaled_in_place(backend, path):
    x = backend.variable([1.0, 2.0, 3.0])
    with (
        agnograd.auto_forward(path == "eager"),
        agnograd.using_config("compile_after", None if path == "walk" else 0),
    ):
        y = F.sum(x)  # its gradient is a broadcast of the seed
        for _ in range(2):
            x.cleargrad()
            y.forward()
            y.backward()
            if backend.name == "jax":  # immutable: nnabla's x.g *= 0.5 makes a new array
                x.g = x.g * 0.5
            else:
                x.g *= 0.5
            close(backend, x.g, np.full(3, 0.5))


def test_an_explicit_plan_follows_its_inputs_to_another_library():
    torch = pytest.importorskip("torch")
    x = Variable(np.array([1.0, 2.0]))
    with agnograd.auto_forward(False):
        y = F.sum(F.sin(x * x) + x)
    plan = compile_graph(y)
    plan.run()
    x.cleargrad()
    x.d = torch.tensor([1.0, 3.0], dtype=torch.float64)
    plan.run()  # rebuilt: every function's namespace is torch's now
    assert isinstance(y.d, torch.Tensor)
    want = 2 * np.array([1.0, 3.0]) * np.cos(np.array([1.0, 9.0])) + 1
    np.testing.assert_allclose(x.grad.numpy(), want)


def test_a_leaf_gone_after_the_plan_was_made_takes_nothing_and_stops_nothing():
    x = Variable(np.array([1.0, 2.0]))
    w = Variable(np.array([3.0, 4.0]))
    with agnograd.auto_forward(False):
        y = F.sum(F.sin(x) * w)
    y.forward()
    y.backward()  # a plan with both leaves alive
    del w
    gc.collect()
    for _ in range(2):
        x.cleargrad()
        y.forward()
        y.backward()
        np.testing.assert_allclose(x.grad, np.cos([1.0, 2.0]) * [3.0, 4.0])


# -- libraries that count writes (PyTorch): the plan's own steps check versions ------


def _torch_chain(torch: Any) -> tuple[Variable, Variable, Variable, Variable]:
    """A define-then-run chain of the plan's own steps (unary rows, scalar and
    elementwise operators) on float64 tensors: x, w, tanh(x) (which its node keeps
    for its backward) and the loss."""
    x = Variable(torch.tensor([0.3, -0.7, 1.1], dtype=torch.float64))
    w = Variable(torch.tensor([1.5, 0.5, -1.0], dtype=torch.float64))
    with agnograd.auto_forward(False):
        t = F.tanh(x)
        y = F.sum(F.exp(t * 0.5 * w) + x)
    return x, w, t, y


@pytest.mark.parametrize("target", ["leaf", "intermediate"])
@pytest.mark.parametrize("plan_kind", ["compile", "replay"])
def test_a_torch_plan_refuses_a_kept_tensor_written_in_place(plan_kind: str, target: str) -> None:
    torch = pytest.importorskip("torch")
    x, w, t, y = _torch_chain(torch)
    want_x = want_w = None
    for _ in range(3):  # runs by the walk, then by the plan: the same gradients
        x.cleargrad()
        w.cleargrad()
        if plan_kind == "compile":
            plan = compile_graph(y)
            plan.run()
        else:
            y.forward()
            y.backward()
        if want_x is None:
            want_x, want_w = x.grad.clone(), w.grad.clone()
        torch.testing.assert_close(x.grad, want_x)
        torch.testing.assert_close(w.grad, want_w)
    if plan_kind == "compile":
        plan.forward()
    else:
        y.forward()
        assert _replay._replays[y.node].waiting is not None  # the plan ran the forward
    # behind agnograd's back, into a tensor a node kept: the leaf w (which the
    # product with w keeps) or tanh's output
    (w if target == "leaf" else t).array.mul_(2.0)
    backward = plan.backward if plan_kind == "compile" else y.backward
    with pytest.raises(RuntimeError, match="was overwritten in place after the forward used it"):
        backward()
    # The refusal leaves the plan as if it had never run: the next run is exact.
    x.cleargrad()
    w.cleargrad()
    if plan_kind == "compile":
        plan.run()
    else:
        y.forward()
        y.backward()
    xe, we = Variable(x.array.clone()), Variable(w.array.clone())
    agnograd.functions.sum(F.exp(F.tanh(xe) * 0.5 * we) + xe).backward()
    torch.testing.assert_close(x.grad, xe.grad)
    torch.testing.assert_close(w.grad, we.grad)


def test_the_engine_checks_the_versions_a_torch_plan_recorded() -> None:
    torch = pytest.importorskip("torch")
    x, w, _, y = _torch_chain(torch)
    for _ in range(3):
        y.forward()
    w.array.add_(1.0)
    # agnograd.grad walks the graph with the engine, after the plan's forward
    with pytest.raises(RuntimeError, match="was overwritten in place after the forward used it"):
        agnograd.grad([y], [x, w])


# -- what the plan keeps and frees: what the walk keeps and frees -------------------------


def _two_outputs(x: Variable, w: Variable, kind: int) -> list[Variable]:
    """Two outputs of one graph that share intermediate results (``kind`` 0, 1, 3),
    or that read one output each of a function of two (``kind`` 2)."""
    if kind == 0:
        h = F.tanh(x * w)
        return [F.sum(F.exp(h)), F.sum(F.sin(h) * w)]
    if kind == 1:
        h = F.tanh(x * w)
        e = F.exp(h)
        return [F.sum(e * h), F.sum(e)]
    if kind == 2:
        a, b = F.split_axis(F.tanh(x * w), 2, axis=0)
        return [F.sum(F.exp(a) * b), F.sum(b * 2.0)]
    h = F.sin(x) * 2.0
    return [F.sum(h * w), F.sum(h)]


def _kept(outputs: list[Variable]) -> list[tuple[str, tuple[bool, ...], int, int]]:
    """What the graph behind ``outputs`` holds: for each function, which of its
    outputs have an array, and how many arrays it keeps for its backward."""
    state = []
    for f in functions_of([y._node for y in outputs]):
        data = tuple(r() is not None and r().data is not None for r in f.outputs)
        held = [
            sum(a is not None for a in saved or ()) for saved in (f._saved_inputs, f._saved_outputs)
        ]
        state.append((f.label, data, *held))
    return state


FORWARDS = [{}, {"clear_no_need_grad": True}, {"clear_buffer": True}]
BACKWARDS = [{}, {"clear_buffer": True}]


def _play(backend: Any, kind: int, actions: list[tuple[Any, ...]], after: int | None) -> list[Any]:
    """Run ``actions`` on a new graph of ``_two_outputs``; after each, what the graph
    keeps, the leaves' gradients, or the type of the error it raised."""
    with agnograd.using_config("compile_after", after):
        x = backend.variable(np.linspace(-1.0, 1.0, 8).reshape(4, 2))
        w = backend.variable(np.full((4, 2), 0.5))
        with agnograd.auto_forward(False):
            outputs = _two_outputs(x, w, kind)
        log: list[Any] = []
        for what, *args in actions:
            try:
                if what == "forward":
                    outputs[args[0]].forward(**FORWARDS[args[1]])
                elif what == "backward":
                    outputs[args[0]].backward(**BACKWARDS[args[1]])
                elif what == "need_grad":
                    (x, w)[args[0]].need_grad = args[1]
                else:
                    x.cleargrad()
                    w.cleargrad()
            except RuntimeError as error:  # a backward after clear_buffer
                log.append(type(error))
                continue
            grads = [None if v.grad is None else backend.to_numpy(v.grad) for v in (x, w)]
            log.append((_kept(outputs), grads))
        return log


@pytest.mark.parametrize("seed", range(3))
def test_a_plan_keeps_and_frees_the_arrays_the_walk_does(backend, seed):
    """Random runs of two outputs of one graph, forward and backward in every mode,
    with leaves' ``need_grad`` switched between them: after each step the graph holds
    the same arrays, walked or run by plans, and the gradients are the same."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        kind = int(rng.integers(4))
        actions: list[tuple[Any, ...]] = []
        for _ in range(int(rng.integers(3, 12))):
            r = rng.random()
            if r < 0.4:
                actions.append(("forward", int(rng.integers(2)), int(rng.integers(3))))
            elif r < 0.75:
                actions.append(("backward", int(rng.integers(2)), int(rng.integers(2))))
            elif r < 0.85:
                actions.append(("need_grad", int(rng.integers(2)), bool(rng.random() < 0.5)))
            else:
                actions.append(("cleargrad",))
        walked = _play(backend, kind, actions, None)
        planned_ = _play(backend, kind, actions, 0)
        for i, (walk, plan) in enumerate(zip(walked, planned_, strict=True)):
            where = f"graph {kind}, after {actions[: i + 1]}"
            if isinstance(walk, type) or isinstance(plan, type):
                assert walk == plan, where
                continue
            assert plan[0] == walk[0], where
            for got, want in zip(plan[1], walk[1], strict=True):
                assert (got is None) == (want is None), where
                if want is not None:
                    close(backend, got, want)


def test_a_plan_frees_an_intermediate_that_another_outputs_forward_computed():
    x = Variable(np.array([0.5, 1.0]))
    with agnograd.auto_forward(False):
        h = F.tanh(x)
        y0, y1 = F.sum(F.exp(h)), F.sum(F.sin(h))
    y0.forward(clear_no_need_grad=True)  # a plan, which frees h
    y1.forward()  # a plan of the other output, which keeps it
    assert h.d is not None
    y0.forward(clear_no_need_grad=True)
    assert h.d is None  # as the walk frees it


def test_after_need_grad_is_unset_clear_buffer_frees_what_the_engine_frees():
    x = Variable(np.array([0.5, 1.0]))
    w = Variable(np.array([2.0, 3.0]))
    with agnograd.auto_forward(False):
        e = F.exp(F.tanh(x))
        y = F.sum(e * w)
    y.forward()
    y.backward()
    x.need_grad = False  # e still requires a gradient: the engine runs exp's backward
    for _ in range(4):  # walks, then a plan made again
        w.cleargrad()
        y.forward()
        y.backward(clear_buffer=True)
        assert e.creator_node._saved_outputs is None
        np.testing.assert_allclose(w.grad, np.exp(np.tanh([0.5, 1.0])))


def test_a_plans_backward_after_another_outputs_clearing_backward_fails_as_the_walk():
    x = Variable(np.array([0.5, 1.0]))
    with agnograd.auto_forward(False):
        h = F.tanh(x)
        y0, y1 = F.sum(F.exp(h)), F.sum(F.sin(h))
    y1.forward()
    y0.forward()  # a plan, whose forward keeps what tanh's backward reads
    y1.backward(clear_buffer=True)  # which frees it
    with pytest.raises(RuntimeError, match="no retained outputs"):
        y0.backward()
