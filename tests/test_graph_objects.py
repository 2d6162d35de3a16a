"""What a graph keeps per operation: the objects Python's collector tracks (a full
collection walks them all, so a big graph's cost per operation grows with them)."""

from __future__ import annotations

import copy
import gc
from typing import Any

import numpy as np
import pytest
from _session import fast_paths

import agnograd
import agnograd.functions as F
from agnograd.core._variable_node import shapes, shared_shape


def test_a_graph_operation_keeps_two_objects_that_the_collector_tracks() -> None:
    # The node and its output's node: the inputs of a node of one or two are kept in
    # attributes, not in a tuple, and a node of the fast path keeps no reference to its
    # output, since a full collection walks every tracked object of a graph
    # (benchmarks/bench_graph_size.py).
    x, w = agnograd.Variable(np.zeros(1)), agnograd.Variable(np.ones(1))

    def chain() -> agnograd.Variable:
        y = x
        for i in range(300):
            y = y * 1.0 if i % 3 == 0 else F.sin(y) if i % 3 == 1 else y + w
        return y

    chain().backward()  # (whatever its first run leaves in caches is not counted)
    gc.collect()
    before = len(gc.get_objects())
    y = chain()
    gc.collect()
    assert (len(gc.get_objects()) - before) / 300 <= 2.01
    assert y.node.rank == 300  # (alive while counted)


def test_nodes_of_one_shape_share_its_tuple() -> None:
    x = agnograd.Variable(np.ones((2, 3)))
    a, b = F.sin(x), F.exp(x) * 2.0
    assert a.node.shape == (2, 3)
    assert a.node.shape is b.node.shape
    assert len(shapes) <= 4096


def test_a_torch_nodes_shape_is_a_plain_shared_tuple() -> None:
    torch = pytest.importorskip("torch")
    x = agnograd.Variable(torch.ones(2, 3, dtype=torch.float64))
    a, b = F.sin(x), x * 2.0
    assert a.node.shape.__class__ is tuple
    assert a.node.shape == (2, 3)
    assert a.node.shape is b.node.shape


def test_a_shape_of_other_integers_is_not_handed_to_other_nodes() -> None:
    # NumPy's integers equal ints: a define-then-run reshape to them must not give
    # their types to the next node of that shape.
    x = agnograd.Variable(shape=(29 * 31,), need_grad=True)  # (a shape no other test takes)
    with agnograd.auto_forward(False):
        y = F.reshape(x, (np.int64(29), 31))
    z = F.tanh(agnograd.Variable(np.ones((29, 31))))
    assert [n.__class__ for n in z.node.shape] == [int, int]
    assert y.node.shape == z.node.shape


def test_a_shape_that_infer_gives_as_a_list_is_taken() -> None:
    class Double(agnograd.FunctionNode):
        def forward(self, inputs):  # type: ignore[no-untyped-def]
            return (inputs[0] * 2,)

        def backward(self, indexes, gys):  # type: ignore[no-untyped-def]
            return (gys[0] * 2,)

        def infer(self, inputs):  # type: ignore[no-untyped-def]
            return ((list(inputs[0].shape), inputs[0].dtype),)

    x = agnograd.Variable(shape=(3,), need_grad=True)
    with agnograd.auto_forward(False):
        y = Double().apply((x,))[0]
    assert y.node.shape == (3,)
    x.d = np.ones(3, np.float32)
    y.forward()
    np.testing.assert_array_equal(y.d, np.full(3, 2.0, np.float32))


def test_the_shared_shapes_are_bounded() -> None:
    for n in range(5000):
        assert shared_shape([n, 1]) == (n, 1)
    assert 0 < len(shapes) <= 4096
    assert shared_shape((4999, 1)) is shared_shape([4999, 1])


def test_a_fast_nodes_output_is_recorded_when_its_creator_is_read() -> None:
    x = agnograd.Variable(np.ones(2))
    y = F.sin(x)
    with pytest.raises(RuntimeError, match=r"Sin\.outputs: .* read the node as y\.creator_node"):
        y.node._creator.outputs  # noqa: B018 - reached around creator_node: refused
    f = y.creator_node
    assert f.outputs is not None
    assert [ref() for ref in f.outputs] == [y.node]
    assert y.node._creator is f


