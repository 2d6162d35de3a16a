"""The JAX bridge, both ways: agnograd inside JAX (``function``) and JAX inside
agnograd (``node``).

Numerical checks against central differences run in float64, inside
``jax.enable_x64(True)`` blocks (never a global switch: other tests share the
process); comparisons with pure JAX run in float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd.testing import check_backward, check_double_backward

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
bridge = pytest.importorskip("agnograd.interop.jax")

ATOL32 = 1e-5


class Cube(agnograd.FunctionNode):
    """x ** 3 with a hand-written backward: a node JAX has never seen."""

    def forward(self, inputs: Any) -> Any:
        (x,) = inputs
        self.retain_inputs((0,))
        return (x * x * x,)

    def backward(self, indexes: Any, grad_outputs: Any) -> Any:
        (x,) = self.get_retained_inputs()
        (gy,) = grad_outputs
        return (3 * x * x * gy,)


def cube(x: Any) -> Any:
    return Cube().apply((x,))[0]


def ag_loss(x: Any, w: Any) -> Any:
    return F.sum(F.tanh(x @ w) ** 2) + F.sum(cube(w)) * 0.1


def jax_loss(x: Any, w: Any) -> Any:
    return jnp.sum(jnp.tanh(x @ w) ** 2) + jnp.sum(w**3) * 0.1


def inputs(dtype: Any = np.float32) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    return (
        jnp.asarray(rng.standard_normal((4, 3)).astype(dtype)),
        jnp.asarray(rng.standard_normal(3).astype(dtype)),
    )


def directional_error(f: Callable[..., Any], args: tuple[Any, ...], gradient: Any) -> float:
    """|<gradient, v> - (f(args + eps v) - f(args - eps v)) / 2 eps| over all
    arguments, for a random direction v (float64; ``f`` is jitted)."""
    rng = np.random.default_rng(1)
    direction = tuple(jnp.asarray(rng.standard_normal(a.shape)) for a in args)
    eps = 1e-6
    f = jax.jit(f)
    plus = f(*(a + eps * v for a, v in zip(args, direction, strict=True)))
    minus = f(*(a - eps * v for a, v in zip(args, direction, strict=True)))
    numerical = float(plus - minus) / (2 * eps)
    analytic = sum(float(jnp.vdot(g, v)) for g, v in zip(gradient, direction, strict=True))
    return abs(numerical - analytic)


def jitted_vjp(f: Callable[..., Any], primals: tuple[Any, ...], cotangent: Any) -> Any:
    """``f``'s outputs and the pullback of ``cotangent``, in one jitted call."""

    def run(primals: tuple[Any, ...], cotangent: Any) -> Any:
        out, pullback = jax.vjp(f, *primals)
        return out, pullback(cotangent)

    return jax.jit(run)(primals, cotangent)


# --- agnograd inside JAX -------------------------------------------------------------
# Everything is jitted where it can be: eager JAX compiles every primitive on its own
# the first time, which costs seconds for a handful of agnograd operations.


def test_function_eager() -> None:
    f = bridge.function(lambda x: F.sum(F.sin(x) * x))
    x = jnp.array([0.5, -1.0])
    np.testing.assert_allclose(f(x), jnp.sum(jnp.sin(x) * x), atol=ATOL32)
    np.testing.assert_allclose(jax.grad(f)(x), jnp.sin(x) + x * jnp.cos(x), atol=ATOL32)


def test_function_gradient_matches_central_differences() -> None:
    loss = bridge.function(ag_loss)
    with jax.enable_x64(True):
        args = inputs(np.float64)
        g = jax.jit(jax.grad(loss, argnums=(0, 1)))(*args)
        assert g[0].dtype == jnp.float64
        assert directional_error(loss, args, g) < 1e-7


