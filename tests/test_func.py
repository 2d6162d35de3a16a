"""``agnograd.func``: ``torch.func``'s and JAX's transforms, and ``agnograd.grad``.

The same functions, written against the array API, are transformed by
``torch.func`` on tensors and by ``agnograd.func`` on the same tensors: the results
nest alike and agree to rounding. On every host backend the transforms give what
:mod:`agnograd.functional` gives, bit for bit, as arrays of the inputs' library;
hypothesis draws the shapes of their compositions (grad of grad, jacrev of grad,
vjp inside ``jit``, ``jit`` of grad, nested dict arguments). The errors name the
transform, the argument and what was wrong. ``agnograd.grad`` is JAX's with a
function and Chainer's with outputs and inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.func
import agnograd.functional as AF
import agnograd.functions as F
from agnograd import Variable
from agnograd.func import (
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    value_and_grad,
    vjp,
)

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")

EXAMPLES = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- functions of the array API, for both torch.func and agnograd.func ------------


def ns(*xs: Any) -> Any:
    return array_api_compat.array_namespace(*xs)


def mlp_loss(p: dict[str, Any], x: Any) -> Any:
    xp = ns(p["w"], x)
    h = xp.tanh(x @ p["w"] + p["b"])
    return xp.sum(h * h) / 3.0


def two_args(x: Any, y: Any) -> Any:
    xp = ns(x, y)
    return xp.sum(xp.sin(x) * y**2)


def with_aux(x: Any, y: Any) -> Any:
    xp = ns(x, y)
    r = xp.exp(x) * y
    return xp.sum(r), {"r": r, "x": x}


def several_outputs(x: Any, y: Any) -> Any:
    xp = ns(x, y)
    return {"prod": x * y, "parts": (xp.sum(xp.exp(x)), [x - y])}


def tensors(rng: np.random.Generator, *shapes: tuple[int, ...]) -> list[Any]:
    return [torch.from_numpy(rng.standard_normal(s)) for s in shapes]


def close(got: Any, want: Any) -> None:
    """Nested alike, arrays equal to rounding (float64)."""
    if isinstance(want, tuple | list):
        assert type(got) is type(want)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            close(g, w)
    elif isinstance(want, dict):
        assert type(got) is dict
        assert list(got) == list(want)
        for k in want:
            close(got[k], want[k])
    else:
        assert type(got) is type(want)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-14)


def same(got: Any, want: Any, back: Callable[[Any], np.ndarray] = np.asarray) -> None:
    """Nested alike, arrays of the same type, equal bit for bit."""
    if isinstance(want, tuple | list):
        assert type(got) is type(want)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same(g, w, back)
    elif isinstance(want, dict):
        assert type(got) is dict
        assert list(got) == list(want)
        for k in want:
            same(got[k], want[k], back)
    else:
        assert type(got) is type(want)
        np.testing.assert_array_equal(back(got), back(want), strict=True)


def near(got: Any, want: Any, back: Callable[[Any], np.ndarray] = np.asarray) -> None:
    """Nested alike, arrays of the same type and dtype, equal to their dtype's rounding."""
    if isinstance(want, tuple | list | dict):
        assert type(got) is type(want)
        assert len(got) == len(want)
        for k in range(len(want)) if isinstance(want, tuple | list) else want:
            near(got[k], want[k], back)
    else:
        assert type(got) is type(want)
        a, b = back(got), back(want)
        assert a.dtype == b.dtype
        rtol = 1e-12 if a.dtype in (np.float64, np.complex128) else 1e-5
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)


# --- against torch.func ------------------------------------------------------------


