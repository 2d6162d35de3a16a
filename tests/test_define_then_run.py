"""Define-then-run (issue 6): nnabla's deferred graphs on agnograd's engine.

The graph is built with auto-forward off, run with ``forward()`` as often as
needed with new data fed through ``.d``, and differentiated with ``backward()``.
Everything is checked against the same computation done eagerly, on every
backend of the ``backend`` fixture (numpy, array_api_strict, torch, jax; jax arrays
are immutable, which define-then-run copes with because forward rebinds arrays).

Tests of behaviour that is specified but broken today are marked
``xfail(strict=True)`` with the reason starting ``BUG:``; they flip to failures
(XPASS) once the bug is fixed, and the marker should then be removed.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable
from agnograd.backends._abstract import Abstract

# -- helpers ------------------------------------------------------------------------


def leaf(backend: Any, values: Any, *, need_grad: bool = True, dtype: str = "float32") -> Variable:
    """A graph input on ``backend`` (define-then-run takes its library from the data)."""
    return Variable.from_array(backend.asarray(values, dtype), need_grad=need_grad)


def rng_values(seed: int, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def deferred(build: Callable[..., Any], *inputs: Variable) -> Any:
    with agnograd.auto_forward(False):
        return build(*inputs)


class MLP:
    """A 3-layer tanh MLP with softmax cross entropy, in float32.

    ``loss(x, t)`` builds the graph on the given input Variables; the parameters
    are leaves shared by every graph built from this object (or fresh copies of
    them with ``copy_params``), so eager and deferred results can be compared.
    """

    sizes = (5, 7, 6, 3)

    def __init__(self, backend: Any, seed: int = 0) -> None:
        self.backend = backend
        self.arrays = []
        for i, (n_in, n_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:], strict=True)):
            W = rng_values(seed + 2 * i, (n_out, n_in), 1 / np.sqrt(n_in))
            b = rng_values(seed + 2 * i + 1, (n_out,), 0.1)
            self.arrays += [W, b]
        self.params = self.copy_params()

    def copy_params(self) -> list[Variable]:
        return [leaf(self.backend, a) for a in self.arrays]

    def loss(self, x: Variable, t: Variable, params: Sequence[Variable] | None = None) -> Variable:
        params = self.params if params is None else params
        h = x
        for i in range(0, len(params) - 2, 2):
            h = F.tanh(F.linear(h, params[i], params[i + 1]))
        return F.softmax_cross_entropy(F.linear(h, params[-2], params[-1]), t)

    def batch(self, seed: int, n: int = 4) -> tuple[Any, Any]:
        x = self.backend.asarray(rng_values(seed, (n, self.sizes[0])))
        t = self.backend.asarray(np.random.default_rng(seed).integers(0, 3, n), "int64")
        return x, t

    def eager(self, x: Any, t: Any) -> tuple[np.ndarray, list[np.ndarray]]:
        """Loss and parameter gradients computed eagerly, as NumPy arrays."""
        params = self.copy_params()
        loss = self.loss(Variable(x, requires_grad=False), Variable(t, requires_grad=False), params)
        loss.backward()
        return self.backend.to_numpy(loss), [self.backend.to_numpy(p.grad) for p in params]


def graph_functions(y: Variable) -> list[FunctionNode]:
    functions: list[FunctionNode] = []
    y.visit(functions.append)
    return functions


def assert_ranks_consistent(y: Variable) -> None:
    """Each function ranks above the creators of its inputs (backward order is right)."""
    for func in graph_functions(y):
        for node in func.inputs:
            if node.creator_node is not None:
                assert node.creator_node.rank < func.rank, (func, node.creator_node)
                assert node.rank == node.creator_node.rank + 1


# -- configuration ------------------------------------------------------------------


def test_auto_forward_is_on_by_default_and_restored_by_the_context_manager():
    assert agnograd.get_auto_forward() is True
    with agnograd.auto_forward(False):
        assert agnograd.get_auto_forward() is False
        with agnograd.auto_forward():  # enabled=True by default
            assert agnograd.get_auto_forward() is True
        assert agnograd.get_auto_forward() is False
    assert agnograd.get_auto_forward() is True
    assert agnograd.config.auto_forward is True


def test_set_auto_forward_switches_until_changed():
    try:
        agnograd.set_auto_forward(False)
        assert agnograd.get_auto_forward() is False
        x = Variable(shape=(2,), need_grad=True)
        y = x * 2
        assert y.array is None
    finally:
        agnograd.set_auto_forward(True)
    assert agnograd.get_auto_forward() is True
    assert (x * 2).array is not None


def test_auto_forward_is_per_thread():
    seen = []
    with agnograd.auto_forward(False):
        thread = threading.Thread(target=lambda: seen.append(agnograd.get_auto_forward()))
        thread.start()
        thread.join()
    assert seen == [True]


# -- Variable construction ----------------------------------------------------------


def test_variable_with_shape_allocates_float32_zeros_and_needs_no_grad():
    x = Variable(shape=(2, 3))
    assert isinstance(x.d, np.ndarray)
    assert x.d.dtype == np.float32
    np.testing.assert_array_equal(x.d, np.zeros((2, 3)))
    assert x.shape == (2, 3)
    assert x.need_grad is False
    assert x.requires_grad is False
    assert x.parent is None
    y = Variable(shape=[4], need_grad=True, dtype=np.float64)
    assert y.d.dtype == np.float64
    assert y.shape == (4,)
    assert y.need_grad is True


def test_variable_with_shape_and_data_is_refused():
    with pytest.raises(TypeError, match="either data or shape"):
        Variable(np.ones(2), shape=(2,))


def test_variable_with_shape_on_a_device(backend):
    x = Variable(shape=(2, 3), device=f"@{backend.name}")
    assert type(x.d) is type(backend.asarray([0.0]))
    backend.assert_close(x.d, np.zeros((2, 3)))


def test_need_grad_is_requires_grad():
    x = Variable(np.ones(2))
    assert x.need_grad is True
    x.need_grad = False
    assert x.requires_grad is False
    x.requires_grad = True
    assert x.need_grad is True


def test_from_numpy_array_copies_data_and_grad():
    data, grad = np.ones(3), np.full(3, 2.0)
    v = Variable.from_numpy_array(data, grad, need_grad=True)
    data[0] = grad[0] = 9.0
    np.testing.assert_array_equal(v.d, np.ones(3))
    np.testing.assert_array_equal(v.g, np.full(3, 2.0))
    assert v.need_grad is True
    assert Variable.from_numpy_array(data).need_grad is False


def test_from_array_copies_on_every_backend(backend):
    data = backend.asarray([1.0, 2.0])
    v = Variable.from_array(data, backend.asarray([3.0, 4.0]), need_grad=True)
    assert type(v.d) is type(data)
    assert v.d is not data
    backend.assert_close(v.d, [1.0, 2.0])
    backend.assert_close(v.g, [3.0, 4.0])
    assert v.need_grad is True


# -- d, g and the other nnabla attributes -------------------------------------------


def test_d_feeds_arrays_and_scalars(backend):
    x = leaf(backend, np.zeros((2, 2)))
    new = backend.asarray([[1.0, 2.0], [3.0, 4.0]])
    x.d = new
    assert x.d is new
    x.d = 5
    backend.assert_close(x.d, np.full((2, 2), 5.0))
    assert x.dtype == backend.dtype("float32")


def test_g_is_zeros_until_set_and_accepts_scalars(backend):
    x = leaf(backend, [1.0, 2.0])
    backend.assert_close(x.g, [0.0, 0.0])
    x.g = 3
    backend.assert_close(x.g, [3.0, 3.0])
    x.g = backend.asarray([1.0, -1.0])
    backend.assert_close(x.grad, [1.0, -1.0])


def test_parent_is_the_creator():
    x = Variable(shape=(2,), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.exp(x)
    assert x.parent is None
    assert y.parent is y.creator_node
    assert y.parent.label == "Exp"
    z = Variable(shape=(2,))
    z.parent = y.parent
    assert z.parent is y.parent
    assert z.rank == y.rank


def test_size_from_axis_and_info():
    x = Variable(shape=(10, 9), need_grad=True)
    assert [x.size_from_axis(a) for a in (-1, 0, 1, 2)] == [90, 90, 9, 1]
    x.name = "x"
    with agnograd.auto_forward(False):
        y = F.tanh(x)
    info = y.info
    assert (info.shape, info.dtype, info.need_grad, info.parent, info.rank) == (
        (10, 9),
        np.float32,
        True,
        "Tanh",
        1,
    )
    assert x.info.name == "x"
    assert x.info.parent is None
    assert x.info.persistent is False


def test_reset_shape_keeps_or_reallocates_data():
    x = Variable(shape=(2, 3))
    x.d = np.arange(6, dtype=np.float32).reshape(2, 3)
    x.reset_shape((3, 2))
    assert x.shape == (3, 2)
    np.testing.assert_array_equal(x.d, np.arange(6).reshape(3, 2))
    with pytest.raises(ValueError, match="force=True"):
        x.reset_shape((4,))
    x.reset_shape((4,), force=True)
    assert x.d.shape == (4,)
    assert x.d.dtype == np.float32


def test_reshape_method_keeps_or_cuts_the_link(backend):
    x = leaf(backend, np.arange(6.0).reshape(2, 3))
    y = x.reshape(3, 2)
    assert y.shape == (3, 2)
    assert y.parent is not None
    u = x.reshape((6,), unlink=True)
    assert u.shape == (6,)
    assert u.parent is None
    assert u.need_grad is True
    F.sum(u * 2).backward()
    assert x.grad is None


def test_reshape_unlink_in_define_then_run_blocks_the_gradient():
    x = Variable(np.ones((2, 3), np.float32), need_grad=True)
    with agnograd.auto_forward(False):
        h = F.exp(x)
        u = h.reshape((6,), unlink=True)
        y = F.sum(u * 2) + F.sum(x)
    y.forward()
    y.backward()
    np.testing.assert_allclose(x.g, np.ones((2, 3)))


def test_no_backprop_mode_in_define_then_run():
    x = Variable(shape=(2,), need_grad=True)
    with agnograd.auto_forward(False), agnograd.no_backprop_mode():
        y = F.exp(x)
    assert y.need_grad is False


# -- building without computing ------------------------------------------------------


def test_deferred_operations_infer_shape_and_dtype_but_compute_nothing(backend):
    x = leaf(backend, np.ones((4, 5)))
    W = leaf(backend, np.ones((3, 5)))
    with agnograd.auto_forward(False):
        h = F.linear(x, W)
        y = F.sum(F.tanh(h), axis=1)
    for v, shape in ((h, (4, 3)), (y, (4,))):
        assert v.d is None
        assert v.shape == shape
        assert v.dtype == backend.dtype("float32")
        assert v.parent is not None
    assert y.rank > h.rank > 0


def test_forward_recomputes_from_the_current_inputs(backend):
    x = leaf(backend, [1.0, 2.0])
    with agnograd.auto_forward(False):
        y = F.exp(x) * 2 + x
    y.forward()
    backend.assert_close(y.d, 2 * np.exp([1.0, 2.0]) + [1.0, 2.0], rtol=1e-6)
    x.d = backend.asarray([0.0, -1.0])
    y.forward()
    backend.assert_close(y.d, 2 * np.exp([0.0, -1.0]) + [0.0, -1.0], rtol=1e-6)


def test_forward_runs_every_function_once_with_shared_subgraphs():
    calls = []

    class Counted(FunctionNode):
        def forward(self, inputs):
            if not isinstance(inputs[0], Abstract):  # not the build-time shape inference
                calls.append(self)
            return (inputs[0] * 2,)

        def backward(self, indexes, grad_outputs):
            return (grad_outputs[0] * 2,)

    x = Variable(shape=(3,), need_grad=True)
    with agnograd.auto_forward(False):
        (shared,) = Counted().apply((x,))
        a = F.exp(shared)
        b = F.sin(shared) + shared
    assert calls == []
    agnograd.forward_all([a, b])
    assert len(calls) == 1
    np.testing.assert_allclose(b.d, np.zeros(3))
    a.forward()
    assert len(calls) == 2


def test_forward_all_keeps_every_requested_output_under_clear_buffer():
    x = Variable(shape=(3,), need_grad=True)
    with agnograd.auto_forward(False):
        h = F.exp(x)
        a = F.sin(h)
        b = F.cos(h)
    x.d = np.array([0.0, 1.0, 2.0], np.float32)
    agnograd.forward_all([a, b, h], clear_buffer=True)
    np.testing.assert_allclose(h.d, np.exp([0.0, 1.0, 2.0]), rtol=1e-6)
    np.testing.assert_allclose(a.d, np.sin(h.d), rtol=1e-6)
    np.testing.assert_allclose(b.d, np.cos(h.d), rtol=1e-6)


def test_intermediate_results_need_no_python_reference():
    x = Variable(shape=(2, 3), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(F.tanh(x)) * 2)
    gc.collect()
    x.d = 1
    y.forward()
    y.backward()
    np.testing.assert_allclose(y.d, 12 * np.exp(np.tanh(1.0)), rtol=1e-6)
    np.testing.assert_allclose(
        x.g, np.full((2, 3), 2 * np.exp(np.tanh(1)) / np.cosh(1) ** 2), rtol=1e-5
    )


@pytest.mark.parametrize("kind", ["raw array", "dropped leaf"])
def test_constants_stay_in_the_deferred_graph(kind):
    x = Variable(shape=(3,), need_grad=True)
    c = np.full(3, 2.0, np.float32)
    other = c if kind == "raw array" else Variable(c, requires_grad=False)
    with agnograd.auto_forward(False):
        y = F.sum(x * other)
    del other
    gc.collect()
    x.d = np.ones(3, np.float32)
    y.forward()
    assert float(y.d) == 6.0


def test_forward_with_an_input_without_data_says_what_to_do():
    x = Variable(shape=(2,), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(x))
    x.array = None
    with pytest.raises(RuntimeError, match=r"input 0 of Exp .*has no data.*x\.d = array"):
        y.forward()


def test_mixed_libraries_are_refused_when_the_graph_is_built():
    torch = pytest.importorskip("torch")
    x = Variable(shape=(3,), need_grad=True)
    t = Variable.from_array(torch.zeros(3))
    with agnograd.auto_forward(False), pytest.raises(TypeError, match="numpy and torch"):
        F.exp(x) + t


def test_mismatched_shapes_are_refused_when_the_graph_is_built():
    x = Variable(shape=(2, 3), need_grad=True)
    y = Variable(shape=(4,), need_grad=True)
    with agnograd.auto_forward(False):
        with pytest.raises(ValueError, match="broadcast"):
            x + y
        with pytest.raises(ValueError, match="matmul"):
            x @ y
        with pytest.raises(ValueError, match="reshape"):
            F.reshape(x, (4, 2))


def test_boolean_mask_inside_a_forward_is_refused_when_the_graph_is_built():
    class PositivePart(FunctionNode):
        def forward(self, inputs):
            (x,) = inputs
            return (x[x > 0],)

    x = Variable(shape=(4,), need_grad=True)
    with agnograd.auto_forward(False), pytest.raises(TypeError, match=r"PositivePart.*infer"):
        PositivePart().apply((x,))


@pytest.mark.parametrize("where", ["leaf", "intermediate"])
def test_deferred_boolean_mask_key_is_refused(where):
    x = Variable(np.arange(4.0, dtype=np.float32), need_grad=True)
    with agnograd.auto_forward(False):
        h = x if where == "leaf" else F.exp(x)
        with pytest.raises(TypeError, match="mask"):
            h[h > 1]


@pytest.mark.parametrize(
    "key",
    [
        (slice(1, None), None, Ellipsis, slice(None, None, 2)),
        (-1, slice(None)),
        (slice(None), 1),
        (np.array([0, 2, 2]), np.array([1, 1, 0])),
    ],
    ids=["slices-newaxis-ellipsis", "int-slice", "slice-int", "int-array"],
)
def test_get_item_on_a_deferred_intermediate(backend, key):
    values = np.arange(12.0).reshape(4, 3)
    x = leaf(backend, values)
    key = tuple(backend.asarray(k, None) if isinstance(k, np.ndarray) else k for k in key)
    with agnograd.auto_forward(False):
        y = F.exp(x)[key]
    x_np_key = tuple(np.asarray(k) if hasattr(k, "shape") else k for k in key)
    want = np.exp(values)[x_np_key]
    assert y.shape == want.shape
    y.forward()
    backend.assert_close(y.d, want, rtol=1e-5)
    y.backward(grad=1)
    expected = np.zeros((4, 3))
    np.add.at(expected, x_np_key, np.exp(values)[x_np_key])
    backend.assert_close(x.g, expected, rtol=1e-5)


def test_get_item_partial_key_on_a_deferred_intermediate(backend):
    x = leaf(backend, np.ones((4, 3)))
    with agnograd.auto_forward(False):
        y = F.exp(x)[0]
    y.forward()
    backend.assert_close(y.d, np.full(3, np.e), rtol=1e-6)


def test_get_item_with_a_variable_key_on_a_deferred_intermediate():
    x = Variable(np.ones((4, 3), np.float32), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.exp(x)[Variable(np.array([1, 3]))]
    y.forward()
    assert y.d.shape == (2, 3)


@pytest.mark.parametrize("convert", [bool, int, float])
def test_python_scalar_of_a_deferred_variable_is_refused(convert):
    x = Variable(shape=(2,), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(x)
        positive = y > 0
    with pytest.raises(RuntimeError, match="forward"):
        convert(positive if convert is bool else y)


def test_eager_use_of_a_variable_not_computed_yet_says_so():
    x = Variable(shape=(2,), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.exp(x)
    with pytest.raises(RuntimeError, match="forward"):
        y * 2


def test_backward_before_forward_says_so():
    x = Variable(shape=(2,), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(x)
    with pytest.raises(RuntimeError, match="no data"):
        y.backward()


# -- backward ----------------------------------------------------------------------


def test_mlp_matches_eager_and_the_graph_is_reused_with_new_inputs(backend):
    mlp = MLP(backend)
    x0, t0 = mlp.batch(100)
    x = Variable.from_array(x0)
    t = Variable.from_array(t0)
    loss = deferred(mlp.loss, x, t)
    assert loss.shape == ()
    assert loss.d is None
    for step in range(3):
        xs, ts = mlp.batch(step)
        x.d, t.d = xs, ts
        loss.forward()
        for p in mlp.params:
            p.cleargrad()
        loss.backward()
        want_loss, want_grads = mlp.eager(xs, ts)
        backend.assert_close(loss.d, want_loss, rtol=1e-5)
        for p, g in zip(mlp.params, want_grads, strict=True):
            backend.assert_close(p.g, g, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("forward_options", "backward_options"),
    [
        ({}, {"clear_buffer": True}),
        ({"clear_no_need_grad": True}, {}),
        ({"clear_no_need_grad": True}, {"clear_buffer": True}),
        ({"clear_buffer": False, "clear_no_need_grad": False}, {"clear_buffer": False}),
    ],
    ids=["backward-clear_buffer", "clear_no_need_grad", "both", "explicit-defaults"],
)
def test_clearing_options_never_change_gradients(backend, forward_options, backward_options):
    mlp = MLP(backend, seed=3)
    xs, ts = mlp.batch(7, n=5)
    x, t = Variable.from_array(xs), Variable.from_array(ts)
    loss = deferred(mlp.loss, x, t)
    loss.forward()
    loss.backward()
    reference = [backend.to_numpy(p.g).copy() for p in mlp.params]
    for p in mlp.params:
        p.cleargrad()
    for _ in range(2):  # and again on the same graph: nothing was lost by clearing
        loss.forward(**forward_options)
        loss.backward(**backward_options)
        for p, want in zip(mlp.params, reference, strict=True):
            np.testing.assert_array_equal(backend.to_numpy(p.g), want)
            p.cleargrad()


def test_backward_accumulates_into_leaves(backend):
    x = leaf(backend, [1.0, 2.0, 3.0])
    with agnograd.auto_forward(False):
        y = F.sum(x * x)
    y.forward()
    y.backward()
    backend.assert_close(x.g, [2.0, 4.0, 6.0])
    y.backward()
    backend.assert_close(x.g, [4.0, 8.0, 12.0])


def test_backward_grad_argument_seeds_without_touching_the_output_grad(backend):
    x = leaf(backend, [1.0, 2.0])
    with agnograd.auto_forward(False):
        y = x * x
    y.forward()
    y.backward(grad=3)
    backend.assert_close(x.g, [6.0, 12.0])
    assert y.grad is None
    x.cleargrad()
    y.backward(grad=backend.asarray([1.0, -1.0]))
    backend.assert_close(x.g, [2.0, -4.0])
    x.cleargrad()
    y.grad = backend.asarray([0.5, 0.5])
    y.backward(retain_grad=True)  # Chainer's positional options still work
    backend.assert_close(x.g, [1.0, 2.0])


def test_need_grad_false_on_an_intermediate_blocks_only_its_ancestors(backend):
    x = leaf(backend, [0.5, 1.0])
    w = leaf(backend, [2.0, 3.0])
    with agnograd.auto_forward(False):
        a = F.exp(x)  # blocked below
        b = F.sin(x)  # sibling path, still differentiated
        y = F.sum(a * b * w)
    a.need_grad = False
    y.forward()
    y.backward()
    xs, ws = np.array([0.5, 1.0]), np.array([2.0, 3.0])
    backend.assert_close(x.g, np.exp(xs) * np.cos(xs) * ws, rtol=1e-5)
    backend.assert_close(w.g, np.exp(xs) * np.sin(xs), rtol=1e-5)


def test_grad_on_a_deferred_graph_first_and_second_order(backend):
    x = leaf(backend, [1.0, 2.0, 3.0])
    with agnograd.auto_forward(False):
        y = F.sum(F.sin(x) * x)
    y.forward()
    (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    xs = np.array([1.0, 2.0, 3.0])
    backend.assert_close(gx, np.cos(xs) * xs + np.sin(xs), rtol=1e-5)
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    backend.assert_close(ggx, -np.sin(xs) * xs + 2 * np.cos(xs), rtol=1e-5, atol=1e-6)
    assert x.grad is None
    # After new inputs, forward() refreshes what grad() sees.
    x.d = backend.asarray([0.0, 0.0, 0.0])
    y.forward()
    (gx,) = agnograd.grad([y], [x])
    backend.assert_close(gx, [0.0, 0.0, 0.0])


def test_grad_called_with_auto_forward_off():
    x = Variable(np.array([1.0, 2.0], np.float32), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(x**3)
        y.forward()
        (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    np.testing.assert_allclose(gx.d, [3.0, 12.0])


# -- writes: x[key] = value -------------------------------------------------------------


def write_then_square(x: Variable) -> Variable:
    h = x * 2.0
    h[0] = 5.0
    return F.sum(h * h)


def read_write_read(x: Variable) -> Variable:
    h = x * 2.0
    before = h * h  # reads h before the write
    h[0] = 5.0
    # The graph's depth-first order runs the write's branch first: the deferred
    # write must not change what `before` reads.
    return F.sum(h * h) + F.sum(before[1:])


def test_setitem_on_an_intermediate_matches_eager(backend):
    values = [1.0, 2.0, 3.0]
    x_eager = leaf(backend, values)
    want = write_then_square(x_eager)
    want.backward()
    x = leaf(backend, values)
    y = deferred(write_then_square, x)
    for _ in range(2):  # and again on the same graph
        x.cleargrad()
        y.forward()
        y.backward()
        backend.assert_close(y.d, backend.to_numpy(want))
        backend.assert_close(x.g, backend.to_numpy(x_eager.grad))
    backend.assert_close(x.g, [0.0, 16.0, 24.0])


def test_setitem_after_a_read_computes_what_eager_computes(backend):
    values = [1.0, 2.0, 3.0]
    want = read_write_read(leaf(backend, values))
    x = leaf(backend, values)
    y = deferred(read_write_read, x)
    y.forward()
    backend.assert_close(y.d, backend.to_numpy(want))  # 25 + 16 + 36 + 16 + 36
    # Eager raises at backward (the first square saved h before the write) except on
    # JAX; define-then-run wrote into a copy, so it knows the gradient.
    y.backward()
    backend.assert_close(x.g, [0.0, 32.0, 48.0])


def test_parameters_updated_in_place_between_runs(backend):
    # A training loop: forward, backward, then an update written into the leaves.
    w = leaf(backend, [0.5, -1.0])
    x = leaf(backend, [1.0, 2.0], need_grad=False)
    y = deferred(lambda x, w: F.sum(F.tanh(x * w) * w), x, w)
    for _ in range(3):
        y.forward()
        w.cleargrad()
        y.backward()
        value = backend.to_numpy(w.d).copy()
        t = np.tanh(np.array([1.0, 2.0]) * value)
        np.testing.assert_allclose(
            backend.to_numpy(w.g), t + value * np.array([1.0, 2.0]) * (1 - t * t), rtol=1e-5
        )
        with agnograd.no_backprop_mode():
            w[...] = w.d - 0.1 * w.g


def test_a_write_after_forward_into_what_backward_needs_raises(backend):
    w = leaf(backend, [0.5, -1.0])
    y = deferred(lambda w: F.sum(w * w), w)
    y.forward()
    with agnograd.no_backprop_mode():
        w[0] = 3.0
    if backend.name == "jax":  # immutable: the saved array is intact
        y.backward()
        backend.assert_close(w.g, [1.0, -2.0])
        return
    with pytest.raises(RuntimeError, match="overwritten in place"):
        y.backward()


# -- clearing buffers ----------------------------------------------------------------


def build_chain(backend: Any) -> tuple[Variable, ...]:
    x = leaf(backend, np.arange(6.0).reshape(2, 3) / 6)
    W = leaf(backend, np.full((3, 3), 0.1))
    with agnograd.auto_forward(False):
        h1 = F.tanh(x @ W)
        h2 = F.tanh(h1 @ W)
        y = F.sum(h2)
    return x, W, h1, h2, y


def test_forward_clear_buffer_frees_intermediates_for_inference(backend):
    x, W, h1, h2, y = build_chain(backend)
    y.forward(clear_buffer=True)
    assert h1.d is None
    assert h2.d is None
    assert y.d is not None
    assert x.d is not None
    assert W.d is not None
    with pytest.raises(RuntimeError, match="clear_buffer"):
        y.backward()
    y.forward()  # a plain forward makes the graph differentiable again
    y.backward()
    assert W.g is not None


def test_persistent_variables_survive_every_clearing_option(backend):
    _x, _W, h1, h2, y = build_chain(backend)
    h1.persistent = True
    assert h1.info.persistent is True
    y.forward(clear_buffer=True)
    assert h1.d is not None
    assert h2.d is None
    y.forward(clear_no_need_grad=True)
    assert h1.d is not None
    assert h2.d is None
    y.backward(clear_buffer=True)
    assert h1.d is not None


def test_clear_no_need_grad_keeps_what_backward_needs(backend):
    x, W, h1, h2, y = build_chain(backend)
    x.need_grad = False
    y.forward(clear_no_need_grad=True)
    assert h1.d is None
    assert h2.d is None
    y.backward()
    _, _, _, _, y2 = chain = build_chain(backend)
    chain[0].need_grad = False
    y2.forward()
    y2.backward()
    backend.assert_close(W.g, backend.to_numpy(chain[1].g))


def test_clear_no_need_grad_saves_nothing_where_no_input_needs_a_gradient():
    x = Variable(np.ones(3, np.float32), need_grad=False)
    w = Variable(np.ones(3, np.float32), need_grad=True)
    with agnograd.auto_forward(False):
        a = F.exp(x)  # no input needs a gradient: nothing to keep for backward
        y = F.sum(F.sin(a) * w)
    y.forward(clear_no_need_grad=True)
    assert a.parent._saved_outputs is None
    y.backward()
    np.testing.assert_allclose(w.g, np.sin(np.e) * np.ones(3), rtol=1e-6)


def test_backward_clear_buffer_frees_as_it_goes(backend):
    _x, W, h1, h2, y = build_chain(backend)
    y.forward()
    y.backward(clear_buffer=True)
    assert h1.d is None
    assert h2.d is None
    assert y.d is not None
    first = backend.to_numpy(W.g).copy()
    with pytest.raises(RuntimeError, match="clear_buffer"):
        y.backward()
    W.cleargrad()
    y.forward()
    y.backward(clear_buffer=True)
    np.testing.assert_array_equal(backend.to_numpy(W.g), first)


# -- rewiring, unlinking, visiting ------------------------------------------------------


def test_rewire_on_equals_composing(backend):
    """nnabla's example: xb -> B -> yb, xa -> A -> ya, then xa.rewire_on(yb)."""
    xa = leaf(backend, np.zeros((2, 8)))
    xb = leaf(backend, rng_values(1, (2, 16)))
    Wa, Wb1, Wb2 = (
        leaf(backend, rng_values(s, shape, 0.3))
        for s, shape in ((2, (10, 8)), (3, (8, 16)), (4, (8, 8)))
    )

    def A(h):
        return F.sum(F.tanh(F.linear(h, Wa)))

    def B(h):
        return F.tanh(F.linear(F.tanh(F.linear(h, Wb1)), Wb2))

    ya = deferred(A, xa)
    yb = deferred(B, xb)
    xa.rewire_on(yb)
    assert xa.parent is not None
    assert yb.parent is None
    assert_ranks_consistent(ya)
    ya.forward()
    ya.backward()

    params = [Variable.from_array(v.d, need_grad=True) for v in (Wa, Wb1, Wb2)]
    x = Variable.from_array(xb.d, need_grad=True)
    h = F.tanh(F.linear(F.tanh(F.linear(x, params[1])), params[2]))
    want = F.sum(F.tanh(F.linear(h, params[0])))
    want.backward()
    backend.assert_close(ya.d, backend.to_numpy(want), rtol=1e-5)
    for got, expected in zip((Wa, Wb1, Wb2, xb), (*params, x), strict=True):
        backend.assert_close(got.g, backend.to_numpy(expected.grad), rtol=1e-5, atol=1e-6)


