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
from agnograd.backends import _backend
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


# -- augmented assignment keeps the left operand's dtype and shape -------------------

AUGMENTED = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "@": operator.imatmul,
    "&": operator.iand, "|": operator.ior, "^": operator.ixor, "<<": operator.ilshift,
    ">>": operator.irshift,
}  # fmt: skip
PLAIN = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
    ">>": operator.rshift,
}  # fmt: skip
LEFT = ["bool", "int32", "int64", "float32", "float64", "complex64"]
# Python numbers, and arrays of (2, 2) (x's shape), (2,) (broadcast to it; a vector
# for @) and (3, 2, 2) (x broadcast to it).
NUMBERS = [True, 2, -1, 1.5, 2j]
RIGHT = [("bool", (2, 2)), ("int32", (2, 2)), ("float32", (2, 2)), ("float64", (2,)),
         ("complex64", (2, 2)), ("int64", (3, 2, 2))]  # fmt: skip


def _outcome(function, *args):
    try:
        return function(*args)
    except Exception as error:  # the library's refusal, or the in-place rule's
        return error


def _augmented_later(augmented, data, y):
    """``x OP= y`` in define-then-run, run."""
    with agnograd.auto_forward(False):
        h = augmented(Variable(data, requires_grad=False), y)
    h.forward()
    return h


@pytest.mark.parametrize("symbol", list(AUGMENTED))
def test_augmented_assignment_keeps_the_dtype_and_shape_or_raises(backend, symbol):
    """``x OP= y`` binds ``x`` to ``x OP y`` where that has ``x``'s dtype and shape,
    and raises ``TypeError`` naming the operator, the dtypes and the rule where it
    has not, eagerly and in define-then-run; where ``x OP y`` is refused, ``x OP= y``
    is refused alike, and where the library refuses its own in-place ``OP=``
    (``int_a += 1.5``), agnograd does too."""
    if backend.name == "jax":
        pytest.skip("JAX compiles each pair of dtypes anew (minutes); the rule is the same")
    augmented, plain = AUGMENTED[symbol], PLAIN[symbol]
    values = np.asarray([[1, 2], [3, 1]])
    rights = [(n, n) for n in NUMBERS]
    for dtype, shape in RIGHT:
        rights.append((backend.asarray(np.resize(values, shape), dtype), f"{dtype} {shape}"))
    for left in LEFT:
        data = backend.asarray(values, left)
        for y, what in rights:
            case = f"{left} x {symbol}= {what}"
            with np.errstate(all="ignore"):
                expected = _outcome(plain, Variable(data, requires_grad=False), y)
                x = Variable(data, requires_grad=False)
                got = _outcome(augmented, x, y)
                raw = _outcome(augmented, backend.xp.asarray(data, copy=True), y)
                raw_plain = _outcome(plain, data, y)
                later = _outcome(_augmented_later, augmented, data, y)
            if isinstance(expected, Exception):
                assert type(got) is type(expected), case
                continue
            if isinstance(raw_plain, Exception):
                continue  # agnograd's matmul promotes what array-api-strict's refuses
            if isinstance(raw, Exception):  # the library's own in-place rule
                assert isinstance(got, TypeError), case
            if expected.dtype == data.dtype and expected.shape == data.shape:
                assert isinstance(got, Variable), f"{case}: {got!r}"
                assert got is not x, case
                assert got.dtype == data.dtype, case
                np.testing.assert_array_equal(backend.to_numpy(got), backend.to_numpy(expected))
                # Define-then-run: decided when the graph is built, from inferred dtypes.
                np.testing.assert_array_equal(backend.to_numpy(later), backend.to_numpy(got))
                assert later.dtype == data.dtype, case
            else:
                assert isinstance(got, TypeError), f"{case}: {got!r}"
                message = str(got)
                assert f"x {symbol}= y (__i" in message, message
                assert left in message, message
                assert _backend.dtype_name(expected.dtype) in message, message
                assert "in-place operator keeps the shape and dtype" in message, message
                assert isinstance(later, TypeError), case  # (or the library's refusal)


def test_augmented_assignment_refuses_a_float64_operand_of_float32(backend):
    # The standard's promotion gives float64: NumPy and PyTorch would cast the result
    # back, array-api-strict refuses, as agnograd does.
    narrow, wide = backend.narrow_and_wide()
    h = backend.variable([1.0, 2.0], narrow)
    with pytest.raises(TypeError, match=rf"x \*= y \(__imul__\).*{wide}.*keeps the shape"):
        h *= backend.asarray([2.0, 2.0], wide)
    h *= backend.asarray([2.0, 2.0], narrow)
    h *= 2.0
    backend.assert_close(h, [4.0, 8.0])


@pytest.mark.parametrize(
    "index",
    [slice(1, 3), [True, False, True, False], [0, 2], 1],
    ids=["slice", "mask", "integers", "integer"],
)
def test_array_api_extra_at_refuses_to_truncate(backend, index):
    """``xpx.at(int_x, i).add(1.1)`` writes ``x[i] += 1.1``: refused, as NumPy (slices
    and masks) and PyTorch (every index) refuse it, instead of truncating 1.1 to 1."""
    xpx = pytest.importorskip("array_api_extra")
    if backend.name == "jax":
        pytest.skip("at() casts y to x's dtype on JAX, as JAX's own x.at[i].add(y) does")
    x = Variable(backend.asarray([0, 1, 2, 3], "int32"), requires_grad=False)
    key = backend.asarray(index, None) if isinstance(index, list) else index
    # (array-api-strict refuses int32 + 1.1 itself.)
    with pytest.raises(TypeError, match=r"x \+= y \(__iadd__\).*int32|can only be promoted"):
        xpx.at(x, key).add(1.1)
    if backend.name == "array_api_strict" and index == [0, 2]:
        return  # its x[key] = v takes no arrays of integers
    expected = np.arange(4)
    expected[np.asarray(index) if isinstance(index, list) else index] += 2
    backend.assert_close(xpx.at(x, key).add(2), expected)
