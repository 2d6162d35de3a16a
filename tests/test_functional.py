"""agnograd.functional against torch.autograd.functional and JAX.

The functions under test (a 2-layer MLP and a Gaussian-mixture log-likelihood) are
written once against the array API and run unchanged on agnograd's Variables of
NumPy, array-api-strict and torch arrays, on torch tensors under torch's autograd,
and on JAX arrays under JAX's transforms. agnograd and torch compare in float64;
JAX runs in float32 (x64 is left off: other test modules share the process), so
comparisons with it use float32 tolerances.
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any

import array_api_compat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.functional import hessian, hvp, jacobian, jvp, value_and_grad, vhp, vjp

torch = pytest.importorskip("torch")
import torch.autograd.functional as TF  # noqa: E402

LIBS = ["numpy", "array_api_strict", "torch"]
SMALL = settings(max_examples=10, deadline=None)


def to_lib(name: str, a: Any) -> Any:
    a = np.asarray(a, dtype=np.float64)
    if name == "numpy":
        return a
    if name == "array_api_strict":
        xps = pytest.importorskip("array_api_strict")
        return xps.asarray(a)
    return torch.asarray(a)


def as_np(a: Any) -> np.ndarray:
    if isinstance(a, Variable):
        a = a.array
    if isinstance(a, torch.Tensor):
        return a.detach().numpy()
    return np.asarray(a)


def of_lib(a: Any, name: str) -> bool:
    if name == "numpy":
        return array_api_compat.is_numpy_array(a)
    if name == "torch":
        return array_api_compat.is_torch_array(a)
    return array_api_compat.is_array_api_strict_namespace(array_api_compat.array_namespace(a))


def assert_tree_close(ours: Any, ref: Any, lib: str, rtol: float = 1e-7, atol: float = 1e-9):
    """Same nesting of tuples/dicts, arrays of ``lib`` (not Variables), same values."""
    if isinstance(ref, tuple | list):
        assert isinstance(ours, tuple | list), (ours, ref)
        assert len(ours) == len(ref), (ours, ref)
        for o, r in zip(ours, ref, strict=True):
            assert_tree_close(o, r, lib, rtol, atol)
    elif isinstance(ref, dict):
        assert isinstance(ours, dict)
        assert ours.keys() == ref.keys()
        for k in ref:
            assert_tree_close(ours[k], ref[k], lib, rtol, atol)
    else:
        assert of_lib(ours, lib), f"expected a {lib} array, got {type(ours).__name__}"
        assert as_np(ours).shape == tuple(ref.shape)
        np.testing.assert_allclose(as_np(ours), as_np(ref), rtol=rtol, atol=atol)


# -- the functions, written once against the array API ------------------------------


def namespace(*arrays: Any) -> tuple[Any, ...]:
    """The namespace to compute with, then the arrays in it: agnograd's differentiable
    namespace if an argument is a Variable (the others are constants of its library,
    lifted to Variables by its asarray), else the arrays' own namespace."""
    xp = next((a.__array_namespace__() for a in arrays if isinstance(a, Variable)), None)
    if xp is None:
        return (array_api_compat.array_namespace(*arrays), *arrays)
    return (xp, *(xp.asarray(a) for a in arrays))


def mlp_loss(data: Any, y: Any):
    """Mean squared error of a tanh MLP with parameters (w1, b1, w2, b2)."""

    def loss(w1, b1, w2, b2):
        xp, w1, b1, w2, b2, x, y_ = namespace(w1, b1, w2, b2, data, y)
        h = xp.tanh(xp.matmul(x, w1) + b1)
        r = xp.matmul(h, w2) + b2 - y_
        return xp.mean(r * r)

    return loss


def mlp_layer(data: Any):
    """Two outputs of the first layer: its activations and their column sums."""

    def layer(w1, b1):
        xp, w1, b1, x = namespace(w1, b1, data)
        h = xp.tanh(xp.matmul(x, w1) + b1)
        return h, xp.sum(h * h, axis=0)

    return layer


def gmm_loglik(data: Any):
    """Log-likelihood of ``data`` (N, D) under an isotropic Gaussian mixture with
    means (K, D), log standard deviations (K,) and mixture logits (K,)."""
    d = data.shape[1]

    def loglik(means, log_sigma, logits):
        xp, means, log_sigma, logits, x = namespace(means, log_sigma, logits, data)
        lm = xp.max(logits)
        log_w = logits - (lm + xp.log(xp.sum(xp.exp(logits - lm))))
        diff = means - xp.expand_dims(x, axis=1)  # (N, K, D)
        sq = xp.sum(diff * diff, axis=-1)
        a = log_w - d * log_sigma - 0.5 * d * math.log(2 * math.pi)
        a = a - 0.5 * sq * xp.exp(-2.0 * log_sigma)
        m = xp.max(a, axis=1, keepdims=True)
        return xp.sum(m[:, 0] + xp.log(xp.sum(xp.exp(a - m), axis=1)))

    return loglik