def test_rewire_on_deep_graphs_with_a_sibling_path_keeps_backward_order(backend):
    """A is deep and reads an intermediate of B directly: without re-ranking, A's
    functions would rank below B's and backward would run B too early."""
    depth = 6
    xa = leaf(backend, np.zeros(3))
    xb = leaf(backend, [0.3, -0.2, 0.5])
    w = leaf(backend, [0.9, 1.1, 0.8])

    def B(h):
        mids = []
        for _ in range(depth):
            h = F.sin(h * w) + h
            mids.append(h)
        return h, mids[1]

    yb, b_mid = deferred(B, xb)

    def A(h, sibling):
        for _ in range(depth):
            h = F.tanh(h * w)
        return F.sum(h * sibling)

    ya = deferred(A, xa, b_mid)
    assert ya.parent.rank < yb.parent.rank  # the order that would break backward
    xa.rewire_on(yb)
    assert_ranks_consistent(ya)
    ya.forward()
    ya.backward()

    w2 = Variable.from_array(w.d, need_grad=True)
    x2 = Variable.from_array(xb.d, need_grad=True)
    h, mids = x2, []
    for _ in range(depth):
        h = F.sin(h * w2) + h
        mids.append(h)
    for _ in range(depth):
        h = F.tanh(h * w2)
    want = F.sum(h * mids[1])
    want.backward()
    backend.assert_close(ya.d, backend.to_numpy(want), rtol=1e-5)
    backend.assert_close(xb.g, backend.to_numpy(x2.grad), rtol=1e-5, atol=1e-6)
    backend.assert_close(w.g, backend.to_numpy(w2.grad), rtol=1e-5, atol=1e-6)


