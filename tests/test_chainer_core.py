"""Chainer's core API around FunctionNode: forward_cpu/forward_gpu, check_type_forward
and agnograd.type_check, backward_accumulate, the old-style Function, and grad()'s and
backward()'s seeding details (grad_inputs that flow on, seeds that backward consumes)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Function, FunctionNode, Variable, type_check

# -- forward_cpu / forward_gpu ------------------------------------------------------------


class Split(FunctionNode):
    """Chainer's split forward: records which one ran."""

    def forward_cpu(self, inputs):
        self.ran = "cpu"
        return (inputs[0] * 2,)

    def forward_gpu(self, inputs):
        self.ran = "gpu"
        return (inputs[0] * 2,)

    def backward(self, indexes, grad_outputs):
        return (grad_outputs[0] * 2,)


def test_forward_dispatches_to_forward_cpu_in_host_memory(backend):
    x = backend.variable([1.0, 2.0])
    node = Split()
    (y,) = node.apply((x,))
    assert node.ran == "cpu"
    backend.assert_close(y, [2.0, 4.0])
    y.grad = backend.asarray([1.0, 1.0])
    y.backward()
    backend.assert_close(x.grad, [2.0, 2.0])


def test_forward_gpu_missing_names_the_fix():
    class CpuOnly(FunctionNode):
        def forward_cpu(self, inputs):
            return inputs

    with pytest.raises(NotImplementedError, match="forward_gpu"):
        CpuOnly().forward_gpu((np.ones(2),))
    with pytest.raises(NotImplementedError, match=r"forward\(inputs\)"):
        FunctionNode().apply((np.ones(2),))


@pytest.mark.gpu
def test_forward_dispatches_to_forward_gpu_on_an_accelerator():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    node = Split()
    node.apply((Variable(torch.ones(2, device="cuda")),))
    assert node.ran == "gpu"


# -- check_type_forward and agnograd.type_check ----------------------------------------------


class Checked(FunctionNode):
    def check_type_forward(self, in_types):
        type_check.expect(in_types.size() == 1)
        (x_type,) = in_types
        type_check.expect(x_type.dtype == np.float32, x_type.ndim >= 2)

    def forward(self, inputs):
        return (inputs[0] * 1,)


def test_check_type_forward_passes_and_fails_with_chainers_message(backend):
    (y,) = Checked().apply((backend.variable([[1.0, 2.0]]),))
    assert y.shape == (1, 2)
    with pytest.raises(type_check.InvalidType) as info:
        Checked().apply((backend.variable([1.0, 2.0]),))
    assert str(info.value).strip().splitlines() == [
        "Invalid operation is performed in: Checked (Forward)",
        "",
        "Expect: in_types[0].ndim >= 2",
        "Actual: 1 < 2",
    ]


def test_dtypes_are_seen_as_numpys_on_every_backend(backend):
    other = next(name for name in backend.narrow_and_wide() if name != "float32")
    with pytest.raises(type_check.InvalidType, match=f"Actual: {other} != <class 'numpy.float32'>"):
        Checked().apply((backend.variable([[1.0]], dtype=other),))


def test_the_check_is_decided_per_class_and_per_instance():
    assert Checked._checks_types
    assert not Split._checks_types
    calls = []
    node = Split()
    node.check_type_forward = lambda in_types: calls.append(in_types)
    node.apply((np.ones((2, 3), np.float32),))
    ((t,),) = calls
    assert isinstance(calls[0], type_check.LightTypeInfoTuple)
    assert (t.shape, t.dtype) == ((2, 3), np.float32)
    assert not Split()._checks_types  # the class is untouched


def test_forward_called_directly_runs_no_check():
    node = Checked()
    node.forward((np.ones(3),))  # a 1-d float64 input: apply would refuse it


def test_expressions_print_as_written():
    x, y = type_check.Variable(1, "x"), type_check.Variable(2, "y")
    assert str(-(x**x)) == "-x ** x"
    assert str((-x) ** x) == "(-x) ** x"
    assert str(x + (x - y)) == "x + (x - y)"
    assert str(x.shape[1:2, ...]) == "x.shape[1:2, ...]"
    assert str(type_check.prod([x, y])) == "prod([x, y])"
    assert (x * 3 + y).eval() == 5
    with pytest.raises(RuntimeError, match="truth value"):
        bool(x == y)


def test_invalid_type_pickles():
    error = type_check.InvalidType("a", "b")
    again = pickle.loads(pickle.dumps(error))
    assert (again.args, again.expect, again.actual) == (error.args, "a", "b")


def test_argname_names_the_inputs_in_messages():
    class Named(FunctionNode):
        def check_type_forward(self, in_types):
            type_check.argname(in_types, ("x",))
            type_check.expect(in_types[0].ndim == 2)

        def forward(self, inputs):
            return inputs

    with pytest.raises(type_check.InvalidType, match=r"Expect: x\.ndim == 2"):
        Named().apply((np.ones(3),))


# -- backward_accumulate ---------------------------------------------------------------------


