"""The backward engine: ordering, accumulation, seeding, double backprop, ``grad``."""

from __future__ import annotations

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable

# -- graph shapes ------------------------------------------------------------------


def test_long_chain_backprops_iteratively():
    # 100 000 nodes: a recursive engine would overflow the stack. Most links are
    # identity (no backend work), one in a thousand adds 1 so the values prove every
    # link ran: on NumPy alone, since the library changes nothing in the engine's loop
    # (each library's identity and sum with a number have tests of their own). How
    # long it takes is benchmarks/' business, not a test's.
    n = 100_000
    x = Variable(np.array([0.0]))
    y = x
    for i in range(n):
        y = y + 1.0 if i % 1000 == 0 else F.identity(y)
    assert y.rank == n
    y.backward()
    np.testing.assert_array_equal(y.array, [n // 1000])
    np.testing.assert_array_equal(x.grad, [1.0])


def test_fan_in_sums_gradients(backend):
    a = np.array([1.0, 2.0, -3.0], dtype=np.float32)
    x = Variable(backend.asarray(a))
    y = F.sum(x * x + x * 3.0 + x)
    y.backward()
    backend.assert_close(x.grad, 2 * a + 4)


def test_fan_in_of_the_very_same_gradient_array_is_summed(backend):
    # x + x hands both inputs the same array: it must count twice.
    x = Variable(backend.asarray([1.0, 2.0]))
    (x + x).backward(grad=backend.asarray([1.0, 10.0]))
    backend.assert_close(x.grad, [2.0, 20.0])
    x.cleargrad()
    a = x - 1.0
    ((a + a) + a).backward(grad=backend.asarray([1.0, 10.0]))
    backend.assert_close(x.grad, [3.0, 30.0])


def test_diamond_graph_runs_each_node_once_after_its_consumers(backend):
    a = np.array([0.5, 2.0], dtype=np.float32)
    x = Variable(backend.asarray(a))
    h = F.exp(x)
    y = F.sum(h * h + F.sin(h))
    y.backward()
    e = np.exp(a)
    backend.assert_close(x.grad, (2 * e + np.cos(e)) * e, rtol=1e-5)


def test_broadcasting_inputs_get_gradients_of_their_own_shape(backend):
    a = np.arange(3, dtype=np.float32).reshape(3, 1)
    b = np.arange(4, dtype=np.float32)
    va = Variable(backend.asarray(a))
    vb = Variable(backend.asarray(b))
    vc = Variable(backend.asarray(2.0))
    vd = Variable(backend.asarray(np.ones((1, 4))))
    y = F.sum(va * vb + vc * vd)
    y.backward()
    assert va.grad.shape == (3, 1)
    assert vb.grad.shape == (4,)
    assert vc.grad.shape == ()
    assert vd.grad.shape == (1, 4)
    backend.assert_close(va.grad, np.full((3, 1), b.sum()))
    backend.assert_close(vb.grad, np.full(4, a.sum()))
    backend.assert_close(vc.grad, 12.0)  # vd broadcast over 3 rows, 4 columns
    backend.assert_close(vd.grad, np.full((1, 4), 6.0))


def test_gradients_passed_on_unchanged_get_their_inputs_shape_and_dtype(backend):
    low, high = backend.narrow_and_wide()
    row = Variable(backend.asarray([1.0, 2.0, 3.0], dtype=low))
    grid = Variable(backend.asarray(np.ones((2, 3)), dtype=high))
    wide = Variable(backend.asarray([1.0, 2.0, 3.0], dtype=high))
    y = (row + grid) + (wide + 1.0)  # row broadcast; a narrow and a wide input
    y.backward()
    assert row.grad.shape == (3,)
    assert row.grad.dtype == backend.dtype(low)
    backend.assert_close(row.grad, [2.0, 2.0, 2.0])
    backend.assert_close(wide.grad, [2.0, 2.0, 2.0])
    assert grid.grad.dtype == backend.dtype(high)
    # A wide seed of a narrow result: each gradient passed on is cast to its input.
    x = Variable(backend.asarray([1.0, 2.0], dtype=low))
    agnograd.backward([(x + x) + 1.0], [backend.asarray([0.5, 0.25], dtype=high)])
    assert x.grad.dtype == backend.dtype(low)
    backend.assert_close(x.grad, [1.0, 0.5])


def test_nodes_of_one_rank_run_in_the_order_they_were_queued(backend):
    # Which gradients are summed first follows that order; compiled plans copy it,
    # so a graph gives the same bits before and after it is compiled. Here the
    # first-queued order sums 1 + 0 first and keeps the 1 that 1e8 - 1e8 cancels.
    x = Variable(backend.asarray([1.0], dtype="float32"))
    u, v, w, z = x * 1.0, x * 0.0, x * -1e8, x * 1e8
    s = ((u + v) + w) + z
    ran = []

    class Order(agnograd.FunctionHook):
        name = "Order"

        def backward_preprocess(self, function, in_nodes, out_grad):
            ran.append(function)

    with Order():
        s.backward()
    backend.assert_close(x.grad, [1.0], rtol=0, atol=0)
    # The products, all of rank 1, queued as the sums reached them: z, w, u, v.
    products = [y.creator_node for y in (z, w, u, v)]
    assert [f for f in ran if f in products] == products


def test_an_output_reshaped_in_place_after_the_forward_gets_gradients_summed_to_shape():
    x = Variable(np.array([1.0, 2.0, 3.0]))
    z = x + x
    z.array.shape = (1, 3)  # the node still says (3,): the gradient's own shape counts
    z.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])