def test_unlinked_shares_the_buffer_and_cuts_the_graph(backend):
    x = leaf(backend, [1.0, 2.0])
    with agnograd.auto_forward(False):
        h = F.exp(x)
    h.forward()
    u = h.unlinked()
    assert u.parent is None
    assert u.d is h.d
    assert u.need_grad is True
    assert h.get_unlinked_variable(need_grad=False).need_grad is False
    x.d = backend.asarray([0.0, 0.0])
    h.forward()  # forward refreshes the unlinked copy too
    backend.assert_close(u.d, [1.0, 1.0])
    y = F.sum(u * x)
    y.backward()
    backend.assert_close(x.g, [1.0, 1.0])  # nothing flows through u into exp
    assert u.g is not None


def test_unlinked_before_forward_in_a_deferred_graph():
    x = Variable(np.ones(3, np.float32), need_grad=True)
    with agnograd.auto_forward(False):
        h = F.exp(x)
        u = h.unlinked()
        y = F.sum(u * x)
    h.forward()
    y.forward()
    y.backward()
    np.testing.assert_allclose(x.g, np.full(3, np.e), rtol=1e-6)


def test_visit_is_in_forward_order_and_stable():
    def build():
        x = Variable(shape=(3,), need_grad=True)
        with agnograd.auto_forward(False):
            a = F.exp(x)
            b = F.sin(a) * F.cos(x)
            c = F.tanh(a) + b
            return x, F.sum(c * b)

    _x, y = build()
    first = graph_functions(y)
    assert graph_functions(y) == first  # same graph, same order
    labels = [f.label for f in first]
    assert [f.label for f in graph_functions(build()[1])] == labels  # same build, same order
    assert labels == ["Exp", "Tanh", "Sin", "Cos", "Mul", "Add", "Mul", "Sum"]  # depth first
    position = {f: i for i, f in enumerate(first)}
    for func in first:  # every function after the creators of its inputs
        for node in func.inputs:
            if node.creator_node is not None:
                assert position[node.creator_node] < position[func]
    assert len(set(first)) == len(first)