def _cases(rng: np.random.Generator) -> list[tuple[str, Callable[[Any], Any]]]:
    w, b, x = tensors(rng, (3, 2), (2,), (4, 3))
    u, v = tensors(rng, (3,), (3,))
    p = {"w": w, "b": b}
    return [
        ("grad", lambda m: m.grad(mlp_loss)(p, x)),
        ("grad argnums", lambda m: m.grad(two_args, argnums=(1, 0))(u, v)),
        ("grad negative argnums", lambda m: m.grad(two_args, argnums=-1)(u, v)),
        ("grad has_aux", lambda m: m.grad(with_aux, argnums=1, has_aux=True)(u, v)),
        ("grad_and_value", lambda m: m.grad_and_value(with_aux, has_aux=True)(u, v)),
        ("grad_and_value plain", lambda m: m.grad_and_value(two_args, argnums=(0, 1))(u, v)),
        ("vjp", lambda m: _vjp_pulled(m, several_outputs, u, v)),
        ("vjp of a dict", lambda m: _vjp_pulled(m, mlp_loss, p, x)),
        ("jacrev", lambda m: m.jacrev(several_outputs, argnums=(0, 1))(u, v)),
        ("jacrev of a dict", lambda m: m.jacrev(lambda q: q["w"] @ q["b"])(p)),
        ("jacrev has_aux", lambda m: m.jacrev(with_aux, has_aux=True)(u, v)),
        ("hessian", lambda m: m.hessian(two_args, argnums=(0, 1))(u, v)),
        ("hessian of a dict", lambda m: m.hessian(mlp_loss)(p, x)),
        ("jacrev of grad", lambda m: m.jacrev(m.grad(mlp_loss))(p, x)),
        ("grad of grad", lambda m: m.grad(lambda a: m.grad(two_args)(a, v)[0])(u)),
        ("jvp", lambda m: m.jvp(several_outputs, (u, v), (v, u))),
        ("jvp has_aux", lambda m: m.jvp(with_aux, (u, v), (v, u), has_aux=True)),
        ("jvp of a dict", lambda m: m.jvp(mlp_loss, (p, x), (_tree_map(torch.cos, p), x))),
        ("jacfwd", lambda m: m.jacfwd(several_outputs, argnums=(0, 1))(u, v)),
        ("jacfwd of a dict", lambda m: m.jacfwd(lambda q: q["w"] @ q["b"])(p)),
        ("jacfwd has_aux", lambda m: m.jacfwd(with_aux, has_aux=True)(u, v)),
        ("jacfwd of jacrev", lambda m: m.jacfwd(m.jacrev(two_args), argnums=1)(u, v)),
        ("jacfwd of grad of a dict", lambda m: m.jacfwd(m.grad(mlp_loss))(p, x)),
        ("jvp of grad", lambda m: m.jvp(lambda q: m.grad(mlp_loss)(q, x), (p,), (p,))),
        ("grad of jvp", lambda m: m.grad(lambda a: m.jvp(two_args, (a, v), (v, a))[1])(u)),
        ("linearize", lambda m: _linearized(m, several_outputs, u, v)),
    ]


def _linearized(m: Any, f: Callable[..., Any], *primals: Any) -> Any:
    out, jvp_fn = m.linearize(f, *primals)
    tangents = _tree_map(lambda t: torch.cos(t) + 2.0, primals)
    return out, jvp_fn(*tangents), jvp_fn(*primals)  # any number of times


def _vjp_pulled(m: Any, f: Callable[..., Any], *primals: Any) -> Any:
    out, vjp_fn = m.vjp(f, *primals)
    cotangents = _tree_map(lambda t: torch.cos(t) + 2.0, out)  # any, of out's structure
    return out, vjp_fn(cotangents)


def _tree_map(f: Callable[[Any], Any], tree: Any) -> Any:
    if isinstance(tree, tuple | list):
        return type(tree)(_tree_map(f, t) for t in tree)
    if isinstance(tree, dict):
        return {k: _tree_map(f, t) for k, t in tree.items()}
    return f(tree)


# torch.func.hessian's jacfwd calls torch.jit.script, deprecated in torch 2.13.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
# torch.func.linearize traces the function with make_fx, which warns of its constants.
@pytest.mark.filterwarnings("ignore:Attempted to insert a get_attr Node:UserWarning")
@pytest.mark.parametrize("case", [name for name, _ in _cases(np.random.default_rng(0))])
def test_as_torch_func_on_the_same_tensors(case: str) -> None:
    (run,) = [run for name, run in _cases(np.random.default_rng(1)) if name == case]
    close(run(agnograd.func), run(tf))


def test_value_and_grad_is_jax_order_of_grad_and_value() -> None:
    u, v = tensors(np.random.default_rng(2), (3,), (3,))
    (value, aux), g = value_and_grad(with_aux, has_aux=True)(u, v)
    close((g, (value, aux)), tf.grad_and_value(with_aux, has_aux=True)(u, v))
    assert value_and_grad is AF.value_and_grad


