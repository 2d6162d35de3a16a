"""What an adversarial user found: misuse refused with the node named, no silent
wrong gradient, no hang (issue 15)."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable

# -- integer and boolean data ------------------------------------------------------


@pytest.mark.parametrize("data", [np.arange(1, 4), np.array([True, False])])
def test_integer_and_boolean_variables_require_no_gradient_by_default(data):
    x = Variable(data)
    assert x.requires_grad is False
    y = F.sum(0.5 * x)
    assert y.requires_grad is False
    y.backward()
    assert x.grad is None  # it used to be [0 0 0]: 0.5 cast to integers


def test_asking_an_integer_variable_for_a_gradient_is_an_error(backend):
    data = backend.asarray([1, 2, 3], dtype="int32")
    with pytest.raises(TypeError, match="requires_grad=True needs floating-point or complex"):
        Variable(data, requires_grad=True)
    x = Variable(data)
    with pytest.raises(TypeError, match="needs floating-point or complex data, got int"):
        x.requires_grad = True
    with pytest.raises(TypeError, match="needs floating-point"):
        x.need_grad = True
    assert x.requires_grad is False


def test_floating_and_uninitialised_variables_still_require_a_gradient(backend):
    assert Variable(backend.asarray([1.0])).requires_grad is True
    assert Variable().requires_grad is True
    assert Variable(backend.asarray([1.0]), requires_grad=False).requires_grad is False


# -- threads -----------------------------------------------------------------------


def test_backward_from_eight_threads_into_shared_leaves_loses_no_update():
    x = Variable(np.zeros(3))
    w = Variable(np.ones(3))
    passes = 1000
    start = threading.Barrier(8)

    def work():
        start.wait()
        for _ in range(passes):
            F.sum(x * w + w).backward()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(x.grad, np.full(3, 8.0 * passes))
    np.testing.assert_array_equal(w.grad, np.full(3, 8.0 * passes))  # x + 1, x = 0


def _paused_in_double_backprop(y: Variable, label: str) -> tuple[threading.Thread, Any]:
    """A thread running ``y.backward(enable_double_backprop=True)``, paused inside the
    backward of the node ``label`` (its hook waits): the node runs with Variables
    there. Returns the thread, and the event that lets it go on."""
    inside, resume = threading.Event(), threading.Event()

    def pause(f: Any) -> None:
        if f.label == label:
            inside.set()
            assert resume.wait(30)

    thread = threading.Thread(
        target=lambda: y.backward(enable_double_backprop=True, function_pre_hook=pause)
    )
    thread.start()
    assert inside.wait(30)
    return thread, resume


def _graph(backend: Any) -> tuple[Variable, Variable]:
    x = backend.variable([-1.0, -0.5, 0.0, 0.5, 1.0])
    return x, F.sum(F.tanh(F.sin(x) * 1.5) * x)


def test_a_plain_backward_beside_a_double_backprop_of_the_same_graph(backend):
    # The node that a double backprop runs with Variables in one thread runs with
    # arrays in another: taking Variables there raised TypeError.
    x0, y0 = _graph(backend)
    (expected,) = agnograd.grad([y0], [x0])
    x, y = _graph(backend)
    thread, resume = _paused_in_double_backprop(y, "Sin")
    try:
        (got,) = agnograd.grad([y], [x])
    finally:
        resume.set()
        thread.join()
    expected = backend.to_numpy(expected)
    backend.assert_close(got, expected)
    backend.assert_close(x.grad, expected)


def test_two_double_backprops_of_the_same_graph_keep_their_second_order(backend):
    # One finishing its double backprop must not end the other's Variables: its
    # gradient would then lose the node's dependence on what it kept, silently.
    x0, y0 = _graph(backend)
    y0.backward(enable_double_backprop=True)
    (want,) = agnograd.grad([F.sum(x0.grad_var * x0.grad_var)], [x0])
    x, y = _graph(backend)
    thread, resume = _paused_in_double_backprop(y, "Tanh")
    try:
        agnograd.grad([y], [x], enable_double_backprop=True)
    finally:
        resume.set()
        thread.join()
    (got,) = agnograd.grad([F.sum(x.grad_var * x.grad_var)], [x])
    backend.assert_close(got, backend.to_numpy(want))


# -- nodes used the wrong way --------------------------------------------------------


class Twice(FunctionNode):
    def forward(self, inputs):
        return (inputs[0] * 2.0,)

    def backward(self, indexes, grad_outputs):
        return (grad_outputs[0] * 2.0,)


def test_a_forward_that_returns_a_bare_array_is_refused():
    class Bare(Twice):
        def forward(self, inputs):
            return inputs[0] * 2.0  # a (1, 3) array would have become a (3,) output

    with pytest.raises(TypeError, match=r"Bare\.forward must return a tuple of arrays"):
        Bare().apply((Variable(np.ones((1, 3))),))


def test_a_forward_that_returns_a_variable_or_a_scalar_is_refused():
    class ReturnsVariable(Twice):
        def forward(self, inputs):
            return (Variable(inputs[0]),)

    class ReturnsFloat(Twice):
        def forward(self, inputs):
            return (2.0,)

    x = Variable(np.ones(2))
    with pytest.raises(TypeError, match=r"ReturnsVariable\.forward returned Variable as output 0"):
        ReturnsVariable().apply((x,))
    with pytest.raises(TypeError, match=r"ReturnsFloat\.forward returned float as output 0"):
        ReturnsFloat().apply((x,))


def test_a_forward_may_return_a_list():
    class ReturnsList(Twice):
        def forward(self, inputs):
            return [inputs[0] * 2.0]

    x = Variable(np.ones(2))
    (y,) = ReturnsList().apply((x,))
    F.sum(y).backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])


@pytest.mark.parametrize("given", ["variable", "array"])
def test_apply_of_a_lone_input_is_refused(given):
    x = Variable(np.ones((2, 3)))
    with pytest.raises(
        TypeError, match=r"Twice.apply\(inputs\): .* got a single .*apply\(\(x,\)\)"
    ):
        Twice().apply(x if given == "variable" else x.array)


def test_a_node_applied_twice_is_refused():
    x = Variable(np.ones(3))
    node = Twice()
    node.apply((x,))
    with pytest.raises(RuntimeError, match=r"Twice\.apply: this node is already part of a graph"):
        node.apply((x,))


def test_a_node_may_run_again_where_no_graph_is_recorded():
    node = Twice()
    with agnograd.no_backprop_mode():
        node.apply((Variable(np.ones(2)),))
        (y,) = node.apply((Variable(np.ones(2)),))
    np.testing.assert_array_equal(y.array, [2.0, 2.0])


# -- iteration -----------------------------------------------------------------------


def test_iteration_stops_after_the_first_axis_on_every_backend(backend):
    x = Variable(backend.asarray([1.0, 2.0, 3.0]))
    rows = list(x)  # JAX clamps out-of-range indices: without __iter__ this never ended
    assert len(rows) == 3
    F.sum(rows[0] * 2.0 + rows[2]).backward()
    backend.assert_close(x.grad, [2.0, 0.0, 1.0])
    assert 2.0 in x
    assert 5.0 not in x


def test_a_0d_variable_does_not_iterate():
    with pytest.raises(TypeError, match="iteration over a 0-d Variable"):
        list(Variable(np.array(1.0)))


# -- arrays of other libraries and of their own autograd ---------------------------------


def test_a_torch_tensor_that_requires_grad_is_refused():
    torch = pytest.importorskip("torch")
    t = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"Variable\(data\): the torch array requires a gradient"):
        Variable(t)
    x = Variable(torch.ones(2))
    with pytest.raises(TypeError, match=r"Mul: an input: the torch array requires a gradient"):
        x * t
    with pytest.raises(TypeError, match=r"Variable.array: the torch array requires"):
        x.array = t
    y = Variable(t.detach()) * 3.0  # what the message says to do
    F.sum(y).backward()
    assert y.creator is not None
    assert t.grad is None


def test_a_numpy_scalar_is_a_scalar_on_every_library(backend):
    x = backend.variable([1.0, 2.0])
    eps = np.finfo(np.float32).eps  # what SciPy's code passes around: a NumPy scalar

    def f(x):
        return F.sum(x * np.float64(2.0) + eps - np.float32(1.0) / (x + np.float64(1.0)))

    if backend.name == "array_api_strict":  # which refuses anything but Python scalars
        with pytest.raises(TypeError) as info:
            f(x)
        assert "in agnograd MulConstant.forward with inputs (2), float32" in info.value.__notes__
        return
    f(x).backward()  # torch and JAX took it for an array of NumPy's: "mix two libraries"
    backend.assert_close(x.grad, 2.0 + 1.0 / (np.array([1.0, 2.0]) + 1.0) ** 2)
    assert x.grad.dtype == x.dtype


def test_a_numpy_scalar_is_a_scalar_on_dask():
    da = pytest.importorskip("dask.array")
    x = Variable(da.from_array(np.array([1.0, 2.0])))
    F.sum(x * np.float64(3.0)).backward()
    np.testing.assert_array_equal(x.grad.compute(), [3.0, 3.0])


def test_dask_arrays_of_unknown_length_backpropagate():
    da = pytest.importorskip("dask.array")
    x = Variable(da.from_array(np.arange(6.0).reshape(2, 3), chunks=3))
    masked = x[x > 2.0]  # shape (nan,): Dask knows it only once computed
    F.sum(masked * masked).backward()
    np.testing.assert_array_equal(x.grad.compute(), [[0.0, 0.0, 0.0], [6.0, 8.0, 10.0]])


# -- what backward returns ---------------------------------------------------------


class Returns(FunctionNode):
    def __init__(self, gradient):
        self.gradient = gradient

    def forward(self, inputs):
        return (inputs[0] * 2.0,)

    def backward(self, indexes, grad_outputs):
        return self.gradient


@pytest.mark.parametrize(
    ("gradient", "message"),
    [
        (None, "backward of Returns returned NoneType; it must return a tuple"),
        ((g for g in ()), "backward of Returns returned generator; it must return a tuple"),
        ((1.5,), "backward of Returns returned float as the gradient of input 0"),
        (("ones",), "backward of Returns returned str as the gradient of input 0"),
    ],
)
def test_a_backward_that_returns_no_gradients_is_refused_with_the_node_named(gradient, message):
    x = Variable(np.ones(3))
    (y,) = Returns(gradient).apply((x,))
    with pytest.raises(TypeError, match=message):
        F.sum(y).backward()


def test_an_error_inside_backward_carries_the_node_and_its_gradients():
    class Broken(Twice):
        def backward(self, indexes, grad_outputs):
            raise ValueError("broken rule")

    (y,) = Broken().apply((Variable(np.ones((2, 3), dtype=np.float32)),))
    with pytest.raises(ValueError, match="broken rule") as info:
        F.sum(y).backward()
    assert "in agnograd Broken.backward with gradients ((2, 3), float32)" in info.value.__notes__


# -- warnings ------------------------------------------------------------------------


def test_rules_raise_no_floating_point_warnings():
    x = Variable(np.array([0.0, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a user's suite run with -W error
        F.sum(F.sqrt(x)).backward()
        F.sum(F.acos(x)).backward()  # -1 / sqrt(1 - x**2): a division by zero at 1
    assert np.isinf(x.grad[0])
    assert np.isneginf(x.grad[1])


def test_the_warnings_of_a_users_forward_are_untouched():
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        F.log(Variable(np.array([0.0])))


def test_grad_inputs_of_the_wrong_kind_are_refused_with_their_index():
    x = Variable(np.ones(2))
    y = x * 2.0
    with pytest.raises(TypeError, match=r"grad: grad_inputs\[0\] must be an array"):
        agnograd.grad([y], [x], [np.ones(2)], grad_inputs=[[1.0, 1.0]])
    with pytest.raises(ValueError, match=r"grad: grad_inputs\[0\] for Variable .* shape"):
        agnograd.grad([y], [x], [np.ones(2)], grad_inputs=[np.ones(3)])
    (gx,) = agnograd.grad([y], [x], [np.ones(2)], grad_inputs=[np.ones(2)])
    np.testing.assert_array_equal(gx.array, [3.0, 3.0])


def test_numpy_scalars_in_comparisons_and_writes_on_torch():
    torch = pytest.importorskip("torch")
    x = Variable(torch.tensor([1.0, -2.0], dtype=torch.float64))
    mask = x > np.float64(0.0)  # took the scalar for a NumPy array: "mix two libraries"
    assert mask.array.tolist() == [True, False]
    h = x * 1.0
    h[0] = np.float64(5.0)
    F.sum(h * h).backward()
    assert x.grad.tolist() == [0.0, -4.0]
