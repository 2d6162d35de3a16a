"""The graph core's contracts that tests of single functions do not see: references
it leaks or drops, the cycles it makes, errors from odd nodes, nested backward runs.
"""

import collections
import copy
import gc
import sys
import weakref

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd.functions import _core
from agnograd.functions._namespace import namespace_of


def test_graph_is_freed_by_reference_counting_alone(backend):
    # No reference leaked (objects would stay alive) and no cycle made (they would
    # wait for the cyclic collector, which is switched off here).
    x = agnograd.Variable(backend.asarray(np.linspace(-1.0, 1.0, 8)))
    w = agnograd.Variable(backend.asarray(np.ones(8)))
    gc.disable()
    try:
        h = F.tanh(x) * w + 1.0
        y = F.sum(F.sin(h) * 0.5)
        func = weakref.ref(h.creator_node)
        node = weakref.ref(h.node)
        try:
            data = weakref.ref(h.array)
        except TypeError:  # arrays of some libraries take no weak references
            data = None
        y.backward()
        del h
        assert func() is not None  # y's graph still holds it
        del y
        assert func() is None
        assert node() is None
        if data is not None:
            assert data() is None
    finally:
        gc.enable()


def test_inputs_and_gradients_keep_their_reference_counts(backend):
    a = backend.asarray(np.linspace(0.5, 1.5, 6))
    seed = backend.asarray(np.ones(6))
    x = agnograd.Variable(a)
    before = sys.getrefcount(a), sys.getrefcount(seed)
    for _ in range(50):
        y = F.exp(x) * x
        y.grad = seed
        y.backward()
        x.cleargrad()
        del y
    assert (sys.getrefcount(a), sys.getrefcount(seed)) == before


def test_forward_error_names_the_function():
    class Boom(agnograd.FunctionNode):
        def forward(self, inputs):
            raise ValueError("boom")

    x = agnograd.Variable(np.ones(3))
    with pytest.raises(ValueError, match="boom") as info:
        Boom().apply((x,))
    assert "in agnograd Boom.forward with inputs (3), float64" in info.value.__notes__


def test_shapes_that_do_not_broadcast_are_named_with_the_function():
    x = agnograd.Variable(np.ones(3))
    with pytest.raises(agnograd.type_check.InvalidType) as info:
        _ = x + np.ones(4)
    assert isinstance(info.value, ValueError)  # what NumPy raised, and code catches
    assert "Add: the shapes of its inputs, (3,) and (4,), do not broadcast" in str(info.value)


def test_an_error_while_noting_a_forward_error_is_chained_to_it():
    class BadLabel(agnograd.FunctionNode):
        @property
        def label(self):
            raise KeyError("label broken")

        def forward(self, inputs):
            raise ValueError("boom")

    with pytest.raises(KeyError, match="label broken") as info:
        BadLabel().apply((agnograd.Variable(np.ones(2)),))
    assert isinstance(info.value.__context__, ValueError)


def test_backward_returning_too_many_gradients_is_an_error():
    class Bad(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 2,)

        def backward(self, indexes, grad_outputs):
            return (grad_outputs[0], grad_outputs[0], grad_outputs[0])

    x = agnograd.Variable(np.ones(2))
    (y,) = Bad().apply((x,))
    y.grad = np.ones(2)
    with pytest.raises(ValueError, match=r"backward of Bad returned 3 gradients for 1 target"):
        y.backward()


def test_apply_takes_any_sequence_of_inputs():
    class Twice(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 2,)

        def backward(self, indexes, grad_outputs):
            return (grad_outputs[0] * 2,)

    x = agnograd.Variable(np.ones(2))
    for inputs in ((x,), [x], collections.deque([x]), (np.ones(2),)):
        (y,) = Twice().apply(inputs)
        np.testing.assert_array_equal(y.array, [2.0, 2.0])
        assert y.requires_grad is (inputs[0] is x)


def test_apply_by_keyword_and_copied_nodes():
    x = agnograd.Variable(np.ones(2))
    (y,) = F.exp.node().apply(inputs=(x,))
    func = y.creator_node
    clone = copy.copy(func)
    assert clone.inputs == func.inputs
    assert clone.rank == func.rank == 0
    assert clone.outputs == func.outputs
    assert type(clone) is type(func)
    # Slots of subclasses are copied too: the scalar of `x * 3.0`.
    scalar = copy.copy((x * 3.0).creator_node)
    assert scalar.value == 3.0
    assert scalar.inputs == (x.node,)


def test_rank_of_a_node_is_the_largest_input_rank_but_at_least_zero():
    a = agnograd.Variable(np.ones(2))
    a.node.rank = -3  # rewire_on can leave ranks below zero
    assert (a * 2.0).creator_node.rank == -3  # one input: its rank
    assert (a * a).creator_node.rank == 0  # several: max(0, ranks)


def test_rules_conjugate_complex_arrays_only(backend):
    real = backend.asarray([1.0, -2.0])
    complex_ = backend.asarray([1 + 2j, 3 - 1j], "complex64")
    xp = namespace_of(real)
    assert _core.conjugate(xp, real) is real
    backend.assert_close(_core.conjugate(xp, complex_), [1 - 2j, 3 + 1j])
    assert _core.conjugate(xp, 2.5) == 2.5
    assert _core.conjugate(xp, 1 + 1j) == 1 - 1j
    assert _core.conjugate(xp, True) == 1


