"""``agnograd.jit`` of the transforms: ``value_and_grad``, ``vjp``, ``jvp``, ``vhp``,
``hvp``, ``agnograd.func``'s ``grad``, ``jacrev`` and ``vjp``, and ``agnograd.grad``
inside a jitted function.

The transforms, given the Variables without data that ``jit`` traces with, build
their derivatives into the graph (``agnograd/transforms/_symbolic.py``); the plan
then computes the function and its derivatives together. Their results must be
those of the transform called eagerly, bit for bit on NumPy, array-api-strict and
PyTorch (to rounding on JAX, where the plan is one XLA program), over programs drawn
by hypothesis and over calls with new data, shapes and parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jit import BACKENDS, OPS, Conv, leaves, op, same

import agnograd
import agnograd.func
import agnograd.functions as F
from agnograd.functional import hvp, jacobian, jvp, value_and_grad, vhp, vjp
from agnograd.static._jit import JitWarning


@pytest.fixture(params=list(BACKENDS))
def conv(request: pytest.FixtureRequest) -> Conv:
    return BACKENDS[request.param]()


Program = list[tuple[str, int, int, int]]


def program_loss(program: Program) -> Callable[..., Any]:
    """The program as a loss of (x, b, c, m): the sum of every value it computes."""

    def loss(x: Any, b: Any, c: Any, m: Any) -> Any:
        xp = agnograd.namespace(x)
        values = [x, b, c]
        for name, i, j, k in program:
            values.append(OPS[name](xp, m, values[i % len(values)], values[j % len(values)], k))
        total = xp.sum(values[0])
        for v in values[1:]:
            total = total + xp.sum(v)
        return xp.astype(total, xp.float64)

    return loss


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=st.lists(op, min_size=1, max_size=10), argnums=st.sampled_from([0, (0, 3), 2]))
def test_value_and_grad_equals_eager_bit_for_bit(
    conv: Conv, program: Program, argnums: int | tuple[int, ...]
) -> None:
    to, back = conv
    step = value_and_grad(program_loss(program), argnums=argnums)
    jitted = agnograd.jit(step)
    with np.errstate(all="ignore"):
        for seed in range(3):
            arrays = [to(a) for a in leaves(seed, scale=1.0 + seed)]
            same(jitted(*arrays), step(*arrays), back)
    assert jitted.cache_info()[:2] == (2, 1)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    program=st.lists(op, min_size=1, max_size=8), which=st.sampled_from(["grad", "jacrev", "vjp"])
)
def test_func_transforms_equal_eager_bit_for_bit(conv: Conv, program: Program, which: str) -> None:
    """agnograd.func's grad, jacrev and a vjp pulled back inside the jitted function."""
    to, back = conv
    loss = program_loss(program)
    if which == "grad":
        step = agnograd.func.grad(loss, argnums=(0, 2))
    elif which == "jacrev":
        step = agnograd.func.jacrev(lambda x, b, c, m: loss(x, b, c, m) * x, argnums=1)
    else:

        def step(x: Any, b: Any, c: Any, m: Any) -> Any:
            value, vjp_fn = agnograd.func.vjp(loss, x, b, c, m)
            return value, vjp_fn(agnograd.namespace(value).ones_like(value) * 0.5)

    jitted = agnograd.jit(step)
    with np.errstate(all="ignore"):
        for seed in range(2):
            arrays = [to(a) for a in leaves(seed, scale=1.0 + seed)]
            got, want = jitted(*arrays), step(*arrays)
            if which == "jacrev":
                # jit builds the rows one pass at a time, eagerly one batched pass
                # (vmap) gives them all, whose products a library may sum in another
                # order (torch's batched matmul)
                np.testing.assert_allclose(back(got), back(want), rtol=1e-12, atol=1e-300)
            else:
                same(got, want, back)


@pytest.mark.parametrize("name", sorted(OPS))
def test_value_and_grad_of_each_op(conv: Conv, name: str) -> None:
    to, back = conv
    step = value_and_grad(program_loss([(name, i, i + 1, i) for i in range(4)]), argnums=(0, 1))
    jitted = agnograd.jit(step)
    for seed in range(2):
        arrays = [to(a) for a in leaves(seed)]
        same(jitted(*arrays), step(*arrays), back)


def mse(params: dict[str, Any], inputs: Any, targets: Any) -> Any:
    r = inputs @ params["w"] + params["b"] - targets
    return F.mean(r * r), {"residuals": r, "n": 2}