def test_visit_check_stops_at_the_first_true():
    x = Variable(shape=(3,), need_grad=True)
    with agnograd.auto_forward(False):
        y = F.sum(F.tanh(F.exp(x)))
    seen = []

    def is_tanh(func):
        seen.append(func.label)
        return func.label == "Tanh"

    assert y.visit_check(is_tanh) is True
    assert seen == ["Exp", "Tanh"]
    assert y.visit_check(lambda f: False) is False


def test_visit_works_on_eager_graphs_too():
    x = Variable(np.ones(2))
    y = F.sum(F.exp(x) * 2)
    labels = []
    y.visit(lambda f: labels.append(f.label))
    assert labels == ["Exp", "MulConstant", "Sum"]


# -- batch size changes ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["reset_shape", "assign"])
def test_new_batch_size_after_building(how):
    x = Variable(shape=(2, 3), need_grad=True)
    W = Variable(np.ones((3, 4), np.float32), need_grad=True)
    with agnograd.auto_forward(False):
        h = F.tanh(x @ W)
        y = F.sum(h * 2)
    if how == "reset_shape":
        x.reset_shape((5, 3), force=True)
        x.d = 0.5
    else:
        x.d = np.full((5, 3), 0.5, np.float32)
    y.forward()
    y.backward()
    assert h.shape == (5, 4)
    np.testing.assert_allclose(W.g, np.full((3, 4), 5 * 0.5 * 2 / np.cosh(1.5) ** 2), rtol=1e-5)


