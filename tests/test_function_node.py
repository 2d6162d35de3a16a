"""User-defined FunctionNodes: apply, graph links, retained arrays, multiple outputs."""

from __future__ import annotations

import math
import weakref

import array_api_compat
import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable, VariableNode
from agnograd.testing import check_backward, check_double_backward


class Cube(FunctionNode):
    """``x ** 3`` with a hand-written rule; records what backward received."""

    def forward(self, inputs):
        (x,) = inputs
        self.retain_inputs((0,))
        return (x * x * x,)

    def backward(self, target_input_indexes, grad_outputs):
        self.seen = (target_input_indexes, grad_outputs)
        (x,) = self.get_retained_inputs()
        (gy,) = grad_outputs
        return (3.0 * x * x * gy,)


class MulAdd(FunctionNode):
    """``(x * w + b,)``; returns one gradient per input, whatever the targets."""

    def forward(self, inputs):
        x, w, b = inputs
        self.retain_inputs((0, 1))
        return (x * w + b,)

    def backward(self, target_input_indexes, grad_outputs):
        self.targets = target_input_indexes
        x, w = self.get_retained_inputs()
        (gy,) = grad_outputs
        return (gy * w, gy * x, gy)


class SplitSign(FunctionNode):
    """Two outputs, ``(x * 2, x * 3)``; records the output gradients it is given."""

    def forward(self, inputs):
        (x,) = inputs
        return (x * 2.0, x * 3.0)

    def backward(self, target_input_indexes, grad_outputs):
        self.grad_outputs = grad_outputs
        g0, g1 = grad_outputs
        gx = None
        if g0 is not None:
            gx = g0 * 2.0
        if g1 is not None:
            gx = g1 * 3.0 if gx is None else gx + g1 * 3.0
        return (gx,)


class Exp(FunctionNode):
    """Retains its output and reads it back in backward."""

    def forward(self, inputs):
        self.retain_outputs((0,))
        return (self.xp.exp(inputs[0]),)

    def backward(self, target_input_indexes, grad_outputs):
        (y,) = self.get_retained_outputs()
        self.retained = y
        return (grad_outputs[0] * y,)


def test_custom_node_forward_and_backward(backend):
    a = np.array([1.0, -2.0], dtype=np.float32)
    x = Variable(backend.asarray(a))
    node = Cube()
    outputs = node.apply((x,))
    assert isinstance(outputs, tuple)
    assert len(outputs) == 1
    (y,) = outputs
    assert isinstance(y, Variable)
    backend.assert_close(y, a**3)
    assert y.creator is node
    assert node.xp is array_api_compat.array_namespace(x.array)
    F.sum(y).backward()
    backend.assert_close(x.grad, 3 * a**2)
    assert node.seen[0] == (0,)


def test_apply_accepts_a_list_and_raw_arrays(backend):
    (y,) = Cube().apply([backend.asarray([2.0])])
    backend.assert_close(y, [8.0])
    assert y.requires_grad is False
    assert y.creator is None


def test_apply_rejects_python_scalars(backend):
    with pytest.raises(TypeError, match="array"):
        MulAdd().apply((Variable(backend.asarray([1.0])), 2.0, backend.asarray([1.0])))


def test_forward_errors_name_the_node(backend):
    class Broken(FunctionNode):
        def forward(self, inputs):
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom") as info:
        Broken().apply((Variable(backend.asarray([1.0, 2.0])),))
    assert any("Broken" in note for note in getattr(info.value, "__notes__", []))


def test_rank_is_max_input_rank_plus_one(backend):
    x = Variable(backend.asarray([1.0]))
    deep = x * 1.0 * 1.0 * 1.0
    assert deep.rank == 3
    w = Variable(backend.asarray([2.0]))
    node = MulAdd()
    (y,) = node.apply((w, deep, backend.asarray([0.0])))
    assert node.rank == 3
    assert y.rank == 4


def test_inputs_and_outputs(backend):
    x = Variable(backend.asarray([1.0]))
    w = Variable(backend.asarray([2.0]))
    b = backend.asarray([3.0])
    node = MulAdd()
    (y,) = node.apply((x, w, b))
    assert isinstance(node.inputs, tuple)
    assert node.inputs[0] is x.node
    assert node.inputs[1] is w.node
    assert isinstance(node.inputs[2], VariableNode)
    assert node.inputs[2].requires_grad is False
    assert len(node.outputs) == 1
    assert isinstance(node.outputs[0], weakref.ref)
    assert node.outputs[0]() is y.node


def test_label_defaults_to_class_name_and_can_be_overridden(backend):
    assert Cube().label == "Cube"

    class Named(Cube):
        @property
        def label(self):
            return "MyCube"

    x = Variable(backend.asarray([1.0]))
    (y,) = Named().apply((x,))
    assert y.creator.label == "MyCube"
    assert "MyCube" in repr(y.creator)


def test_no_graph_when_no_input_requires_grad(backend):
    x = Variable(backend.asarray([1.0]), requires_grad=False)
    node = Cube()
    (y,) = node.apply((x,))
    assert y.creator is None
    assert y.requires_grad is False
    assert node.inputs is None