class MulAdd(FunctionNode):
    """``a * b + c`` whose backward_accumulate fuses the accumulation (Chainer's test)."""

    seen: list[tuple[int, ...]]

    def forward(self, inputs):
        self.retain_inputs((0, 1))
        a, b, c = inputs
        return (a * b + c,)

    def backward_accumulate(self, indexes, grad_outputs, grad_inputs):
        self.given = grad_inputs
        a, b = self.get_retained_inputs()
        (g,) = grad_outputs
        out = []
        for i, g_in in zip(indexes, grad_inputs, strict=True):
            gx = (g * b, a * g, g)[i]
            out.append(gx if g_in is None else gx + g_in)
        return tuple(out)


def muladd(a, b, c):
    return MulAdd().apply((a, b, c))[0]


@pytest.mark.parametrize("mapping", [(0, 1, 2), (0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 0, 0)])
def test_backward_accumulate_matches_the_plain_expression(backend, mapping):
    values = [[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]]
    ours = [backend.variable(v) for v in values]
    plain = [backend.variable(v) for v in values]
    a, b, c = (ours[i] for i in mapping)
    y = muladd(a, b, c) * 2.0 + a  # a also reaches y by another path
    F.sum(y).backward()
    a, b, c = (plain[i] for i in mapping)
    F.sum((a * b + c) * 2.0 + a).backward()
    for got, want in zip(ours, plain, strict=True):
        if want.grad is None:
            assert got.grad is None
        else:
            backend.assert_close(got.grad, backend.to_numpy(want.grad))


def test_backward_accumulate_is_given_the_gradients_so_far(backend):
    a = backend.variable([1.0, 2.0])
    b = backend.variable([3.0, 4.0])
    c = backend.variable([0.0, 0.0])
    w = backend.variable([10.0, 10.0])
    node = MulAdd()
    (y,) = node.apply((a, b, c))
    # (w * 1) * a ranks above MulAdd: its backward runs first and gives a w.
    F.sum(y + (w * 1.0) * a).backward()
    backend.assert_close(node.given[0], [10.0, 10.0])
    assert node.given[1:] == (None, None)
    backend.assert_close(a.grad, [13.0, 14.0])


def test_backward_accumulate_to_second_order(backend):
    x = backend.variable([1.0, 2.0])
    y = muladd(x, x, x)  # x * x + x
    (gx,) = agnograd.grad([F.sum(y)], [x], enable_double_backprop=True)
    backend.assert_close(gx, [3.0, 5.0])
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    backend.assert_close(ggx, [2.0, 2.0])


def test_backward_of_a_node_with_backward_accumulate_only(backend):
    x = backend.variable([1.0, 2.0])
    node = MulAdd()
    node.apply((x, x, x))
    gxs = node.backward((0, 1), (backend.asarray([1.0, 1.0]),))
    backend.assert_close(gxs[0], [1.0, 2.0])


def test_backward_accumulate_dropping_a_gradient_is_an_error():
    class Drops(FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 2,)

        def backward_accumulate(self, indexes, grad_outputs, grad_inputs):
            return (None,)  # drops grad_inputs[0]

    x = Variable(np.ones(2))
    (y,) = Drops().apply((x,))
    with pytest.raises(ValueError, match="had a gradient from other paths"):
        F.sum(y + x).backward()


def test_default_backward_accumulate_adds(backend):
    x = backend.variable([1.0, 2.0])
    (y,) = Split().apply((x,))
    gxs = Split.backward_accumulate(
        y.creator_node, (0,), (backend.asarray([1.0, 1.0]),), (backend.asarray([5.0, 5.0]),)
    )
    backend.assert_close(gxs[0], [7.0, 7.0])


# -- the old-style Function -----------------------------------------------------------------


class Square(Function):
    def forward(self, inputs):
        self.retain_outputs((0,))
        (x,) = inputs
        return (x * x,)

    def backward(self, inputs, grad_outputs):
        self.got = (inputs, self.output_data)
        (x,), (gy,) = inputs, grad_outputs
        return (2 * x * gy,)


def test_function_forward_and_backward(backend):
    x = backend.variable([1.0, 3.0])
    f = Square()
    y = f(x)
    assert isinstance(y, Variable)
    assert y.creator_node.function is f
    assert y.creator_node.label == "Square"
    assert f.inputs == (x.node,)
    assert f.rank == 0
    F.sum(y).backward()
    backend.assert_close(x.grad, [2.0, 6.0])
    (kept_x,), (kept_y,) = f.got
    backend.assert_close(kept_x, [1.0, 3.0])
    backend.assert_close(kept_y, [1.0, 9.0])


def test_function_of_several_outputs_and_partial_retention(backend):
    class Two(Function):
        def forward(self, inputs):
            self.retain_inputs((1,))
            x, w = inputs
            return x * w, x + w

        def backward(self, inputs, grad_outputs):
            self.inputs_seen = inputs
            _x, w = inputs
            g0, g1 = grad_outputs
            return g0 * w + (0 if g1 is None else g1), None

    x, w = backend.variable([1.0, 2.0]), backend.variable([3.0, 4.0])
    f = Two()
    y0, _y1 = f(x, w)
    F.sum(y0).backward()
    assert f.inputs_seen[0] is None
    backend.assert_close(x.grad, [3.0, 4.0])
    assert w.grad is None