# -- iterating over a Variable while building ----------------------------------------------

# Programs that iterate over ``x`` (its rows are nodes of the graph, one per row).
ITERATING: dict[str, Callable[[Variable], Variable]] = {
    "for": lambda x: F.sum(_rows_summed(x) ** 2),
    "stack-list": lambda x: F.sum(x.__array_namespace__().stack(list(x)) ** 2 * 0.5),
    "concat-rows": lambda x: F.sum(F.exp(x.__array_namespace__().concat([r for r in x]))),
    # Nodes before the iteration whose backward reads their input's shape (Sum): a
    # refused run must leave none of its shapes for the next.
    "rows-of-a-result": lambda x: _rows_of_a_result(x * 3.0),
}


def _rows_of_a_result(h: Variable) -> Variable:
    xp = h.__array_namespace__()
    return xp.sum(xp.stack(list(h)) * xp.sum(h))


def _rows_summed(x: Variable) -> Variable:
    total = None
    for row in x:
        total = row * 2.0 if total is None else total + row * 2.0
    assert total is not None
    return total


def _run(y: Variable, x: Variable, plan: Any) -> None:
    x.cleargrad()
    if plan is not None:
        plan.run()
    else:
        y.forward()
        y.backward()


@pytest.mark.parametrize("means", ["walk", "replay", "compile"])
@pytest.mark.parametrize("how", sorted(ITERATING))
def test_iterating_while_building_refuses_a_run_on_another_batch_size(backend, means, how):
    """The graph has one node per row that ``x`` had: a run on another batch size
    raises, naming the iteration and the new shape, where it used to cover only the
    old rows; runs on the built size give eager's answer before and after."""
    from agnograd.static._compiled import compile as compile_graph

    program = ITERATING[how]
    x = leaf(backend, rng_values(0, (2, 3)))
    y = deferred(program, x)
    plan = compile_graph(y) if means == "compile" else None
    with agnograd.using_config("compile_after", None if means == "walk" else 0):
        for seed, batch in enumerate([2, 2, 4, 1, 2]):
            data = rng_values(seed + 1, (batch, 3))
            x.d = backend.asarray(data)
            if batch != 2:
                with pytest.raises(agnograd.type_check.InvalidType) as refused:
                    _run(y, x, plan)
                message = str(refused.value)
                assert "iteration over" in message, message
                assert f"shape ({batch}, 3)" in message, message
                assert "2 rows" in message, message
                continue
            _run(y, x, plan)
            want = leaf(backend, data)
            expected = program(want)
            expected.backward()
            backend.assert_close(y.d, backend.to_numpy(expected), rtol=1e-5)
            backend.assert_close(x.g, backend.to_numpy(want.grad), rtol=1e-5)


