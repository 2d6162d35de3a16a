"""Forward mode (``agnograd.transforms._forward.jvp``): tangents pushed through each
operation as it runs, derived from the declarations.

Every function with an input domain in the testing kit is checked, so a new row is
covered by itself: ``jvp == J v`` against the reverse-mode Jacobian
(``agnograd.functional.jacobian``) on NumPy, array-api-strict and torch, hypothesis
drawing the inputs; holomorphic functions also on complex inputs (against central
differences), and those made of nodes declared ``linear`` or ``bilinear`` on complex
inputs too (against the complex Jacobian); and a function hook counts that no
backward runs during a jvp. ``test_forward_orders.py`` has the second order, JAX and
Dask.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.functional import jacobian
from agnograd.functions import _elementwise
from agnograd.testing import backend_namespace
from agnograd.testing import strategies as ags
from agnograd.transforms import _forward
from agnograd.transforms._forward import jvp

torch = pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")
EXAMPLES = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Functions with an input domain whose nodes have no jvp of their own yet: their
# tangents come from the fallback (the backward, transposed), which runs backward.
FALLBACK: set[str] = set()
# Their Jacobian is not a matrix of the real inputs: complex outputs of conventions
# that reverse mode and jacobian do not share (eigenvectors' phases), or no gradient.
SKIP = {"linalg.eig", "linalg.eigvals"}

NAMES = [name for name in ags.registered_domains() if name not in SKIP]


def to_numpy(a: Any) -> np.ndarray:
    a = a.array if isinstance(a, Variable) else a
    if isinstance(a, torch.Tensor):
        return a.detach().resolve_conj().numpy()
    return np.asarray(a)


def leaves(y: Any) -> list[Any]:
    if isinstance(y, tuple | list):
        return [leaf for item in y for leaf in leaves(item)]
    return [y]


class CountBackward(agnograd.FunctionHook):
    name = "CountBackward"

    def __init__(self) -> None:
        self.calls = 0

    def backward_preprocess(self, function: Any, in_data: Any, out_grad: Any) -> None:
        self.calls += 1


def floating(xp: Any, x: Any) -> bool:
    return bool(xp.isdtype(x.dtype, ("real floating", "complex floating")))


def split(xp: Any, case: Any) -> tuple[list[int], Any]:
    """The positions of the case's floating inputs, and the case as a function of them
    (the others, indices, held fixed)."""
    where = [i for i, x in enumerate(case.inputs) if floating(xp, x)]

    def f(*xs: Any) -> Any:
        inputs = list(case.inputs)
        for i, x in zip(where, xs, strict=True):
            inputs[i] = x
        return case(*inputs)

    return where, f


def tangents_for(xp: Any, primals: list[Any], seed: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    made = []
    for p in primals:
        t = rng.uniform(-1.0, 1.0, tuple(p.shape))
        if xp.isdtype(p.dtype, "complex floating"):
            t = t + 1j * rng.uniform(-1.0, 1.0, tuple(p.shape))
        made.append(xp.astype(xp.asarray(t), p.dtype))
    return made


def jacobian_times(f: Any, primals: list[Any], tangents: list[Any]) -> list[np.ndarray]:
    """``J v`` of ``f`` (each output) from the reverse-mode Jacobian."""
    several = isinstance(f(*primals), tuple | list)
    outputs = leaves(f(*primals))
    jac = jacobian(lambda *xs: tuple(leaves(f(*xs))) if several else f(*xs), tuple(primals))
    result = []
    for k, y in enumerate(outputs):
        total = np.zeros(tuple(y.shape), dtype=to_numpy(y).dtype)
        for i, t in enumerate(tangents):
            size = int(np.prod(tuple(t.shape)))
            block = to_numpy(jac[k][i] if several else jac[i]).reshape(total.size, size)
            total = total + (block @ to_numpy(t).reshape(-1)).reshape(total.shape)
        result.append(total)
    return result


def central_difference(f: Any, primals: list[Any], tangents: list[Any]) -> np.ndarray:
    h = 1e-6
    plus = f(*[p + h * t for p, t in zip(primals, tangents, strict=True)])
    minus = f(*[p - h * t for p, t in zip(primals, tangents, strict=True)])
    return (to_numpy(plus) - to_numpy(minus)) / (2 * h)


class RecordNodes(agnograd.FunctionHook):
    """The classes of the nodes that run while it is on."""

    name = "RecordNodes"

    def __init__(self) -> None:
        self.classes: set[type] = set()

    def forward_preprocess(self, function: Any, in_data: Any) -> None:
        self.classes.add(type(function))


def linear_nodes_only(f: Any, primals: list[Any]) -> bool:
    """Whether ``f`` runs only nodes declared ``linear`` or ``bilinear`` (so is linear
    or bilinear in its floating inputs, and holomorphic unless it conjugates)."""
    with RecordNodes() as hook:
        f(*primals)
    return bool(hook.classes) and all(
        getattr(c, "linear", False) or getattr(c, "bilinear", False) for c in hook.classes
    )


# Of the functions made of linear and bilinear nodes, those that take real input only,
# and those that are linear over the reals only (they conjugate, or read the real
# part): their tangent of a complex input is no complex Jacobian times the tangent.
REAL_INPUT = {"astype", "fft.rfft", "fft.rfftn", "fft.ihfft"}
REAL_LINEAR = {"fft.hfft", "fft.irfft", "fft.irfftn", "vecdot", "linalg.vecdot"}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
@EXAMPLES
@given(data=st.data())
def test_jvp_is_jacobian_times_tangent(name: str, backend: str, data: Any) -> None:
    xp = backend_namespace(backend)
    case = data.draw(ags.function_inputs(xp, name), label="case")
    where, f = split(xp, case)
    primals = [case.inputs[i] for i in where]
    if not primals:
        return
    # Functions made of linear and bilinear nodes also on complex inputs (half the
    # examples): holomorphic, their tangent is the complex Jacobian times the tangent.
    holomorphic = False
    if (
        name not in REAL_INPUT
        and all(not xp.isdtype(p.dtype, "complex floating") for p in primals)
        and linear_nodes_only(f, primals)
        and data.draw(st.booleans(), label="complex")
    ):
        primals = [xp.astype(p, xp.complex128) * (1 + 0.5j) for p in primals]
        holomorphic = name not in REAL_LINEAR
    tangents = tangents_for(xp, primals, data.draw(st.integers(0, 2**16), label="seed"))
    with CountBackward() as hook:
        output, out_tangent = jvp(f, tuple(primals), tuple(tangents))
    if name not in FALLBACK:
        assert hook.calls == 0, f"{name}: {hook.calls} backward calls during jvp"
    tolerance = {"rtol": 1e-6, "atol": 1e-8}
    if not holomorphic and any(xp.isdtype(p.dtype, "complex floating") for p in primals):
        # (conj, real, imag, hfft, irfft: not holomorphic, so no complex Jacobian)
        expected = [central_difference(f, primals, tangents)]
        tolerance = {"rtol": 1e-5, "atol": 1e-7}
    else:
        expected = jacobian_times(f, primals, tangents)
    got = leaves(out_tangent)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert not isinstance(g, Variable)  # raw arrays in, raw arrays out
        np.testing.assert_allclose(to_numpy(g), e, **tolerance)
    for y, ref in zip(leaves(output), leaves(f(*primals)), strict=True):
        np.testing.assert_array_equal(to_numpy(y), to_numpy(ref))
    # Without the hook, the fast paths push the tangents (Level.push1, push2): the
    # same bits as the general path that the hook took.
    fast_output, fast_tangent = jvp(f, tuple(primals), tuple(tangents))
    for fast, general in zip(
        leaves(fast_output) + leaves(fast_tangent), leaves(output) + got, strict=True
    ):
        np.testing.assert_array_equal(to_numpy(fast), to_numpy(general))


# -- complex: holomorphic rows, against central differences ----------------------------

# The rows whose function is holomorphic (on the domain the kit draws from, turned
# a little into the complex plane); abs, the real/imag parts and the extensions of
# real functions (atan2, hypot, ...) are not.
HOLOMORPHIC = [
    name
    for name in [
        "exp",
        "expm1",
        "log",
        "log1p",
        "log2",
        "log10",
        "sin",
        "cos",
        "tan",
        "sinh",
        "cosh",
        "tanh",
        "asin",
        "acos",
        "atan",
        "asinh",
        "acosh",
        "atanh",
        "sqrt",
        "square",
        "reciprocal",
        "negative",
        "positive",
        "add",
        "subtract",
        "multiply",
        "divide",
        "pow",
    ]
    if name in _elementwise.CHAPTER
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", HOLOMORPHIC)
@EXAMPLES
@given(data=st.data())
def test_complex_jvp_of_holomorphic_rows(name: str, backend: str, data: Any) -> None:
    xp = backend_namespace(backend)
    case = data.draw(ags.function_inputs(xp, name), label="case")
    primals = [xp.astype(x, xp.complex128) * (1 + 0.2j) for x in case.inputs]
    tangents = tangents_for(xp, primals, data.draw(st.integers(0, 2**16), label="seed"))
    _, t = jvp(case, tuple(primals), tuple(tangents))
    expected = central_difference(case, primals, tangents)
    np.testing.assert_allclose(to_numpy(t), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["abs", "real", "imag", "conj"])
def test_complex_jvp_of_nonholomorphic_rows(name: str) -> None:
    """Real results of complex inputs, and conj: the R-linear directional derivative."""
    fn = getattr(agnograd.namespace(np), name)
    z = np.array([1.0 + 2.0j, -0.5 + 0.3j, 2.0 - 1.0j])
    v = np.array([0.3 - 1.0j, 1.0 + 0.5j, -0.2 + 0.1j])
    _, t = jvp(fn, (z,), (v,))
    expected = central_difference(lambda a: fn(a).array, [z], [v])
    np.testing.assert_allclose(t, expected, rtol=1e-6, atol=1e-8)


# -- formulas: adjoint to backward on real and complex inputs, and differentiable -------


def _hermitian(a: np.ndarray) -> np.ndarray:
    """A well conditioned Hermitian positive-definite matrix made from ``a``."""
    return a @ np.conj(a.T) + len(a) * np.eye(len(a))


# name -> (function of the namespace ns and the inputs, inputs from a random square a)
FORMULAS: dict[str, tuple[Any, Any]] = {
    "prod": (lambda ns, a: ns.prod(a, axis=0), lambda a: [a]),
    "max": (lambda ns, a: ns.max(a, axis=1), lambda a: [a]),
    "var": (lambda ns, a: ns.var(a, axis=0, correction=1), lambda a: [a]),
    "std": (lambda ns, a: ns.std(a), lambda a: [a]),
    "cumulative_prod": (
        lambda ns, a: ns.cumulative_prod(a, axis=1, include_initial=True),
        lambda a: [a * (np.arange(4) % 3 != 1)],  # zeros: the first and second of a row
    ),
    "vector_norm": (lambda ns, a: ns.linalg.vector_norm(a, axis=0, ord=3), lambda a: [a]),
    "inv": (lambda ns, a: ns.linalg.inv(a), lambda a: [a]),
    "solve": (lambda ns, a, b: ns.linalg.solve(a, b), lambda a: [a, a[:, :2]]),
    "det": (lambda ns, a: ns.linalg.det(a), lambda a: [a]),
    "det singular": (lambda ns, a: ns.linalg.det(a), lambda a: [a[:, [0, 1, 2, 0]]]),
    "slogdet": (lambda ns, a: tuple(ns.linalg.slogdet(a)), lambda a: [a]),
    "pinv": (lambda ns, a: ns.linalg.pinv(a), lambda a: [a[:, :3]]),
    "cholesky": (lambda ns, a: ns.linalg.cholesky(a, upper=True), lambda a: [_hermitian(a)]),
    "qr": (lambda ns, a: tuple(ns.linalg.qr(a)), lambda a: [a[:3]]),
    "eigh": (lambda ns, a: tuple(ns.linalg.eigh(a)), lambda a: [_hermitian(a)]),
    "svd": (lambda ns, a: tuple(ns.linalg.svd(a)), lambda a: [a[:, :3]]),
    "eig": (lambda ns, a: tuple(ns.linalg.eig(a)), lambda a: [a]),
}


def _draw(rng: Any, shape: tuple[int, ...], complex_: bool) -> np.ndarray:
    a = rng.standard_normal(shape)
    return a + 1j * rng.standard_normal(shape) if complex_ else a


def _pairing(a: Any, b: Any) -> float:
    """The real inner product ``Re(sum(conj(a) b))``."""
    return float(np.real(np.vdot(to_numpy(a), to_numpy(b))))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize(
    ("name", "complex_"),
    # (max has no complex inputs: complex numbers have no order)
    [(name, c) for name in sorted(FORMULAS) for c in (False, True) if not (c and name == "max")],
)
def test_formula_is_the_adjoint_of_backward(name: str, complex_: bool, backend: str) -> None:
    # <g, jvp(t)> == <vjp(g), t>: the formula and the backward give the same
    # derivative, in PyTorch's complex convention (eig is left out of the drawn test).
    rng = np.random.default_rng(0)
    f, make = FORMULAS[name]
    raw = [np.asarray(x) for x in make(_draw(rng, (4, 4), complex_))]
    lib = np if backend == "numpy" else torch
    ns = agnograd.namespace(lib)
    primals = [lib.asarray(x) for x in raw]
    tangents = [lib.asarray(_draw(rng, x.shape, complex_)) for x in raw]
    with CountBackward() as hook:
        outputs, out_tangents = jvp(lambda *xs: f(ns, *xs), tuple(primals), tuple(tangents))
    assert hook.calls == 0
    seeds = [
        lib.asarray(_draw(rng, tuple(y.shape), np.iscomplexobj(to_numpy(y))))
        for y in leaves(outputs)
    ]
    xs = [Variable(p, requires_grad=True) for p in primals]
    loss = None
    for y, g in zip(leaves(f(ns, *xs)), seeds, strict=True):
        term = (
            ns.sum(ns.real(ns.conj(g) * y))
            if ns.isdtype(y.dtype, "complex floating")
            else ns.sum(g * y)
        )
        loss = term if loss is None else loss + term
    loss.backward()
    forward = sum(_pairing(g, t) for g, t in zip(seeds, leaves(out_tangents), strict=True))
    reverse = sum(_pairing(x.grad, t) for x, t in zip(xs, tangents, strict=True))
    np.testing.assert_allclose(forward, reverse, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["prod", "max", "var", "std", "cumulative_prod", "det", "svd"])
def test_formula_forward_over_forward(name: str) -> None:
    # The formulas run on Variables under an outer jvp: the second derivative along
    # t against central differences of the first.
    rng = np.random.default_rng(1)
    f, make = FORMULAS[name]
    ns = agnograd.namespace(np)
    (x,) = make(rng.standard_normal((4, 4)))
    t = rng.standard_normal(x.shape)

    def first(a: Any) -> Any:
        return leaves(jvp(lambda b: f(ns, b), (a,), (t,))[1])[-1]

    _, second = jvp(first, (Variable(x),), (t,))
    h = 1e-5
    expected = (to_numpy(first(x + h * t)) - to_numpy(first(x - h * t))) / (2 * h)
    np.testing.assert_allclose(to_numpy(second), expected, rtol=1e-5, atol=1e-6)


# -- the user's nodes: jvp, and the fallback ---------------------------------------------


class Cube(agnograd.FunctionNode):
    def forward(self, inputs: Any) -> Any:
        self.retain_inputs((0,))
        return (inputs[0] ** 3,)

    def backward(self, indexes: Any, grad_outputs: Any) -> Any:
        (x,) = self.get_retained_inputs()
        return (3 * x * x * grad_outputs[0],)


class CubeWithJvp(Cube):
    calls = 0

    def jvp(self, inputs: Any, tangents: Any) -> Any:
        type(self).calls += 1
        (x,), (t,) = inputs, tangents
        return (3 * x * x * t,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_node_jvp_is_used_and_no_backward_runs(backend: str) -> None:
    xp = backend_namespace(backend)
    x = xp.asarray([0.5, -1.0, 2.0], dtype=xp.float64)
    v = xp.asarray([1.0, 2.0, -1.0], dtype=xp.float64)
    CubeWithJvp.calls = 0
    with CountBackward() as hook:
        _, t = jvp(lambda a: F.sin(CubeWithJvp().apply((a,))[0]), (x,), (v,))
    assert hook.calls == 0
    assert CubeWithJvp.calls == 1
    expected = np.cos(to_numpy(x) ** 3) * 3 * to_numpy(x) ** 2 * to_numpy(v)
    np.testing.assert_allclose(to_numpy(t), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_without_jvp_falls_back_to_its_backward_transposed(backend: str) -> None:
    xp = backend_namespace(backend)
    x = xp.asarray([0.5, -1.0, 2.0], dtype=xp.float64)
    v = xp.asarray([1.0, 2.0, -1.0], dtype=xp.float64)
    y, t = jvp(lambda a: F.sin(Cube().apply((a,))[0]), (x,), (v,))
    expected = np.cos(to_numpy(x) ** 3) * 3 * to_numpy(x) ** 2 * to_numpy(v)
    np.testing.assert_allclose(to_numpy(t), expected)
    np.testing.assert_allclose(to_numpy(y), np.sin(to_numpy(x) ** 3))


def test_fallback_refuses_to_be_differentiated_again() -> None:
    x = Variable(np.array([0.5, 2.0]))
    with pytest.raises(NotImplementedError, match="Cube defines no jvp"):
        jvp(lambda a: Cube().apply((a,))[0], (x,), (np.ones(2),))


# -- the transform's interface -----------------------------------------------------------


def test_raw_in_raw_out_variables_in_variables_out() -> None:
    x, v = np.array([0.1, 0.2]), np.array([1.0, 1.0])
    y, t = jvp(F.tanh, (x,), (v,))
    assert type(y) is np.ndarray
    assert type(t) is np.ndarray
    y, t = jvp(F.tanh, (Variable(x, requires_grad=False),), (v,))
    assert isinstance(y, Variable)
    assert isinstance(t, Variable)
    np.testing.assert_allclose(t.array, 1 - np.tanh(x) ** 2)


def test_nested_arguments_and_aux() -> None:
    params = {"w": np.array([2.0, 3.0]), "b": (np.array(1.0),)}
    tangents = {"w": np.array([1.0, 0.0]), "b": (np.array(1.0),)}

    def f(p: Any, x: Any) -> Any:
        y = F.sum(p["w"] * x) + p["b"][0]
        return {"y": y, "twice": [y * 2]}, "aux"

    x = np.array([1.0, 1.0])
    out, t, aux = jvp(f, (params, x), (tangents, np.zeros(2)), has_aux=True)
    assert aux == "aux"
    assert float(out["y"]) == 6.0
    assert float(t["y"]) == 2.0
    assert float(t["twice"][0]) == 4.0


def test_constants_have_no_tangent_and_outputs_that_ignore_inputs_get_zeros() -> None:
    c = np.array([1.0, 2.0])
    _, t = jvp(lambda x: F.exp(Variable(c)), (np.zeros(2),), (np.ones(2),))
    np.testing.assert_array_equal(t, np.zeros(2))
    # The same Variable captured from outside carries no tangent.
    outside = Variable(np.array([1.0, 2.0]))
    _, t = jvp(lambda x: x * outside, (outside,), (np.ones(2),))
    np.testing.assert_array_equal(t.array, np.array([1.0, 2.0]))


def test_errors_name_the_argument() -> None:
    with pytest.raises(ValueError, match="tangent 0 has shape"):
        jvp(F.sin, (np.zeros(2),), (np.zeros(3),))
    with pytest.raises(TypeError, match="tuples of arguments"):
        jvp(F.sin, np.zeros(2), np.zeros(2))
    with pytest.raises(TypeError, match="floating dtype"):
        jvp(F.sin, (np.zeros(2),), (np.zeros(2, dtype=np.int64),))


def test_fast_paths_are_off_only_inside_a_jvp() -> None:
    hooks = agnograd.config.function_hooks
    seen = []
    jvp(
        lambda x: seen.append(dict(agnograd.config.function_hooks)) or x * 2,
        (np.ones(1),),
        (np.ones(1),),
    )
    assert "agnograd.jvp" in seen[0]
    assert agnograd.config.function_hooks == hooks


# -- higher orders ----------------------------------------------------------------------


def test_forward_over_forward() -> None:
    x, u, v = np.array([0.3, 1.2]), np.array([1.0, 2.0]), np.array([0.5, -1.0])

    def tangent(a: Any) -> Any:
        return jvp(F.sin, (a,), (v,))[1]

    _, second = jvp(tangent, (x,), (u,))
    np.testing.assert_allclose(to_numpy(second), -np.sin(x) * u * v)


def test_forward_over_reverse_is_a_hessian_vector_product() -> None:
    x, v = np.array([0.3, 1.2, -0.7]), np.array([1.0, 2.0, 0.5])

    def gradient(a: Any) -> Any:
        (g,) = agnograd.grad([F.sum(F.sin(a) * a)], [a], enable_double_backprop=True)
        return g

    with CountBackward():
        _, hv = jvp(gradient, (Variable(x),), (v,))
    # d2/dx2 (x sin x) = 2 cos x - x sin x
    np.testing.assert_allclose(to_numpy(hv), (2 * np.cos(x) - x * np.sin(x)) * v)


def test_forward_over_a_transform_of_raw_arrays_gives_raw_arrays() -> None:
    """A transform inside a jvp of raw arrays carries the tangents of its arguments,
    differentiated or not, to its own leaves, and gives raw tangents back."""
    x, w, v = np.array([0.3, 1.2]), np.array([2.0, -1.0]), np.array([1.0, 0.5])

    def f(a: Any, b: Any) -> Any:
        return F.sum(F.sin(a) * a * b)

    # d/da f = (cos a * a + sin a) * b; its derivative along v in a, and in b.
    d2 = (2 * np.cos(x) - x * np.sin(x)) * w
    g, hv = jvp(agnograd.func.grad(f), (x, w), (v, np.zeros(2)))
    assert type(g) is type(hv) is np.ndarray
    np.testing.assert_allclose(hv, d2 * v)
    _, t = jvp(lambda b: agnograd.func.grad(f)(x, b), (w,), (v,))
    np.testing.assert_allclose(t, (np.cos(x) * x + np.sin(x)) * v)
    out, t = jvp(lambda a: agnograd.func.vjp(F.sin, a)[0], (x,), (v,))
    assert type(out) is type(t) is np.ndarray
    np.testing.assert_allclose(t, np.cos(x) * v)


def test_reverse_over_forward() -> None:
    x, v = Variable(np.array([0.3, 1.2])), np.array([0.5, -1.0])
    _, t = jvp(lambda a: F.tanh(a) * a, (x,), (v,))
    F.sum(t).backward()
    # t = (x (1 - tanh^2) + tanh) v; d/dx of it
    th = np.tanh(x.array)
    d2 = 2 * (1 - th**2) - 2 * x.array * th * (1 - th**2)
    np.testing.assert_allclose(x.grad, d2 * v)


def test_tangents_die_with_their_variables_and_stay_at_their_level() -> None:
    outer = _forward._Level(None)
    inner = _forward._Level(outer)
    a = Variable(np.ones(2))
    t_outer, t_inner = np.zeros(2), np.full(2, 2.0)
    outer.set(a, t_outer)
    inner.set(a, t_inner)
    inner.set(a, t_inner + 1)  # set again: replaces, the chain does not grow
    assert outer.tangent(a) is t_outer
    assert inner.tangent(a)[0] == 3.0
    assert _forward._Level(None).tangent(a) is None
    assert a._node._tangent[2][2] is None
    gone = weakref.ref(t_outer)
    del a, t_outer
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_jvp_under_define_then_run_links_its_tangents_into_the_graph(backend: str) -> None:
    xp = backend_namespace(backend)
    x = Variable(xp.asarray([0.3, 1.2], dtype=xp.float64))
    v = xp.asarray([1.0, 2.0], dtype=xp.float64)
    eager = jvp(lambda a: F.sin(a) * a, (x,), (v,))
    with agnograd.auto_forward(False):
        y, t = jvp(lambda a: F.sin(a) * a, (x,), (v,))
    assert y.array is None  # linked, not computed
    assert t.array is None
    t.forward()
    y.forward()
    np.testing.assert_array_equal(to_numpy(t), to_numpy(eager[1]))
    np.testing.assert_array_equal(to_numpy(y), to_numpy(eager[0]))


def _written(a: Any) -> Any:
    h = F.sin(a) * 2.0
    h[0] = 5.0  # a Python scalar: no tangent there
    h[1:] = a[:2] * a[:2]  # an array that has one
    return F.exp(h) * a


@pytest.mark.parametrize("watched", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_into_an_intermediate_writes_its_tangent(backend: str, watched: bool) -> None:
    # The written Variable's tangent is the write's, not the one it had before (which
    # a write without a graph, the jvp's fast path, used to leave in place).
    xp = backend_namespace(backend)
    x = xp.asarray([0.3, 1.2, -0.5], dtype=xp.float64)
    v = xp.asarray([1.0, 2.0, 3.0], dtype=xp.float64)
    primal = Variable(x, requires_grad=True) if watched else x
    _, t = jvp(_written, (primal,), (v,))
    expected = central_difference(lambda a: _written(Variable(a)), [x], [v])
    np.testing.assert_allclose(to_numpy(t), expected, rtol=1e-6)


NN_CASES = {
    "softmax": lambda a, labels: F.softmax(a, axis=1),
    "log_softmax": lambda a, labels: F.log_softmax(a, axis=0),
    "softmax_cross_entropy": lambda a, labels: F.softmax_cross_entropy(a, labels),
    "softmax_cross_entropy(reduce='no')": lambda a, labels: F.softmax_cross_entropy(
        a, labels, reduce="no"
    ),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(NN_CASES))
def test_nn_functions_jvp_and_second_order(name: str, backend: str) -> None:
    # agnograd.functions' own rows outside the namespace: first order against central
    # differences without a backward, second order (forward over reverse, whose
    # backward runs the loss's gradient node) against reverse over reverse.
    xp = backend_namespace(backend)
    rng = np.random.default_rng(0)
    x = xp.asarray(rng.standard_normal((4, 3)))
    v = xp.asarray(rng.standard_normal((4, 3)))
    labels = xp.asarray(np.array([0, 2, -1, 1]))
    f = NN_CASES[name]
    with CountBackward() as hook:
        _, t = jvp(lambda a: f(a, labels), (x,), (v,))
    assert hook.calls == 0
    expected = central_difference(lambda a: f(Variable(a), labels), [x], [v])
    np.testing.assert_allclose(to_numpy(t), expected, rtol=1e-6, atol=1e-9)

    def loss(a: Any) -> Any:
        return F.sum(f(a, labels) ** 2)

    forward_over_reverse = agnograd.func.hessian(loss)(x)
    reverse_over_reverse = agnograd.func.jacrev(agnograd.func.jacrev(loss))(x)
    np.testing.assert_allclose(
        to_numpy(forward_over_reverse), to_numpy(reverse_over_reverse), rtol=1e-9, atol=1e-12
    )
    _, hv = agnograd.functional.hvp(loss, x, v)
    want = np.tensordot(to_numpy(reverse_over_reverse), to_numpy(v), axes=2)
    np.testing.assert_allclose(to_numpy(hv), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hvp_through_a_node_without_jvp_takes_the_double_backward_trick(backend: str) -> None:
    # Forward mode cannot differentiate the fallback's tangents again (reverse over
    # forward watches them): hvp computes by double backward instead.
    xp = backend_namespace(backend)
    x = xp.asarray([1.0, 2.0], dtype=xp.float64)
    v = xp.asarray([1.0, 0.5], dtype=xp.float64)
    value, product = agnograd.functional.hvp(lambda a: F.sum(Cube().apply((a,))[0]), x, v)
    np.testing.assert_allclose(to_numpy(value), 9.0)
    np.testing.assert_allclose(to_numpy(product), [6.0, 6.0])  # diag(6 x) v