def test_as_jax_to_rounding() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(3)
    p = {"w": jnp.asarray(rng.standard_normal((3, 2)), dtype=jnp.float32), "b": jnp.ones(2)}
    x = jnp.asarray(rng.standard_normal((4, 3)), dtype=jnp.float32)
    # JAX's own results under jax.jit: one program each, where running them eagerly
    # compiles every operation of every transform on its own (seconds).
    for ours, theirs in [
        (grad(mlp_loss)(p, x), jax.jit(jax.grad(mlp_loss))(p, x)),
        (jacrev(lambda q: q["w"] @ q["b"])(p), jax.jit(jax.jacrev(lambda q: q["w"] @ q["b"]))(p)),
        (hessian(mlp_loss)(p, x), jax.jit(jax.hessian(mlp_loss))(p, x)),
        (jacfwd(lambda q: q["w"] @ q["b"])(p), jax.jit(jax.jacfwd(lambda q: q["w"] @ q["b"]))(p)),
        (
            jvp(mlp_loss, (p, x), (p, x)),
            jax.jit(lambda *a: jax.jvp(mlp_loss, a[:2], a[2:]))(p, x, p, x),
        ),
        (
            linearize(mlp_loss, p, x)[1](p, x),
            jax.jit(lambda *a: jax.linearize(mlp_loss, *a[:2])[1](*a[2:]))(p, x, p, x),
        ),
        (
            vjp(mlp_loss, p, x)[1](jnp.asarray(2.0)),
            jax.jit(lambda *a: jax.vjp(mlp_loss, *a[:2])[1](a[2]))(p, x, jnp.asarray(2.0)),
        ),
    ]:
        assert jax.tree.structure(ours) == jax.tree.structure(theirs)
        for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
            assert isinstance(a, jax.Array)
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)


# --- against agnograd.functional, on every backend -----------------------------------


def cube_sum(x: Any) -> Any:
    xp = agnograd.namespace(x)
    return xp.sum(x**3 * xp.sin(x))


def pair(x: Any, y: Any) -> Any:
    xp = agnograd.namespace(x)
    return x * y, xp.exp(x) - y


def test_as_agnograd_functional_bit_for_bit(backend: Any) -> None:
    rng = np.random.default_rng(4)
    x, y = (backend.asarray(rng.standard_normal(3)) for _ in range(2))
    xt = type(x)
    g = grad(cube_sum)(x)
    assert type(g) is xt
    same(g, AF.value_and_grad(cube_sum)(x)[1], backend.to_numpy)
    same(grad_and_value(cube_sum)(x), AF.value_and_grad(cube_sum)(x)[::-1], backend.to_numpy)
    same(jacrev(pair, argnums=(0, 1))(x, y), AF.jacobian(pair, (x, y)), backend.to_numpy)
    # hessian is forward over reverse: the reverse-over-reverse Hessian (the one of
    # agnograd.functional) to rounding, as is the forward-mode Jacobian to jacrev's.
    same(jacrev(jacrev(cube_sum))(x), AF.hessian(cube_sum, x), backend.to_numpy)
    near(hessian(cube_sum)(x), AF.hessian(cube_sum, x), backend.to_numpy)
    near(jacfwd(pair, argnums=(0, 1))(x, y), AF.jacobian(pair, (x, y)), backend.to_numpy)
    vs = (backend.asarray([1.0, -2.0, 0.5]), backend.asarray([0.0, 3.0, 1.0]))
    out, vjp_fn = vjp(pair, x, y)
    want_out, want_product = AF.vjp(pair, (x, y), vs)
    same(out, want_out, backend.to_numpy)
    same(vjp_fn(vs), want_product, backend.to_numpy)
    same(vjp_fn(vs), want_product, backend.to_numpy)  # any number of times


def test_complex_follows_agnograd_functional() -> None:
    z = np.array([1.0 + 2.0j, -0.5j])
    same(jacrev(lambda z: z**2)(z), AF.jacobian(lambda z: z**2, z))
    near(hessian(lambda z: F.sum(z**3))(z), AF.hessian(lambda z: F.sum(z**3), z))
    near(jacfwd(lambda z: z**2)(z), AF.jacobian(lambda z: z**2, z))
    v = np.array([1.0 + 0j, 1j])
    same(vjp(lambda z: z**2, z)[1](v), (AF.vjp(lambda z: z**2, z, v)[1],))


# --- arrays in, arrays out; Variables in, Variables out ----------------------------