def test_value_and_grad_of_pytrees_with_aux_over_batch_sizes() -> None:
    step = value_and_grad(mse, has_aux=True)
    jitted = agnograd.jit(step)
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal(3), "b": np.asarray(0.5)}
    for n in (4, 2, 4, 7, 2):
        inputs, targets = rng.standard_normal((n, 3)), rng.standard_normal(n)
        same(jitted(params, inputs, targets), step(params, inputs, targets))
        params = {"w": params["w"] * 0.9, "b": np.asarray(params["b"] + 0.1)}
    assert jitted.cache_info()[:4] == (2, 3, 0, 3)


def test_a_training_loop() -> None:
    """Parameters updated at every step: the jitted step follows eager's exactly."""

    def loss(w: list[Any], x: Any, y: Any) -> Any:
        xp = agnograd.namespace(x)
        h = xp.tanh(x @ w[0] + w[1])
        return xp.mean((h @ w[2] - y) ** 2)

    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((16, 3)), rng.standard_normal(16)
    w0 = [rng.standard_normal((3, 5)), np.zeros(5), rng.standard_normal(5)]
    step = value_and_grad(loss)
    jitted = agnograd.jit(step)
    eager_w, jit_w = list(w0), list(w0)
    for _ in range(20):
        value, grads = step(eager_w, x, y)
        jvalue, jgrads = jitted(jit_w, x, y)
        same(jvalue, value)
        eager_w = [p - 0.1 * g for p, g in zip(eager_w, grads, strict=True)]
        jit_w = [p - 0.1 * g for p, g in zip(jit_w, jgrads, strict=True)]
    same(jit_w, eager_w)
    assert jitted.cache_info()[:2] == (19, 1)


def test_value_and_grad_of_a_closed_over_variable_changed_between_calls() -> None:
    scale = agnograd.Variable(np.array([1.0, 2.0]), requires_grad=False)

    def loss(w: Any) -> Any:
        return F.sum(F.sin(w * scale))

    step = value_and_grad(loss)
    jitted = agnograd.jit(step)
    w = np.array([0.3, -0.4])
    same(jitted(w), step(w))
    scale.d = np.array([-1.0, 0.5])
    same(jitted(w), step(w))
    assert jitted.cache_info()[:2] == (1, 1)


def test_grad_inside_a_jitted_function() -> None:
    def f(x: Any, w: Any) -> Any:
        y = F.sum(F.tanh(x * w) ** 2)
        gx, gw = agnograd.grad([y], [x, w])
        return y, gx, gw

    def eager(x: Any, w: Any) -> Any:
        xv, wv = agnograd.Variable(x), agnograd.Variable(w)
        return tuple(v.array for v in f(xv, wv))

    jitted = agnograd.jit(f)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x, w = rng.standard_normal(4), rng.standard_normal(4)
        # Variables that require a gradient, as eagerly: the trace's do too.
        same(jitted(agnograd.Variable(x), agnograd.Variable(w)), eager(x, w))
    assert jitted.cache_info()[:2] == (2, 1)
    # Raw arrays require no gradient, as Variables made with requires_grad=False.
    plain = [agnograd.Variable(a, requires_grad=False) for a in (x, w)]
    same(jitted(x, w), (f(*plain)[0].array, None, None))


def test_second_order_gradient() -> None:
    """grad of grad: value_and_grad nested, jitted as a whole."""

    def f(x: Any) -> Any:
        return F.sum(x**3)

    def grad_sum(x: Any) -> Any:
        return F.sum(value_and_grad(f)(x)[1])

    step = value_and_grad(grad_sum)
    jitted = agnograd.jit(step)
    x = np.array([1.0, 2.0])
    same(jitted(x), step(x))
    same(jitted(x)[1], 6.0 * x)


def sin_times(x: Any) -> Any:
    return agnograd.namespace(x).sin(x) * x


def cube(x: Any) -> Any:
    return agnograd.namespace(x).sum(x**3)


