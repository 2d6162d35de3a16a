"""``agnograd.checkpoint`` / ``agnograd.functions.forget``: gradients through a block
recomputed in backward equal those of the block itself, at first and second order,
on every backend; the block's intermediate arrays are not kept; closed-over
parameters get their gradients; misuse raises errors that say what to do."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.functions._checkpoint import Checkpoint, checkpoint, forget
from agnograd.testing import check_backward, check_double_backward

RTOL = {"float64": 1e-10, "float32": 1e-5}


def _dtype(backend: Any) -> str:
    """float64, or float32 on JAX without its x64 mode."""
    return backend.narrow_and_wide()[1]


def _close(backend: Any, actual: Any, expected: Any) -> None:
    dtype = _dtype(backend)
    backend.assert_close(actual, backend.to_numpy(expected), rtol=RTOL[dtype], atol=RTOL[dtype])


class Counted:
    """A block ``tanh(x @ w + b) * 2 - x`` closing over ``w``; counts its calls."""

    def __init__(self, w: Variable) -> None:
        self.w = w
        self.calls = 0
        self.__name__ = "block"

    def __call__(self, x: Any, b: Any) -> Variable:
        self.calls += 1
        return F.tanh(F.matmul(x, self.w) + b) * 2 - x


def _grads(outputs: list[Variable], inputs: list[Variable], double: bool) -> list[Any]:
    return agnograd.grad(outputs, inputs, enable_double_backprop=double)


# -- gradients equal those of the block itself ------------------------------------


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_gradients_equal_the_unchecked_block(backend: Any, data: st.DataObject) -> None:
    rows, n = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    dtype = _dtype(backend)
    x = backend.variable(rng.uniform(-1, 1, (rows, n)), dtype)
    w = backend.variable(rng.uniform(-1, 1, (n, n)), dtype)
    b = backend.variable(rng.uniform(-1, 1, (n,)), dtype)
    block = Counted(w)

    def loss(y: Variable) -> Variable:
        return F.sum(y * y)

    want = _grads([loss(block(x, b))], [x, w, b], double=True)
    want2 = _grads([sum((F.sum(g * g) for g in want[1:]), F.sum(want[0]))], [x, w, b], False)
    block.calls = 0
    got = _grads([loss(checkpoint(block, x, b))], [x, w, b], double=True)
    assert block.calls == 1 + 1  # forward, then the recomputation in backward
    got2 = _grads([sum((F.sum(g * g) for g in got[1:]), F.sum(got[0]))], [x, w, b], False)
    for g, r in zip([*got, *got2], [*want, *want2], strict=True):
        _close(backend, g, r)


def test_backward_and_leaf_gradients(backend: Any) -> None:
    dtype = _dtype(backend)
    x = backend.variable([[0.5, -1.0], [2.0, 0.25]], dtype)
    w = backend.variable([[1.0, -0.5], [0.3, 0.7]], dtype)
    b = backend.variable([0.1, -0.2], dtype)
    block = Counted(w)
    F.sum(block(x, b) ** 2).backward()
    want = [backend.to_numpy(v.grad).copy() for v in (x, w, b)]
    for v in (x, w, b):
        v.cleargrad()
    y = checkpoint(block, x, b)
    assert isinstance(y.creator, Checkpoint)
    F.sum(y**2).backward()
    for v, expected in zip((x, w, b), want, strict=True):
        _close(backend, v.grad, expected)


def test_check_backward_and_double_backward(backend: Any) -> None:
    if backend.name == "jax":
        pytest.skip("the numerical checks want float64, which JAX lacks without x64")
    rng = np.random.default_rng(0)
    w = backend.variable(rng.uniform(-1, 1, (3, 3)), "float64")
    x, b = (backend.asarray(rng.uniform(-1, 1, s), "float64") for s in ((2, 3), (3,)))
    gy, ggx, ggb = (
        backend.asarray(rng.uniform(-1, 1, s), "float64") for s in ((2, 3), (2, 3), (3,))
    )
    ggw = backend.asarray(rng.uniform(-1, 1, (3, 3)), "float64")
    block = Counted(w)
    check_backward(lambda x, b: checkpoint(block, x, b), (x, b), gy, params=w)
    check_double_backward(
        lambda x, b: checkpoint(block, x, b), (x, b), gy, (ggx, ggb), params=w, params_grad_grad=ggw
    )


def test_third_order() -> None:
    x = Variable(np.array([0.5, 2.0]))
    y = checkpoint(lambda a: a**4, x)
    (g1,) = agnograd.grad([F.sum(y)], [x], enable_double_backprop=True)
    (g2,) = agnograd.grad([F.sum(g1)], [x], enable_double_backprop=True)
    (g3,) = agnograd.grad([F.sum(g2)], [x])
    np.testing.assert_allclose(g1.array, 4 * x.array**3)
    np.testing.assert_allclose(g2.array, 12 * x.array**2)
    np.testing.assert_allclose(g3.array, 24 * x.array)


def test_second_order_with_respect_to_a_parameter_only() -> None:
    # The second backward asks for w alone; the first-order gradient of x (which
    # depends on w) must still be computed inside it.
    x = Variable(np.array([0.3, -0.7]))
    w = Variable(np.array([1.5, 0.5]))

    def block(a: Variable) -> Variable:
        return F.sin(a * w)

    def second(y: Variable) -> Any:
        gx, gw = agnograd.grad([F.sum(y)], [x, w], enable_double_backprop=True)
        return agnograd.grad([F.sum(gx * gx) + F.sum(gw)], [w])[0].array

    np.testing.assert_allclose(second(checkpoint(block, x)), second(block(x)))


def test_gradient_of_a_subset_of_the_inputs() -> None:
    x = Variable(np.array([0.3, -0.7]))
    w = Variable(np.array([1.5, 0.5]))
    (gw,) = agnograd.grad([F.sum(checkpoint(lambda a: F.exp(a * w), x))], [w])
    np.testing.assert_allclose(gw.array, x.array * np.exp(x.array * w.array))


def test_an_output_that_depends_on_no_requested_input() -> None:
    # Asked for x alone, the recomputation gives y * 3 no gradient: it adds nothing.
    x, y = Variable(np.array([1.0, 2.0])), Variable(np.array([3.0, 4.0]))
    a, b = checkpoint(lambda u, v: (u * 2, v * 3), x, y)
    (gx,) = agnograd.grad([F.sum(a) + F.sum(b)], [x])
    np.testing.assert_allclose(gx.array, [2.0, 2.0])


def test_dask() -> None:
    da = pytest.importorskip("dask.array")
    x = Variable(da.from_array(np.array([[0.5, -1.0], [2.0, 0.25]])))
    w = Variable(da.from_array(np.array([[1.0, -0.5], [0.3, 0.7]])))
    block = Counted(w)
    b = Variable(da.from_array(np.array([0.1, -0.2])))
    want = _grads([F.sum(block(x, b) ** 2)], [x, w, b], double=False)
    got = _grads([F.sum(checkpoint(block, x, b) ** 2)], [x, w, b], double=False)
    for g, r in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g.array), np.asarray(r.array))


# -- what the block receives and returns --------------------------------------------


def test_tuple_and_list_outputs(backend: Any) -> None:
    dtype = _dtype(backend)
    x = backend.variable([0.5, -1.0, 2.0], dtype)

    def pair(a: Variable) -> tuple[Variable, Variable]:
        return F.exp(a), a * a

    y, z = checkpoint(pair, x)
    assert y.creator is z.creator
    (gx,) = agnograd.grad([F.sum(y) + F.sum(z * 3)], [x])
    _close(backend, gx, np.exp(backend.to_numpy(x)) + 6 * backend.to_numpy(x))
    # An output that receives no gradient is left out of the recomputed backward.
    (gx,) = agnograd.grad([F.sum(checkpoint(pair, x)[1])], [x])
    _close(backend, gx, 2 * backend.to_numpy(x))
    result = checkpoint(lambda a: [a * 2, a + 1], x)
    assert isinstance(result, list)
    assert len(result) == 2


def test_outputs_without_a_gradient_are_not_linked() -> None:
    x = Variable(np.array([0.5, -1.0]))
    y, mask = checkpoint(lambda a: (a * 3, a > 0), x)
    assert mask.creator is None
    assert not mask.requires_grad
    assert isinstance(y.creator, Checkpoint)
    y.grad = np.ones(2)
    y.backward()
    np.testing.assert_allclose(x.grad, [3.0, 3.0])


def test_raw_arrays_keywords_and_other_arguments_pass_through() -> None:
    x = Variable(np.array([0.5, -1.0]))
    seen: list[tuple[Any, ...]] = []

    def block(a: Variable, c: np.ndarray, scale: float, *, shift: Variable, tag: str) -> Variable:
        seen.append((type(c), scale, tag))
        return a * c * scale + shift

    shift = Variable(np.array([1.0, 2.0]))
    y = checkpoint(block, x, np.array([2.0, 3.0]), 0.5, shift=shift, tag="t")
    F.sum(y).backward()
    np.testing.assert_allclose(x.grad, [1.0, 1.5])
    np.testing.assert_allclose(shift.grad, [1.0, 1.0])
    assert seen == [(np.ndarray, 0.5, "t")] * 2


def test_a_block_returning_its_input() -> None:
    x = Variable(np.array([0.5, -1.0]))
    y = checkpoint(lambda a: a, x)
    F.sum(y * y).backward()
    np.testing.assert_allclose(x.grad, [1.0, -2.0])


def test_the_same_variable_twice() -> None:
    x = Variable(np.array([0.5, -1.0]))
    F.sum(checkpoint(lambda a, b: a * b, x, x)).backward()
    np.testing.assert_allclose(x.grad, 2 * x.array)


def test_forget_is_checkpoint_with_chainers_signature() -> None:
    x = Variable(np.array([0.5, -1.0]))
    y = forget(lambda a, b: F.exp(a) * b, x, np.array([2.0, 3.0]))
    F.sum(y).backward()
    np.testing.assert_allclose(x.grad, np.exp(x.array) * [2.0, 3.0])


def test_nothing_to_differentiate_builds_no_node() -> None:
    x = Variable(np.array([0.5, -1.0]), requires_grad=False)
    assert checkpoint(F.exp, x).creator is None
    calls = []
    with agnograd.no_backprop_mode():
        y = checkpoint(lambda a: calls.append(1) or a * 2, Variable(np.ones(2)))
    assert y.creator is None
    assert calls == [1]


def test_public_names() -> None:
    assert agnograd.checkpoint is checkpoint
    assert F.forget is forget
    assert "checkpoint" in agnograd.__all__
    assert "forget" in F.__all__


# -- parameters the block closes over -------------------------------------------------


def test_closed_over_parameter_gets_its_gradient() -> None:
    w = Variable(np.array([2.0, -1.0]), name="w")
    x = Variable(np.array([0.5, 3.0]), requires_grad=False)  # data: only w needs a gradient
    y = checkpoint(lambda a: F.sum(F.tanh(a * w)), x)
    y.backward()
    np.testing.assert_allclose(w.grad, x.array * (1 - np.tanh(x.array * w.array) ** 2))
    assert x.grad is None


def test_parameters_in_a_list_argument() -> None:
    ws = [Variable(np.array([2.0])), Variable(np.array([3.0]))]

    def block(a: Variable, params: list[Variable]) -> Variable:
        for p in params:
            a = a * p
        return a

    x = Variable(np.array([0.5]))
    checkpoint(block, x, ws).backward()
    np.testing.assert_allclose([ws[0].grad, ws[1].grad, x.grad], [[1.5], [1.0], [6.0]])


def test_closed_over_intermediate_result() -> None:
    v = Variable(np.array([2.0, -1.0]))
    h = v * v  # computed outside the block, read inside it
    x = Variable(np.array([0.5, 3.0]))
    F.sum(checkpoint(lambda a: a * h, x)).backward()
    np.testing.assert_allclose(x.grad, h.array)
    np.testing.assert_allclose(v.grad, 2 * v.array * x.array)


def test_closed_over_result_and_its_source_is_refused() -> None:
    v = Variable(np.array([2.0, -1.0]))
    h = v * 3
    x = Variable(np.array([0.5, 3.0]))
    with pytest.raises(ValueError, match=r"checkpoint: .* pass the computed one to checkpoint"):
        checkpoint(lambda a: a * h + v, x)
    # passed as an argument instead, it works
    F.sum(checkpoint(lambda a, g: a * g + v, x, h)).backward()
    np.testing.assert_allclose(v.grad, 3 * x.array + 1)


def test_no_gradient_is_silently_missing() -> None:
    # Every Variable the block reads that requires a gradient gets one, argument or not.
    rng = np.random.default_rng(1)
    params = [Variable(rng.uniform(-1, 1, (3, 3))) for _ in range(3)]
    extra = Variable(rng.uniform(-1, 1, (3,)))

    def block(a: Variable) -> Variable:
        for p in params:
            a = F.tanh(F.matmul(a, p))
        return a + extra

    x = Variable(rng.uniform(-1, 1, (2, 3)))
    want = _grads([F.sum(block(x))], [x, *params, extra], double=False)
    got = _grads([F.sum(checkpoint(block, x))], [x, *params, extra], double=False)
    for g, r in zip(got, want, strict=True):
        assert g is not None
        np.testing.assert_allclose(g.array, r.array)


# -- nesting and memory -----------------------------------------------------------------


def test_nested_checkpoints() -> None:
    rng = np.random.default_rng(2)
    w = Variable(rng.uniform(-1, 1, (3, 3)))
    inner = Counted(w)
    b = Variable(rng.uniform(-1, 1, (3,)))

    def outer(a: Variable) -> Variable:
        return checkpoint(inner, checkpoint(inner, a, b), b) * 0.5

    x = Variable(rng.uniform(-1, 1, (2, 3)))
    want = _grads([F.sum(outer(x) ** 2)], [x, w, b], double=True)
    want2 = _grads([F.sum(want[0] * want[1][:2])], [x, w, b], double=False)
    inner.calls = 0
    got = _grads([F.sum(checkpoint(outer, x) ** 2)], [x, w, b], double=True)
    got2 = _grads([F.sum(got[0] * got[1][:2])], [x, w, b], double=False)
    for g, r in zip([*got, *got2], [*want, *want2], strict=True):
        np.testing.assert_allclose(g.array, r.array)


def test_nested_forward_counts() -> None:
    w = Variable(np.array([0.5, 2.0]))
    inner = Counted(w)
    x = Variable(np.array([1.0, -1.0]))
    y = checkpoint(lambda a: checkpoint(inner, a, 0.0), x)
    assert inner.calls == 1
    F.sum(y).backward()
    # the outer recomputation runs the inner forward again, the inner backward once more
    assert inner.calls == 3


def test_intermediate_arrays_are_not_kept() -> None:
    kept: list[weakref.ref[np.ndarray]] = []

    def block(a: Variable) -> Variable:
        for _ in range(5):
            a = F.tanh(a * 1.5)
            kept.append(weakref.ref(a.array))
        return a * 2

    x = Variable(np.linspace(-1, 1, 1000))
    y = block(x)
    gc.collect()
    assert all(r() is not None for r in kept)  # without checkpoint, tanh keeps its outputs
    del y
    kept.clear()
    y = checkpoint(block, x)
    gc.collect()
    assert len(kept) == 5
    assert all(r() is None for r in kept)
    F.sum(y).backward()
    recomputed = kept[5:]
    gc.collect()
    assert len(recomputed) == 5
    assert all(r() is None for r in recomputed)


class CountedNode(agnograd.FunctionNode):
    """``2 x`` whose forward counts its calls."""

    calls = 0

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        CountedNode.calls += 1
        return (inputs[0] * 2,)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (grad_outputs[0] * 2,)


def test_the_block_runs_once_forward_and_once_in_backward() -> None:
    CountedNode.calls = 0
    x = Variable(np.array([1.0, 2.0]))
    y = checkpoint(lambda a: CountedNode().apply((a,))[0] + 1, x)
    assert CountedNode.calls == 1
    F.sum(y).backward()
    assert CountedNode.calls == 2
    np.testing.assert_allclose(x.grad, [2.0, 2.0])


def test_outer_backward_with_clear_buffer() -> None:
    x = Variable(np.array([1.0, 2.0]))
    F.sum(checkpoint(F.exp, x) * 2).backward(clear_buffer=True)
    np.testing.assert_allclose(x.grad, 2 * np.exp(x.array))


# -- errors ---------------------------------------------------------------------------


def test_f_must_be_callable() -> None:
    x = Variable(np.ones(2))
    with pytest.raises(TypeError, match=r"checkpoint\(f, \*args\): f must be callable"):
        checkpoint(F.exp(x), x)  # type: ignore[arg-type]


@pytest.mark.parametrize("returned", [np.ones(2), (), "text", None])
def test_f_must_return_variables(returned: Any) -> None:
    x = Variable(np.ones(2))
    with pytest.raises(TypeError, match=r"checkpoint: <lambda> returned .* Variable"):
        checkpoint(lambda a: returned, x)


def test_recomputation_with_other_shapes_is_refused() -> None:
    sizes = iter([2, 3])
    x = Variable(np.ones(4))
    y = checkpoint(lambda a: a[: next(sizes)] * 2, x)
    with pytest.raises(RuntimeError, match=r"Checkpoint\(<lambda>\): recomputing .* same thing"):
        F.sum(y).backward()


def test_recomputation_reading_another_variable_is_refused() -> None:
    params = [Variable(np.array([2.0]))]
    x = Variable(np.array([1.0]))
    y = checkpoint(lambda a: a * params[0], x)
    params[0] = Variable(np.array([3.0]))  # the block now reads another Variable
    with pytest.raises(RuntimeError, match=r"read a Variable \(\(1\), float64\) that the forward"):
        y.backward()


def test_parameter_given_a_new_array_before_backward_is_refused() -> None:
    w = Variable(np.array([2.0]))
    x = Variable(np.array([1.0]))
    y = checkpoint(lambda a: a * w, x)
    w.array = np.array([5.0])  # an update before backward
    with pytest.raises(RuntimeError, match=r"was given a new array between forward and backward"):
        y.backward()


def test_input_written_in_place_before_backward_is_refused() -> None:
    x = Variable(np.array([1.0, 2.0]))
    y = checkpoint(lambda a: a * a, x)
    with agnograd.no_backprop_mode():  # an update in place: it bumps x's memory version
        x[0] = 5.0
    with pytest.raises(RuntimeError, match=r"Checkpoint\(<lambda>\): saved input 0 was overwr"):
        F.sum(y).backward()


def test_define_then_run_is_refused() -> None:
    x = Variable(np.ones(2))
    refused = pytest.raises(RuntimeError, match=r"checkpoint: not available with auto_forward off")
    with agnograd.auto_forward(False), refused:
        checkpoint(F.exp, x)


# -- arrays read through closures: unchanged between forward and backward --------------

CHANGED = r"Checkpoint\(block\): .* that block reads was (written in place|given a new array)"


def _write(c: Variable, v: Variable, how: str) -> None:
    """Write into the no-grad Variable ``c`` as ``how`` says."""
    if how == "setitem":
        c[...] = 5.0
    elif how == "setitem_variable":
        c[0] = v[0]  # a value that requires a gradient: c gets a creator
    elif how == "view":
        c[0:1][0] = 5.0  # through a view of c's memory
    else:
        with agnograd.no_backprop_mode():  # an update
            c[1] = -1.0


@pytest.mark.parametrize("how", ["setitem", "setitem_variable", "view", "no_backprop"])
def test_a_closed_over_constant_written_before_backward_is_refused(backend: Any, how: str) -> None:
    # Without checkpoint the Mul that saved c raises; recomputing with c's new values
    # instead would give a silently wrong gradient.
    dtype = _dtype(backend)
    c = backend.variable([1.0, 2.0], dtype, requires_grad=False)
    v = backend.variable([7.0, 8.0], dtype)
    x = backend.variable([3.0, 4.0], dtype)

    def block(a: Variable) -> Variable:
        return F.tanh(a) * c

    y = checkpoint(block, x)
    _write(c, v, how)
    if backend.name == "jax" and how == "view":
        # A write into a JAX view makes a new array: c is untouched, the gradient right.
        F.sum(y).backward()
        _close(backend, x.grad, (1 - np.tanh([3.0, 4.0]) ** 2) * [1.0, 2.0])
        return
    with pytest.raises(RuntimeError, match=CHANGED):
        F.sum(y).backward()


def test_a_closed_over_constant_written_before_double_backward_is_refused(backend: Any) -> None:
    dtype = _dtype(backend)
    c = backend.variable([1.0, 2.0], dtype, requires_grad=False)
    x = backend.variable([3.0, 4.0], dtype)

    def block(a: Variable) -> Variable:
        return a * a * c

    y = checkpoint(block, x)
    c[...] = 5.0
    with pytest.raises(RuntimeError, match=CHANGED):
        agnograd.grad([F.sum(y)], [x], enable_double_backprop=True)


def test_a_closed_over_constant_read_only_by_constant_operations(backend: Any) -> None:
    # c is read by an operation that needs no gradient (c * 2), whose result only then
    # meets the input: the write into c's memory is seen all the same.
    if backend.name == "jax":
        pytest.skip("JAX's write makes a new array, which that operation never sees")
    dtype = _dtype(backend)
    c = backend.variable([1.0, 2.0], dtype, requires_grad=False)
    x = backend.variable([3.0, 4.0], dtype)

    def block(a: Variable) -> Variable:
        return a * F.exp(c * 2)

    y = checkpoint(block, x)
    c[...] = 5.0
    with pytest.raises(RuntimeError, match=CHANGED):
        F.sum(y).backward()


@pytest.mark.parametrize("how", ["raw", "d"])
def test_a_closed_over_tensor_written_behind_agnograds_back_is_refused(how: str) -> None:
    # PyTorch counts every write itself: writes through the tensor (or Variable.d)
    # that agnograd never sees are caught, as they are without checkpoint.
    torch = pytest.importorskip("torch")
    raw = torch.tensor([1.0, 2.0], dtype=torch.float64)
    c = Variable(raw, requires_grad=False)
    x = Variable(torch.tensor([3.0, 4.0], dtype=torch.float64))

    def block(a: Variable) -> Variable:
        return a * (c if how == "d" else raw)

    y = checkpoint(block, x)
    if how == "d":
        c.d[...] = 5.0
    else:
        raw[0] = 5.0
    with pytest.raises(RuntimeError, match=r"Checkpoint\(block\): .* written in place"):
        F.sum(y).backward()


def test_a_closed_over_constant_given_a_new_array_is_refused(backend: Any) -> None:
    dtype = _dtype(backend)
    c = backend.variable([1.0, 2.0], dtype, requires_grad=False, name="c")
    x = backend.variable([3.0, 4.0], dtype)

    def block(a: Variable) -> Variable:
        return a * c

    y = checkpoint(block, x)
    c.array = c.array + 1.0  # gives c a new array (c += 1.0 would bind a new Variable)
    with pytest.raises(RuntimeError, match=r"Variable 'c' .* that block reads was given a new"):
        F.sum(y).backward()


def test_writing_after_backward_is_fine(backend: Any) -> None:
    dtype = _dtype(backend)
    c = backend.variable([1.0, 2.0], dtype, requires_grad=False)
    x = backend.variable([3.0, 4.0], dtype)

    def block(a: Variable) -> Variable:
        return a * a * c

    F.sum(checkpoint(block, x)).backward()
    _close(backend, x.grad, [6.0, 16.0])
    c[...] = 5.0
    x.cleargrad()
    F.sum(checkpoint(block, x)).backward()
    _close(backend, x.grad, [30.0, 40.0])


def test_a_closure_reading_unchanged_arrays_is_exact(backend: Any) -> None:
    # A constant Variable and a raw array of the library, both closed over, one of them
    # read through a view; a write into an unrelated buffer changes nothing.
    dtype = _dtype(backend)
    rng = np.random.default_rng(3)
    c = backend.variable(rng.uniform(-1, 1, (3, 3)), dtype, requires_grad=False)
    raw = backend.asarray(rng.uniform(-1, 1, (3,)), dtype)
    other = backend.variable([1.0, 2.0], dtype, requires_grad=False)
    w = backend.variable(rng.uniform(-1, 1, (3,)), dtype)
    x = backend.variable(rng.uniform(-1, 1, (2, 3)), dtype)

    def block(a: Variable) -> Variable:
        return F.tanh(F.matmul(a, c[0:3]) * w + raw) * c[0]

    want = _grads([F.sum(block(x) ** 2)], [x, w], double=False)
    y = checkpoint(block, x)
    other[...] = 9.0
    got = _grads([F.sum(y**2)], [x, w], double=False)
    for g, r in zip(got, want, strict=True):
        backend.assert_close(g, backend.to_numpy(r), rtol=0, atol=0)


def test_writing_into_the_blocks_own_output_before_backward() -> None:
    # The recomputation makes its outputs anew: a write into one the block also read
    # (h, read by h * h) does not change the gradient, which is that of the block.
    x = Variable(np.array([1.0, 2.0]))

    def block(a: Variable) -> tuple[Variable, Variable]:
        h = F.exp(a)
        return h, h * h

    h, hh = checkpoint(block, x)
    with agnograd.no_backprop_mode():
        h[...] = 0.0
    F.sum(hh).backward()
    np.testing.assert_allclose(x.grad, 2 * np.exp(2 * x.array))


# -- names read through closures: rebound between forward and backward ----------------

REBOUND = (
    r"Checkpoint\(block\): recomputing block in backward, Mul read another array .* a name "
    r"that block reads through a closure now refers to another array or Variable .* pass it "
    r"to checkpoint\(\) as an argument, or rebind it after backward"
)


@pytest.mark.parametrize("how", ["rebind", "augmented", "raw", "list"])
def test_a_closed_over_name_rebound_before_backward_is_refused(backend: Any, how: str) -> None:
    # Without checkpoint the graph keeps the old values (the gradient of x is c); the
    # recomputation would read what the name holds now (c + 1). On JAX, where every
    # write is a rebinding, the same.
    dtype = _dtype(backend)
    c: Any = backend.variable([1.0, 2.0], dtype, requires_grad=False)
    if how == "raw":
        c = backend.asarray([1.0, 2.0], dtype)
    held = [c]
    x = backend.variable([3.0, 4.0], dtype)

    def block(a: Variable) -> Variable:
        return a * (held[0] if how == "list" else c)

    y = checkpoint(block, x)
    if how == "augmented":
        c += 1.0  # binds a new Variable: no longer an in-place write
    elif how == "list":
        held[0] = held[0] + 1.0
    else:
        c = c + 1.0
    with pytest.raises(RuntimeError, match=REBOUND):
        F.sum(y).backward()


def test_a_name_rebound_before_double_backward_is_refused(backend: Any) -> None:
    dtype = _dtype(backend)
    held = [backend.variable([1.0, 2.0], dtype, requires_grad=False)]
    x = backend.variable([3.0, 4.0], dtype)

    def block(a: Variable) -> Variable:
        return a * a * held[0]

    y = checkpoint(block, x)
    held[0] = held[0] + 1.0
    with pytest.raises(RuntimeError, match=REBOUND):
        agnograd.grad([F.sum(y)], [x], enable_double_backprop=True)
    # Rebound after the first-order gradient: the second-order one recomputes again.
    held[0] = held[0] - 1.0
    y = checkpoint(block, x)
    (gx,) = agnograd.grad([F.sum(y)], [x], enable_double_backprop=True)
    _close(backend, gx, [6.0, 16.0])
    held[0] = held[0] + 1.0
    with pytest.raises(RuntimeError, match=REBOUND):  # the gradient's block recomputes block
        agnograd.grad([F.sum(gx)], [x])


def test_a_name_rebound_inside_a_nested_checkpoint_is_refused() -> None:
    held = [Variable(np.array([1.0, 2.0]), requires_grad=False)]
    x = Variable(np.array([3.0, 4.0]))

    def block(a: Variable) -> Variable:
        return a * a * held[0]

    def outer(a: Variable) -> Variable:
        return checkpoint(block, a) * 2

    y = checkpoint(outer, x)
    held[0] = held[0] + 1.0
    # The outer block's recomputation reads the new array first (through block).
    with pytest.raises(RuntimeError, match=r"Checkpoint\(outer\): .* closure now refers"):
        F.sum(y).backward()
    held[0] = held[0] - 1.0
    y = checkpoint(outer, x)
    (gx,) = agnograd.grad([F.sum(y)], [x], enable_double_backprop=True)
    np.testing.assert_allclose(gx.array, [12.0, 32.0])
    held[0] = held[0] + 1.0
    with pytest.raises(RuntimeError, match=r"Checkpoint\(outer\): .* closure now refers"):
        agnograd.grad([F.sum(gx)], [x])


def test_swapped_names_are_refused() -> None:
    # Each array the block reads is still alive and still read, but in another place.
    held = [Variable(np.array([1.0, 2.0]), requires_grad=False) for _ in range(2)]
    held[1].array = held[1].array * 3
    x = Variable(np.array([3.0, 4.0]))

    def block(a: Variable) -> Variable:
        return a * held[0] + held[1]

    y = checkpoint(block, x)
    held.reverse()
    with pytest.raises(RuntimeError, match=REBOUND):
        F.sum(y).backward()


def test_the_error_names_the_variable_first_read() -> None:
    c = Variable(np.array([1.0, 2.0]), requires_grad=False, name="c")
    x = Variable(np.array([3.0, 4.0]))

    def block(a: Variable) -> Variable:
        return a * c

    y = checkpoint(block, x)
    old, c = c, c + 1.0  # the old Variable alive
    with pytest.raises(RuntimeError, match=r"where the forward pass read the Variable 'c' \("):
        F.sum(y).backward()
    del old
    c = Variable(np.array([1.0, 2.0]), requires_grad=False, name="c")
    y = checkpoint(block, x)
    c = c + 1.0  # the old Variable gone: its name was kept
    with pytest.raises(
        RuntimeError, match=r"read the array of the Variable 'c' \(\(2\), float64\)"
    ):
        F.sum(y).backward()


class Stores:
    """A block that makes constants inside itself, keeps one of its intermediate
    results outside itself, and returns a mask it also reads."""

    __name__ = "block"

    def __init__(self, c: Variable, raw: Any, w: Variable) -> None:
        self.c, self.raw, self.w = c, raw, w
        self.h: Variable | None = None

    def __call__(self, a: Variable) -> tuple[Variable, Variable]:
        one = Variable(a.xp.ones_like(a.array), requires_grad=False)
        self.h = F.tanh(a * self.w)  # recorded: the recomputation makes it anew
        mask = a > 0
        return F.exp(self.h * self.c + self.raw) * one * F.astype(mask, a.dtype), mask


def test_unchanged_names_stay_exact(backend: Any) -> None:
    # Constants made inside the block, a result kept outside it, a mask returned and
    # read, a nested checkpoint whose node is applied only where its inputs need a
    # gradient (here not, for w alone), at first and second order: the gradients are
    # those of the block itself, nothing raises.
    dtype = _dtype(backend)
    rng = np.random.default_rng(4)
    c = backend.variable(rng.uniform(-1, 1, (3,)), dtype, requires_grad=False)
    raw = backend.asarray(rng.uniform(-1, 1, (3,)), dtype)
    w = backend.variable(rng.uniform(-1, 1, (3,)), dtype)
    x = backend.variable(rng.uniform(-1, 1, (2, 3)), dtype)
    stores = Stores(c, raw, w)

    def block(a: Variable) -> Variable:
        return checkpoint(stores, a)[0] * c + checkpoint(lambda b: b * raw, a)

    for wrt in ([x, w], [w]):
        for run in (block, lambda a: checkpoint(block, a)):
            got = _grads([F.sum(run(x) ** 2)], wrt, double=True)
            got2 = _grads([sum((F.sum(g * g) for g in got[1:]), F.sum(got[0]))], wrt, False)
            if run is block:
                want, want2 = got, got2
                continue
            for g, r in zip([*got, *got2], [*want, *want2], strict=True):
                _close(backend, g, r)