def test_leaf_gradients_accumulate_across_backward_calls(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    F.sum(x * 3.0).backward()
    F.sum(x * x).backward()
    backend.assert_close(x.grad, [3.0 + 2.0, 3.0 + 4.0])
    x.cleargrad()
    F.sum(x * 3.0).backward()
    backend.assert_close(x.grad, [3.0, 3.0])


def test_intermediate_gradients_are_dropped_unless_retained(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    h = x * 2.0
    y = F.sum(h * h)
    y.backward()
    assert h.grad is None
    backend.assert_close(x.grad, [8.0, 16.0])

    x.cleargrad()
    h = x * 2.0
    y = F.sum(h * h)
    y.backward(retain_grad=True)
    backend.assert_close(h.grad, [4.0, 8.0])
    backend.assert_close(y.grad, 1.0)
    backend.assert_close(x.grad, [8.0, 16.0])


def test_retained_intermediate_gradient_is_the_full_fan_in_sum(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    h = x * 2.0
    y = F.sum(h * h + h * 3.0)
    y.backward(retain_grad=True)
    backend.assert_close(h.grad, [2 * 2.0 + 3.0, 2 * 4.0 + 3.0])
    backend.assert_close(x.grad, [14.0, 22.0])


def test_gradient_is_cast_back_to_the_input_dtype(backend):
    low, high = backend.narrow_and_wide()
    x = Variable(backend.asarray([1.0, 2.0], dtype=low))
    c = backend.asarray([3.0, 4.0], dtype=high)
    y = F.sum(x * c)
    assert y.dtype == backend.dtype(high)
    y.backward()
    assert x.grad.dtype == backend.dtype(low)
    backend.assert_close(x.grad, [3.0, 4.0])


def test_requires_grad_false_branch_gets_nothing(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    c = Variable(backend.asarray([3.0, 4.0]), requires_grad=False)
    h = c * 2.0  # a constant: no graph is recorded for it
    assert h.creator is None
    F.sum(x * h).backward()
    backend.assert_close(x.grad, [6.0, 8.0])
    assert c.grad is None
    assert h.grad is None


# -- seeding ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_one_element_output_is_seeded_with_ones(backend, shape):
    x = Variable(backend.asarray(np.full(shape, 3.0)))
    y = x * x
    y.backward()
    backend.assert_close(x.grad, np.full(shape, 6.0))
    backend.assert_close(y.grad, np.ones(shape))
    assert y.grad.dtype == backend.dtype("float32")


def test_larger_output_is_seeded_with_ones_as_nnabla_does(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 2.0
    y.backward()
    backend.assert_close(x.grad, np.array([2.0, 2.0]))
    backend.assert_close(y.grad, np.ones(2))
    with pytest.raises(ValueError, match="grad_outputs"):  # Chainer's and torch's grad()
        agnograd.grad([y], [x])


def test_explicit_seed(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 3.0
    y.grad = backend.asarray([10.0, 100.0])
    y.backward()
    backend.assert_close(x.grad, [30.0, 300.0])


@pytest.mark.parametrize("preset", [False, True], ids=["seed-ones", "seed-set"])
def test_loss_scale_multiplies_the_seed_and_leaf_grads_stay_scaled(backend, preset):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = F.sum(x * x)
    if preset:
        y.grad = backend.asarray(2.0)
    y.backward(loss_scale=8.0)
    seed = 2.0 if preset else 1.0
    backend.assert_close(x.grad, np.array([2.0, 4.0]) * 8.0 * seed)


def test_backward_of_a_leaf_does_not_touch_other_leaves(backend):
    x = Variable(backend.asarray([1.0]))
    other = Variable(backend.asarray([2.0]))
    x.backward()
    assert other.grad is None


# -- double backprop ---------------------------------------------------------------------


def test_third_order_with_backward(backend):
    a = np.array([1.0, 2.0, -0.5], dtype=np.float32)
    x = Variable(backend.asarray(a))
    F.sum(x**4).backward(enable_double_backprop=True)
    g1 = x.grad_var
    backend.assert_close(g1, 4 * a**3)
    assert g1.creator is not None
    x.cleargrad()
    F.sum(g1).backward(enable_double_backprop=True)
    g2 = x.grad_var
    backend.assert_close(g2, 12 * a**2)
    x.cleargrad()
    F.sum(g2).backward()
    backend.assert_close(x.grad, 24 * a)


def test_third_order_with_grad(backend):
    a = np.array([1.0, 2.0, -0.5], dtype=np.float32)
    x = Variable(backend.asarray(a))
    y = F.sum(x * x * x * x)
    (g1,) = agnograd.grad([y], [x], enable_double_backprop=True)
    backend.assert_close(g1, 4 * a**3, rtol=1e-5)
    (g2,) = agnograd.grad([F.sum(g1)], [x], enable_double_backprop=True)
    backend.assert_close(g2, 12 * a**2, rtol=1e-5)
    (g3,) = agnograd.grad([F.sum(g2)], [x])
    backend.assert_close(g3, 24 * a, rtol=1e-5)
    assert x.grad is None


def test_without_double_backprop_the_gradient_has_no_graph(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    F.sum(x**3).backward()
    assert x.grad_var.creator is None


def test_mixed_partials(backend):
    x = Variable(backend.asarray([2.0]))
    w = Variable(backend.asarray([3.0]))
    y = F.sum(x * x * w)
    gx, gw = agnograd.grad([y], [x, w], enable_double_backprop=True)
    backend.assert_close(gx, [12.0])  # 2 x w
    backend.assert_close(gw, [4.0])  # x^2
    (gxw,) = agnograd.grad([F.sum(gx)], [w])
    backend.assert_close(gxw, [4.0])  # 2 x


# -- agnograd.grad --------------------------------------------------------------------


def test_grad_returns_a_list_of_variables(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    w = Variable(backend.asarray([3.0, 4.0]))
    y = F.sum(x * w)
    result = agnograd.grad([y], [x, w])
    assert isinstance(result, list)
    assert all(isinstance(g, Variable) for g in result)
    backend.assert_close(result[0], [3.0, 4.0])
    backend.assert_close(result[1], [1.0, 2.0])
    assert agnograd.grad((y,), (x,))[0] is not None  # tuples are lists too


def test_grad_has_no_side_effect_on_grad(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    h = x * 2.0
    y = F.sum(h * h)
    agnograd.grad([y], [x])
    assert x.grad is None
    assert h.grad is None


def test_grad_does_not_set_the_output_grad(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = F.sum(x * x)
    agnograd.grad([y], [x])
    assert y.grad is None


def test_grad_set_grad_stores_the_results(backend):
    x = Variable(backend.asarray([1.0, 2.0]), grad=backend.asarray([100.0, 100.0]))
    y = F.sum(x * x)
    (gx,) = agnograd.grad([y], [x], set_grad=True)
    assert x.grad_var is gx
    backend.assert_close(x.grad, [2.0, 4.0])  # replaced, not accumulated


def test_grad_of_an_output_with_respect_to_itself_is_the_seed(backend):
    x = Variable(backend.asarray([1.0]))
    y = x * 2.0
    (gy,) = agnograd.grad([y], [y], grad_outputs=[backend.asarray([5.0])])
    backend.assert_close(gy, [5.0])


def test_grad_unreachable_input_gets_none(backend):
    x = Variable(backend.asarray([1.0]))
    z = Variable(backend.asarray([2.0]))
    y = x * 3.0
    gx, gz = agnograd.grad([y], [x, z])
    backend.assert_close(gx, [3.0])
    assert gz is None


def test_grad_of_an_intermediate(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    h = x * 2.0
    y = F.sum(h * h)
    gh, gx = agnograd.grad([y], [h, x])
    backend.assert_close(gh, [4.0, 8.0])
    backend.assert_close(gx, [8.0, 16.0])


def test_grad_arguments_must_be_lists(backend):
    x = Variable(backend.asarray([1.0]))
    y = x * 2.0
    with pytest.raises(TypeError, match="list"):
        agnograd.grad(y, [x])
    with pytest.raises(TypeError, match="list"):
        agnograd.grad([y], x)
    with pytest.raises(TypeError):
        agnograd.grad([y], [x.array])


def test_grad_length_mismatch(backend):
    x = Variable(backend.asarray([1.0]))
    y = x * 2.0
    one = backend.asarray([1.0])
    with pytest.raises(ValueError, match="grad_outputs"):
        agnograd.grad([y], [x], grad_outputs=[one, one])
    with pytest.raises(ValueError, match="grad_inputs"):
        agnograd.grad([y], [x], grad_inputs=[one, one])


def test_grad_outputs_must_have_the_outputs_shape(backend):
    x = Variable(backend.asarray([1.0, 2.0, 3.0]))
    y = x * 2.0
    with pytest.raises(ValueError, match=r"grad: grad_outputs\[0\] for .*shape \(2, 3\)"):
        agnograd.grad([y], [x], grad_outputs=[backend.asarray(np.ones((2, 3)))])
    with pytest.raises(ValueError, match=r"backward: grad_outputs\[1\] for .*shape \(1,\)"):
        agnograd.backward([y, y], [backend.asarray(np.ones(3)), backend.asarray([1.0])])
    assert x.grad is None


def test_grad_outputs_must_be_arrays(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"grad: grad_outputs\[0\] must be an array .* got float"):
        agnograd.grad([x * 2.0], [x], [1.0])


def test_grad_outputs_of_another_library_are_a_type_error(backend):
    import array_api_strict

    other = array_api_strict if backend.name == "numpy" else np
    y = Variable(backend.asarray([1.0, 2.0])) * 2.0
    with pytest.raises(TypeError, match=r"grad_outputs\[0\] .*array but the data is"):
        agnograd.backward([y], [other.asarray([1.0, 1.0], dtype=other.float32)])


def test_grad_outputs_of_another_dtype_give_the_inputs_dtype(backend):
    x = Variable(backend.asarray([1.0, 2.0]))  # float32
    (gx,) = agnograd.grad([x * 3.0 + 1.0], [x], [backend.asarray([1.0, 2.0], dtype="float64")])
    assert gx.dtype == x.dtype
    backend.assert_close(gx, [3.0, 6.0])


def test_grad_with_grad_outputs_and_grad_inputs(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x * 3.0
    (gx,) = agnograd.grad(
        [y],
        [x],
        grad_outputs=[backend.asarray([1.0, 10.0])],
        grad_inputs=[backend.asarray([0.5, 0.5])],
    )
    backend.assert_close(gx, [3.5, 30.5])


def test_grad_inputs_for_an_unreachable_input(backend):
    x = Variable(backend.asarray([1.0]))
    z = Variable(backend.asarray([2.0]))
    (gz,) = agnograd.grad([x * 2.0], [z], grad_inputs=[backend.asarray([7.0])])
    backend.assert_close(gz, [7.0])


def test_grad_loss_scale(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    (gx,) = agnograd.grad([F.sum(x * x)], [x], loss_scale=4.0)
    backend.assert_close(gx, [8.0, 16.0])


class Recorder(FunctionNode):
    """Multiplies by 2; its backward records each call, or raises when told to."""

    def __init__(self, log: list[str], tag: str, fail: bool = False) -> None:
        self.log = log
        self.tag = tag
        self.fail = fail

    def forward(self, inputs):
        return (inputs[0] * 2.0,)

    def backward(self, target_input_indexes, grad_outputs):
        if self.fail:
            raise AssertionError(f"backward of {self.tag} should not have run")
        self.log.append(self.tag)
        return (grad_outputs[0] * 2.0,)


def test_grad_runs_only_paths_that_reach_the_inputs(backend):
    log: list[str] = []
    w = Variable(backend.asarray([1.0]))
    x = Variable(backend.asarray([3.0]))
    (a,) = Recorder(log, "from-w", fail=True).apply((w,))
    (b,) = Recorder(log, "from-x").apply((x,))
    (c,) = Recorder(log, "after-x").apply((b,))
    y = F.sum(a * c)
    (gx,) = agnograd.grad([y], [x])
    backend.assert_close(gx, [8.0])  # d(a * 4x)/dx with a = 2
    assert sorted(log) == ["after-x", "from-x"]


def test_grad_stops_at_the_inputs(backend):
    log: list[str] = []
    x = Variable(backend.asarray([3.0]))
    (h,) = Recorder(log, "below-h", fail=True).apply((x,))
    y = F.sum(h * h)
    (gh,) = agnograd.grad([y], [h])
    backend.assert_close(gh, [12.0])
    assert log == []


def test_grad_of_leaves_with_nothing_to_prune_runs_backwards_loop(backend, monkeypatch):
    # Every node lies on a path to the leaves asked for: grad asks each node what
    # backward asks (no per-node question about the targets) and gets its answer.
    from agnograd.core import _engine_loop

    asked: list[str] = []
    for name in ("_indexes", "_output_grads"):
        real = getattr(_engine_loop, name)

        def counting(*args, _real=real, _name=name):
            asked.append(_name)
            return _real(*args)

        monkeypatch.setattr(_engine_loop, name, counting)
    w = Variable(backend.asarray([0.5, 2.0]), requires_grad=False)
    x = Variable(backend.asarray([1.0, -3.0]))
    v = Variable(backend.asarray([2.0, 1.0]))

    def loss():
        h = x
        for _ in range(5):
            h = F.sin(h * w + x) * v
        return F.sum(h)

    gx, gv = agnograd.grad([loss()], [x, v])
    assert asked == []
    loss().backward()
    backend.assert_close(gx, x.grad)
    backend.assert_close(gv, v.grad)


def test_grad_inputs_of_an_intermediate_no_seed_reaches_flow_no_further(backend):
    x = Variable(backend.asarray([1.0]))
    x2 = Variable(backend.asarray([2.0]))
    z = x2 * 2.0
    gz, gx2 = agnograd.grad([x * 2.0], [z, x2], grad_inputs=[backend.asarray([7.0]), None])
    backend.assert_close(gz, [7.0])
    assert gx2 is None


# -- agnograd.backward -------------------------------------------------------------------


def test_backward_of_several_outputs(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    a = x * 2.0
    b = x * x
    agnograd.backward([a, b], [backend.asarray([1.0, 1.0]), backend.asarray([1.0, 10.0])])
    backend.assert_close(x.grad, [2.0 + 2.0, 2.0 + 40.0])


def test_backward_of_several_outputs_with_default_seeds(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    a = F.sum(x * 2.0)
    b = F.sum(x * x)
    agnograd.backward([a, b])
    backend.assert_close(x.grad, [4.0, 6.0])


def test_backward_arguments(backend):
    x = Variable(backend.asarray([1.0]))
    y = x * 2.0
    with pytest.raises(TypeError, match="list"):
        agnograd.backward(y)
    with pytest.raises(ValueError, match="grad_outputs"):
        agnograd.backward([y], [None, None])


# -- aliasing -------------------------------------------------------------------------------


def test_two_leaves_given_the_same_gradient_do_not_alias(backend):
    a = Variable(backend.asarray([1.0, 2.0]))
    b = Variable(backend.asarray([3.0, 4.0]))
    y = a + b  # Add hands the same gradient array to both inputs
    y.grad = backend.asarray([1.0, 1.0])
    y.backward()
    assert a.grad is not b.grad
    if backend.name != "jax":  # JAX arrays cannot be mutated, so cannot alias
        a.grad[0] = 100.0
        backend.assert_close(b.grad, [1.0, 1.0])


def test_leaf_gradient_does_not_alias_the_seed(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = x + 1.0  # the gradient passes through unchanged
    seed = backend.asarray([1.0, 1.0])
    y.grad = seed
    y.backward()
    assert x.grad is not seed
    if backend.name != "jax":
        seed[0] = 100.0
        backend.assert_close(x.grad, [1.0, 1.0])
