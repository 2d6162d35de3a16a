"""Variable operators with Variables, raw arrays and Python scalars on either side."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import agnograd.functions as F
from agnograd import Variable

X1 = np.array([[1.5, 2.0, 3.0], [0.5, 1.0, 4.0]], dtype=np.float32)
X2 = np.array([[2.0, 0.5, 1.5], [3.0, 2.5, 0.25]], dtype=np.float32)

# op, forward with NumPy, gradients (d/dx1, d/dx2) as NumPy functions of (x1, x2)
ARITHMETIC = {
    "+": (operator.add, lambda a, b: (np.ones_like(a), np.ones_like(b))),
    "-": (operator.sub, lambda a, b: (np.ones_like(a), -np.ones_like(b))),
    "*": (operator.mul, lambda a, b: (b, a)),
    "/": (operator.truediv, lambda a, b: (1 / b, -a / b**2)),
    "**": (operator.pow, lambda a, b: (b * a ** (b - 1), a**b * np.log(a))),
}


def _operands(backend, kind1, kind2):
    """Left and right operands of the given kinds, plus the leaf Variables among them."""
    made, leaves = [], []
    for kind, values in ((kind1, X1), (kind2, X2)):
        if kind == "variable":
            v = Variable(backend.asarray(values))
            leaves.append(v)
            made.append(v)
        else:
            made.append(backend.asarray(values))
    return made, leaves


@pytest.mark.parametrize("op", list(ARITHMETIC), ids=list(ARITHMETIC))
@pytest.mark.parametrize(
    ("kind1", "kind2"),
    [("variable", "variable"), ("variable", "array"), ("array", "variable")],
    ids=["var-var", "var-array", "array-var"],
)
def test_arithmetic_with_variables_and_arrays(backend, op, kind1, kind2):
    forward, grads = ARITHMETIC[op]
    (a, b), _ = _operands(backend, kind1, kind2)
    if kind1 == "array" and backend.name == "array_api_strict":
        # array-api-strict's operators refuse operands they do not know, Variables too,
        # rather than returning NotImplemented: the reflected operator never runs.
        with pytest.raises(TypeError):
            forward(a, b)
        return
    y = forward(a, b)
    assert isinstance(y, Variable)
    assert y.dtype == backend.dtype("float32")
    backend.assert_close(y, forward(X1, X2))
    y.grad = backend.asarray(np.ones_like(X1))
    y.backward()
    expected = grads(X1, X2)
    for operand, g in zip((a, b), expected, strict=True):
        if isinstance(operand, Variable):
            backend.assert_close(operand.grad, g, rtol=1e-5)


def test_raw_arrays_are_constants(backend):
    x = Variable(backend.asarray(X1))
    c = backend.asarray(X2)
    y = x * c
    assert y.creator is not None
    (c_node,) = [n for n in y.creator.inputs if n is not x.node]
    assert c_node.requires_grad is False
    F.sum(y).backward()
    backend.assert_close(x.grad, X2)


SCALAR_CASES = {
    "v+s": (lambda v: v + 2.0, lambda a: a + 2.0, lambda a: np.ones_like(a)),
    "s+v": (lambda v: 2.0 + v, lambda a: 2.0 + a, lambda a: np.ones_like(a)),
    "v-s": (lambda v: v - 2.0, lambda a: a - 2.0, lambda a: np.ones_like(a)),
    "s-v": (lambda v: 2.0 - v, lambda a: 2.0 - a, lambda a: -np.ones_like(a)),
    "v*s": (lambda v: v * 3.0, lambda a: a * 3.0, lambda a: np.full_like(a, 3.0)),
    "s*v": (lambda v: 3.0 * v, lambda a: 3.0 * a, lambda a: np.full_like(a, 3.0)),
    "v/s": (lambda v: v / 4.0, lambda a: a / 4.0, lambda a: np.full_like(a, 0.25)),
    "s/v": (lambda v: 4.0 / v, lambda a: 4.0 / a, lambda a: -4.0 / a**2),
    "v**s": (lambda v: v**3.0, lambda a: a**3.0, lambda a: 3.0 * a**2),
    "v**2": (lambda v: v**2, lambda a: a**2, lambda a: 2.0 * a),
    "s**v": (lambda v: 2.0**v, lambda a: 2.0**a, lambda a: 2.0**a * np.log(2.0)),
    "v+int": (lambda v: v + 1, lambda a: a + 1, lambda a: np.ones_like(a)),
    "int*v": (lambda v: 2 * v, lambda a: 2 * a, lambda a: np.full_like(a, 2.0)),
}


@pytest.mark.parametrize("case", list(SCALAR_CASES), ids=list(SCALAR_CASES))
def test_python_scalars_on_either_side_keep_float32(backend, case):
    apply, forward, grad = SCALAR_CASES[case]
    x = Variable(backend.asarray(X1))
    y = apply(x)
    assert isinstance(y, Variable)
    assert y.dtype == backend.dtype("float32")
    backend.assert_close(y, forward(X1), rtol=1e-5)
    F.sum(y).backward()
    assert x.grad.dtype == backend.dtype("float32")
    backend.assert_close(x.grad, grad(X1), rtol=1e-5)


@pytest.mark.parametrize("kind", ["variable", "array"])
def test_matmul(backend, kind):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    x = Variable(backend.asarray(a))
    w = Variable(backend.asarray(b)) if kind == "variable" else backend.asarray(b)
    y = x @ w
    backend.assert_close(y, a @ b, rtol=1e-5)
    F.sum(y).backward()
    backend.assert_close(x.grad, np.ones((2, 4), np.float32) @ b.T, rtol=1e-5)
    if kind == "variable":
        backend.assert_close(w.grad, a.T @ np.ones((2, 4), np.float32), rtol=1e-5)


def test_rmatmul(backend):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    w = Variable(backend.asarray(b))
    if backend.name == "array_api_strict":
        # Its operators refuse unknown operands instead of returning NotImplemented.
        with pytest.raises(TypeError):
            backend.asarray(a) @ w
        return
    y = backend.asarray(a) @ w
    assert isinstance(y, Variable)
    backend.assert_close(y, a @ b, rtol=1e-5)
    F.sum(y).backward()
    backend.assert_close(w.grad, a.T @ np.ones((2, 4), np.float32), rtol=1e-5)


def test_unary_minus_plus_abs(backend):
    a = np.array([-2.0, 0.5, 3.0], dtype=np.float32)
    x = Variable(backend.asarray(a))
    neg = -x
    backend.assert_close(neg, -a)
    F.sum(neg).backward()
    backend.assert_close(x.grad, -np.ones(3))

    x.cleargrad()
    pos = +x
    assert isinstance(pos, Variable)
    backend.assert_close(pos, a)
    F.sum(pos * 2.0).backward()
    backend.assert_close(x.grad, [2.0, 2.0, 2.0])

    x.cleargrad()
    y = abs(x)
    backend.assert_close(y, np.abs(a))
    F.sum(y).backward()
    backend.assert_close(x.grad, np.sign(a))


def test_abs_gradient_at_zero_is_zero(backend):
    x = Variable(backend.asarray([0.0]))
    F.sum(abs(x)).backward()
    backend.assert_close(x.grad, [0.0])


@pytest.mark.parametrize(
    "make",
    [
        lambda x, c: x // 2.0,
        lambda x, c: 7.0 // x,
        lambda x, c: x // c,
        lambda x, c: x // Variable(c),
    ],
    ids=["v//s", "s//v", "v//array", "v//v"],
)
def test_floordiv_has_no_gradient(backend, make):
    a = np.array([7.0, -3.5, 4.0], dtype=np.float32)
    c = np.array([2.0, 2.0, 3.0], dtype=np.float32)
    x = Variable(backend.asarray(a))
    y = make(x, backend.asarray(c))
    assert isinstance(y, Variable)
    assert y.requires_grad is False
    assert y.creator is None


def test_floordiv_values(backend):
    a = np.array([7.0, -3.5, 4.0], dtype=np.float32)
    x = Variable(backend.asarray(a))
    backend.assert_close(x // 2.0, a // 2.0)
    backend.assert_close(7.0 // x, 7.0 // a)
    backend.assert_close(x // backend.asarray([2.0, 2.0, 3.0]), a // [2.0, 2.0, 3.0])


COMPARISONS = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


@pytest.mark.parametrize("op", list(COMPARISONS), ids=list(COMPARISONS))
@pytest.mark.parametrize("other", ["variable", "array", "scalar"])
def test_comparisons_return_boolean_constants(backend, op, other):
    compare = COMPARISONS[op]
    a = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    b = np.array([3.0, 2.0, 1.0], dtype=np.float32)
    x = Variable(backend.asarray(a))
    rhs = {
        "variable": lambda: Variable(backend.asarray(b)),
        "array": lambda: backend.asarray(b),
        "scalar": lambda: 2.0,
    }[other]()
    y = compare(x, rhs)
    assert isinstance(y, Variable)
    assert y.dtype == backend.dtype("bool")
    assert y.requires_grad is False
    assert y.creator is None
    expected = compare(a, b if other != "scalar" else 2.0)
    np.testing.assert_array_equal(backend.to_numpy(y), expected)


def test_comparison_with_scalar_on_the_left(backend):
    x = Variable(backend.asarray([1.0, 2.0, 3.0]))
    # The scalar is on the left on purpose: the reflected comparison must run.
    left_lt = 2.0 < x  # noqa: SIM300
    left_eq = 2.0 == x  # noqa: SIM300
    np.testing.assert_array_equal(backend.to_numpy(left_lt), [False, False, True])
    np.testing.assert_array_equal(backend.to_numpy(left_eq), [False, True, False])


def test_variables_stay_hashable(backend):
    x = Variable(backend.asarray([1.0]))
    assert {x: 1}[x] == 1


def _other_backend(backend):
    """A second library for mixing tests: NumPy, or array-api-strict when testing NumPy."""
    if backend.name == "numpy":
        import array_api_strict

        return "array_api_strict", array_api_strict
    return "numpy", np


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "@"])
def test_two_backends_in_one_op_is_a_type_error_naming_both(backend, op):
    other_name, other = _other_backend(backend)
    forward = {**{k: f for k, (f, _) in ARITHMETIC.items()}, "@": operator.matmul}[op]
    a = Variable(backend.asarray(np.ones((2, 2))))
    b = Variable(other.asarray(np.ones((2, 2), dtype=np.float32)))
    for lhs, rhs in ((a, b), (b, a), (a, b.array)):
        with pytest.raises(TypeError) as info:
            forward(lhs, rhs)
        message = str(info.value)
        assert backend.name.partition("_")[0] in message
        assert other_name.partition("_")[0] in message