def test_variables_that_require_a_gradient_give_connected_variables() -> None:
    x = Variable(np.array([1.0, 2.0]))
    g = grad(cube_sum)(x)
    assert isinstance(g, Variable)
    assert g.requires_grad
    F.sum(g).backward()  # the second derivative reaches x
    np.testing.assert_allclose(x.grad, np.diag(AF.hessian(cube_sum, x.array)))
    j = jacrev(lambda a: a * a)(x)
    assert isinstance(j, Variable)
    assert j.requires_grad
    out, vjp_fn = vjp(lambda a: a * a, x)
    assert isinstance(out, Variable)
    assert isinstance(vjp_fn(np.ones(2))[0], Variable)
    # Variables that require none are read as their arrays.
    const = Variable(np.array([1.0, 2.0]), requires_grad=False)
    assert type(grad(cube_sum)(const)) is np.ndarray


def test_vjp_is_linear_in_a_cotangent_that_requires_a_gradient() -> None:
    """Differentiating ``vjp_fn`` with respect to its cotangent gives ``J v``."""
    x, v = np.array([0.3, -1.2]), np.array([1.0, 2.0])

    def f(a: Any) -> Any:
        return F.tanh(a) * a[::-1]

    _, vjp_fn = vjp(f, x)

    def dot_v(u: Any) -> Any:
        return F.sum(vjp_fn(u)[0] * Variable(v, requires_grad=False))

    np.testing.assert_allclose(grad(dot_v)(np.zeros(2)), AF.jvp(f, x, v)[1], rtol=1e-15)


def test_results_are_the_callers_own_arrays() -> None:
    x = np.array([1.0, 2.0])
    (gx, gy) = vjp(lambda a, b: a + b, x, x)[1](np.ones(2))
    assert not np.shares_memory(gx, gy)
    g = grad(lambda a: F.sum(a))(x)  # the gradient of a sum broadcasts its seed
    g[0] = 5.0
    assert x[0] == 1.0


def test_data_beside_the_arguments_reaches_func_as_constants() -> None:
    def loss(w: Any, x: Any, y: Any) -> Any:
        xp = array_api_compat.array_namespace(w, x, y)
        return xp.mean((x @ w - y) ** 2)

    w, x, y = np.array([1.0, -1.0]), np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.0, 1.0])
    np.testing.assert_array_equal(grad(loss)(w, x, y=y), [-7.0, -10.0])
    np.testing.assert_array_equal(jacrev(lambda w, x: x @ w)(w, x), x)


# --- compositions, shapes drawn by hypothesis ----------------------------------------

shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
BACKENDS = ("numpy", "array_api_strict", "torch")


def _to(name: str) -> Callable[[np.ndarray], Any]:
    if name == "numpy":
        return lambda a: a
    if name == "torch":
        return torch.from_numpy
    return pytest.importorskip("array_api_strict").asarray


def smooth(x: Any) -> Any:
    xp = agnograd.namespace(x)
    return xp.sum(xp.sin(x) * x * x)


@EXAMPLES
@given(shape=shapes, name=st.sampled_from(BACKENDS), seed=st.integers(0, 2**16))
def test_grad_of_grad_and_jacrev_of_grad_are_the_hessian(
    shape: tuple[int, ...], name: str, seed: int
) -> None:
    x = _to(name)(np.random.default_rng(seed).standard_normal(shape))
    h = AF.hessian(smooth, x)
    n = int(np.prod(shape))
    flat = np.reshape(np.asarray(h), (n, n))
    np.testing.assert_allclose(np.reshape(np.asarray(jacrev(grad(smooth))(x)), (n, n)), flat)
    np.testing.assert_allclose(np.reshape(np.asarray(hessian(smooth)(x)), (n, n)), flat)
    gg = grad(lambda a: agnograd.namespace(a).sum(grad(smooth)(a)))(x)
    np.testing.assert_allclose(np.reshape(np.asarray(gg), n), flat.sum(axis=0), atol=1e-12)
    # Forward over reverse: jacfwd of grad, and jvp of grad (H v), raw arrays out.
    jf = jacfwd(grad(smooth))(x)
    assert type(jf) is type(x)
    np.testing.assert_allclose(np.reshape(np.asarray(jf), (n, n)), flat)
    v = _to(name)(np.random.default_rng(seed + 1).standard_normal(shape))
    g, hv = jvp(grad(smooth), (x,), (v,))
    assert type(g) is type(hv) is type(x)
    np.testing.assert_allclose(np.reshape(np.asarray(hv), n), flat @ np.reshape(np.asarray(v), n))
    _, jvp_fn = linearize(grad(smooth), x)
    same(jvp_fn(v), hv, np.asarray)
    # The value beside the gradient, and its derivative grad f . v, raw arrays too.
    (value, g2), (tv, hv2) = jvp(value_and_grad(smooth), (x,), (v,))
    assert type(value) is type(tv) is type(g2) is type(hv2) is type(x)
    same(g2, g, np.asarray)
    same(hv2, hv, np.asarray)
    np.testing.assert_allclose(float(np.asarray(tv)), float(np.sum(np.asarray(g) * np.asarray(v))))
    # agnograd.functional's forward mode: jvp is forward mode's, and the forward-mode
    # Jacobian of the gradient (its jvps on raw arrays) the Hessian.
    same(AF.jvp(grad(smooth), x, v), (g, hv), np.asarray)
    fm = AF.jacobian(grad(smooth), x, strategy="forward-mode")
    assert type(fm) is type(x)
    np.testing.assert_allclose(np.reshape(np.asarray(fm), (n, n)), flat)
    # Reverse over forward: the gradient of the directional derivative grad f . v.
    dot = grad(lambda a: jvp(smooth, (a,), (v,))[1])(x)
    np.testing.assert_allclose(np.reshape(np.asarray(dot), n), flat @ np.reshape(np.asarray(v), n))


