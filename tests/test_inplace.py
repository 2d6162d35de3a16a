"""Writes into Variables: ``x[key] = value``; augmented assignment binds a new
Variable instead (issue 3)."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.testing import check_backward, check_double_backward


def test_setitem_gradient_overwritten_positions_get_zero(backend):
    x = Variable(backend.asarray([1.0, 2.0, 3.0, 4.0], dtype="float64"))
    v = Variable(backend.asarray([10.0, 20.0], dtype="float64"))
    h = x * 1.0
    h[1:3] = v
    F.sum(h * h).backward()
    backend.assert_close(h, [1.0, 10.0, 20.0, 4.0])
    backend.assert_close(x.grad, [2.0, 0.0, 0.0, 8.0])
    backend.assert_close(v.grad, [20.0, 40.0])


def test_setitem_with_a_scalar_and_broadcast_value(backend):
    x = Variable(backend.asarray([[1.0, 2.0], [3.0, 4.0]], dtype="float64"))
    v = Variable(backend.asarray([5.0], dtype="float64"))
    h = x * 2.0
    h[0] = v  # broadcast over the row: v gets the sum of the row's gradients
    h[1, 1] = 0.0
    F.sum(h).backward()
    backend.assert_close(x.grad, [[0.0, 0.0], [2.0, 0.0]])
    backend.assert_close(v.grad, [2.0])


def test_setitem_numerical_first_and_second_order(backend):
    def f(x, v):
        h = x * x
        h[0] = v * v
        return h * x

    x = backend.asarray([0.5, -1.5, 2.0], dtype="float64")
    v = backend.asarray(0.7, dtype="float64")
    gy = backend.asarray([1.0, -2.0, 0.5], dtype="float64")
    check_backward(f, (x, v), gy)
    check_double_backward(f, (x, v), gy, (backend.asarray([0.3, 0.1, -0.2], dtype="float64"),
                                          backend.asarray(0.4, dtype="float64")))  # fmt: skip


def test_overwriting_an_array_saved_for_backward_raises(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    h = x * 1.0
    y = F.sum(h * h)  # Mul saves h's array
    h[0] = 7.0
    if backend.name == "jax":
        # JAX arrays are immutable: the write made a new array, so the saved one is
        # intact and backward uses the values the forward saw.
        y.backward()
        backend.assert_close(x.grad, [2.0, 4.0])
        return
    with pytest.raises(RuntimeError, match="overwritten in place"):
        y.backward()


def test_writing_into_a_leaf_that_requires_grad_is_refused(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 3.0
    with agnograd.no_backprop_mode():
        x[0] = 3.0  # an update, as an optimizer makes it
    backend.assert_close(x, [3.0, 2.0])


def test_setitem_on_a_constant_needs_no_graph(backend):
    out = Variable(backend.asarray([0.0, 0.0, 0.0]), requires_grad=False)
    x = Variable(backend.asarray([2.0]))
    out[1:2] = x * 3.0
    F.sum(out * out).backward()
    backend.assert_close(x.grad, [36.0])


@pytest.mark.parametrize(
    ("op", "expected_value", "expected_grad"),
    [
        (operator.iadd, 4.0, 2.0),  # h = x + x
        (operator.isub, 0.0, 0.0),  # h = x - x
        (operator.imul, 4.0, 4.0),  # h = x * x
        (operator.itruediv, 1.0, 0.0),  # h = x / x
        (operator.ipow, 4.0, 4.0 * (math.log(2.0) + 1.0)),  # h = x ** x
    ],
    ids=["+=", "-=", "*=", "/=", "**="],
)
def test_augmented_assignment_binds_a_new_variable_and_keeps_gradients(
    backend, op, expected_value, expected_grad
):
    x = Variable(backend.asarray([2.0], dtype="float64"))
    h = x * 1.0
    result = op(h, x)
    assert result is not h  # a new Variable; h itself is unchanged (Chainer, nnabla)
    backend.assert_close(h, [2.0])
    backend.assert_close(result, [expected_value])
    F.sum(result).backward()
    backend.assert_close(x.grad, [expected_grad])


def test_augmented_assignment_leaves_the_old_array_untouched(backend):
    a = backend.asarray([1.0, 2.0])
    x = Variable(a, requires_grad=False)
    old = x
    x += 1.0
    assert backend.to_numpy(a).tolist() == [1.0, 2.0]
    assert old.array is a
    backend.assert_close(x, [2.0, 3.0])


def test_conversions_and_dlpack(backend):
    x = Variable(backend.asarray(2.5))
    assert float(x) == 2.5
    assert bool(x)
    assert int(Variable(backend.asarray(3))) == 3
    assert complex(x) == 2.5 + 0j
    assert isinstance(x.__dlpack_device__(), tuple)


def test_numpy_conversion_of_a_variable_that_needs_a_gradient_is_refused():
    x = Variable(np.ones(2))
    with pytest.raises(TypeError, match="gradient"):
        np.asarray(x)
    assert np.asarray(Variable(np.ones(2), requires_grad=False)).tolist() == [1.0, 1.0]