def test_function_matches_pure_jax_under_jit_and_vmap() -> None:
    loss = bridge.function(ag_loss)
    x, w = inputs()
    both = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(x, w)
    expected = jax.jit(jax.value_and_grad(jax_loss, argnums=(0, 1)))(x, w)
    for got, want in zip(jax.tree.leaves(both), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(got, want, atol=ATOL32)
    # One loss and one gradient per row of x: vmap over the custom_vjp, with batched
    # tracers inside agnograd.
    per_row = jax.jit(jax.vmap(jax.value_and_grad(loss, argnums=1), in_axes=(0, None)))(x, w)
    expected = jax.jit(jax.vmap(jax.value_and_grad(jax_loss, argnums=1), in_axes=(0, None)))(x, w)
    assert per_row[1].shape == (4, 3)
    for got, want in zip(per_row, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=ATOL32)


def test_function_second_order_through_jax() -> None:
    # The backward is agnograd's backward on JAX tracers, so JAX differentiates it.
    loss = bridge.function(ag_loss)
    x, w = inputs()
    expected = jax.jit(jax.hessian(jax_loss, 1))(x, w)
    np.testing.assert_allclose(jax.jit(jax.hessian(loss, 1))(x, w), expected, atol=1e-4)

    def grad_sum(w: Any) -> Any:
        return jax.grad(loss, argnums=1)(x, w).sum()

    with jax.enable_x64(True):
        x, w = inputs(np.float64)
        hvp = jax.jit(jax.grad(grad_sum))(w)
        assert directional_error(grad_sum, (w,), (hvp,)) < 1e-6


def test_function_refuses_forward_mode() -> None:
    loss = bridge.function(ag_loss)
    x, w = inputs()
    with pytest.raises(TypeError, match="forward-mode"):
        jax.jvp(lambda w: loss(x, w), (w,), (w,))


def test_function_pytrees_in_and_out() -> None:
    @bridge.function
    def f(params: dict[str, Any], pair: tuple[Any, Any]) -> Any:
        a, b = pair
        y = F.sin(params["w"]) * a
        return {"y": y, "z": (F.sum(y * b), params["w"])}  # an input returned as is

    def reference(params: dict[str, Any], pair: tuple[Any, Any]) -> Any:
        a, b = pair
        y = jnp.sin(params["w"]) * a
        return {"y": y, "z": (jnp.sum(y * b), params["w"])}

    w, a, b = jnp.array([0.5, -1.0]), jnp.array([2.0, 3.0]), jnp.array([1.0, -1.0])
    primals = ({"w": w}, (a, b))
    cotangent = {"y": jnp.array([1.0, 2.0]), "z": (jnp.array(3.0), jnp.array([-1.0, 1.0]))}
    ours = jitted_vjp(f, primals, cotangent)
    theirs = jitted_vjp(reference, primals, cotangent)
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    for got, want in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_allclose(got, want, atol=ATOL32)


def test_function_repeated_outputs_integers_and_unused_inputs() -> None:
    @bridge.function
    def f(x: Any, n: Any, unused: Any) -> Any:
        y = F.sin(x) * F.astype(n, x.dtype)
        return y, y, n  # the same Variable twice, and an integer output

    x, n, u = jnp.array([0.5, -1.0]), jnp.array([1, 2]), jnp.array([7.0])
    (_, _, m), pullback = jax.vjp(f, x, n, u)
    assert m.dtype == n.dtype
    ones = jnp.ones(2)
    float0 = np.zeros(2, dtype=jax.dtypes.float0)
    gx, gn, gu = pullback((ones, 2 * ones, float0))
    np.testing.assert_allclose(gx, 3 * jnp.cos(x) * n, atol=ATOL32)  # cotangents added
    assert gn.dtype == jax.dtypes.float0
    np.testing.assert_array_equal(gu, jnp.zeros(1))


def test_function_static_arguments_and_closures() -> None:
    scale = jnp.array(2.0)  # closed over: a constant
    power = bridge.function(lambda x, p: F.sum(x**p) * scale, nondiff_argnums=(1,))
    x = jnp.array([0.5, -1.0, 2.0])
    g = jax.jit(jax.grad(power), static_argnums=1)(x, 3)
    np.testing.assert_allclose(g, 2.0 * 3 * x**2, atol=ATOL32)

    @bridge.function(nondiff_argnums=(0,))
    def apply_activation(activation: Callable[[Any], Any], x: Any) -> Any:
        return F.sum(activation(x))

    g = jax.jit(jax.grad(apply_activation, argnums=1), static_argnums=0)(F.tanh, x)
    np.testing.assert_allclose(g, 1 - jnp.tanh(x) ** 2, atol=ATOL32)


def test_function_records_inside_no_backprop_mode() -> None:
    loss = bridge.function(ag_loss)
    x, w = inputs()
    with agnograd.no_backprop_mode():
        g = jax.jit(jax.grad(loss, argnums=1))(x, w)
    np.testing.assert_allclose(g, jax.jit(jax.grad(jax_loss, argnums=1))(x, w), atol=ATOL32)


@pytest.mark.parametrize(
    ("ours", "reference"),
    [
        (lambda z: z * z, lambda z: z * z),
        (lambda z: F.exp(z) * 1j, lambda z: jnp.exp(z) * 1j),
        (lambda z: F.conj(z) * z * 3j, lambda z: jnp.conj(z) * z * 3j),  # not holomorphic
        (lambda z: F.real(z * z), lambda z: jnp.real(z * z)),  # complex to real
    ],
    ids=["square", "exp", "conj", "real"],
)
def test_function_complex_follows_jax_convention(
    ours: Callable[[Any], Any], reference: Callable[[Any], Any]
) -> None:
    # agnograd's gradients follow PyTorch's convention, JAX's cotangents differ by a
    # conjugation: the bridge converts.
    z = jnp.array([0.5 + 1j, -1.0 - 0.3j], dtype=jnp.complex64)
    ct = jnp.array([0.3 - 0.2j, 1.0 + 0.5j], dtype=jnp.complex64)
    if not jnp.iscomplexobj(reference(z)):
        ct = jnp.real(ct)
    out, (gz,) = jitted_vjp(bridge.function(ours), (z,), ct)
    expected, (expected_gz,) = jitted_vjp(reference, (z,), ct)
    np.testing.assert_allclose(out, expected, atol=ATOL32)
    np.testing.assert_allclose(gz, expected_gz, atol=ATOL32)


def test_function_refuses_outputs_that_are_not_variables() -> None:
    x = jnp.array([1.0, 2.0])
    raw = bridge.function(lambda x: x.array * 2)
    with pytest.raises(TypeError, match="outside agnograd's graph"):
        raw(x)
    number = bridge.function(lambda x: (x * 2, 3.0))
    with pytest.raises(TypeError, match="output 1 of <lambda> is a float"):
        number(x)


def test_function_refuses_bad_arguments() -> None:
    f = bridge.function(lambda x, *rest: F.sum(x))
    x = jnp.array([1.0, 2.0])
    with pytest.raises(TypeError, match="argument 0 holds a Variable"):
        f(agnograd.Variable(x))
    with pytest.raises(TypeError, match=r"argument 1 holds a str.*nondiff_argnums"):
        f(x, "mean")
    with pytest.raises(TypeError, match="keyword arguments"):
        f(x, axis=0)
    with pytest.raises(TypeError, match="nondiff_argnums names position 3"):
        bridge.function(lambda x: F.sum(x), nondiff_argnums=(3,))(x)
    with pytest.raises(ValueError, match="non-negative"):
        bridge.function(lambda x: F.sum(x), nondiff_argnums=(-1,))
    with pytest.raises(TypeError, match="must be a function of Variables"):
        bridge.function(3)


def test_function_wrong_shapes() -> None:
    class WrongShape(agnograd.FunctionNode):
        def forward(self, inputs: Any) -> Any:
            return (inputs[0] * 2,)

        def backward(self, indexes: Any, grad_outputs: Any) -> Any:
            return (F.concat([grad_outputs[0], grad_outputs[0]]),)

    f = bridge.function(lambda x: F.sum(WrongShape().apply((x,))[0]))
    with pytest.raises(ValueError, match="backward of WrongShape returned a gradient of shape"):
        jax.grad(f)(jnp.ones(2))
    _, pullback = jax.vjp(bridge.function(F.sin), jnp.ones(2))
    with pytest.raises(ValueError, match="float32\\[3\\]"):  # JAX checks cotangents itself
        pullback(jnp.ones(3))


# --- JAX inside agnograd -------------------------------------------------------------


def jax_softplus(x: Any) -> Any:
    return jnp.logaddexp(x, 0.0)


def test_node_backward_and_double_backward_match_central_differences() -> None:
    softplus = bridge.node(jax.jit(jax_softplus))
    rng = np.random.default_rng(2)
    x = rng.standard_normal(5)
    with jax.enable_x64(True):
        check_backward(softplus, x, rng.standard_normal(5), dtype=np.float64)
        check_double_backward(
            softplus, x, rng.standard_normal(5), rng.standard_normal(5), dtype=np.float64
        )


def test_node_gradients_of_every_order() -> None:
    softplus = bridge.node(jax_softplus)
    a = np.array([-1.0, 0.0, 2.0], dtype=np.float32)
    x = agnograd.Variable(a)
    (g1,) = agnograd.grad([F.sum(softplus(x))], [x], enable_double_backprop=True)
    (g2,) = agnograd.grad([F.sum(g1)], [x], enable_double_backprop=True)
    (g3,) = agnograd.grad([F.sum(g2)], [x])
    s = 1 / (1 + np.exp(-a))
    for got, want in [(g1, s), (g2, s * (1 - s)), (g3, s * (1 - s) * (1 - 2 * s))]:
        assert isinstance(got.array, np.ndarray)
        np.testing.assert_allclose(got.array, want, atol=ATOL32)
    assert g1.creator is not None
    assert g1.creator.label == "jax:vjp(jax_softplus)"


@pytest.mark.parametrize("library", ["numpy", "torch", "jax"])
def test_node_returns_the_inputs_library(library: str) -> None:
    softplus = bridge.node(jax.jit(jax_softplus))
    data = np.array([-1.0, 0.0, 2.0], dtype=np.float32)
    if library == "torch":
        torch = pytest.importorskip("torch")
        raw = torch.asarray(data)
    elif library == "jax":
        raw = jnp.asarray(data)
    else:
        raw = data
    x = agnograd.Variable(raw)
    y = softplus(x)
    F.sum(y).backward()
    if library != "jax":  # JAX arrays and gradients are of several classes
        assert type(y.array) is type(raw)
        assert type(x.grad) is type(raw)
    np.testing.assert_allclose(np.asarray(x.grad), 1 / (1 + np.exp(-data)), atol=ATOL32)


def test_node_pytree_outputs_and_static_keywords() -> None:
    def parts(a: Any, b: Any, *, power: int) -> Any:
        return a * b, {"sin": jnp.sin(a) ** power, "argmax": jnp.argmax(b)}

    node = bridge.node(parts)
    a = agnograd.Variable(np.array([1.0, 2.0], dtype=np.float32))
    b = agnograd.Variable(np.array([3.0, 4.0], dtype=np.float32))
    product, rest = node(a, b, power=2)
    assert sorted(rest) == ["argmax", "sin"]
    assert int(rest["argmax"].array) == 1
    F.sum(product + rest["sin"]).backward()  # the integer output receives nothing
    np.testing.assert_allclose(a.grad, b.array + 2 * np.sin(a.array) * np.cos(a.array), atol=1e-5)
    np.testing.assert_allclose(b.grad, a.array)


def test_node_complex_matches_agnograd() -> None:
    node = bridge.node(lambda z: jnp.conj(z) * z * 3j + jnp.exp(z))
    data = np.array([0.5 + 1j, -1.0 - 0.3j], dtype=np.complex64)
    seed = np.array([0.3 - 0.2j, 1.0 + 0.5j], dtype=np.complex64)
    z, w = agnograd.Variable(data), agnograd.Variable(data.copy())
    y = node(z)
    y.grad = seed
    y.backward()
    expected = F.conj(w) * w * 3j + F.exp(w)
    expected.grad = seed
    expected.backward()
    np.testing.assert_allclose(y.array, expected.array, atol=ATOL32)
    np.testing.assert_allclose(z.grad, w.grad, atol=ATOL32)


def test_node_inside_function_under_jit_vmap_and_second_order() -> None:
    inner = bridge.node(lambda x: jnp.sin(x) * 2)  # receives JAX tracers, untouched
    outer = bridge.function(lambda x: F.sum(inner(x) ** 2))

    def reference(x: Any) -> Any:
        return jnp.sum((jnp.sin(x) * 2) ** 2)

    x = jnp.array([0.5, -1.0])
    ours = jax.jit(jax.grad(outer))(x)
    np.testing.assert_allclose(ours, jax.jit(jax.grad(reference))(x), atol=ATOL32)
    ours = jax.jit(jax.hessian(outer))(x)
    np.testing.assert_allclose(ours, jax.jit(jax.hessian(reference))(x), atol=1e-4)
    rows = jnp.stack([x, 2 * x, -x])
    ours = jax.jit(jax.vmap(jax.grad(outer)))(rows)
    np.testing.assert_allclose(ours, jax.jit(jax.vmap(jax.grad(reference)))(rows), atol=ATOL32)


def test_node_define_then_run() -> None:
    softplus = bridge.node(jax_softplus)
    with agnograd.auto_forward(False):
        x = agnograd.Variable(np.array([1.0, 2.0], dtype=np.float32))
        y = F.sum(softplus(x) * 2)
        assert y.array is None
    agnograd.forward_all([y])
    y.backward()
    np.testing.assert_allclose(float(y.array), 2 * np.logaddexp(x.array, 0).sum(), rtol=1e-6)
    np.testing.assert_allclose(x.grad, 2 / (1 + np.exp(-x.array)), atol=ATOL32)


def test_node_without_backprop_records_nothing() -> None:
    softplus = bridge.node(jax_softplus)
    x = agnograd.Variable(np.array([1.0], dtype=np.float32))
    with agnograd.no_backprop_mode():
        y = softplus(x)
    assert y.creator is None
    assert not y.requires_grad
    assert softplus(np.array([1.0], dtype=np.float32)).creator is None  # constants only


def test_node_refuses_64_bit_inputs_without_x64() -> None:
    softplus = bridge.node(jax_softplus)
    x = agnograd.Variable(np.array([1.0, 2.0]))
    if not jax.config.read("jax_enable_x64"):
        with pytest.raises(TypeError, match=r"input 0 is float64.*jax\.enable_x64"):
            softplus(x)
    with jax.enable_x64(True):
        y = softplus(x)
        assert y.dtype == np.float64


def test_node_errors() -> None:
    x = agnograd.Variable(np.ones(2, dtype=np.float32))
    with pytest.raises(TypeError, match="output 1 of the JAX function is a str"):
        bridge.node(lambda x: (x, "label"))(x)
    with pytest.raises(TypeError, match="keyword argument 'w' is an array"):
        bridge.node(lambda x, w: x * w)(x, w=np.ones(2, dtype=np.float32))
    with pytest.raises(TypeError, match="at least one"):
        bridge.node(lambda: jnp.ones(2))()
    with pytest.raises(TypeError, match="must be a JAX function"):
        bridge.node("sin")
    with pytest.raises(TypeError, match="not hashable"):
        bridge.node(lambda x, axes: x.sum(axes))(x, axes=[0])

    @jax.jit
    def leaks(t: Any) -> None:  # a NumPy-input node whose function closes over a tracer
        bridge.node(lambda v: v * t, jit=False)(x)

    with pytest.raises(TypeError, match="returned a traced value for numpy inputs"):
        leaks(jnp.ones(2))
    y = bridge.node(jnp.sin)(x)
    with pytest.raises(ValueError, match=r"gradient shape \(3,\) differs"):
        agnograd.grad([y], [x], [np.ones(3, dtype=np.float32)])  # checked before JAX


# --- zero-copy -----------------------------------------------------------------------


def aligned(values: list[float], alignment: int = 64) -> np.ndarray:
    """A float32 NumPy array whose buffer starts on an ``alignment``-byte boundary."""
    n = len(values)
    raw = np.empty(n * 4 + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start : start + n * 4].view(np.float32)
    out[:] = values
    return out


def address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def test_numpy_crosses_without_a_copy_when_aligned() -> None:
    from agnograd.interop._jax_arrays import _from_jax, _to_jax

    a = aligned([1.0, 2.0, 3.0])
    j = _to_jax(a, "test", 0)
    assert j.unsafe_buffer_pointer() == address(a)
    result = jnp.sin(j)
    back = _from_jax(result, agnograd.get_device(a), "test")
    assert isinstance(back, np.ndarray)
    assert address(back) == result.unsafe_buffer_pointer()
    assert not back.flags.writeable  # JAX's own memory
    # An identity run op by op shares the input's memory both ways (a jitted one
    # returns a new buffer: XLA's output).
    y = bridge.node(lambda v: v, jit=False)(agnograd.Variable(a))
    assert address(y.array) == address(a)
    # 16-byte aligned memory (NumPy's promise) is copied: JAX imports 64-byte only.
    b = aligned([1.0, 2.0, 3.0, 4.0, 5.0], 64)[4:]
    copied = _to_jax(b, "test", 0)
    assert copied.unsafe_buffer_pointer() != address(b)
    np.testing.assert_array_equal(np.asarray(copied), b)


def test_torch_crosses_without_a_copy() -> None:
    torch = pytest.importorskip("torch")
    from agnograd.interop._jax_arrays import _to_jax

    t = torch.tensor([1.0, 2.0, 3.0])
    assert _to_jax(t, "test", 0).unsafe_buffer_pointer() == t.data_ptr()
    x = agnograd.Variable(t)
    y = bridge.node(lambda v: v, jit=False)(x)
    assert y.array.data_ptr() == t.data_ptr()
    # torch's broadcast gradients (stride 0), which JAX's DLPack import refuses, are
    # copied; backward through the node works with them.
    F.sum(bridge.node(jnp.sin)(x)).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(t.numpy()), atol=ATOL32)
    # JAX may share the input's memory: a write into it before backward is caught.
    loss = F.sum(bridge.node(jnp.sin)(x))
    t.add_(1.0)
    with pytest.raises(RuntimeError, match="overwritten in place"):
        loss.backward()