@EXAMPLES
@given(shape=shapes, name=st.sampled_from(BACKENDS), seed=st.integers(0, 2**16))
def test_under_jit_as_eagerly_bit_for_bit(shape: tuple[int, ...], name: str, seed: int) -> None:
    to = _to(name)
    rng = np.random.default_rng(seed)
    x, v = to(rng.standard_normal(shape)), to(rng.standard_normal(shape))

    def pulled(a: Any, u: Any) -> Any:
        return vjp(lambda b: F.tanh(b) * b, a)[1](u)

    for fun, args in [
        (grad(smooth), (x,)),
        (pulled, (x, v)),
        (jacrev(lambda a: F.tanh(a) * a), (x,)),
        (grad(lambda a: F.sum(grad(smooth)(a))), (x,)),
        # forward mode, which inside jit links its rules into the traced graph
        (lambda a, u: jvp(lambda b: F.tanh(b) * b, (a,), (u,)), (x, v)),
        (lambda a, u: jvp(grad(smooth), (a,), (u,)), (x, v)),
        (lambda a, u: linearize(lambda b: F.exp(b) * b, a)[1](u), (x, v)),
        (jacfwd(lambda a: F.tanh(a) * a), (x,)),
        (hessian(smooth), (x,)),
        (grad(lambda a: jvp(smooth, (a,), (v,))[1]), (x,)),
    ]:
        jitted = agnograd.jit(fun)
        same(jitted(*args), fun(*args))
        same(jitted(*args), fun(*args))  # the plan, run again


@EXAMPLES
@given(
    sizes=st.dictionaries(st.sampled_from("abc"), st.integers(1, 3), min_size=1),
    name=st.sampled_from(BACKENDS),
)
def test_nested_dict_arguments(sizes: dict[str, int], name: str) -> None:
    to = _to(name)
    params = {
        "layer": {k: to(np.linspace(-1.0, 1.0, n)) for k, n in sizes.items()},
        "s": [to(np.array(2.0))],
    }

    def loss(p: Any) -> Any:
        total = p["s"][0] * 0.0
        for a in p["layer"].values():
            total = total + F.sum(F.sin(a)) * p["s"][0]
        return total

    g = grad(loss)(params)
    assert list(g) == ["layer", "s"]
    assert list(g["layer"]) == list(sizes)
    want = AF.value_and_grad(loss)(params)[1]
    same(g, want)
    same(agnograd.jit(grad(loss))(params), want)
    _, vjp_fn = vjp(loss, params)
    same(vjp_fn(to(np.array(1.0))), (want,))
    near(jacfwd(loss)(params), jacrev(loss)(params), np.asarray)
    _, t = jvp(loss, (params,), (params,))  # the tangents: the parameters themselves
    pairs = zip(_leaves(want), _leaves(params), strict=True)
    dot = sum(float(np.sum(np.asarray(g) * np.asarray(a))) for g, a in pairs)
    np.testing.assert_allclose(float(np.asarray(t)), dot)


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, tuple | list):
        return [leaf for t in tree for leaf in _leaves(t)]
    if isinstance(tree, dict):
        return [leaf for t in tree.values() for leaf in _leaves(t)]
    return [tree]