def test_no_graph_in_no_backprop_mode(backend):
    x = Variable(backend.asarray([2.0]))
    node = Cube()
    with agnograd.no_backprop_mode():
        (y,) = node.apply((x,))
    backend.assert_close(y, [8.0])
    assert y.creator is None
    assert node.inputs is None
    y.backward()
    assert x.grad is None


def test_retained_inputs_are_the_input_arrays(backend):
    x = Variable(backend.asarray([1.0]))
    w = Variable(backend.asarray([2.0]))
    b = backend.asarray([3.0])
    node = MulAdd()
    node.apply((x, w, b))
    # Outside backward, the retained values may come as arrays or as Variables.
    saved = [agnograd.as_array(v) for v in node.get_retained_inputs()]
    assert len(saved) == 2
    assert saved[0] is x.array
    assert saved[1] is w.array


def test_what_a_node_keeps_may_be_declared_on_its_class(backend):
    class Slotted(FunctionNode):
        __slots__ = ()  # FunctionNode has an instance dict: retain_inputs still works

        def forward(self, inputs):
            self.retain_inputs((0,))
            return (inputs[0] * inputs[0],)

        def backward(self, indexes, grad_outputs):
            (x,) = self.get_retained_inputs()
            return (2.0 * x * grad_outputs[0],)

    class Declared(Slotted):
        _retain_in = (0,)

        def forward(self, inputs):
            return (inputs[0] * inputs[0],)

    for node in (Slotted(), Declared()):
        x = Variable(backend.asarray([3.0]))
        (y,) = node.apply((x,))
        y.backward()
        backend.assert_close(x.grad, [6.0])


def test_retained_outputs_are_read_in_backward(backend):
    x = Variable(backend.asarray([0.0, 1.0]))
    node = Exp()
    (y,) = node.apply((x,))
    assert agnograd.as_array(node.get_retained_outputs()[0]) is y.array
    F.sum(y).backward()
    backend.assert_close(x.grad, np.exp([0.0, 1.0]), rtol=1e-6)
    backend.assert_close(node.retained, np.exp([0.0, 1.0]), rtol=1e-6)


def test_retained_output_survives_its_variable(backend):
    x = Variable(backend.asarray([0.0, 1.0]))
    node = Exp()
    (y,) = node.apply((x,))
    loss = F.sum(y * 2.0)
    del y
    loss.backward()
    backend.assert_close(x.grad, 2 * np.exp([0.0, 1.0]), rtol=1e-6)


def test_get_retained_without_retaining_raises(backend):
    x = Variable(backend.asarray([1.0]))
    node = SplitSign()
    node.apply((x,))
    with pytest.raises(RuntimeError, match="retain_inputs"):
        node.get_retained_inputs()
    with pytest.raises(RuntimeError, match="retain_outputs"):
        node.get_retained_outputs()