@st.composite
def mlp_problems(draw) -> dict[str, np.ndarray]:
    n, d, h = (draw(st.integers(1, 3)) for _ in range(3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return {
        "data": rng.normal(size=(n, d)),
        "y": rng.normal(size=n),
        "w1": rng.normal(size=(d, h)),
        "b1": rng.normal(size=h),
        "w2": rng.normal(size=h),
        "b2": rng.normal(size=()),
    }


@st.composite
def gmm_problems(draw) -> dict[str, np.ndarray]:
    n, d, k = draw(st.integers(1, 4)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return {
        "data": rng.normal(size=(n, d)),
        "means": rng.normal(size=(k, d)),
        "log_sigma": 0.3 * rng.normal(size=k),
        "logits": rng.normal(size=k),
    }


def mlp_in(p: dict[str, np.ndarray], lib: str, *names: str) -> tuple[Any, ...]:
    return tuple(to_lib(lib, p[name]) for name in names)


PARAMS = ("w1", "b1", "w2", "b2")
GMM = ("means", "log_sigma", "logits")


# -- each function against torch.autograd.functional --------------------------------


@pytest.mark.parametrize("lib", LIBS)
@SMALL
@given(p=mlp_problems())
def test_vjp_matches_torch(lib: str, p: dict[str, np.ndarray]) -> None:
    (data, y), (data_t, yt) = mlp_in(p, lib, "data", "y"), mlp_in(p, "torch", "data", "y")
    ours = vjp(mlp_loss(data, y), mlp_in(p, lib, *PARAMS))  # v omitted: one element
    assert_tree_close(ours, TF.vjp(mlp_loss(data_t, yt), mlp_in(p, "torch", *PARAMS)), lib)

    h = np.cos(np.arange(p["w1"].shape[1] * len(p["data"]))).reshape(len(p["data"]), -1)
    v = (h, np.sin(np.arange(h.shape[1])))
    ours = vjp(mlp_layer(data), mlp_in(p, lib, "w1", "b1"), tuple(to_lib(lib, a) for a in v))
    ref = TF.vjp(mlp_layer(data_t), mlp_in(p, "torch", "w1", "b1"), tuple(map(torch.asarray, v)))
    assert_tree_close(ours, ref, lib)


@pytest.mark.parametrize("lib", LIBS)
@SMALL
@given(p=mlp_problems())
def test_jvp_matches_torch(lib: str, p: dict[str, np.ndarray]) -> None:
    data, data_t = to_lib(lib, p["data"]), to_lib("torch", p["data"])
    t = (np.cos(p["w1"]), np.sin(p["b1"]))
    ours = jvp(mlp_layer(data), mlp_in(p, lib, "w1", "b1"), tuple(to_lib(lib, a) for a in t))
    ref = TF.jvp(mlp_layer(data_t), mlp_in(p, "torch", "w1", "b1"), tuple(map(torch.asarray, t)))
    assert_tree_close(ours, ref, lib)

    (y,), (yt,) = mlp_in(p, lib, "y"), mlp_in(p, "torch", "y")
    b2, b2t = to_lib(lib, p["b2"]), to_lib("torch", p["b2"])
    rest, rest_t = mlp_in(p, lib, *PARAMS[:3]), mlp_in(p, "torch", *PARAMS[:3])
    # one input of one element: v may be omitted
    ours = jvp(lambda b: mlp_loss(data, y)(*rest, b), b2)
    assert_tree_close(ours, TF.jvp(lambda b: mlp_loss(data_t, yt)(*rest_t, b), b2t), lib)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("lib", LIBS)
@SMALL
@given(p=mlp_problems())
def test_jacobian_matches_torch(lib: str, strategy: str, p: dict[str, np.ndarray]) -> None:
    data, data_t = to_lib(lib, p["data"]), to_lib("torch", p["data"])
    w1, b1 = mlp_in(p, lib, "w1", "b1")
    w1t, b1t = mlp_in(p, "torch", "w1", "b1")
    layer, layer_t = mlp_layer(data), mlp_layer(data_t)
    cases = [  # tuple in, tuple out; one in, one out; one in, tuple out; tuple in, one out
        (layer, (w1, b1), layer_t, (w1t, b1t)),
        (lambda w: layer(w, b1)[0], w1, lambda w: layer_t(w, b1t)[0], w1t),
        (lambda w: layer(w, b1), w1, lambda w: layer_t(w, b1t), w1t),
        (lambda w, b: layer(w, b)[1], (w1, b1), lambda w, b: layer_t(w, b)[1], (w1t, b1t)),
    ]
    for f, x, ft, xt in cases:
        # torch's forward mode needs vectorize=True; its reverse mode is the reference
        assert_tree_close(jacobian(f, x, strategy=strategy), TF.jacobian(ft, xt), lib)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("lib", LIBS)
@SMALL
@given(p=gmm_problems())
def test_hessian_matches_torch(lib: str, strategy: str, p: dict[str, np.ndarray]) -> None:
    f, ft = gmm_loglik(to_lib(lib, p["data"])), gmm_loglik(to_lib("torch", p["data"]))
    ours = hessian(f, mlp_in(p, lib, *GMM), outer_jacobian_strategy=strategy)
    assert_tree_close(ours, TF.hessian(ft, mlp_in(p, "torch", *GMM)), lib)

    means, rest = to_lib(lib, p["means"]), mlp_in(p, lib, *GMM[1:])
    means_t, rest_t = to_lib("torch", p["means"]), mlp_in(p, "torch", *GMM[1:])
    ours = hessian(lambda m: f(m, *rest), means, outer_jacobian_strategy=strategy)
    assert_tree_close(ours, TF.hessian(lambda m: ft(m, *rest_t), means_t), lib)


@pytest.mark.parametrize("lib", LIBS)
@SMALL
@given(p=gmm_problems())
def test_hvp_and_vhp_match_torch(lib: str, p: dict[str, np.ndarray]) -> None:
    f, ft = gmm_loglik(to_lib(lib, p["data"])), gmm_loglik(to_lib("torch", p["data"]))
    v = tuple(np.cos(np.arange(p[k].size)).reshape(p[k].shape) for k in GMM)
    x, xt = mlp_in(p, lib, *GMM), mlp_in(p, "torch", *GMM)
    for ours, theirs in ((hvp, TF.hvp), (vhp, TF.vhp)):
        result = ours(f, x, tuple(to_lib(lib, a) for a in v))
        assert_tree_close(result, theirs(ft, xt, tuple(map(torch.asarray, v))), lib)
    # one input of one element: v may be omitted
    # (s is a 0-d scale of the log standard deviations)
    g = lambda s: f(x[0], s * x[1], x[2])  # noqa: E731
    gt = lambda s: ft(xt[0], s * xt[1], xt[2])  # noqa: E731
    s, st_ = to_lib(lib, 0.2), to_lib("torch", 0.2)
    assert_tree_close(hvp(g, s), TF.hvp(gt, st_), lib)
    assert_tree_close(vhp(g, s), TF.vhp(gt, st_), lib)
    # create_graph: the product differentiates again (a third derivative), as torch's
    xs = tuple(Variable(a) for a in x)
    _, products = hvp(f, xs, tuple(to_lib(lib, a) for a in v), create_graph=True)
    third = agnograd.grad([F.sum(sum(F.sum(q) for q in products))], list(xs))
    xts = tuple(a.detach().requires_grad_() for a in xt)
    _, tp = TF.hvp(ft, xts, tuple(map(torch.asarray, v)), create_graph=True)
    theirs = torch.autograd.grad(sum(q.sum() for q in tp), xts)
    assert_tree_close(tuple(t.array for t in third), theirs, lib)


# -- against JAX ------------------------------------------------------------------


def _problem(seed: int) -> dict[str, np.ndarray]:
    """A Gaussian mixture and an MLP of fixed shapes: JAX compiles each operation
    anew for each shape, so the JAX comparisons draw values, not shapes."""
    rng = np.random.default_rng(seed)
    shapes = {"data": (3, 2), "means": (2, 2), "log_sigma": 2, "logits": 2, "w1": (2, 3)}
    p = {k: rng.normal(size=shape) for k, shape in {**shapes, "b1": 3}.items()}
    p["log_sigma"] *= 0.3
    return p


@functools.cache
@functools.cache  # the same jitted functions for every example and library
def _jax_references() -> dict[str, Any]:
    """JAX's transforms of the test functions, jitted once: eager JAX compiles every
    operation for every shape, and the examples share theirs."""
    jax = pytest.importorskip("jax")

    def f(means, log_sigma, logits, data):
        return gmm_loglik(data)(means, log_sigma, logits)

    def with_aux(params, data):  # a dict of parameters, and an auxiliary output
        value = f(params["means"], params["log_sigma"], params["logits"], data)
        return value, {"neg": -value}

    def layer(w1, b1, data):
        return mlp_layer(data)(w1, b1)

    return {
        name: jax.jit(fn)
        for name, fn in {
            "jacrev": jax.jacrev(f, (0, 1, 2)),
            "hessian": jax.hessian(f, (0, 1, 2)),
            "jvp": lambda x, t, data: jax.jvp(lambda *x: f(*x, data), x, t),
            "jacfwd": jax.jacfwd(layer, (0, 1)),
            "value_and_grad": jax.value_and_grad(f, (0, 2)),
            "with_aux": jax.value_and_grad(with_aux, has_aux=True),
        }.items()
    }


@pytest.mark.parametrize("lib", LIBS)
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_against_jax(lib: str, seed: int) -> None:
    jnp = pytest.importorskip("jax").numpy
    ref = _jax_references()
    p = _problem(seed)
    J = {k: jnp.asarray(v, dtype=jnp.float32) for k, v in p.items()}
    f = gmm_loglik(to_lib(lib, p["data"]))
    x, xj = mlp_in(p, lib, *GMM), tuple(J[k] for k in GMM)
    close = functools.partial(assert_tree_close, lib=lib, rtol=2e-4, atol=2e-4)

    close(jacobian(f, x), ref["jacrev"](*xj, J["data"]))
    close(hessian(f, x), ref["hessian"](*xj, J["data"]))
    t = tuple(np.sin(np.arange(p[k].size)).reshape(p[k].shape) for k in GMM)
    tj = tuple(jnp.asarray(a, dtype=jnp.float32) for a in t)
    close(jvp(f, x, tuple(to_lib(lib, a) for a in t)), ref["jvp"](xj, tj, J["data"]))
    layer = mlp_layer(to_lib(lib, p["data"]))
    ours = jacobian(layer, mlp_in(p, lib, "w1", "b1"), strategy="forward-mode")
    close(ours, ref["jacfwd"](J["w1"], J["b1"], J["data"]))

    close(value_and_grad(f, argnums=(0, 2))(*x), ref["value_and_grad"](*xj, J["data"]))
    value, grads = value_and_grad(f, argnums=(0, 1, 2))(*x)
    close(value_and_grad(f, argnums=-1)(*x), (value, grads[2]))

    def with_aux(params, data):
        value = gmm_loglik(data)(params["means"], params["log_sigma"], params["logits"])
        return value, {"neg": -value}

    params = dict(zip(GMM, x, strict=True))
    ours = value_and_grad(with_aux, has_aux=True)(params, to_lib(lib, p["data"]))
    close(ours, ref["with_aux"](dict(zip(GMM, xj, strict=True)), J["data"]))


# -- higher order, graphs, devices -------------------------------------------------


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("lib", LIBS)
def test_jacobian_of_jacobian_is_the_hessian(lib: str, strategy: str) -> None:
    rng = np.random.default_rng(0)
    data, means, log_sigma, logits = (rng.normal(size=s) for s in ((4, 2), (3, 2), 3, 3))
    f = gmm_loglik(to_lib(lib, data))
    rest = (to_lib(lib, 0.3 * log_sigma), to_lib(lib, logits))

    def grad_f(m):
        return jacobian(lambda m: f(m, *rest), m, create_graph=True, strategy=strategy)

    assert isinstance(grad_f(Variable(to_lib(lib, means))), Variable)
    nested = jacobian(grad_f, to_lib(lib, means), strategy=strategy)
    direct = hessian(lambda m: f(m, *rest), to_lib(lib, means))
    assert_tree_close(nested, as_np(direct), lib)

    # third order: the jacobian of the create_graph hessian, against torch's
    ft = gmm_loglik(to_lib("torch", data))
    rest_t = (to_lib("torch", 0.3 * log_sigma), to_lib("torch", logits))
    ours = jacobian(
        lambda s: hessian(lambda s: f(to_lib(lib, means), s, rest[1]), s, create_graph=True),
        rest[0],
    )
    ref = TF.jacobian(
        lambda s: TF.hessian(lambda s: ft(to_lib("torch", means), s, rest_t[1]), s, True),
        rest_t[0],
    )
    assert_tree_close(ours, ref, lib)


@pytest.mark.parametrize("lib", LIBS)
def test_forward_mode_jacobian_records_no_reverse_graph_unless_asked(lib: str) -> None:
    """The forward-mode Jacobian's jvps (and jacfwd's) run on arrays that require no
    gradient (no reverse graph, rules on raw arrays) unless ``create_graph`` asks for
    one."""
    seen = []

    def f(a: Any) -> Any:
        y = F.tanh(a) * a
        seen.append((a.requires_grad, y.requires_grad))
        return y

    x = to_lib(lib, [0.5, -1.0, 2.0])
    want = jacobian(f, x)
    seen.clear()
    assert_tree_close(jacobian(f, x, strategy="forward-mode"), as_np(want), lib, rtol=1e-14)
    assert seen == [(False, False)] * 3
    seen.clear()
    assert_tree_close(agnograd.func.jacfwd(f)(x), as_np(want), lib, rtol=1e-14)
    assert seen == [(False, False)]  # one jvp, batched over the columns
    seen.clear()
    block = jacobian(f, Variable(x), create_graph=True, strategy="forward-mode")
    assert isinstance(block, Variable)
    assert block.requires_grad
    assert seen == [(True, True)] * 3


def _gradient_by(how: str) -> Any:
    """The gradient of ``sum(sin(x) x^3)``, by a transform of each kind."""

    def f(a: Any) -> Any:
        return F.sum(F.sin(a) * a**3)

    if how == "jacobian":
        return lambda a: jacobian(f, a, create_graph=True)
    if how == "vjp":
        return lambda a: vjp(f, a, create_graph=True)[1]
    if how == "value_and_grad":
        return lambda a: value_and_grad(f)(a)[1]
    if how == "func.grad":
        return lambda a: agnograd.func.grad(f)(a)
    # agnograd.grad of outputs and inputs: the argument must require a gradient
    return lambda a: agnograd.grad([f(a)], [a], enable_double_backprop=True)[0]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("how", ["jacobian", "vjp", "value_and_grad", "func.grad", "chainer"])
def test_forward_mode_jacobian_of_a_func_that_differentiates_its_argument(
    lib: str, how: str
) -> None:
    """A transform that func runs on its argument carries the argument's tangents:
    the forward-mode Jacobian of a gradient is the Hessian. ``agnograd.grad`` of
    outputs and inputs differentiates the argument itself, which requires a gradient
    with ``create_graph=True`` only."""
    a = np.array([0.5, -1.0, 2.0])
    x = to_lib(lib, a)
    h = np.diag(6 * a * np.sin(a) + 6 * a**2 * np.cos(a) - a**3 * np.sin(a))
    gradient = _gradient_by(how)
    if how != "chainer":
        assert_tree_close(jacobian(gradient, x, strategy="forward-mode"), h, lib, rtol=1e-13)
    got = jacobian(gradient, x, create_graph=True, strategy="forward-mode")
    np.testing.assert_allclose(as_np(got), h, rtol=1e-13)


def test_create_graph_results_are_variables_connected_to_the_inputs() -> None:
    a = np.array([0.5, -1.0, 2.0])
    v = np.array([1.0, 2.0, 3.0])
    cube = lambda x: x * x * x  # noqa: E731
    x = Variable(a)
    out, vj = vjp(cube, x, v, create_graph=True)
    assert isinstance(out, Variable)
    assert isinstance(vj, Variable)
    F.sum(vj).backward()  # d/dx sum(3 x^2 v) = 6 x v
    np.testing.assert_allclose(x.grad, 6 * a * v)

    xt = torch.asarray(a).requires_grad_()
    TF.vjp(cube, xt, torch.asarray(v), create_graph=True)[1].sum().backward()
    np.testing.assert_allclose(x.grad, xt.grad.numpy())

    # v as a Variable keeps its graph too
    x, vv = Variable(a), Variable(v)
    _, jv = jvp(cube, x, vv, create_graph=True)
    F.sum(jv).backward()
    np.testing.assert_allclose(vv.grad, 3 * a**2)
    np.testing.assert_allclose(x.grad, 6 * a * v)

    # without create_graph: arrays, and the caller's Variable is left alone
    x = Variable(a)
    out, vj = vjp(cube, x, v)
    assert type(out) is np.ndarray
    assert type(vj) is np.ndarray
    assert x.grad is None


def test_value_and_grad_nests() -> None:
    a = np.array([0.5, -1.0, 2.0])

    def f(x):
        xp = x.__array_namespace__()
        return xp.sum(xp.sin(x) * x)

    def grad_sum(x):
        return F.sum(value_and_grad(f)(x)[1])

    value, g2 = value_and_grad(grad_sum)(a)
    np.testing.assert_allclose(g2, hessian(f, a).sum(axis=0))
    np.testing.assert_allclose(value, np.sum(np.cos(a) * a + np.sin(a)))


def test_a_captured_input_is_not_the_argument() -> None:
    # pytorch/pytorch#32576: f uses x both as its argument and from its closure
    a = np.array([1.0, 2.0])
    x = Variable(a)
    ours = jacobian(lambda u: u * x, x)
    xt = torch.asarray(a)
    np.testing.assert_allclose(ours, TF.jacobian(lambda u: u * xt, xt).numpy())
    np.testing.assert_allclose(ours, np.diag(a))


def test_results_stay_on_the_inputs_device() -> None:
    xps = pytest.importorskip("array_api_strict")
    device = xps.Device("device1")
    x = xps.asarray([1.0, 2.0, 3.0], device=device)

    def f(x):
        return x * x, F.sum(x)

    for strategy in ("reverse-mode", "forward-mode"):
        for block in jacobian(f, x, strategy=strategy):
            assert block.device == device
    assert hvp(lambda x: F.sum(x**3), x, x)[1].device == device
    assert jvp(f, x, x)[1][0].device == device


def test_works_inside_no_backprop_mode() -> None:
    with agnograd.no_backprop_mode():
        h = hessian(lambda x: F.sum(x**3), np.array([1.0, 2.0]))
    np.testing.assert_allclose(h, np.diag([6.0, 12.0]))


def test_vectorize_gives_what_the_loop_gives() -> None:
    # (tests/test_vmap_jacobians.py compares them on every library)
    x = np.array([[0.5, 1.0], [2.0, -1.0]])
    f = lambda x: F.tanh(x) * 2.0  # noqa: E731
    np.testing.assert_array_equal(jacobian(f, x, vectorize=True), jacobian(f, x))
    g = lambda x: F.sum(F.tanh(x) ** 2)  # noqa: E731
    np.testing.assert_array_equal(hessian(g, x, vectorize=True), hessian(g, x))


def test_empty_arrays() -> None:
    # (torch's jacobian raises "stack expects a non-empty TensorList" here)
    double = lambda x: x * 2.0  # noqa: E731
    for strategy in ("reverse-mode", "forward-mode"):
        assert jacobian(double, np.zeros((0, 2)), strategy=strategy).shape == (0, 2, 0, 2)
        block = jacobian(lambda x: (x, F.sum(x)), np.zeros(0), strategy=strategy)[1]
        np.testing.assert_array_equal(block, np.zeros(0))


def test_backward_passes_are_those_the_docstrings_state(monkeypatch: pytest.MonkeyPatch) -> None:
    import agnograd.transforms._transforms as transforms

    passes = []
    real = transforms._grad

    def counting(*args: Any, **kwargs: Any) -> Any:
        passes.append(kwargs.get("enable_double_backprop", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(transforms, "_grad", counting)

    def count(call: Any) -> int:
        passes.clear()
        call()
        return len(passes)

    x, y = np.ones((2, 3)), np.ones(4)  # 6 and 4 elements
    f = lambda a, b: (F.sum(a) * b, F.tanh(b))  # noqa: E731 - outputs of 4 and 4 elements
    g = lambda a, b: F.sum(a**2) * F.sum(b**3)  # noqa: E731
    n = x.size + y.size
    assert count(lambda: vjp(f, (x, y), (y, y))) == 1
    assert count(lambda: jvp(f, (x, y), (x, y))) == 0  # forward mode: no backward
    assert count(lambda: jvp(f, (x, y), (x, y), strict=True)) == 2  # the double-backward trick
    assert count(lambda: jacobian(f, (x, y))) == 4 + 4  # one per output element
    assert count(lambda: jacobian(f, (x, y), vectorize=True)) == 2  # one per output
    assert count(lambda: jacobian(f, (x, y), strategy="forward-mode")) == 0
    k = lambda a, b: F.sum(a) * b  # noqa: E731
    assert count(lambda: jacobian(k, (x, y), strict=True, strategy="forward-mode")) == 1 + n
    const = agnograd.as_variable(np.ones(3))
    assert count(lambda: jacobian(lambda a: (a, const), y)) == 4  # none for a constant
    assert count(lambda: hessian(g, (x, y))) == 1 + n
    assert count(lambda: hessian(g, (x, y), outer_jacobian_strategy="forward-mode")) == 2 + n
    assert count(lambda: hessian(g, (x, y), vectorize=True)) == 1 + 2  # one per input
    assert (
        count(lambda: jacobian(k, (x, y), strict=True, vectorize=True, strategy="forward-mode"))
        == 1 + 2
    )
    assert count(lambda: vhp(g, (x, y), (x, y))) == 2
    assert count(lambda: hvp(g, (x, y), (x, y))) == 1  # of the derivative along v
    assert count(lambda: hvp(g, (x, y), (x, y), strict=True)) == 3
    assert count(lambda: value_and_grad(g, argnums=(0, 1))(x, y)) == 1

    # complex numbers: a holomorphic function costs what a real one does; a second pass
    # where a complex output meets a real input (rows), or a complex input a real
    # output (columns)
    r, z = np.ones(2), np.ones(3, dtype=np.complex128)
    assert count(lambda: jacobian(lambda b: b * b, z)) == 3
    assert count(lambda: jacobian(lambda b: b * b, z, strategy="forward-mode")) == 0
    assert count(lambda: hessian(lambda b: F.sum(b**3), z)) == 1 + 3
    h = lambda a, b: (F.sum(a) * b, F.real(b))  # noqa: E731 - complex and real outputs
    assert count(lambda: jacobian(h, (r, z))) == 2 * 3 + 3
    assert count(lambda: jacobian(h, (r, z), vectorize=True)) == 2 + 1
    assert count(lambda: jacobian(h, (r, z), strategy="forward-mode")) == 0
    e = lambda a: F.sum(F.exp(F.astype(a, np.complex128) * 1j))  # noqa: E731
    assert count(lambda: hessian(e, r)) == 2 + 2 * 2
    assert count(lambda: hvp(e, r, r)) == 2  # the gradient's real and imaginary parts
    assert count(lambda: vhp(e, r, r)) == 4


def _python_calls(call: Any) -> int:
    """The Python functions ``call()`` calls, all depths: a measure of its cost in
    the interpreter that no other process disturbs (after a first call, which fills
    the caches)."""
    call()
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("several", [False, True])
def test_jvp_adds_its_checks_alone_to_forward_mode(lib: str, several: bool) -> None:
    """``jvp`` (create_graph=False) is forward mode's jvp on the raw arrays, with its
    checks of the inputs and tangents: a few calls per input beside those of
    forward mode itself, and the same results bit for bit."""
    from agnograd.transforms import _forward

    x, y = to_lib(lib, [0.5, -1.0, 2.0]), to_lib(lib, [1.0, 2.0, 3.0])
    if several:
        f, inputs, v = (lambda a, b: (F.sin(a) * b, b)), (x, y), (y, x)
    else:
        f, inputs, v = F.sin, x, y
    pair = inputs if several else (inputs,)
    vs = v if several else (v,)
    ours, want = jvp(f, inputs, v), _forward.jvp(f, pair, vs)
    assert_tree_close(ours, want, lib, rtol=0, atol=0)
    beside = _python_calls(lambda: jvp(f, inputs, v)) - _python_calls(
        lambda: _forward.jvp(f, pair, vs)
    )
    assert beside <= 15 * (1 + len(pair))


# -- complex numbers: one convention for every transform ---------------------------
# A holomorphic f has the Jacobian J = df/dz (JAX's holomorphic=True) by every strategy;
# jvp gives J v, vjp the engine's backward J^H u; a real output of complex inputs has
# backward's gradient dL/dRe z + i dL/dIm z (PyTorch's) as its row.


def to_lib_c(name: str, a: Any) -> Any:
    a = np.asarray(a, dtype=np.complex128)
    if name == "numpy":
        return a
    if name == "array_api_strict":
        return pytest.importorskip("array_api_strict").asarray(a)
    return torch.asarray(a)


def _c(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def _close(ours: Any, ref: Any, lib: str) -> None:
    assert_tree_close(ours, ref, lib, rtol=1e-10, atol=1e-12)


def _matmul(z: Any, m: Any) -> Any:
    xp, m, z = namespace(m, z)
    return xp.matmul(m, z)


# (name, f(z, m), the Jacobian of f at z (numpy arrays); m is a constant matrix)
HOLOMORPHIC: list[tuple[str, Any, Any]] = [
    ("square", lambda z, m: z**2, lambda z, m: np.diag(2 * z)),
    ("exp", lambda z, m: F.exp(z), lambda z, m: np.diag(np.exp(z))),
    ("sin", lambda z, m: F.sin(z), lambda z, m: np.diag(np.cos(z))),
    ("matmul", _matmul, lambda z, m: m),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(("name", "f", "jac"), HOLOMORPHIC, ids=[n for n, _, _ in HOLOMORPHIC])
@SMALL
@given(n=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_a_holomorphic_function_has_its_complex_derivative_by_every_transform(
    lib: str, name: str, f: Any, jac: Any, n: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    z, m, v, u = _c(rng, n), _c(rng, n, n), _c(rng, n), _c(rng, n)
    J = jac(z, m)
    fz = lambda x: f(x, to_lib_c(lib, m))  # noqa: E731
    x = to_lib_c(lib, z)
    for strategy in ("reverse-mode", "forward-mode"):
        _close(jacobian(fz, x, strategy=strategy), J, lib)
    _close(jvp(fz, x, to_lib_c(lib, v))[1], J @ v, lib)
    _close(vjp(fz, x, to_lib_c(lib, u))[1], J.conj().T @ u, lib)  # the engine's backward
    # a nested Jacobian (create_graph) keeps the convention: the Hessian of sum(f)
    H = jacobian(lambda x: jacobian(lambda y: F.sum(fz(y)), x, create_graph=True), x)
    _close(hessian(lambda y: F.sum(fz(y)), x), H, lib)


@pytest.mark.parametrize("lib", LIBS)
@SMALL
@given(n=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_two_holomorphic_inputs_and_the_hessian(lib: str, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    z1, z2, v1, v2, u = (_c(rng, n) for _ in range(5))
    x = (to_lib_c(lib, z1), to_lib_c(lib, z2))
    J = (np.diag(z2), np.diag(z1))
    for strategy in ("reverse-mode", "forward-mode"):
        _close(jacobian(lambda a, b: a * b, x, strategy=strategy), J, lib)
    vs = (to_lib_c(lib, v1), to_lib_c(lib, v2))
    _close(jvp(lambda a, b: a * b, x, vs)[1], z2 * v1 + z1 * v2, lib)
    _close(vjp(lambda a, b: a * b, x, to_lib_c(lib, u))[1], (z2.conj() * u, z1.conj() * u), lib)

    # f = sum(z1**3 * z2): H is its matrix of second complex derivatives, by every route
    f = lambda a, b: F.sum(a**3 * b)  # noqa: E731
    H = (
        (np.diag(6 * z1 * z2), np.diag(3 * z1**2)),
        (np.diag(3 * z1**2), np.zeros((n, n))),
    )
    for strategy in ("reverse-mode", "forward-mode"):
        _close(hessian(f, x, outer_jacobian_strategy=strategy), H, lib)
    Hv = (6 * z1 * z2 * v1 + 3 * z1**2 * v2, 3 * z1**2 * v1)
    _close(hvp(f, x, vs), (np.sum(z1**3 * z2), Hv), lib)
    _close(vhp(f, x, vs), (np.sum(z1**3 * z2), Hv), lib)  # H is symmetric


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("lib", LIBS)
def test_a_real_output_of_complex_inputs_has_backwards_gradient(lib: str, strategy: str) -> None:
    z = np.array([1.0 + 2.0j, 0.5 - 1.0j, -3.0 + 0.25j])
    x = to_lib_c(lib, z)

    def f(a):
        xp = a.__array_namespace__()
        return xp.abs(a), xp.real(a * a), xp.sum(xp.imag(a) * xp.abs(a))

    # rows as backward() leaves them in .grad, as torch's jacobian
    ref = TF.jacobian(lambda a: (a.abs(), (a * a).real, (a.imag * a.abs()).sum()), torch.asarray(z))
    ours = jacobian(f, x, strategy=strategy)
    _close(ours, ref, lib)
    var = Variable(x)
    F.sum(f(var)[0]).backward()
    np.testing.assert_allclose(as_np(ours[0]).sum(axis=0), as_np(var.grad), rtol=1e-12)
    _close(value_and_grad(lambda a: f(a)[2])(x)[1], ref[2], lib)
    # jvp is the derivative along v: Re(sum(conj(gradient) * v))
    v = np.array([0.5 - 1.0j, 2.0j, 1.0])
    _close(jvp(lambda a: f(a)[2], x, to_lib_c(lib, v))[1], np.real(np.vdot(as_np(ref[2]), v)), lib)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("lib", LIBS)
def test_a_complex_output_of_real_inputs_has_its_derivative(lib: str, strategy: str) -> None:
    t = np.array([0.5, -1.0, 2.0])
    x = to_lib(lib, t)

    def f(a):
        xp = a.__array_namespace__()
        return xp.exp(xp.astype(a, xp.complex128) * 1j)

    J = np.diag(1j * np.exp(1j * t))
    _close(jacobian(f, x, strategy=strategy), J, lib)
    _close(jvp(f, x, x)[1], J @ t, lib)
    # with a real and a complex input: each block by its own rule
    z = to_lib_c(lib, t + 1j)
    both = jacobian(lambda a, b: f(a) * b, (x, z), strategy=strategy)
    _close(both, (J * (t + 1j), np.diag(np.exp(1j * t))), lib)
    # the second derivative: sum(f) has H = diag(-exp(i t))
    H = np.diag(-np.exp(1j * t))
    g = lambda a: F.sum(f(a))  # noqa: E731
    _close(hessian(g, x, outer_jacobian_strategy=strategy), H, lib)
    _close(hvp(g, x, x)[1], H @ t, lib)
    _close(vhp(g, x, x)[1], H @ t, lib)
    # and with a complex input beside the real one
    g2 = lambda a, b: F.sum(f(a) * b)  # noqa: E731
    e = np.exp(1j * t)
    H2 = ((np.diag(-e * (t + 1j)), np.diag(1j * e)), (np.diag(1j * e), np.zeros((3, 3))))
    _close(hessian(g2, (x, z), outer_jacobian_strategy=strategy), H2, lib)
    w = np.array([1.0, 2.0j, -1.0 + 0.5j])
    H2v = (-e * (t + 1j) * t + 1j * e * w, 1j * e * t)
    _close(hvp(g2, (x, z), (x, to_lib_c(lib, w)))[1], H2v, lib)
    _close(vhp(g2, (x, z), (x, to_lib_c(lib, w)))[1], H2v, lib)


def test_hvp_and_vhp_of_a_real_function_of_complex_inputs_are_the_real_hessians() -> None:
    """hessian refuses (a real f of complex z has no complex Hessian matrix); hvp and
    vhp give the real Hessian in (Re z, Im z) applied to (Re v, Im v), packed as
    complex: the derivative of backward's gradient along v."""
    z = np.array([1.0 + 2.0j, 0.5 - 1.0j])
    v = np.array([0.25 + 1.0j, -2.0 + 0.5j])

    def f(a):
        xp = a.__array_namespace__()
        return xp.sum(xp.real(a * a) * xp.abs(a) ** 2 + xp.imag(a) ** 3)

    grad = value_and_grad(f)
    h = 1e-5
    numeric = (grad(z + h * v)[1] - grad(z - h * v)[1]) / (2 * h)
    np.testing.assert_allclose(hvp(f, z, v)[1], numeric, rtol=1e-7)
    np.testing.assert_allclose(vhp(f, z, v)[1], numeric, rtol=1e-7)
    with pytest.raises(TypeError, match="hessian: func's output is real but inputs is complex"):
        hessian(f, z)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_as_jax_holomorphic_even_for_non_holomorphic_functions(strategy: str) -> None:
    """A complex output of complex inputs is taken to be holomorphic, as JAX's
    holomorphic=True: each strategy gives what JAX's jacrev or jacfwd does, also for
    conj, where the two disagree."""
    jax = pytest.importorskip("jax")
    z = np.array([1.0 + 2.0j, 0.5 - 1.0j], dtype=np.complex64)
    jax_jacobian = jax.jacrev if strategy == "reverse-mode" else jax.jacfwd

    def fs(xp: Any) -> list[Any]:
        return [lambda a: a**2, xp.sin, lambda a: 1j * xp.conj(a), lambda a: a * xp.conj(a)]

    for ours, theirs in zip(fs(F), fs(jax.numpy), strict=True):
        ref = jax_jacobian(theirs, holomorphic=True)(jax.numpy.asarray(z))
        np.testing.assert_allclose(
            jacobian(ours, z, strategy=strategy), np.asarray(ref), rtol=1e-6, atol=1e-6
        )


# -- strict mode, as torch -------------------------------------------------------


def _sum(a: Any) -> Any:
    return array_api_compat.array_namespace(a).sum(a)


# (name, call(functional, x, y, v)): each function of (x, y) ignores y, or is linear.
STRICT_CASES: list[tuple[str, Any]] = [
    ("vjp", lambda fn, x, y, v: fn.vjp(lambda a, b: a * 2.0, (x, y), v)),
    ("jvp", lambda fn, x, y, v: fn.jvp(lambda a, b: a * 2.0, (x, y), (v, v))),
    ("jacobian", lambda fn, x, y, v: fn.jacobian(lambda a, b: a * 2.0, (x, y))),
    ("hessian", lambda fn, x, y, v: fn.hessian(lambda a, b: _sum(a * a), (x, y))),
    ("hessian-linear", lambda fn, x, y, v: fn.hessian(lambda a: _sum(a * 2.0), x)),
    ("hvp", lambda fn, x, y, v: fn.hvp(lambda a, b: _sum(a * a), (x, y), (v, v))),
    ("vhp", lambda fn, x, y, v: fn.vhp(lambda a, b: _sum(a * a), (x, y), (v, v))),
    ("vhp-linear", lambda fn, x, y, v: fn.vhp(lambda a: _sum(a * 2.0), x, v)),
]


class _Ours:
    """agnograd.functional with torch's keyword spellings, for the table above."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def __getattr__(self, name: str) -> Any:
        import agnograd.functional

        fn = getattr(agnograd.functional, name)
        return lambda *args: fn(*args, **self.kwargs)


class _Torch(_Ours):
    def __getattr__(self, name: str) -> Any:
        return lambda *args: getattr(TF, name)(*args, **self.kwargs)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize(("name", "call"), STRICT_CASES, ids=[n for n, _ in STRICT_CASES])
def test_strict_mode_as_torch(lib: str, create_graph: bool, name: str, call: Any) -> None:
    a, b, v = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([1.0, -1.0])
    args = (to_lib(lib, a), to_lib(lib, b), to_lib(lib, v))
    args_t = (torch.asarray(a), torch.asarray(b), torch.asarray(v))
    with pytest.raises(RuntimeError):
        call(_Torch(strict=True, create_graph=create_graph), *args_t)
    with pytest.raises(RuntimeError, match=r"strict=True"):
        call(_Ours(strict=True, create_graph=create_graph), *args)
    # without strict: zeros where torch has zeros
    ref = call(_Torch(create_graph=create_graph), *args_t)
    ours = call(_Ours(create_graph=create_graph), *args)
    if create_graph:
        ours, ref = _detach(ours), _detach(ref)
    assert_tree_close(ours, ref, lib)


def _detach(tree: Any) -> Any:
    if isinstance(tree, tuple):
        return tuple(_detach(t) for t in tree)
    if isinstance(tree, Variable):
        return tree.array
    return tree.detach() if isinstance(tree, torch.Tensor) else tree


def test_strict_forward_mode_and_constant_outputs() -> None:
    x, y = np.array([1.0, 2.0]), np.array([3.0])
    with pytest.raises(RuntimeError, match="no output of func depends on input 1"):
        jacobian(lambda a, b: a * 2.0, (x, y), strict=True, strategy="forward-mode")
    const = lambda a: agnograd.as_variable(np.ones(3))  # noqa: E731
    with pytest.raises(RuntimeError, match="does not depend on the inputs"):
        jacobian(const, x, strict=True)
    np.testing.assert_array_equal(jacobian(const, x), np.zeros((3, 2)))
    np.testing.assert_array_equal(vjp(const, x, np.ones(3))[1], np.zeros(2))
    np.testing.assert_array_equal(TF.jacobian(lambda a: torch.ones(3), torch.ones(2)), 0)


# -- errors --------------------------------------------------------------------


X = np.array([1.0, 2.0])


def _double(a: Any) -> Any:
    return a * 2.0


def _total(a: Any) -> Any:
    return F.sum(a * a)


ERRORS: list[tuple[type[Exception], str, Any]] = [
    (RuntimeError, r"vjp: v has shape \(3,\) but the output", lambda: vjp(_double, X, np.ones(3))),
    (RuntimeError, "vjp: v is a tuple of length 3", lambda: vjp(lambda a: (a, a), X, (X,) * 3)),
    (RuntimeError, "vjp: v must be a single array", lambda: vjp(_double, X, (X, X))),
    (RuntimeError, "vjp: v can be omitted only", lambda: vjp(_double, X)),
    (RuntimeError, "jvp: v can be omitted only", lambda: jvp(_double, X)),
    (
        RuntimeError,
        r"hvp: v\[1\] has shape",
        lambda: hvp(lambda a, b: _total(a), (X, X), (X, X[:1])),
    ),
    (
        TypeError,
        "jacobian: inputs must be .*got list; pass a tuple",
        lambda: jacobian(_double, [X]),
    ),
    (TypeError, r"jacobian: inputs\[1\] must be .*got float", lambda: jacobian(_double, (X, 1.0))),
    (TypeError, "vjp: v is a torch array but the output", lambda: vjp(_double, X, torch.ones(2))),
    (
        TypeError,
        "jacobian: the output of func is a numpy array, not a Variable",
        lambda: jacobian(lambda a: np.ones(1), X),
    ),
    (
        TypeError,
        "jacobian: output 1 of func must be a Variable",
        lambda: jacobian(lambda a: (a, 1), X),
    ),
    (
        TypeError,
        "jacobian: the output of func must be .*got list",
        lambda: jacobian(lambda a: [a], X),
    ),
    (
        TypeError,
        "jacobian: inputs has dtype int64; .*cast it",
        lambda: jacobian(_double, np.arange(2)),
    ),
    (
        TypeError,
        "vjp: inputs requires a gradient in torch's own autograd",
        lambda: vjp(_double, torch.ones(2, requires_grad=True), torch.ones(2)),
    ),
    (
        RuntimeError,
        r"hessian: func returned a Variable of shape \(2,\)",
        lambda: hessian(_double, X),
    ),
    (
        RuntimeError,
        "vhp: func returned a tuple of 2",
        lambda: vhp(lambda a: (_total(a),) * 2, X, X),
    ),
    (ValueError, "jacobian: strategy must be", lambda: jacobian(_double, X, strategy="fwd")),
    (
        ValueError,
        "hessian: outer_jacobian_strategy must be",
        lambda: hessian(_total, X, outer_jacobian_strategy="fwd"),
    ),
    (
        TypeError,
        "value_and_grad: differentiating with respect to argnums=2 needs at least 3",
        lambda: value_and_grad(_total, argnums=2)(X),
    ),
    (
        TypeError,
        r"value_and_grad: .*scalar output.*shape \(2,\)",
        lambda: value_and_grad(_double)(X),
    ),
    (
        TypeError,
        "value_and_grad: has_aux=True needs fun to return a pair",
        lambda: value_and_grad(_total, has_aux=True)(X),
    ),
    (TypeError, "value_and_grad: argnums must be an int", lambda: value_and_grad(_total, "0")),
    (
        TypeError,
        r"value_and_grad: argument 0\['a'\] is a float",
        lambda: value_and_grad(lambda p: _total(p["a"]))({"a": 1.0}),
    ),
    (
        TypeError,
        "value_and_grad: fun's output must have a real floating dtype",
        lambda: value_and_grad(lambda a: F.astype(F.sum(a), np.int64))(X),
    ),
]


@pytest.mark.parametrize(("error", "match", "call"), ERRORS, ids=[m[:40] for _, m, _ in ERRORS])
def test_errors_name_the_function_the_argument_and_the_fix(
    error: type[Exception], match: str, call: Any
) -> None:
    with pytest.raises(error, match=match):
        call()


def test_value_and_grad_of_a_position_named_twice_and_of_a_namedtuple() -> None:
    import collections

    def f(a: Any, b: Any) -> Any:
        return F.sum(a * a) + F.sum(b)

    a, b = np.array([1.0, 2.0]), np.array([3.0])
    for argnums in ((0, 0), (0, -2)):
        value, (g1, g2) = value_and_grad(f, argnums=argnums)(a, b)
        assert float(value) == 8.0
        np.testing.assert_array_equal(g1, [2.0, 4.0])
        np.testing.assert_array_equal(g2, [2.0, 4.0])
    P = collections.namedtuple("P", "a b")
    value, grad = value_and_grad(lambda p: F.sum(p.a * p.b))(P(a, np.array([3.0, 4.0])))
    assert isinstance(grad, P)
    np.testing.assert_array_equal(grad.a, [3.0, 4.0])
    np.testing.assert_array_equal(grad.b, [1.0, 2.0])


def _write_first(a: Any, value: float) -> None:
    """``a[0, ..., 0] = value``, on any of LIBS' arrays."""
    a[(0,) * a.ndim] = value


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(
    ("loss", "shape"),
    [
        (lambda a, b: F.sum(a) + F.sum(b), (3,)),  # a broadcast view of the seed each
        (lambda a, b: F.sum((a + b)[:2]), (3,)),  # one gradient for both arguments
        (lambda a, b: F.sum(F.reshape(a, (3,)) + b), (1, 3)),  # a view of the other's
    ],
    ids=["sums", "add", "reshape"],
)
def test_value_and_grad_gives_writable_arrays_of_their_own(
    lib: str, loss: Any, shape: tuple[int, ...]
) -> None:
    """As x.grad: writing into one gradient changes that element of it alone, on
    NumPy (read-only broadcast views), torch (expanded tensors, which write every
    element) and array-api-strict; and under agnograd.jit, whose plan would hand the
    same memory to every call."""
    a, b = to_lib(lib, np.ones(shape)), to_lib(lib, np.ones(3))
    step = value_and_grad(loss, argnums=(0, 1))
    jitted = agnograd.jit(step)
    for call in (step, jitted, jitted):
        _, (ga, gb) = call(a, b)
        want_a, want_b = as_np(ga).copy(), as_np(gb).copy()
        _write_first(gb, 7.0)
        _write_first(ga, 5.0)
        want_a.reshape(-1)[0], want_b[0] = 5.0, 7.0
        np.testing.assert_array_equal(as_np(gb), want_b)
        np.testing.assert_array_equal(as_np(ga), want_a)
    _, (ga, gb) = step(a, b)
    want_a, want_b = as_np(ga), as_np(gb)
    _, (ga, gb) = jitted(a, b)  # the writes above reached no later call
    np.testing.assert_array_equal(as_np(ga), want_a)
    np.testing.assert_array_equal(as_np(gb), want_b)