# --- inside a jvp of raw arrays: raw arrays out, at every depth ------------------------


def vector(a: Any) -> Any:
    xp = agnograd.namespace(a)
    return xp.sin(a) * a


def smooth_aux(a: Any) -> Any:
    return smooth(a), {"cos": agnograd.namespace(a).cos(a)}


def vector_aux(a: Any) -> Any:
    return vector(a), {"cos": agnograd.namespace(a).cos(a)}


def _pulled(f: Callable[..., Any], a: Any, has_aux: bool = False) -> Any:
    out, vjp_fn, *aux = vjp(f, a, has_aux=has_aux)
    return (out, vjp_fn(agnograd.namespace(a).cos(out[0] if has_aux else out)), *aux)


def _pulled_aux(a: Any) -> Any:
    out, vjp_fn, aux = vjp(vector_aux, a, has_aux=True)
    return out, vjp_fn(out), aux


def _pushed(a: Any) -> Any:
    out, jvp_fn = linearize(vector, a)
    return out, jvp_fn(agnograd.namespace(a).cos(a))


#: Each transform of agnograd.func, with and without has_aux, as a function of one
#: array: what a jvp differentiates.
COMPOSED: dict[str, Callable[[Any], Any]] = {
    "grad": lambda a: grad(smooth)(a),
    "grad has_aux": lambda a: grad(smooth_aux, has_aux=True)(a),
    "grad_and_value": lambda a: grad_and_value(smooth)(a),
    "grad_and_value has_aux": lambda a: grad_and_value(smooth_aux, has_aux=True)(a),
    "value_and_grad": lambda a: value_and_grad(smooth)(a),
    "value_and_grad has_aux": lambda a: value_and_grad(smooth_aux, has_aux=True)(a),
    "vjp": lambda a: _pulled(vector, a),
    "vjp has_aux": _pulled_aux,
    "jvp": lambda a: jvp(vector, (a,), (a * a,)),
    "jvp has_aux": lambda a: jvp(vector_aux, (a,), (a * a,), has_aux=True),
    "jacrev": lambda a: jacrev(vector)(a),
    "jacrev has_aux": lambda a: jacrev(vector_aux, has_aux=True)(a),
    "jacfwd": lambda a: jacfwd(vector)(a),
    "jacfwd has_aux": lambda a: jacfwd(vector_aux, has_aux=True)(a),
    "linearize": _pushed,
    "hessian": lambda a: hessian(smooth)(a),
    "hessian has_aux": lambda a: hessian(smooth_aux, has_aux=True)(a),
}


def _central(f: Callable[[Any], Any], x: Any, v: Any) -> list[np.ndarray]:
    """The derivative of each leaf of ``f`` at ``x`` along ``v``, by central differences."""
    h = 1e-6
    plus, minus = _leaves(f(x + h * v)), _leaves(f(x - h * v))
    return [(np.asarray(p) - np.asarray(m)) / (2 * h) for p, m in zip(plus, minus, strict=True)]


def _raw_like(got: Any, want: Any) -> None:
    """Nested as ``want``, each leaf an array of ``want``'s leaves' type (no Variable)."""
    if isinstance(want, tuple | list | dict):
        assert type(got) is type(want)
        assert len(got) == len(want)
        for k in range(len(want)) if isinstance(want, tuple | list) else want:
            _raw_like(got[k], want[k])
    else:
        assert type(got) is type(want)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("case", list(COMPOSED))