@pytest.mark.parametrize("jit", [True, False])
def test_node_compiles_once_per_shape_when_jitted(jit: bool) -> None:
    traced = []

    def square(v: Any) -> Any:
        traced.append(v.shape)  # runs when JAX traces (or, op by op, calls) square
        return v * v

    node = bridge.node(square, jit=jit)
    for value in (1.0, 2.0, 3.0):
        x = agnograd.Variable(np.array([value, 1.0], dtype=np.float32))
        F.sum(node(x)).backward()
        np.testing.assert_allclose(x.grad, [2 * value, 2.0])
    # Jitted: traced for the compiled forward and the compiled backward, once each.
    assert len(traced) == (2 if jit else 3)


def test_a_concrete_gradient_seeds_a_traced_output() -> None:
    # JAX's tracers report no device: a concrete seed must not be refused as being on
    # another one (it was, under jax.grad).
    def f(x: Any) -> Any:
        v = agnograd.Variable(x)
        y = agnograd.functions.sum(v * v * v)
        y.grad = jnp.asarray(1.0)
        y.backward()
        return jnp.sum(v.grad)

    x = jnp.asarray([1.0, 2.0])
    np.testing.assert_allclose(np.asarray(jax.grad(f)(x)), [6.0, 12.0])


def test_a_node_does_not_keep_its_function_alive_after_it_is_gone() -> None:
    # JAX's caches hold static arguments for the life of the process: the compiled
    # functions close over fn instead, and belong to the node.
    import gc
    import weakref

    class Box:
        w = jnp.float32(2.0)

    refs = []
    for _ in range(3):
        box = Box()
        refs.append(weakref.ref(box))
        node = bridge.node(lambda x, box=box: x * box.w)
        x = agnograd.Variable(np.ones(3, dtype=np.float32))
        F.sum(node(x)).backward()
        del node, box, x
    gc.collect()
    assert all(r() is None for r in refs)


@pytest.mark.parametrize("transform", ["jit", "grad", "vmap"])
def test_a_traced_variable_has_a_device_to_create_arrays_on(transform: str) -> None:
    # A tracer's .devices() raises ConcretizationTypeError: array API code that asks
    # for x.device to make new arrays next to x must still run under a transform.
    @bridge.function
    def f(x: Any) -> Any:
        xp = x.__array_namespace__()
        eye = xp.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        return xp.sum(xp.matmul(eye * 2.0, x))

    x = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    if transform == "jit":
        np.testing.assert_allclose(np.asarray(jax.jit(f)(x)), 20.0)
    elif transform == "grad":
        np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(f))(x)), np.full((2, 2), 2.0))
    else:
        np.testing.assert_allclose(np.asarray(jax.vmap(f)(x)), [6.0, 14.0])