def _passing_on(x):
    # + and - pass the gradient on unchanged, which the loop need not check.
    return ((x + 1.0) - x * 2.0 + x * 3.0) - 3.0  # 2 x - 2


@pytest.mark.parametrize("seed_dtype", ["float32", "float64"])
def test_gradients_passed_on_take_the_input_dtype(backend, seed_dtype):
    x = backend.variable([0.5, -1.0, 2.0])
    seed = backend.asarray([1.0, 2.0, 3.0], dtype=seed_dtype)
    (gx,) = agnograd.grad([_passing_on(x)], [x], [seed])
    agnograd.backward([_passing_on(x)], [seed])
    for g in (gx, x.grad):
        assert g.dtype == x.dtype
        backend.assert_close(g, [2.0, 4.0, 6.0])


@pytest.mark.parametrize("n", [3, 6])
def test_backward_is_given_the_indexes_of_the_inputs_that_require_grad(n):
    seen = []

    class Total(agnograd.FunctionNode):
        def forward(self, inputs):
            return (sum(inputs[1:], inputs[0]),)

        def backward(self, indexes, grad_outputs):
            seen.append(indexes)
            return grad_outputs * len(indexes)

    xs = [agnograd.Variable(np.ones(2), requires_grad=i % 2 == 0) for i in range(n)]
    (y,) = Total().apply(xs)
    y.grad = np.ones(2)
    y.backward()
    assert [x.grad is not None for x in xs] == [i % 2 == 0 for i in range(n)]
    assert seen == [tuple(range(0, n, 2))]


def test_a_cycle_through_a_node_is_collected():
    class Keeper(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 2.0,)

    node = Keeper()
    (y,) = node.apply((agnograd.Variable(np.ones(3)),))
    node.kept = y  # y -> its VariableNode -> node -> y
    ref = weakref.ref(node)
    del node, y
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("probe_first", [True, False])
def test_a_backward_run_inside_another_on_the_same_graph(probe_first):
    # The inner run marks nodes the outer one queued (with the probe second, the
    # outer loop queues b's creator before the inner run and again after it); the
    # outer loop must still run each node once, with all of its gradients.
    inner = []

    class Probe(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, indexes, grad_outputs):
            with agnograd.force_backprop_mode():  # ordinary backprop records nothing
                c = self.b * 1.0
            c.grad = np.ones(2)
            c.backward()  # into x.grad too: 6 for each element
            inner.append(self.x.grad.tolist())
            return grad_outputs

    x = agnograd.Variable(np.array([1.0, 2.0]))
    b = (x * 2.0) * 3.0
    probe = Probe()
    probe.b, probe.x = b, x
    (p,) = probe.apply((b,))
    loss = p + b * 5.0 if probe_first else b * 5.0 + p
    loss.grad = np.ones(2)
    loss.backward()
    assert x.grad.tolist() == [42.0, 42.0]
    assert inner == [[6.0, 6.0]]


def test_a_backward_that_returns_an_array_for_a_tuple_is_refused():
    # Taken apart row by row, a (1, 2, 3) array would pass for one (2, 3) gradient.
    class Rows(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, indexes, grad_outputs):
            return np.ones((1, 3), dtype=np.float32)

    x = agnograd.Variable(np.array([1.0, 2.0, 3.0]))
    (y,) = Rows().apply((x,))
    with pytest.raises(
        TypeError, match="backward of Rows returned ndarray; it must return a tuple"
    ):
        (y * 2.0).backward(grad=np.ones(3))


def test_a_gradient_that_only_looks_like_an_array_is_a_type_error():
    class Fake:  # holds ndarray's descriptors without being an ndarray
        shape = np.ndarray.__dict__["shape"]
        dtype = np.ndarray.__dict__["dtype"]

    class Odd(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, indexes, grad_outputs):
            return (Fake(),)

    (y,) = Odd().apply((agnograd.Variable(np.array([1.0, 2.0])),))
    with pytest.raises(TypeError, match="backward of Odd returned Fake as the gradient of input 0"):
        y.backward(grad=np.ones(2))
    assert y.creator is not None  # the graph is intact


def test_a_gradient_of_another_library_is_refused_with_the_node_named():
    # A rule that returns a JAX array for a NumPy input must not leave x.grad a JAX
    # array, nor fail deep inside NumPy further down the graph.
    jnp = pytest.importorskip("jax.numpy")

    class OtherLibrary(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, indexes, grad_outputs):
            return (jnp.ones(2),)

    x = agnograd.Variable(np.ones(2, dtype=np.float32))
    (y,) = OtherLibrary().apply((x,))
    with pytest.raises(
        TypeError, match=r"OtherLibrary returned a jax.numpy array as the gradient of input 0"
    ):
        y.backward(grad=np.ones(2, dtype=np.float32))
    assert x.grad is None


def test_requires_grad_given_as_any_truth_value():
    x = agnograd.Variable(np.ones(2), requires_grad=np.True_)
    w = agnograd.Variable(np.full(2, 3.0), requires_grad="yes")
    F.sum(x * w).backward()
    assert x.requires_grad is True
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])
    np.testing.assert_array_equal(w.grad, [1.0, 1.0])
