"""agnograd.functions: forward values against NumPy, gradients against analytic rules.

Every check weights the output by a fixed array ``w`` before summing, so a
gradient that is right only up to a permutation or a broadcast would fail.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import Variable

RNG = np.random.default_rng(0)
X = RNG.uniform(-2.0, 2.0, size=(2, 3)).astype(np.float32)
POSITIVE = RNG.uniform(0.5, 2.0, size=(2, 3)).astype(np.float32)
W = RNG.uniform(-1.0, 1.0, size=(2, 3)).astype(np.float32)


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


# name: (input, forward, first derivative, second derivative or None when the
# first derivative does not depend on x through a differentiable path)
UNARY = {
    "exp": (X, np.exp, np.exp, np.exp),
    "log": (POSITIVE, np.log, lambda a: 1 / a, lambda a: -1 / a**2),
    "sin": (X, np.sin, np.cos, lambda a: -np.sin(a)),
    "cos": (X, np.cos, lambda a: -np.sin(a), lambda a: -np.cos(a)),
    "tanh": (
        X,
        np.tanh,
        lambda a: 1 - np.tanh(a) ** 2,
        lambda a: -2 * np.tanh(a) * (1 - np.tanh(a) ** 2),
    ),
    "sqrt": (POSITIVE, np.sqrt, lambda a: 0.5 / np.sqrt(a), lambda a: -0.25 * a**-1.5),
    "square": (X, np.square, lambda a: 2 * a, lambda a: np.full_like(a, 2.0)),
    "sigmoid": (
        X,
        _sigmoid,
        lambda a: _sigmoid(a) * (1 - _sigmoid(a)),
        lambda a: _sigmoid(a) * (1 - _sigmoid(a)) * (1 - 2 * _sigmoid(a)),
    ),
    "negative": (X, np.negative, lambda a: -np.ones_like(a), None),
    "absolute": (X, np.abs, np.sign, None),
    "relu": (X, lambda a: np.maximum(a, 0), lambda a: (a > 0).astype(a.dtype), None),
    "identity": (X, lambda a: a, np.ones_like, None),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_forward_and_gradient(backend, name):
    data, forward, derivative, _ = UNARY[name]
    x = Variable(backend.asarray(data))
    y = getattr(F, name)(x)
    assert isinstance(y, Variable)
    assert y.shape == data.shape
    assert y.dtype == backend.dtype("float32")
    backend.assert_close(y, forward(data), rtol=1e-5)
    F.sum(y * backend.asarray(W)).backward()
    assert x.grad.dtype == backend.dtype("float32")
    backend.assert_close(x.grad, W * derivative(data), rtol=1e-5)


@pytest.mark.parametrize("name", [n for n, case in UNARY.items() if case[3] is not None])
def test_unary_second_derivative(backend, name):
    data, _, derivative, second = UNARY[name]
    x = Variable(backend.asarray(data))
    y = F.sum(getattr(F, name)(x) * backend.asarray(W))
    (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    backend.assert_close(gx, W * derivative(data), rtol=1e-5)
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    backend.assert_close(ggx, W * second(data), rtol=1e-4, atol=1e-5)


def test_unary_rule_refuses_freed_or_overwritten_arrays(backend):
    # Unary rules read their saved arrays directly when nothing is unusual; freed
    # arrays and in-place writes must still reach the accessors' errors.
    x = Variable(backend.asarray(X))
    y = F.sum(F.exp(F.sin(x)))  # exp keeps its output, sin its input
    y.backward(clear_buffer=True)
    with pytest.raises(RuntimeError, match="no retained outputs"):
        y.backward()
    if backend.name == "jax":
        return  # JAX arrays are immutable: nothing can be overwritten
    h = x * 1.0
    y = F.sum(F.sin(h))
    h[0, 0] = 7.0
    with pytest.raises(RuntimeError, match="overwritten in place"):
        y.backward()


@pytest.mark.parametrize("name", ["negative", "absolute", "relu", "identity"])
def test_piecewise_linear_second_derivative_is_none(backend, name):
    x = Variable(backend.asarray(X))
    (gx,) = agnograd.grad([F.sum(getattr(F, name)(x))], [x], enable_double_backprop=True)
    assert agnograd.grad([F.sum(gx)], [x]) == [None]


def test_functions_accept_raw_arrays_and_return_constants(backend):
    y = F.exp(backend.asarray(X))
    assert isinstance(y, Variable)
    assert y.requires_grad is False
    assert y.creator is None
    backend.assert_close(y, np.exp(X), rtol=1e-6)


def test_sigmoid_does_not_overflow(backend):
    y = F.sigmoid(backend.asarray([-100.0, 0.0, 100.0]))
    backend.assert_close(y, [0.0, 0.5, 1.0])


def test_identity_shares_arrays_and_links_the_graph(backend):
    a, b = Variable(backend.asarray([1.0])), Variable(backend.asarray([2.0]))
    y = F.identity(a)
    assert isinstance(y, Variable)
    assert y.array is a.array
    ya, yb = F.identity(a, b)
    assert yb.array is b.array
    F.sum(ya * 3.0 + yb * 5.0 + y).backward()
    backend.assert_close(a.grad, [4.0])
    backend.assert_close(b.grad, [5.0])


# -- binary arithmetic (functional spelling) -------------------------------------------

BINARY = {
    "add": (np.add, lambda a, b: (np.ones_like(a), np.ones_like(b))),
    "subtract": (np.subtract, lambda a, b: (np.ones_like(a), -np.ones_like(b))),
    "multiply": (np.multiply, lambda a, b: (b, a)),
    "divide": (np.divide, lambda a, b: (1 / b, -a / b**2)),
    "pow": (np.power, lambda a, b: (b * a ** (b - 1), a**b * np.log(a))),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_forward_and_gradient(backend, name):
    forward, grads = BINARY[name]
    a, b = POSITIVE, POSITIVE[::-1] + 0.25
    x1, x2 = Variable(backend.asarray(a)), Variable(backend.asarray(b))
    y = getattr(F, name)(x1, x2)
    backend.assert_close(y, forward(a, b), rtol=1e-5)
    F.sum(y * backend.asarray(W)).backward()
    g1, g2 = grads(a, b)
    backend.assert_close(x1.grad, W * g1, rtol=1e-5)
    backend.assert_close(x2.grad, W * g2, rtol=1e-5)


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_second_derivatives(backend, name):
    # Mixed second derivatives d2y/dx1dx2 of the five rules, in closed form.
    a = np.array([1.5, 0.5], dtype=np.float32)
    b = np.array([2.0, 3.0], dtype=np.float32)
    mixed = {
        "add": np.zeros_like(a),
        "subtract": np.zeros_like(a),
        "multiply": np.ones_like(a),
        "divide": -1 / b**2,
        "pow": a ** (b - 1) * (1 + b * np.log(a)),
    }[name]
    x1, x2 = Variable(backend.asarray(a)), Variable(backend.asarray(b))
    y = F.sum(getattr(F, name)(x1, x2))
    (g1,) = agnograd.grad([y], [x1], enable_double_backprop=True)
    (g12,) = agnograd.grad([F.sum(g1)], [x2])
    if name in ("add", "subtract"):
        assert g12 is None
    else:
        backend.assert_close(g12, mixed, rtol=1e-5)


@pytest.mark.parametrize(
    ("call", "forward", "derivative"),
    [
        (lambda x: F.add(x, 2.0), lambda a: a + 2.0, lambda a: np.ones_like(a)),
        (lambda x: F.add(2.0, x), lambda a: a + 2.0, lambda a: np.ones_like(a)),
        (lambda x: F.subtract(1.0, x), lambda a: 1.0 - a, lambda a: -np.ones_like(a)),
        (lambda x: F.multiply(3, x), lambda a: 3 * a, lambda a: np.full_like(a, 3.0)),
        (lambda x: F.divide(x, 4.0), lambda a: a / 4.0, lambda a: np.full_like(a, 0.25)),
        (lambda x: F.divide(1.0, x), lambda a: 1.0 / a, lambda a: -1.0 / a**2),
        (lambda x: F.pow(x, 3), lambda a: a**3, lambda a: 3 * a**2),
        (lambda x: F.pow(3.0, x), lambda a: 3.0**a, lambda a: 3.0**a * np.log(3.0)),
    ],
    ids=["x+2", "2+x", "1-x", "3*x", "x/4", "1/x", "x**3", "3**x"],
)
def test_binary_with_scalars(backend, call, forward, derivative):
    x = Variable(backend.asarray(POSITIVE))
    y = call(x)
    assert y.dtype == backend.dtype("float32")
    backend.assert_close(y, forward(POSITIVE), rtol=1e-5)
    F.sum(y).backward()
    backend.assert_close(x.grad, derivative(POSITIVE), rtol=1e-5)


@pytest.mark.parametrize(
    ("call", "second"),
    [
        (lambda x: F.divide(1.0, x), lambda a: 2.0 / a**3),
        (lambda x: F.pow(x, 3), lambda a: 6 * a),
        (lambda x: F.pow(x, 2), lambda a: np.full_like(a, 2.0)),
        (lambda x: F.pow(3.0, x), lambda a: 3.0**a * np.log(3.0) ** 2),
        (lambda x: F.subtract(1.0, x) * x, lambda a: np.full_like(a, -2.0)),
    ],
    ids=["1/x", "x**3", "x**2", "3**x", "(1-x)*x"],
)
def test_binary_with_scalars_second_derivative(backend, call, second):
    x = Variable(backend.asarray(POSITIVE))
    (gx,) = agnograd.grad([F.sum(call(x))], [x], enable_double_backprop=True)
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    backend.assert_close(ggx, second(POSITIVE), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("equal", [False, True, False]),
        ("not_equal", [True, False, True]),
        ("less", [True, False, False]),
        ("less_equal", [True, True, False]),
        ("greater", [False, False, True]),
        ("greater_equal", [False, True, True]),
    ],
)
def test_comparison_functions(backend, name, expected):
    x = Variable(backend.asarray([1.0, 2.0, 3.0]))
    y = getattr(F, name)(x, backend.asarray([2.0, 2.0, 2.0]))
    assert y.dtype == backend.dtype("bool")
    assert y.requires_grad is False
    np.testing.assert_array_equal(backend.to_numpy(y), expected)


def test_sign_and_floor_divide_are_not_differentiable(backend):
    x = Variable(backend.asarray([-2.5, 0.0, 3.5]))
    s = F.sign(x)
    backend.assert_close(s, [-1.0, 0.0, 1.0])
    assert s.requires_grad is False
    f = F.floor_divide(x, 2.0)
    backend.assert_close(f, [-2.0, 0.0, 1.0])
    assert f.requires_grad is False


# -- reductions -------------------------------------------------------------------------

A3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10


@pytest.mark.parametrize(
    ("axis", "keepdims"),
    [(None, False), (0, False), (-1, True), ((0, 2), False), ((0, 2), True)],
    ids=str,
)
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_reductions(backend, name, axis, keepdims):
    x = Variable(backend.asarray(A3))
    y = getattr(F, name)(x, axis=axis, keepdims=keepdims)
    expected = getattr(np, name)(A3, axis=axis, keepdims=keepdims)
    assert y.shape == expected.shape
    backend.assert_close(y, expected, rtol=1e-5)
    w = np.arange(1, expected.size + 1, dtype=np.float32).reshape(expected.shape)
    F.sum(y * backend.asarray(w)).backward()
    spread = w if keepdims or axis is None else np.expand_dims(w, axis)
    count = A3.size // expected.size if name == "mean" else 1
    backend.assert_close(x.grad, np.broadcast_to(spread, A3.shape) / count, rtol=1e-6)


def test_sum_dtype(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    y = F.sum(x, dtype=backend.dtype("float32"))
    backend.assert_close(y, 3.0)


def test_reductions_double_backprop(backend):
    a = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    x = Variable(backend.asarray(a))
    y = F.sum(F.mean(x * x, axis=0) * backend.asarray([1.0, 3.0]))
    (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    backend.assert_close(gx, a * np.array([1.0, 3.0]))  # 2 x w / 2
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    backend.assert_close(ggx, np.broadcast_to([1.0, 3.0], (2, 2)))


# -- linear algebra ----------------------------------------------------------------------


def _linear_grads(fn, operands, w, *, additive=False):
    """Exact gradients of sum(w * fn(*operands)) for fn linear in each operand.

    ``additive`` says that fn is a sum of one linear map per operand (concat,
    stack) rather than multilinear (matmul): the other operands are then zeroed.
    """
    grads = []
    for k, op in enumerate(operands):
        g = np.zeros_like(op)
        for idx in itertools.product(*map(range, op.shape)):
            basis = np.zeros_like(op)
            basis[idx] = 1.0
            args = [np.zeros_like(a) for a in operands] if additive else list(operands)
            args[k] = basis
            g[idx] = np.sum(w * fn(*args))
        grads.append(g)
    return grads


@pytest.mark.parametrize(
    ("shape1", "shape2"),
    [
        ((2, 3), (3, 4)),
        ((2, 1, 2, 3), (3, 3, 2)),  # batch axes broadcast both ways
        ((3,), (3, 4)),
        ((2, 3), (3,)),
        ((3,), (3,)),
    ],
    ids=str,
)
def test_matmul(backend, shape1, shape2):
    a = RNG.uniform(-1, 1, size=shape1).astype(np.float32)
    b = RNG.uniform(-1, 1, size=shape2).astype(np.float32)
    x1, x2 = Variable(backend.asarray(a)), Variable(backend.asarray(b))
    y = F.matmul(x1, x2)
    expected = np.matmul(a, b)
    assert y.shape == expected.shape
    backend.assert_close(y, expected, rtol=1e-5)
    w = RNG.uniform(-1, 1, size=expected.shape).astype(np.float32)
    F.sum(y * backend.asarray(w)).backward()
    g1, g2 = _linear_grads(np.matmul, [a, b], w)
    backend.assert_close(x1.grad, g1, rtol=1e-4, atol=1e-5)
    backend.assert_close(x2.grad, g2, rtol=1e-4, atol=1e-5)


def test_matmul_rejects_0d(backend):
    with pytest.raises(ValueError, match="0-d"):
        F.matmul(backend.asarray(1.0), backend.asarray([1.0]))


def test_matmul_double_backprop(backend):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    x1, x2 = Variable(backend.asarray(a)), Variable(backend.asarray(b))
    y = F.sum(F.matmul(x1, x2))
    (g1,) = agnograd.grad([y], [x1], enable_double_backprop=True)
    backend.assert_close(g1, np.ones((2, 4)) @ b.T, rtol=1e-5)
    # sum(ones @ b.T) = 2 * sum(b): its gradient with respect to b is 2 everywhere
    (g12,) = agnograd.grad([F.sum(g1)], [x2])
    backend.assert_close(g12, np.full((3, 4), 2.0))


@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(backend, with_bias):
    x = RNG.uniform(-1, 1, size=(4, 3)).astype(np.float32)
    weight = RNG.uniform(-1, 1, size=(2, 3)).astype(np.float32)  # (out, in)
    bias = np.array([0.5, -1.0], dtype=np.float32)
    vx, vw, vb = (Variable(backend.asarray(v)) for v in (x, weight, bias))
    y = F.linear(vx, vw, vb) if with_bias else F.linear(vx, vw)
    expected = x @ weight.T + (bias if with_bias else 0)
    backend.assert_close(y, expected, rtol=1e-5)
    g = RNG.uniform(-1, 1, size=(4, 2)).astype(np.float32)
    F.sum(y * backend.asarray(g)).backward()
    backend.assert_close(vx.grad, g @ weight, rtol=1e-5, atol=1e-6)
    backend.assert_close(vw.grad, g.T @ x, rtol=1e-5, atol=1e-6)
    if with_bias:
        backend.assert_close(vb.grad, g.sum(axis=0), rtol=1e-5)
    else:
        assert vb.grad is None


# -- manipulation -------------------------------------------------------------------------


def _check_linear_map(backend, fn, np_fn, data):
    """Forward against NumPy and the gradient of sum(w * fn(x)) for a linear ``fn``."""
    x = Variable(backend.asarray(data))
    y = fn(x)
    expected = np_fn(data)
    assert y.shape == expected.shape
    backend.assert_close(y, expected)
    w = np.arange(1, expected.size + 1, dtype=np.float32).reshape(expected.shape)
    F.sum(y * backend.asarray(w)).backward()
    (g,) = _linear_grads(np_fn, [data], w)
    backend.assert_close(x.grad, g)
    return x


MANIPULATIONS = {
    "broadcast_to": (
        lambda x: F.broadcast_to(x, (2, 3, 4)),
        lambda a: np.broadcast_to(a, (2, 3, 4)),
        (3, 1),
    ),
    "reshape": (lambda x: F.reshape(x, (4, -1)), lambda a: a.reshape(4, -1), (2, 3, 2)),
    "transpose": (lambda x: F.transpose(x), lambda a: a.transpose(), (2, 3, 4)),
    "transpose_axes": (
        lambda x: F.transpose(x, (1, -1, 0)),
        lambda a: a.transpose(1, 2, 0),
        (2, 3, 4),
    ),
    "permute_dims": (
        lambda x: F.permute_dims(x, (2, 0, 1)),
        lambda a: a.transpose(2, 0, 1),
        (2, 3, 4),
    ),
    "matrix_transpose": (F.matrix_transpose, lambda a: np.swapaxes(a, -1, -2), (2, 3, 4)),
    "expand_dims_0": (lambda x: F.expand_dims(x, axis=0), lambda a: a[None], (2, 3)),
    "expand_dims_-1": (lambda x: F.expand_dims(x, axis=-1), lambda a: a[..., None], (2, 3)),
    "squeeze_int": (lambda x: F.squeeze(x, axis=1), lambda a: a.squeeze(1), (2, 1, 3)),
    "squeeze_tuple": (
        lambda x: F.squeeze(x, axis=(0, 2)),
        lambda a: a.squeeze((0, 2)),
        (1, 3, 1),
    ),
    "get_item": (
        lambda x: F.get_item(x, (slice(None), 1, slice(None, None, 2))),
        lambda a: a[:, 1, ::2],
        (2, 3, 4),
    ),
}


@pytest.mark.parametrize("name", list(MANIPULATIONS))
def test_manipulation(backend, name):
    fn, np_fn, shape = MANIPULATIONS[name]
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 4
    _check_linear_map(backend, fn, np_fn, data)


def test_manipulation_errors(backend):
    x = Variable(backend.asarray(np.zeros((2, 3))))
    with pytest.raises(ValueError, match="permute_dims"):
        F.permute_dims(x, (0, 0))
    with pytest.raises(ValueError, match="squeeze"):
        F.squeeze(x, axis=0)
    with pytest.raises(ValueError, match="matrix_transpose"):
        F.matrix_transpose(Variable(backend.asarray([1.0])))
    with pytest.raises(IndexError, match="expand_dims: axis 5 is out of range"):
        F.expand_dims(x, axis=5)


@pytest.mark.parametrize("axis", [0, 1, -1, None], ids=str)
def test_concat(backend, axis):
    parts = [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.arange(6, 12, dtype=np.float32).reshape(2, 3),
        np.arange(12, 18, dtype=np.float32).reshape(2, 3),
    ]
    variables = [Variable(backend.asarray(p)) for p in parts]
    y = F.concat(variables, axis=axis)
    expected = np.concatenate(parts, axis=axis)
    backend.assert_close(y, expected)
    w = np.arange(expected.size, dtype=np.float32).reshape(expected.shape)
    F.sum(y * backend.asarray(w)).backward()
    grads = _linear_grads(lambda *p: np.concatenate(p, axis=axis), parts, w, additive=True)
    for v, g in zip(variables, grads, strict=True):
        backend.assert_close(v.grad, g)


def test_concat_with_a_constant_and_unequal_sizes(backend):
    x = Variable(backend.asarray([[1.0], [2.0]]))
    c = backend.asarray([[3.0, 4.0], [5.0, 6.0]])
    y = F.concat([c, x], axis=1)
    backend.assert_close(y, [[3.0, 4.0, 1.0], [5.0, 6.0, 2.0]])
    F.sum(y * backend.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).backward()
    backend.assert_close(x.grad, [[3.0], [6.0]])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack(backend, axis):
    parts = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * i for i in range(3)]
    variables = [Variable(backend.asarray(p)) for p in parts]
    y = F.stack(variables, axis=axis)
    expected = np.stack(parts, axis=axis)
    backend.assert_close(y, expected)
    w = np.arange(expected.size, dtype=np.float32).reshape(expected.shape)
    F.sum(y * backend.asarray(w)).backward()
    grads = _linear_grads(lambda *p: np.stack(p, axis=axis), parts, w, additive=True)
    for v, g in zip(variables, grads, strict=True):
        backend.assert_close(v.grad, g)


def test_concat_and_stack_double_backprop(backend):
    a = Variable(backend.asarray([1.0, 2.0]))
    b = Variable(backend.asarray([3.0]))
    y = F.sum(F.concat([a, b]) ** 2) + F.sum(F.stack([a, a]) ** 2)
    ga, gb = agnograd.grad([y], [a, b], enable_double_backprop=True)
    backend.assert_close(ga, [2.0 + 4.0, 4.0 + 8.0])
    backend.assert_close(gb, [6.0])
    (gga,) = agnograd.grad([F.sum(ga)], [a])
    backend.assert_close(gga, [6.0, 6.0])


def test_astype_casts_the_gradient_back(backend):
    low, high = backend.narrow_and_wide()
    x = Variable(backend.asarray([1.5, 2.5], dtype=low))
    y = F.astype(x, backend.dtype(high))
    assert y.dtype == backend.dtype(high)
    F.sum(y * y).backward()
    assert x.grad.dtype == backend.dtype(low)
    backend.assert_close(x.grad, [3.0, 5.0])


def test_astype_to_the_same_dtype(backend):
    x = Variable(backend.asarray([1.5, 2.5]))
    y = F.astype(x, backend.dtype("float32"))
    F.sum(y * 2.0).backward()
    backend.assert_close(x.grad, [2.0, 2.0])


# -- where ------------------------------------------------------------------------------


def test_where_with_two_variables(backend):
    cond = backend.asarray([True, False, True], dtype="bool")
    x1 = Variable(backend.asarray([1.0, 2.0, 3.0]))
    x2 = Variable(backend.asarray([10.0, 20.0, 30.0]))
    y = F.where(cond, x1, x2)
    backend.assert_close(y, [1.0, 20.0, 3.0])
    F.sum(y * backend.asarray([1.0, 2.0, 3.0])).backward()
    backend.assert_close(x1.grad, [1.0, 0.0, 3.0])
    backend.assert_close(x2.grad, [0.0, 2.0, 0.0])


@pytest.mark.parametrize("side", ["left", "right"])
def test_where_with_a_scalar(backend, side):
    x = Variable(backend.asarray([-1.0, 2.0, -3.0]))
    cond = x > 0.0
    if side == "left":
        y = F.where(cond, 5.0, x)
        expected, grad = [-1.0, 5.0, -3.0], [1.0, 0.0, 1.0]
    else:
        y = F.where(cond, x, 0.0)
        expected, grad = [0.0, 2.0, 0.0], [0.0, 1.0, 0.0]
    assert y.dtype == backend.dtype("float32")
    backend.assert_close(y, expected)
    F.sum(y).backward()
    backend.assert_close(x.grad, grad)


def test_where_with_two_scalars_is_refused(backend):
    # The standard requires at least one array operand; agnograd says so on every
    # backend rather than only where the backend itself objects.
    cond = backend.asarray([True, False], dtype="bool")
    with pytest.raises(TypeError, match="scalars"):
        F.where(cond, 1.0, 0.0)


def test_where_broadcasts(backend):
    cond = backend.asarray([[True], [False]], dtype="bool")
    x1 = Variable(backend.asarray([1.0, 2.0, 3.0]))
    x2 = Variable(backend.asarray(0.0))
    y = F.where(cond, x1, x2)
    backend.assert_close(y, [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    F.sum(y).backward()
    backend.assert_close(x1.grad, [1.0, 1.0, 1.0])
    backend.assert_close(x2.grad, 3.0)


# -- neural-network functions -----------------------------------------------------------

LOGITS = RNG.uniform(-2.0, 2.0, size=(4, 3)).astype(np.float32)


def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [None, 0, -1], ids=str)
def test_softmax(backend, axis):
    x = Variable(backend.asarray(LOGITS))
    y = F.softmax(x) if axis is None else F.softmax(x, axis=axis)
    ax = 1 if axis is None else axis
    s = _np_softmax(LOGITS, ax)
    backend.assert_close(y, s, rtol=1e-5)
    w = RNG.uniform(-1, 1, size=LOGITS.shape).astype(np.float32)
    F.sum(y * backend.asarray(w)).backward()
    backend.assert_close(x.grad, s * (w - np.sum(w * s, axis=ax, keepdims=True)), atol=1e-6)


@pytest.mark.parametrize("axis", [None, 0], ids=str)
def test_log_softmax(backend, axis):
    x = Variable(backend.asarray(LOGITS))
    y = F.log_softmax(x) if axis is None else F.log_softmax(x, axis=axis)
    ax = 1 if axis is None else axis
    s = _np_softmax(LOGITS, ax)
    backend.assert_close(y, np.log(s), rtol=1e-5, atol=1e-6)
    w = RNG.uniform(-1, 1, size=LOGITS.shape).astype(np.float32)
    F.sum(y * backend.asarray(w)).backward()
    backend.assert_close(x.grad, w - s * np.sum(w, axis=ax, keepdims=True), atol=1e-6)


def test_softmax_is_stable_for_large_logits(backend):
    y = F.softmax(backend.asarray([[1000.0, 1000.0]]))
    backend.assert_close(y, [[0.5, 0.5]])
    z = F.log_softmax(backend.asarray([[1000.0, 0.0]]))
    backend.assert_close(z, [[0.0, -1000.0]])


def test_softmax_double_backprop(backend):
    # For y = sum(softmax(x) * w), the gradient is s * (w - <w, s>); its sum over the
    # class axis is zero for every sample, so the second derivative of that sum is 0.
    x = Variable(backend.asarray(LOGITS))
    w = backend.asarray(RNG.uniform(-1, 1, size=LOGITS.shape))
    (gx,) = agnograd.grad([F.sum(F.softmax(x) * w)], [x], enable_double_backprop=True)
    backend.assert_close(F.sum(gx, axis=1), np.zeros(4), atol=1e-6)
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    backend.assert_close(ggx, np.zeros_like(LOGITS), atol=1e-6)


LABELS = np.array([0, 2, -1, 1])


def _np_cross_entropy(logits, labels, ignore_label=-1):
    log_p = np.log(_np_softmax(logits, 1))
    valid = labels != ignore_label
    losses = np.where(valid, -log_p[np.arange(len(labels)), np.where(valid, labels, 0)], 0.0)
    onehot = np.zeros_like(logits)
    onehot[np.arange(len(labels))[valid], labels[valid]] = 1.0
    grad = (_np_softmax(logits, 1) - onehot) * valid[:, None]
    return losses, grad, valid.sum()


def test_softmax_cross_entropy_mean_ignores_rows(backend):
    x = Variable(backend.asarray(LOGITS))
    loss = F.softmax_cross_entropy(x, backend.asarray(LABELS, dtype=None))
    losses, grad, count = _np_cross_entropy(LOGITS, LABELS)
    assert loss.shape == ()
    backend.assert_close(loss, losses.sum() / count, rtol=1e-5)
    loss.backward()
    backend.assert_close(x.grad, grad / count, atol=1e-6)
    np.testing.assert_array_equal(backend.to_numpy(x.grad)[2], np.zeros(3))


def test_softmax_cross_entropy_no_reduction(backend):
    x = Variable(backend.asarray(LOGITS))
    losses_v = F.softmax_cross_entropy(x, backend.asarray(LABELS, dtype=None), reduce="no")
    losses, grad, _ = _np_cross_entropy(LOGITS, LABELS)
    assert losses_v.shape == (4,)
    backend.assert_close(losses_v, losses, rtol=1e-5)
    w = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    F.sum(losses_v * backend.asarray(w)).backward()
    backend.assert_close(x.grad, grad * w[:, None], atol=1e-6)


def test_softmax_cross_entropy_other_ignore_label(backend):
    labels = np.array([0, 2, 1, 1])
    x = Variable(backend.asarray(LOGITS))
    loss = F.softmax_cross_entropy(x, backend.asarray(labels, dtype=None), ignore_label=1)
    losses, grad, count = _np_cross_entropy(LOGITS, labels, ignore_label=1)
    backend.assert_close(loss, losses.sum() / count, rtol=1e-5)
    loss.backward()
    backend.assert_close(x.grad, grad / count, atol=1e-6)


def test_softmax_cross_entropy_all_ignored_is_zero(backend):
    x = Variable(backend.asarray(LOGITS))
    loss = F.softmax_cross_entropy(x, backend.asarray([-1, -1, -1, -1], dtype=None))
    backend.assert_close(loss, 0.0)
    loss.backward()
    backend.assert_close(x.grad, np.zeros_like(LOGITS))


def test_softmax_cross_entropy_argument_errors(backend):
    x = backend.asarray(LOGITS)
    t = backend.asarray(LABELS, dtype=None)
    with pytest.raises(ValueError, match=r"\(N, C\)"):
        F.softmax_cross_entropy(backend.asarray(np.zeros((2, 3, 4))), t)
    with pytest.raises(ValueError, match="t must have shape"):
        F.softmax_cross_entropy(x, backend.asarray([0, 1], dtype=None))
    with pytest.raises(ValueError, match="reduce"):
        F.softmax_cross_entropy(x, t, reduce="sum")


def test_softmax_cross_entropy_double_backprop(backend):
    # The gradient (softmax - onehot) / N sums to zero over classes, so the gradient
    # of its total is zero too.
    x = Variable(backend.asarray(LOGITS))
    loss = F.softmax_cross_entropy(x, backend.asarray(LABELS, dtype=None))
    (gx,) = agnograd.grad([loss], [x], enable_double_backprop=True)
    _, grad, count = _np_cross_entropy(LOGITS, LABELS)
    backend.assert_close(gx, grad / count, atol=1e-6)
    (ggx,) = agnograd.grad([F.sum(gx)], [x])
    backend.assert_close(ggx, np.zeros_like(LOGITS), atol=1e-6)


@pytest.mark.parametrize("reduce", ["mean", "no"])
def test_softmax_cross_entropy_second_order(backend, reduce):
    # The gradient's own derivative, in x and in the output gradient, against central
    # differences (taken in float64), an ignored label among the labels.
    from agnograd.testing import check_double_backward

    if backend.name == "jax":
        pytest.skip("JAX has no float64 outside its x64 mode, which the suite leaves off")
    rng = np.random.default_rng(3)
    x = rng.uniform(-2.0, 2.0, size=(4, 3))
    t = backend.asarray(LABELS, dtype=None)
    gy = rng.uniform(0.5, 1.5, size=() if reduce == "mean" else (4,))
    ggx = rng.uniform(-1.0, 1.0, size=(4, 3))
    check_double_backward(
        lambda v: F.softmax_cross_entropy(v, t, reduce=reduce),
        backend.asarray(x),
        backend.asarray(gy),
        backend.asarray(ggx),
        dtype="float64",
    )


def test_mean_squared_error(backend):
    a = X
    b = W
    x0, x1 = Variable(backend.asarray(a)), Variable(backend.asarray(b))
    loss = F.mean_squared_error(x0, x1)
    assert loss.shape == ()
    backend.assert_close(loss, np.mean((a - b) ** 2), rtol=1e-5)
    loss.backward()
    backend.assert_close(x0.grad, 2 * (a - b) / a.size, rtol=1e-5)
    backend.assert_close(x1.grad, -2 * (a - b) / a.size, rtol=1e-5)


def test_mean_squared_error_with_a_raw_target(backend):
    x0 = Variable(backend.asarray([1.0, 2.0]))
    loss = F.mean_squared_error(x0, backend.asarray([1.0, 4.0]))
    backend.assert_close(loss, 2.0)
    loss.backward()
    backend.assert_close(x0.grad, [0.0, -2.0])