def test_function_gradients_refuse_second_order(backend):
    x = backend.variable([1.0, 2.0])
    (gx,) = agnograd.grad([F.sum(Square()(x))], [x], enable_double_backprop=True)
    backend.assert_close(gx, [2.0, 4.0])
    with pytest.raises(RuntimeError, match="old-style Function Square cannot be differentiated"):
        agnograd.grad([F.sum(gx)], [x])


def test_function_check_type_forward_and_label():
    class Checked1(Function):
        def check_type_forward(self, in_types):
            type_check.expect(in_types[0].ndim == 2)

        def forward(self, inputs):
            return inputs

    with pytest.raises(type_check.InvalidType, match=r"performed in: Checked1 \(Forward\)"):
        Checked1()(np.ones(3))
    assert Function().label == "Function"


def test_function_default_backward_gives_no_gradient():
    class NoGrad(Function):
        def forward(self, inputs):
            return (inputs[0] * 2,)

    x = Variable(np.ones(2))
    F.sum(NoGrad()(x)).backward()
    assert x.grad is None


# -- grad(): grad_inputs flow on, retain_grad keeps the inputs' gradients -------------------


def _chain(backend):
    """Chainer's TestGradV3Compat1: v0 -> x1 = 2 v0 -> x2 = 2 x1 -> y1 = 2 x2 -> y2 = 2 y1."""
    v0 = backend.variable(0.5)
    x1 = v0 + v0
    x2 = (x1 * 1.0) + (x1 * 1.0)
    y1 = (x2 * 1.0) + (x2 * 1.0)
    y2 = (y1 * 1.0) + (y1 * 1.0)
    return v0, x1, x2, y1, y2


@pytest.mark.parametrize("double", [False, True])
def test_grad_inputs_flow_on_to_the_inputs_below(backend, double):
    v0, x1, x2, y1, y2 = _chain(backend)
    seeds = [backend.variable(10.0), backend.variable(1.0)]
    extra = [backend.variable(1000.0), backend.variable(100.0)]
    gx1, gx2 = agnograd.grad([y1, y2], [x1, x2], seeds, extra, enable_double_backprop=double)
    backend.assert_close(gx2, 100.0 + 10 * 2 + 1 * 4)
    backend.assert_close(gx1, 1000.0 + 124 * 2)
    assert v0.grad is None
    assert x1.grad is None


def test_grad_retain_grad_keeps_intermediate_inputs_gradients(backend):
    v0, x1, x2, _y1, y2 = _chain(backend)
    agnograd.grad([y2], [x1, x2], [backend.variable(1.0)], retain_grad=True)
    backend.assert_close(x1.grad, 8.0)
    backend.assert_close(x2.grad, 4.0)
    assert v0.grad is None


# -- backward(): several outputs, seeds consumed --------------------------------------------


def test_backward_consumes_the_seeds_it_takes_from_grad(backend):
    x = backend.variable([1.0, 2.0])
    h = x * 2.0
    y0, y1 = h * 3.0, h * 4.0
    y0.grad = backend.asarray([1.0, 10.0])
    y1.grad = backend.asarray([100.0, 1000.0])
    agnograd.backward([y0, y1])
    backend.assert_close(x.grad, [806.0, 8060.0])
    assert y0.grad is None
    assert y1.grad is None


def test_backward_of_one_output_keeps_its_grad_as_variable_backward_does(backend):
    x = backend.variable([1.0, 2.0])
    y = x * 2.0
    y.grad = backend.asarray([1.0, 1.0])
    y.backward()
    backend.assert_close(y.grad, [1.0, 1.0])
    agnograd.backward([y])
    backend.assert_close(y.grad, [1.0, 1.0])
    backend.assert_close(x.grad, [4.0, 4.0])


def test_retained_nothing_on_purpose_gives_empty_tuples(backend):
    class Nothing(FunctionNode):
        def forward(self, inputs):
            self.retain_inputs(())
            self.retain_outputs(())
            return (inputs[0] * 3,)

        def backward(self, indexes, grad_outputs):
            assert self.get_retained_inputs() == ()
            assert self.get_retained_outputs() == ()
            return (grad_outputs[0] * 3,)

    x = backend.variable([1.0])
    (y,) = Nothing().apply((x,))
    y.backward()
    backend.assert_close(x.grad, [3.0])


def test_creator_of_an_old_style_function_is_the_function_as_in_chainer():
    class Twice(agnograd.Function):
        def forward(self, inputs):
            return (inputs[0] * 2,)

        def backward(self, inputs, grad_outputs):
            return (grad_outputs[0] * 2,)

    f = Twice()
    y = f(agnograd.Variable(np.ones(2)))
    assert y.creator is f
    assert isinstance(y.creator_node, agnograd.FunctionNode)  # the node that runs it
    v = agnograd.Variable(np.ones(2))
    v.creator = f  # Chainer records the Function's node
    assert v.creator is f
    assert v.creator_node is f.node