def test_transforms_inside_jvps_of_raw_arrays_give_raw_arrays(case: str, name: str) -> None:
    """Inside a jvp of raw arrays a transform's results (values, aux, gradients) carry
    their tangents as the jvp's arguments do; the jvp gives raw arrays of the inputs'
    library back, as the transform does outside a jvp, and so does a jvp of a jvp."""
    f, to = COMPOSED[case], _to(name)
    rng = np.random.default_rng(5)
    x, u, v = (to(rng.uniform(-1.0, 1.0, 3)) for _ in range(3))
    plain = f(x)
    out, t = jvp(f, (x,), (v,))
    _raw_like(out, plain)
    _raw_like(t, plain)
    for got, want in zip(_leaves(out), _leaves(plain), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-13, atol=1e-15)
    for got, want in zip(_leaves(t), _central(f, x, v), strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7)
    # Forward over forward over the transform: the inner jvp's results, and their
    # derivatives along v.
    along_u = lambda a: jvp(f, (a,), (u,))  # noqa: E731
    out2, t2 = jvp(along_u, (x,), (v,))
    _raw_like(out2, (plain, plain))
    _raw_like(t2, (plain, plain))
    for got, want in zip(_leaves(out2), _leaves(along_u(x)), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-13, atol=1e-15)
    for got, want in zip(_leaves(t2), _central(along_u, x, v), strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", BACKENDS)
def test_reverse_over_a_jvp_of_a_transform_reaches_what_requires_a_gradient(name: str) -> None:
    """A transform inside a jvp of raw arrays keeps its results connected to a
    Variable from outside that requires a gradient: one its function captures, and
    the jvp's tangent."""
    to = _to(name)
    x, v, w = to(np.array([0.3, 1.2])), to(np.array([1.0, 0.5])), to(np.array([2.0, -1.0]))

    def through_captured(c: Any) -> Any:
        def f(a: Any) -> Any:
            return F.sum(F.sin(a) * c)

        _, (g, value) = jvp(grad_and_value(f), (x,), (v,))
        return F.sum(g) + value

    # d/dc of sum(-sin(x) c v) + sum(cos(x) c v)
    want = (np.cos(np.asarray(x)) - np.sin(np.asarray(x))) * np.asarray(v)
    got = grad(through_captured)(w)
    assert type(got) is type(w)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14)

    def through_tangent(t: Any) -> Any:
        return F.sum(jvp(grad(smooth), (x,), (t,))[1] * w)

    # H w, H the (diagonal) Hessian of sum(sin(x) x^2)
    a = np.asarray(x)
    h = 2 * np.sin(a) + 4 * a * np.cos(a) - a * a * np.sin(a)
    np.testing.assert_allclose(np.asarray(grad(through_tangent)(v)), h * np.asarray(w), rtol=1e-14)


# --- errors ---------------------------------------------------------------------------