def test_retained_inputs_are_variables_in_double_backprop(backend):
    x = Variable(backend.asarray([2.0]))
    node = Cube()
    (y,) = node.apply((x,))
    (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    backend.assert_close(gx, [12.0])
    _, grad_outputs = node.seen
    assert isinstance(grad_outputs[0], Variable)
    (ggx,) = agnograd.grad([gx], [x])
    backend.assert_close(ggx, [12.0])  # d(3 x^2)/dx = 6 x


class Sin(FunctionNode):
    """``sin(x)``, whose rule calls the namespace given by ``namespace`` (a name)."""

    namespace = "namespace_of"

    def forward(self, inputs):
        self.retain_inputs((0,))
        return (self.xp.sin(inputs[0]),)

    def backward(self, target_input_indexes, grad_outputs):
        (x,) = self.get_retained_inputs()
        (gy,) = grad_outputs
        xp = agnograd.namespace_of(gy) if self.namespace == "namespace_of" else self.xp
        return (gy * xp.cos(x),)


def test_namespace_of_serves_a_backward_at_every_order(backend):
    # The documented way: raw arrays at first order, Variables at second (and on
    # array-api-strict at first too), on every library, torch's tensors included.
    x = backend.asarray([0.5, 1.0, -2.0])
    gy = backend.asarray([1.0, -1.0, 0.5])
    ggx = backend.asarray([0.25, 2.0, 1.0])
    check_backward(lambda v: Sin().apply((v,))[0], x, gy)
    check_double_backward(lambda v: Sin().apply((v,))[0], x, gy, ggx)
    v = Variable(x)
    (g,) = agnograd.grad([F.sum(Sin().apply((v,))[0])], [v], enable_double_backprop=True)
    (gg,) = agnograd.grad([F.sum(g)], [v])
    backend.assert_close(gg, -np.sin([0.5, 1.0, -2.0]))


def test_a_backward_that_refuses_variables_names_namespace_of(backend):
    class RawSin(Sin):
        namespace = "self.xp"  # the raw namespace: it refuses the Variables it gets

    def second_derivative(v):  # array-api-strict refuses at the first already
        (g,) = agnograd.grad([F.sum(RawSin().apply((v,))[0])], [v], enable_double_backprop=True)
        return agnograd.grad([F.sum(g)], [v])

    with pytest.raises(TypeError) as caught:
        second_derivative(Variable(backend.asarray([0.5, 1.0])))
    assert any("agnograd.namespace_of(gy)" in note for note in caught.value.__notes__)


def test_only_inputs_that_require_grad_are_targets(backend):
    x = Variable(backend.asarray([1.0]))
    w = Variable(backend.asarray([2.0]), requires_grad=False)
    b = Variable(backend.asarray([3.0]))
    node = MulAdd()
    (y,) = node.apply((x, w, b))
    y.backward()
    assert node.targets == (0, 2)
    backend.assert_close(x.grad, [2.0])
    backend.assert_close(b.grad, [1.0])
    assert w.grad is None


def test_unchain(backend):
    x = Variable(backend.asarray([1.0]))
    node = Cube()
    (y,) = node.apply((x,))
    node.unchain()
    assert y.creator is None
    assert node.inputs is None
    with pytest.raises(RuntimeError):
        node.get_retained_inputs()
    y.backward()
    assert x.grad is None


def test_backward_may_return_variables(backend):
    class ReturnsVariables(FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 5.0,)

        def backward(self, target_input_indexes, grad_outputs):
            (gy,) = grad_outputs  # a Variable on array-api-strict: see the next test
            return (Variable(agnograd.as_array(gy) * 5.0),)

    x = Variable(backend.asarray([1.0, 2.0]))
    (y,) = ReturnsVariables().apply((x,))
    F.sum(y).backward()
    backend.assert_close(x.grad, [5.0, 5.0])
    assert not isinstance(x.grad, Variable)


def test_raw_arrays_and_variables_mix_in_backward_on_every_backend(backend):
    # array-api-strict's arrays raise on a Variable to their right instead of leaving
    # the operator to it: there a node's backward receives Variables.
    class Gate(FunctionNode):
        def forward(self, inputs):
            self.retain_inputs((0,))
            return (inputs[0] * 1.0,)

        def backward(self, target_input_indexes, grad_outputs):
            (x,) = self.get_retained_inputs()
            return (grad_outputs[0] * F.sigmoid(x),)

    x = Variable(backend.asarray([0.0, 1.0]))
    (y,) = Gate().apply((x,))
    F.sum(y).backward()
    backend.assert_close(x.grad, [0.5, 1 / (1 + math.exp(-1.0))])


def test_backward_receives_variables_when_asked(backend):
    class ChainerStyle(FunctionNode):
        backward_receives_variables = True

        def forward(self, inputs):
            return (inputs[0] * 5.0,)

        def backward(self, target_input_indexes, grad_outputs):
            (gy,) = grad_outputs
            assert isinstance(gy, Variable)
            return (gy * 5.0,)

    x = Variable(backend.asarray([1.0, 2.0]))
    (y,) = ChainerStyle().apply((x,))
    F.sum(y).backward()
    backend.assert_close(x.grad, [5.0, 5.0])


@pytest.mark.parametrize("used", [0, 1])
def test_unused_output_gets_none_in_grad_outputs(backend, used):
    x = Variable(backend.asarray([1.0, 2.0]))
    node = SplitSign()
    outputs = node.apply((x,))
    assert len(outputs) == 2
    assert outputs[0].rank == outputs[1].rank == 1
    F.sum(outputs[used]).backward()
    assert node.grad_outputs[1 - used] is None
    assert node.grad_outputs[used] is not None
    backend.assert_close(x.grad, [2.0 + used, 2.0 + used])


def test_both_outputs_used(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    node = SplitSign()
    a, b = node.apply((x,))
    F.sum(a + b).backward()
    backend.assert_close(x.grad, [5.0, 5.0])


def test_backward_returning_none_means_zero(backend):
    class Stop(FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, target_input_indexes, grad_outputs):
            return (None,)

    x = Variable(backend.asarray([1.0]))
    (y,) = Stop().apply((x,))
    F.sum(y + x).backward()
    backend.assert_close(x.grad, [1.0])


def test_backward_with_a_wrong_number_of_gradients_is_an_error(backend):
    class TooMany(FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, target_input_indexes, grad_outputs):
            return (grad_outputs[0], grad_outputs[0])

    x = Variable(backend.asarray([1.0]))
    (y,) = TooMany().apply((x,))
    with pytest.raises(ValueError, match="TooMany"):
        y.backward()


def test_not_implemented_backward(backend):
    class ForwardOnly(FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

    x = Variable(backend.asarray([1.0]))
    (y,) = ForwardOnly().apply((x,))
    with pytest.raises(NotImplementedError, match="ForwardOnly"):
        y.backward()


def test_inputs_of_two_libraries_are_refused(backend):
    other = np if backend.name != "numpy" else __import__("array_api_strict")
    x = Variable(backend.asarray([1.0]))
    with pytest.raises(TypeError, match="two libraries"):
        MulAdd().apply((x, x, other.asarray(np.asarray([1.0], dtype=np.float32))))