def test_a_copy_of_an_output_node_does_not_take_its_place() -> None:
    # A copy shares the creator: read first, it must not be recorded as the output.
    x = agnograd.Variable(np.ones(3))
    y = F.sin(x)
    twin = copy.copy(y.node)
    assert twin.creator_node is y.creator_node
    y.backward()
    np.testing.assert_allclose(x.grad, np.cos(np.ones(3)))


def _backward_routes(backend: Any, fast: bool) -> list[object]:
    """What the engine's routes that read a node's outputs give, run on one graph."""

    def host(a: object) -> object:
        return None if a is None else backend.to_numpy(a).copy()

    with fast_paths(fast):
        got: list[object] = []
        x = backend.variable([0.1, 0.3, 0.6, 0.9])
        h = F.tanh(x * 2.0)
        y = F.sum(F.exp(h) + h)
        y.backward(retain_grad=True)  # each output's gradient is stored
        got += [host(h.grad), host(x.grad)]
        x.cleargrad()
        y = F.sum(F.sin(F.tanh(x) * x))
        y.backward(enable_double_backprop=True)  # tanh's retained output, as a Variable
        gx = x.grad_var
        x.cleargrad()
        F.sum(gx * gx).backward()
        got.append(host(x.grad))
        x.cleargrad()
        h = F.tanh(x) + 1.0
        y = F.sum(h * h)
        y.backward(clear_buffer=True)  # each output's buffer is freed
        got += [host(x.grad), host(h.array)]
        x.cleargrad()
        seen: list[str] = []
        F.sum(F.sin(x) * x).backward(function_pre_hook=lambda f: seen.append(f.label))
        got += [host(x.grad), seen]
        h = F.cos(x) * x
        y = F.sum(F.exp(h))
        (gh,) = agnograd.grad([y], [h])  # a target inside the graph
        got.append(host(gh.array))
        return got


def test_the_engines_routes_give_a_fast_node_its_output(backend: Any) -> None:
    fast, general = _backward_routes(backend, True), _backward_routes(backend, False)
    assert len(fast) == len(general)
    for a, b in zip(fast, general, strict=True):
        if isinstance(a, list):
            assert a == b
        elif a is None or b is None:
            assert a is b
        else:
            np.testing.assert_array_equal(a, b)


def test_a_backward_that_raised_leaves_the_graph_as_it_was(backend: Any) -> None:
    # The first backward records outputs on its way (a hook's route) and raises
    # halfway; the next gives what a graph never run backward gives.
    def graph() -> tuple[agnograd.Variable, agnograd.Variable]:
        x = backend.variable([0.2, -0.4, 0.7])
        return x, F.sum(F.exp(F.tanh(x * 3.0) * x))

    x0, y0 = graph()
    y0.backward()
    x, y = graph()

    def stop(f: object) -> None:
        if getattr(f, "label", None) == "Tanh":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        y.backward(function_pre_hook=stop, retain_grad=True)
    x.cleargrad()
    y.backward()
    np.testing.assert_array_equal(backend.to_numpy(x.grad), backend.to_numpy(x0.grad))


def test_the_shared_shapes_starting_again_change_no_gradient() -> None:
    # The table emptied halfway through a graph (as when it is full): the nodes made
    # after it hold other tuples of the same shapes, and backward gives the same.
    def run(clear: bool) -> np.ndarray:
        x = agnograd.Variable(np.linspace(-1.0, 1.0, 6).reshape(2, 3))
        h = F.sum(F.sin(x) * x, axis=1)
        if clear:
            shapes.clear()
        F.sum(F.exp(h) * F.reshape(F.sum(x, axis=0), (3, 1))).backward()
        return x.grad

    np.testing.assert_array_equal(run(True), run(False))


def test_a_nodes_inputs_read_back_as_they_were_set() -> None:
    f = F.sin(agnograd.Variable(np.ones(2))).creator_node
    (a,) = f.inputs
    assert f.inputs == (a,)
    for value in [(a, a), (a, a, a), [a], (), None, (None, a), (a, None), (a,)]:
        f.inputs = value
        assert f.inputs == value
        assert f.inputs.__class__ is value.__class__