@pytest.mark.parametrize("how", sorted(ITERATING))
def test_jit_follows_the_batch_size_of_an_iterated_argument(backend, how):
    program = ITERATING[how]
    fun = agnograd.jit(agnograd.functional.value_and_grad(program))
    for seed, batch in enumerate([2, 4, 1, 2]):
        data = rng_values(seed, (batch, 3))
        value, grad = fun(backend.asarray(data))
        want = leaf(backend, data)
        expected = program(want)
        expected.backward()
        backend.assert_close(value, backend.to_numpy(expected), rtol=1e-5)
        backend.assert_close(grad, backend.to_numpy(want.grad), rtol=1e-5)


# -- check_type_forward in define-then-run and jit -------------------------------------------


class Matrices(FunctionNode):
    """``2 x``, for 2-d inputs only (its ``check_type_forward`` says so); counts its
    checks."""

    checks = 0

    def check_type_forward(self, in_types):
        Matrices.checks += 1
        agnograd.type_check.expect(in_types[0].ndim == 2)

    def forward(self, inputs):
        return (inputs[0] * 2.0,)

    def backward(self, indexes, grad_outputs):
        return (grad_outputs[0] * 2.0,)


def _doubled(x: Any) -> Any:
    (y,) = Matrices().apply((x,))
    return y