x2 = np.array([1.0, 2.0])
ERRORS: list[tuple[type[Exception], str, Callable[[], Any]]] = [
    (
        TypeError,
        r"grad: the gradient is defined only for a function with a scalar output, but "
        r"func's output has shape \(2,\).*jacrev",
        lambda: grad(lambda x: x * 2.0)(x2),
    ),
    (
        TypeError,
        r"grad_and_value: differentiating with respect to argnums=\(0, 3\) needs at least 4 "
        "positional arguments, but the function was called with 1",
        lambda: grad_and_value(F.sum, argnums=(0, 3))(x2),
    ),
    (
        TypeError,
        "jacrev: argnums must be an int or a non-empty sequence",
        lambda: jacrev(F.sum, ()),
    ),
    (
        TypeError,
        r"grad: argument 0\['w'\]\[1\] is a float; differentiated arguments must be arrays",
        lambda: grad(lambda p: F.sum(p["w"][0]))({"w": [x2, 1.0]}),
    ),
    (
        TypeError,
        r"vjp: primals\[1\] is a str",
        lambda: vjp(lambda a, b: a, x2, "b"),
    ),
    (
        TypeError,
        r"grad: has_aux=True needs func to return a pair \(value, aux\), got a tuple of 3",
        lambda: grad(lambda x: (F.sum(x), x, x), has_aux=True)(x2),
    ),
    (
        TypeError,
        r"jacrev: has_aux=True needs func to return a pair \(value, aux\), got a Variable",
        lambda: jacrev(lambda x: x, has_aux=True)(x2),
    ),
    (
        TypeError,
        r"vjp: the output of func\[1\] is an int; func must return Variables",
        lambda: vjp(lambda x: (x, 3), x2),
    ),
    (
        TypeError,
        r"jacrev: the output of func\['y'\] is a numpy array, not a Variable",
        lambda: jacrev(lambda x: {"y": np.sum(x.array)})(x2),
    ),
    (
        TypeError,
        r"vjp: cotangents is a tuple, but the output of func there is one array",
        lambda: vjp(lambda x: x, x2)[1]((x2,)),
    ),
    (
        TypeError,
        r"vjp: cotangents\[1\] is a ndarray, but the output of func there is a dict",
        lambda: vjp(lambda x: (x, {"a": x}), x2)[1]((x2, x2)),
    ),
    (
        RuntimeError,
        r"vjp: cotangents\['a'\] has shape \(3,\) but the output it pairs with has shape \(2,\)",
        lambda: vjp(lambda x: {"a": x}, x2)[1]({"a": np.ones(3)}),
    ),
    (
        TypeError,
        r"vjp: cotangents is a torch array but the output it pairs with is a numpy array",
        lambda: vjp(lambda x: x, x2)[1](torch.ones(2, dtype=torch.float64)),
    ),
    (TypeError, "vjp: no primals given", lambda: vjp(lambda: 1.0)),
    (
        TypeError,
        "hessian: func's output is real but argument 0 holds complex arrays",
        lambda: hessian(lambda z: F.sum(F.real(z * z)))(np.array([1j])),
    ),
    (
        TypeError,
        r"grad: argument 0 has dtype int64; only floating-point or complex inputs",
        lambda: grad(F.sum)(np.array([1, 2])),
    ),
    (
        TypeError,
        r"jvp: primals\[0\]\['a'\] is a float; differentiated arguments must be arrays",
        lambda: jvp(lambda p: p["a"], ({"a": 1.0},), ({"a": 1.0},)),
    ),
    (
        ValueError,
        r"jvp: tangent 0 has shape \(3,\), its primal \(2,\)",
        lambda: jvp(F.sin, (x2,), (np.ones(3),)),
    ),
    (
        TypeError,
        r"jvp: has_aux=True needs func to return a pair \(value, aux\), got a Variable",
        lambda: jvp(F.sin, (x2,), (x2,), has_aux=True),
    ),
    (
        TypeError,
        r"jacfwd: argument 1 has dtype int64; only floating-point or complex inputs",
        lambda: jacfwd(two_args, argnums=1)(x2, np.array([1, 2])),
    ),
    (
        TypeError,
        "jacfwd: argnums must be an int or a non-empty sequence",
        lambda: jacfwd(F.sum, ()),
    ),
    (
        TypeError,
        r"jacfwd: has_aux=True needs func to return a pair \(value, aux\), got a Variable",
        lambda: jacfwd(lambda x: x, has_aux=True)(x2),
    ),
    (TypeError, "linearize: no primals given", lambda: linearize(lambda: 1.0)),
    (
        TypeError,
        r"linearize: jvp_fn takes one tangent per primal \(1\), got 2",
        lambda: linearize(F.sin, x2)[1](x2, x2),
    ),
    (
        ValueError,
        r"linearize: tangent 0 has shape \(3,\), its primal \(2,\)",
        lambda: linearize(F.sin, x2)[1](np.ones(3)),
    ),
]


@pytest.mark.parametrize(("error", "match", "call"), ERRORS, ids=[m[:40] for _, m, _ in ERRORS])
def test_errors_name_the_transform_the_argument_and_the_problem(
    error: type[Exception], match: str, call: Callable[[], Any]
) -> None:
    with pytest.raises(error, match=match):
        call()


# --- the front door -----------------------------------------------------------------


def test_agnograd_grad_of_a_function_is_jax_grad() -> None:
    g = agnograd.grad(cube_sum)
    same(g(x2), grad(cube_sum)(x2))
    same(agnograd.grad(two_args, 1)(x2, x2), grad(two_args, argnums=1)(x2, x2))
    same(agnograd.grad(func=two_args, argnums=(0, 1))(x2, x2), grad(two_args, (0, 1))(x2, x2))
    assert agnograd.func.grad is grad
    assert agnograd.jit is agnograd.static._jit.jit
    assert {"func", "jit", "grad"} <= set(agnograd.__all__)


def test_agnograd_grad_of_outputs_and_inputs_is_chainer_grad() -> None:
    x = Variable(np.array(3.0))
    y = x**3
    (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    assert float(gx.array) == 27.0
    assert x.grad is None
    assert agnograd.grad(outputs=[gx], inputs=[x])[0].array == 18.0
    with pytest.raises(TypeError, match="grad: outputs must be a list or tuple, got Variable"):
        agnograd.grad(y, [x])
    with pytest.raises(TypeError, match="missing"):
        agnograd.grad()


def test_func_all_lists_its_public_names() -> None:
    # Not the names pytest's assertion rewriting adds to a module it rewrote ("@py_...").
    names = {n for n in vars(agnograd.func) if n.isidentifier() and not n.startswith("_")}
    public = names - {"annotations"}
    assert public == set(agnograd.func.__all__)