@pytest.mark.parametrize(
    ("transform", "f"), [(vjp, sin_times), (jvp, sin_times), (vhp, cube), (hvp, cube)]
)
def test_products_with_v_as_an_argument(
    conv: Conv, transform: Callable[..., Any], f: Callable[..., Any]
) -> None:
    """``jit(lambda x, v: vjp(f, x, v))`` is the pullback (JAX's jax.vjp returns a
    function, which cannot be jitted; agnograd's vjp takes v). Under jit, jvp and hvp
    run the double-backward trick, as eagerly with ``strict=True`` (eagerly without
    it, forward mode: the same numbers, up to rounding)."""
    to, back = conv
    jitted = agnograd.jit(lambda x, v: transform(f, x, v))
    by_double_backward = transform in (jvp, hvp)
    rng = np.random.default_rng(3)
    for _ in range(3):
        x, v = to(rng.standard_normal(3)), to(rng.standard_normal(3))
        got = jitted(x, v)
        same(got, transform(f, x, v, strict=by_double_backward), back)
        for g, w in zip(got, transform(f, x, v), strict=True):
            np.testing.assert_allclose(back(g), back(w), rtol=1e-12)
    assert jitted.cache_info()[:2] == (2, 1)


def test_vjp_of_several_inputs_and_outputs() -> None:
    def f(x: Any, y: Any) -> Any:
        return x * y, F.exp(x) + y

    jitted = agnograd.jit(lambda xs, vs: vjp(f, xs, vs))
    xs = (np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    vs = (np.array([1.0, 0.5]), np.array([-1.0, 2.0]))
    same(jitted(xs, vs), vjp(f, xs, vs))


def test_jacobian_under_jit_is_refused_clearly() -> None:
    jitted = agnograd.jit(lambda x: jacobian(sin_times, x))
    with pytest.raises(ValueError, match=r"jacobian: inputs is a Variable without data") as info:
        jitted(np.ones(2))
    assert any("agnograd.jit traced <lambda>" in n for n in info.value.__notes__)


def test_a_gradient_that_cannot_be_built_ahead_runs_eagerly() -> None:
    """svdvals' gradient reads the decomposition's factors, which the graph does not
    hold before it runs: jit warns once and runs that signature eagerly."""

    def loss(a: Any) -> Any:
        xp = agnograd.namespace(a)
        return xp.sum(xp.linalg.svdvals(a))

    step = value_and_grad(loss)
    jitted = agnograd.jit(step)
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    with pytest.warns(JitWarning, match=r"jit\(loss\): grad: the gradient of SVD cannot be built"):
        same(jitted(a), step(a))
    same(jitted(a * 2.0), step(a * 2.0))
    assert jitted.cache_info()[:4] == (0, 1, 2, 1)


def test_raw_arrays_beside_the_differentiated_argument() -> None:
    """Data passed beside the parameters (transforms take raw arrays there) is traced
    as an input of the plan as well: new data, same plan."""
    import array_api_compat

    def loss(w: Any, x: Any, y: Any) -> Any:
        xp = array_api_compat.array_namespace(w, x, y)
        return xp.mean((x @ w - y) ** 2)

    step = value_and_grad(loss)
    jitted = agnograd.jit(step)
    rng = np.random.default_rng(4)
    w = rng.standard_normal(3)
    for _ in range(3):
        x, y = rng.standard_normal((5, 3)), rng.standard_normal(5)
        same(jitted(w, x, y), step(w, x, y))
    assert jitted.cache_info()[:2] == (2, 1)


def test_on_jax_to_rounding() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def loss(w: Any, x: Any) -> Any:
        xp = agnograd.namespace(w)
        return xp.sum(xp.tanh(x @ w) ** 2)

    def reference(w: Any, x: Any) -> Any:
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    jitted = agnograd.jit(value_and_grad(loss))
    ours = jax.jit(jax.value_and_grad(reference))
    rng = np.random.default_rng(5)
    for _ in range(3):
        w = jnp.asarray(rng.standard_normal(3), dtype=jnp.float32)
        x = jnp.asarray(rng.standard_normal((4, 3)), dtype=jnp.float32)
        (value, grad), (want_value, want_grad) = jitted(w, x), ours(w, x)
        assert isinstance(grad, jax.Array)
        np.testing.assert_allclose(np.asarray(value), np.asarray(want_value), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(grad), np.asarray(want_grad), rtol=1e-5, atol=1e-6)
    (entry,) = jitted._cache.values()
    assert entry.program is not None  # loss and gradient: one jax.jit program


# -- closed-over state changing between calls ---------------------------------------


@pytest.mark.parametrize("flag", ["requires_grad", "need_grad"])
def test_freezing_a_closed_over_variable_traces_again(conv: Conv, flag: str) -> None:
    """The gradient of ``x * w`` with respect to ``w`` is ``x``: a graph that does not
    read ``w``. Freezing ``w`` (or unfreezing it) changes what eager gives (None, or
    the gradient): the plan made before is not used."""
    to, back = conv
    w = agnograd.Parameter(to(np.array([1.0, 2.0])))

    def f(x: Any) -> Any:
        (gw,) = agnograd.grad([F.sum(x * w)], [w])
        return gw

    jitted = agnograd.jit(f)
    x = to(np.array([3.0, 4.0]))
    for frozen in (False, True, True, False, False):
        setattr(w, flag, not frozen)
        want = f(agnograd.Variable(x, requires_grad=False))
        same(jitted(x), None if want is None else want.array, back)
    assert jitted.cache_info()[:2] == (2, 3)


def test_a_closed_over_computed_variable_keeps_its_array(conv: Conv) -> None:
    """``h = exp(w)`` computed eagerly and closed over: each call reads ``h.array``
    as eager does (neither recomputed from ``w`` nor freed), also where the jitted
    function differentiates through ``h``; an eager backward through ``h`` works
    after the calls."""
    to, back = conv
    w = agnograd.Variable(to(np.array([0.5, -1.0])))
    h = F.exp(w)

    def f(x: Any) -> Any:
        y = F.sum(x * h)
        (gw,) = agnograd.grad([y], [w])
        return y, gw

    jitted = agnograd.jit(f)
    x = to(np.array([3.0, 4.0]))
    for _ in range(2):
        want = tuple(v.array for v in f(agnograd.Variable(x, requires_grad=False)))
        same(jitted(x), want, back)
        same(h.array, to(np.exp(np.array([0.5, -1.0]))), back)
    h.array = to(np.array([2.0, 3.0]))  # new data, read by the next call
    same(jitted(x)[0], to(np.asarray(18.0)), back)
    F.sum(h * 2.0).backward()
    same(w.grad, to(2.0 * np.exp(np.array([0.5, -1.0]))), back)
    assert jitted.cache_info()[:2] == (2, 1)


EDIT = st.sampled_from(["w data", "w freeze", "h data", "v data", "v shape", "v dtype", "v freeze"])


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(edits=st.lists(st.tuples(EDIT, st.integers(0, 3)), min_size=1, max_size=8))
def test_closed_over_state_changing_between_calls(conv: Conv, edits: list[tuple[str, int]]) -> None:
    """A jitted function reading closed-over Variables (a leaf ``w``, ``h`` computed
    eagerly from it, another leaf ``v``) and asking for their gradients, called
    after each of a run of edits (new data, shape or dtype, frozen or unfrozen):
    each call gives eager's answer, and leaves ``h``'s array as it was."""
    to, back = conv
    rng = np.random.default_rng(len(edits))
    w = agnograd.Parameter(to(rng.uniform(-1.0, 1.0, 4)))
    h = w * 2.0
    v = agnograd.Parameter(to(rng.uniform(-1.0, 1.0, 4)))

    def f(x: Any) -> Any:
        xp = agnograd.namespace(x)
        y = xp.sum(xp.tanh(x * w) * h) + xp.sum(v * v)
        targets = [u for u in (w, h, v) if u.requires_grad]
        return (y, *agnograd.grad([y], targets))

    jitted = agnograd.jit(f, max_traces=64)
    x = to(rng.uniform(-1.0, 1.0, 4))
    for edit, k in [("none", 0), *edits]:
        values = rng.uniform(-1.0, 1.0, 4)
        if edit == "w data":
            w.d = to(values)
        elif edit == "w freeze":
            w.requires_grad = not w.requires_grad
        elif edit == "h data":
            h.array = to(values)
        elif edit == "v data":
            v.d = to(values.astype(back(v.array).dtype)[: back(v.array).shape[0]])
        elif edit == "v shape":
            v.array = to(values[: (1, 4)[k % 2]].astype(back(v.array).dtype))
        elif edit == "v dtype":
            v.array = to(back(v.array).astype((np.float32, np.float64)[k % 2]))
        elif edit == "v freeze":
            v.requires_grad = not v.requires_grad
        kept = back(h.array).copy()
        want = tuple(u.array for u in f(agnograd.Variable(x, requires_grad=False)))
        same(jitted(x), want, back)
        np.testing.assert_array_equal(back(h.array), kept)