def test_check_type_forward_refuses_a_graph_built_on_invalid_inputs(backend):
    x = leaf(backend, [1.0, 2.0, 3.0])
    with pytest.raises(agnograd.type_check.InvalidType, match=r"(?s)Matrices.*ndim == 2"):
        deferred(_doubled, x)
    with pytest.raises(agnograd.type_check.InvalidType, match=r"(?s)Matrices.*ndim == 2"):
        agnograd.jit(_doubled)(backend.asarray([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("means", ["walk", "replay", "compile"])
def test_check_type_forward_refuses_a_run_on_invalid_inputs(backend, means):
    from agnograd.static._compiled import compile as compile_graph

    x = leaf(backend, np.ones((2, 3), np.float32))
    y = deferred(_doubled, x)
    plan = compile_graph(y) if means == "compile" else None
    with agnograd.using_config("compile_after", None if means == "walk" else 0):
        for values in ([[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0], [[5.0]]):
            x.d = backend.asarray(values)
            if len(np.shape(values)) != 2:
                with pytest.raises(agnograd.type_check.InvalidType, match=r"Actual: 1 != 2"):
                    _run(y, x, plan)
                continue
            _run(y, x, plan)
            backend.assert_close(y.d, 2 * np.asarray(values))
            backend.assert_close(x.g, np.full(np.shape(values), 2.0))


def test_a_plan_checks_types_once_per_signature(backend):
    """Runs of a plan on inputs of the signature it was checked for check nothing."""
    from agnograd.static._compiled import compile as compile_graph

    x = leaf(backend, np.ones((2, 3), np.float32))
    y = deferred(_doubled, x)
    plan = compile_graph(y)
    _run(y, x, plan)
    before = Matrices.checks
    for _ in range(3):
        _run(y, x, plan)
    assert Matrices.checks == before
    x.d = backend.asarray(np.ones((4, 3), np.float32))
    _run(y, x, plan)
    assert Matrices.checks > before


# -- random graphs ---------------------------------------------------------------------


def _write(h: Variable, skip: Variable) -> Variable:
    h = h * 1.0
    h[0, 1:] = skip[1, 1:] * 2.0
    return h


# Steps of a random graph: each maps the current state ``h`` (shape (2, 3)), an
# earlier state ``skip`` (a sibling path) and the leaves ``x`` (2, 3), ``w`` (3, 3)
# to a new state of the same shape.
STEPS: dict[str, Callable[[Variable, Variable, Variable, Variable], Variable]] = {
    "tanh": lambda h, skip, x, w: F.tanh(h),
    "matmul": lambda h, skip, x, w: h @ w,
    "mul-leaf": lambda h, skip, x, w: h * x,
    "skip": lambda h, skip, x, w: h + skip,
    "mul-skip": lambda h, skip, x, w: F.sin(h) * skip,
    "softmax": lambda h, skip, x, w: F.softmax(h, axis=1),
    "mean": lambda h, skip, x, w: h - F.mean(h, axis=0, keepdims=True),
    "where": lambda h, skip, x, w: F.where(h > 0, h, h * 0.1),
    "square": lambda h, skip, x, w: F.square(h) * 0.5,
    "transpose": lambda h, skip, x, w: F.transpose(F.transpose(h) * 2),
    "concat": lambda h, skip, x, w: F.sum(
        F.reshape(F.concat([h, skip], axis=1), (2, 2, 3)), axis=1
    ),
    "write": lambda h, skip, x, w: _write(h, skip),
}


def run_graph(steps, skips, h0: Variable, x: Variable, w: Variable) -> Variable:
    states = [h0]
    for name, skip in zip(steps, skips, strict=True):
        states.append(STEPS[name](states[-1], states[skip % len(states)], x, w))
    return F.sum(states[-1] * states[-1])


# The backend fixture holds no state, so sharing it between examples is safe.
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=8),
    skips=st.lists(st.integers(0, 8), min_size=8, max_size=8),
    options=st.sampled_from(["none", "backward", "no_need_grad", "both"]),
)
def test_random_graphs_match_eager_under_every_clearing_option(backend, steps, skips, options):
    skips = skips[: len(steps)]
    arrays = [rng_values(i, shape, 0.5) for i, shape in enumerate([(2, 3), (2, 3), (3, 3)])]
    eager = [leaf(backend, a) for a in arrays]
    want = run_graph(steps, skips, *eager)
    want.backward()
    inputs = [leaf(backend, np.zeros_like(a)) for a in arrays]
    y = deferred(run_graph, steps, skips, *inputs)
    assert y.shape == ()
    assert y.dtype == want.dtype
    for v, a in zip(inputs, arrays, strict=True):
        v.d = backend.asarray(a)
    y.forward(clear_no_need_grad=options in ("no_need_grad", "both"))
    y.backward(clear_buffer=options in ("backward", "both"))
    backend.assert_close(y.d, backend.to_numpy(want), rtol=1e-5)
    for got, expected in zip(inputs, eager, strict=True):
        if expected.grad is None:  # a leaf the random graph does not use
            assert got.grad is None
        else:
            backend.assert_close(got.g, backend.to_numpy(expected.grad), rtol=1e-4, atol=1e-5)


# -- memory ------------------------------------------------------------------------------


def test_clearing_options_reach_the_theoretical_minimum_of_memory():
    """benchmarks/bench_define_then_run_memory.py at a small size: the clearing options
    stay within 10 % of the least memory any implementation needs (tracemalloc)."""
    script = Path(__file__).resolve().parent.parent / "benchmarks"
    command = [sys.executable, str(script / "bench_define_then_run_memory.py")]
    command += ["--layers", "20", "--batch", "128", "--width", "128"]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=script, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(proc.stdout.splitlines()[-1].removeprefix("BENCHMARK_JSON "))
    results = {r["mode"]: r for r in record["results"]}
    assert results["dtr forward(clear_buffer)"]["over_minimum"] < 1.1
    assert results["dtr clear_no_need_grad+clear_buffer"]["over_minimum"] < 1.1
    kept = record["minimum_bytes"]["training_kept"]
    assert results["dtr forward()+backward()"]["peak_bytes"] > kept  # all buffers stay
    assert results["eager backward()"]["peak_bytes"] < 1.1 * kept


# -- a result without data knows its library, device and shape --------------------------


def test_a_result_without_data_answers_what_array_api_code_asks(backend):
    x = backend.variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], need_grad=True)
    with agnograd.auto_forward(False):
        h = F.exp(x)
        assert h.array is None
        assert h.__array_namespace__() is x.__array_namespace__()
        assert h.xp is x.xp
        assert h.device == x.device
        assert agnograd.get_device(h) == x.device
        assert len(h) == 3
        rows = list(h)  # each row is in the graph
        total = F.sum(rows[0] + rows[2])
    assert all(r.array is None for r in rows)
    total.forward()
    total.backward()
    expected = np.zeros((3, 2), np.float32)
    expected[[0, 2]] = np.exp([[1.0, 2.0], [5.0, 6.0]])
    backend.assert_close(x.grad, expected)


def test_a_0d_result_without_data_has_no_length():
    x = Variable(np.float32(2.0) * np.ones((), np.float32))
    with agnograd.auto_forward(False):
        h = F.exp(x)
    with pytest.raises(TypeError, match="0-d"):
        len(h)
    with pytest.raises(TypeError, match="0-d"):
        iter(h)


def test_an_uninitialised_variable_has_no_library():
    v = Variable()
    assert v.device is None
    with pytest.raises(RuntimeError, match="neither data nor a creator"):
        v.__array_namespace__()
    with pytest.raises(TypeError, match="no shape"):
        len(v)


def test_a_write_with_a_key_computed_in_the_graph_follows_new_data() -> None:
    # Each forward fills the key from this run's arrays (it kept the first run's).
    x = Variable(shape=(4,), need_grad=True)
    k = Variable(shape=(), need_grad=False)
    with agnograd.auto_forward(False):
        h = x * 1.0
        h[F.astype(k, np.int64)] = 100.0
        y = F.sum(h * h)
    x.d = np.arange(4.0)
    k.d = np.array(1)
    y.forward()
    assert float(y.d) == 0 + 100.0**2 + 4 + 9
    k.d = np.array(3)
    y.forward()
    assert float(y.d) == 0 + 1 + 4 + 100.0**2
    y.backward()
    np.testing.assert_array_equal(x.g, [0.0, 2.0, 4.0, 0.0])


@pytest.mark.parametrize("eager", [False, True])
def test_an_index_held_in_a_variable_is_read_at_every_run(backend, eager):
    x = leaf(backend, np.arange(0.0, 50.0, 10.0))
    i = Variable(backend.asarray([0, 1], None))
    with agnograd.auto_forward(eager):
        y = x[i]
        y.forward()
        backend.assert_close(y.d, np.array([0.0, 10.0]))
        i.d = backend.asarray([3, 4], None)
        if eager:  # computed when applied: a new run is a new y
            y = x[i]
        y.forward()
        backend.assert_close(y.d, np.array([30.0, 40.0]))
        y.backward()
        backend.assert_close(x.g, np.array([0.0, 0.0, 0.0, 1.0, 1.0]))


@pytest.mark.parametrize("axis", [0, None])
def test_concat_of_zero_dimensional_variables_is_refused_as_eagerly(axis):
    a, b = Variable(np.array(1.0)), Variable(np.array(2.0))
    if axis is None:  # flattened first: allowed
        with agnograd.auto_forward(False):
            c = F.concat([a, b], axis=None)
        c.forward()
        np.testing.assert_array_equal(c.d, [1.0, 2.0])
        return
    with agnograd.auto_forward(False), pytest.raises(ValueError, match="zero-dimensional"):
        F.concat([a, b], axis=axis)


def test_grad_of_a_graph_not_run_yet_builds_the_gradient_graph(backend):
    """nnabla's nn.grad: the gradients are Variables of the static graph, which
    forward() computes from the data the inputs hold then, to second order."""
    x = leaf(backend, [1.0, 2.0])
    w = leaf(backend, [3.0, 4.0])
    with agnograd.auto_forward(False):
        y = F.sum(F.sin(x) * w + x * x)
        gx, gw = agnograd.grad([y], [x, w])
        (ggx,) = agnograd.grad([F.sum(gx)], [x])
    assert gx.d is None  # built, not computed
    for xs in ([1.0, 2.0], [0.5, 0.0]):
        x.d = backend.asarray(xs)
        gx.forward()
        gw.forward()
        ggx.forward()
        xs_ = np.array(xs)
        backend.assert_close(gx.d, np.cos(xs_) * [3.0, 4.0] + 2 * xs_, rtol=1e-5)
        backend.assert_close(gw.d, np.sin(xs_), rtol=1e-5)
        backend.assert_close(ggx.d, -np.sin(xs_) * [3.0, 4.0] + 2, rtol=1e-5)
    assert x.grad is None
    assert w.grad is None
