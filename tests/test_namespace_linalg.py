"""Linear algebra of the differentiable namespace: ``matmul``, ``tensordot``, ``vecdot``
and the ``linalg`` extension.

Each case builds well-conditioned inputs from hypothesis-drawn shapes and a seed,
and is checked to first and second order against central differences on NumPy,
array-api-strict and PyTorch, and against ``torch.autograd`` (the same expression
run on ``array_api_compat.torch``) to first and second order, for real and complex
inputs.

Functions of Hermitian matrices are checked through ``(x + x^H) / 2``, so that
central differences see the same Hermitian perturbations the gradient is defined
for; eigenvectors and singular vectors enter losses as ``|v|^2``, which does not
depend on their arbitrary signs (phases).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import array_api_compat.torch as tnp
import numpy as np
import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import agnograd
from agnograd.functions import _linalg_inverse, _linalg_norms
from agnograd.functions._standard import LINALG, LINEAR_ALGEBRA
from agnograd.functions._table import DIFFERENTIABLE, NON_DIFFERENTIABLE
from agnograd.testing import backend_namespace, check_backward, check_double_backward

BACKENDS = ["numpy", "array_api_strict", "torch"]
EXAMPLES = settings(max_examples=3, deadline=None, database=None)

batches = st.lists(st.integers(1, 2), max_size=2).map(tuple)
sizes = st.integers(1, 3)


# -- inputs ------------------------------------------------------------------------------


def orthogonal(rng: np.random.Generator, shape: tuple[int, ...], cplx: bool) -> np.ndarray:
    """Random unitary matrices of shape ``(..., n, n)``."""
    a = rng.standard_normal(shape)
    if cplx:
        a = a + 1j * rng.standard_normal(shape)
    q, r = np.linalg.qr(a)
    return q * np.expand_dims(np.sign(np.diagonal(r, axis1=-2, axis2=-1).real), -2)


def conditioned(
    rng: np.random.Generator, batch: tuple[int, ...], m: int, n: int, cplx: bool = False
) -> np.ndarray:
    """``U diag(s) V^H`` with singular values spread over [1, 3] and well separated."""
    k = min(m, n)
    s = np.linspace(3.0, 1.0, k) + rng.uniform(-0.1, 0.1, k) if k > 1 else np.array([2.0])
    u = orthogonal(rng, (*batch, m, m), cplx)[..., :k]
    v = orthogonal(rng, (*batch, n, n), cplx)[..., :k]
    return (u * s) @ np.conj(np.swapaxes(v, -1, -2))


def hermitian(
    rng: np.random.Generator, batch: tuple[int, ...], n: int, cplx: bool = False
) -> np.ndarray:
    """Positive-definite Hermitian matrices with eigenvalues in [1, 4], 0.7 apart or more."""
    lam = np.linspace(1.0, 4.0, n) + rng.uniform(-0.05, 0.05, n) if n > 1 else np.array([2.0])
    q = orthogonal(rng, (*batch, n, n), cplx)
    return (q * lam) @ np.conj(np.swapaxes(q, -1, -2))


def normal(rng: np.random.Generator, shape: tuple[int, ...], cplx: bool = False) -> np.ndarray:
    a = rng.standard_normal(shape)
    return a + 1j * rng.standard_normal(shape) if cplx else a


def away_from_zero(
    rng: np.random.Generator, shape: tuple[int, ...], cplx: bool = False
) -> np.ndarray:
    """Elements with ``|x|`` in [0.5, 2] (norms with ord <= 1 have kinks at 0)."""
    magnitude = rng.uniform(0.5, 2.0, shape)
    if cplx:
        return magnitude * np.exp(1j * rng.uniform(0, 2 * math.pi, shape))
    return magnitude * rng.choice([-1.0, 1.0], shape)


# -- the cases: build(rng, draw, cplx) -> inputs, fn(xp, *args) -> outputs ---------------


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[np.random.Generator, Any, bool], tuple[np.ndarray, ...]]
    fn: Callable[..., Any]

    def __repr__(self) -> str:
        return self.name


def herm(xp: Any, a: Any) -> Any:
    """``(a + a^H) / 2``: the input that functions of Hermitian matrices read."""
    t = xp.matrix_transpose(a)
    if xp.isdtype(a.dtype, "complex floating"):
        t = xp.conj(t)
    return (a + t) * 0.5


def abs2(xp: Any, v: Any) -> Any:
    """``|v|^2``, invariant under the sign (phase) of eigen- and singular vectors."""
    if xp.isdtype(v.dtype, "complex floating"):
        return xp.real(v * xp.conj(v))
    return v * v


def _square(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    n = draw(sizes)
    return (conditioned(rng, draw(batches), n, n, cplx),)


def _rect(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    m, n = draw(sizes), draw(sizes)
    return (conditioned(rng, draw(batches), m, n, cplx),)


def _tall(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    n = draw(sizes)
    return (conditioned(rng, draw(batches), n + draw(st.integers(0, 2)), n, cplx),)


def _hermitian(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    return (hermitian(rng, draw(batches), draw(sizes), cplx),)


def _matmul(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    m, k, n = draw(sizes), draw(sizes), draw(sizes)
    kind = draw(st.sampled_from(["mm", "vm", "mv", "vv"]))
    shapes = st.sampled_from([((), ()), ((2,), ()), ((2, 1), (3,)), ((), (2,))])
    b1, b2 = draw(shapes)
    s1 = (k,) if kind[0] == "v" else (*b1, m, k)
    s2 = (k,) if kind[1] == "v" else (*b2, k, n)
    return normal(rng, s1, cplx), normal(rng, s2, cplx)


def _tensordot_inputs(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    s1 = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    s2 = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    return normal(rng, tuple(s1), cplx), normal(rng, tuple(s2), cplx)


def _tensordot(xp: Any, a: Any, b: Any) -> Any:
    # Contract as many equally sized pairs as there are, in scrambled order.
    pairs = [(i, i) for i in range(min(a.ndim, b.ndim)) if a.shape[i] == b.shape[i]]
    pairs = pairs[::-1][:2]
    if not pairs and a.ndim and b.ndim and a.shape[-1] == b.shape[0]:
        return xp.tensordot(a, b, axes=1)
    return xp.tensordot(a, b, axes=([i for i, _ in pairs], [j for _, j in pairs]))


def _broadcast_pair(last: int) -> Callable[..., tuple[np.ndarray, ...]]:
    """Two arrays whose shapes broadcast, sharing a last axis of ``last`` (or drawn)."""

    def build(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
        n = last or draw(sizes)
        b1, b2 = draw(st.sampled_from([((), ()), ((2,), ()), ((2, 1), (3,)), ((1,), (2,))]))
        return normal(rng, (*b1, n), cplx), normal(rng, (*b2, n), cplx)

    return build


def _solve(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    n = draw(sizes)
    b1, b2 = draw(st.sampled_from([((), ()), ((2,), ()), ((2, 1), (3,)), ((), (2,))]))
    a = conditioned(rng, b1, n, n, cplx)
    if draw(st.booleans()):
        return a, normal(rng, (n,), cplx)
    return a, normal(rng, (*b2, n, draw(sizes)), cplx)


def _vectors(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    shape = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    return (away_from_zero(rng, shape, cplx),)


def _vector_norm(xp: Any, x: Any, ord: Any, axis: Any, keepdims: bool) -> Any:  # noqa: A002
    if x.ndim == 0:
        axis = None
    elif axis is not None:
        axis = tuple(a for a in axis if a < x.ndim) or None
    return xp.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)


def _matrix_power(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    n = draw(sizes)
    # Scaled so that powers up to 3 stay moderate.
    return (conditioned(rng, draw(batches), n, n, cplx) * 0.6,)


def _diagonal_inputs(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    return (normal(rng, (*draw(batches), draw(sizes), draw(sizes)), cplx),)


def _outer(rng: Any, draw: Any, cplx: bool) -> tuple[np.ndarray, ...]:
    return normal(rng, (draw(sizes),), cplx), normal(rng, (draw(sizes),), cplx)


def _qr(xp: Any, a: Any) -> Any:
    q, r = xp.linalg.qr(a)
    return q, r


def _eigh(xp: Any, a: Any) -> Any:
    w, v = xp.linalg.eigh(herm(xp, a))
    return w, abs2(xp, v)


def _svd(full: bool) -> Callable[..., Any]:
    def fn(xp: Any, a: Any) -> Any:
        u, s, vh = xp.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        return abs2(xp, u[..., :k]), s, abs2(xp, vh[..., :k, :])

    return fn


def _slogdet(xp: Any, a: Any) -> Any:
    sign, logabsdet = xp.linalg.slogdet(a)
    if xp.isdtype(a.dtype, "complex floating"):
        return xp.real(sign), xp.imag(sign), logabsdet
    return logabsdet


def _columns(xp: Any, a: Any) -> Any:
    """Vectors along axis -2 instead of -1 (at least 2-D)."""
    return xp.matrix_transpose(a[None, ...] if a.ndim == 1 else a)


def _matrix_norm(o: Any) -> Callable[..., Any]:
    return lambda xp, a: xp.linalg.matrix_norm(a, ord=o, keepdims=o == 1)


def _norm_case(o: Any, axis: Any, keepdims: bool) -> Case:
    return Case(
        f"linalg.vector_norm ord={o!r}",
        _vectors,
        lambda xp, x: _vector_norm(xp, x, o, axis, keepdims),
    )


def _power(n: int) -> Callable[..., Any]:
    return lambda xp, a: xp.linalg.matrix_power(a, n)


CASES = [
    Case("matmul", _matmul, lambda xp, a, b: xp.matmul(a, b)),
    Case("tensordot", _tensordot_inputs, _tensordot),
    Case("vecdot", _broadcast_pair(0), lambda xp, a, b: xp.vecdot(a, b)),
    Case(
        "linalg.vecdot axis=-2",
        _broadcast_pair(0),
        lambda xp, a, b: xp.linalg.vecdot(_columns(xp, a), _columns(xp, b), axis=-2),
    ),
    Case("linalg.inv", _square, lambda xp, a: xp.linalg.inv(a)),
    Case("linalg.solve", _solve, lambda xp, a, b: xp.linalg.solve(a, b)),
    Case("linalg.det", _square, lambda xp, a: xp.linalg.det(a)),
    Case("linalg.slogdet", _square, _slogdet),
    Case("linalg.cholesky", _hermitian, lambda xp, a: xp.linalg.cholesky(herm(xp, a))),
    Case(
        "linalg.cholesky upper",
        _hermitian,
        lambda xp, a: xp.linalg.cholesky(herm(xp, a), upper=True),
    ),
    Case("linalg.qr", _tall, _qr),
    Case("linalg.qr wide", _rect, _qr),
    Case("linalg.eigh", _hermitian, _eigh),
    Case("linalg.eigvalsh", _hermitian, lambda xp, a: xp.linalg.eigvalsh(herm(xp, a))),
    Case("linalg.svd", _rect, _svd(False)),
    Case("linalg.svd full", _rect, _svd(True)),
    Case("linalg.svdvals", _rect, lambda xp, a: xp.linalg.svdvals(a)),
    Case("linalg.pinv", _rect, lambda xp, a: xp.linalg.pinv(a)),
    *(
        Case(f"linalg.matrix_norm ord={o!r}", _rect, _matrix_norm(o))
        for o in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)
    ),
    _norm_case(2, None, False),
    _norm_case(1, (0,), True),
    _norm_case(3, (0, 2), False),
    _norm_case(0.5, (1,), False),
    _norm_case(-1.5, None, True),
    _norm_case(math.inf, (0, 1), False),
    _norm_case(-math.inf, None, False),
    *(Case(f"linalg.matrix_power n={n}", _matrix_power, _power(n)) for n in (1, 2, 3, -1, -2)),
    Case("linalg.diagonal", _diagonal_inputs, lambda xp, a: xp.linalg.diagonal(a, offset=-1)),
    Case(
        "linalg.diagonal offset=1",
        _diagonal_inputs,
        lambda xp, a: xp.linalg.diagonal(a, offset=1),
    ),
    Case("linalg.trace", _diagonal_inputs, lambda xp, a: xp.linalg.trace(a)),
    Case("linalg.outer", _outer, lambda xp, a, b: xp.linalg.outer(a, b)),
    Case("linalg.cross", _broadcast_pair(3), lambda xp, a, b: xp.linalg.cross(a, b)),
    Case(
        "linalg.cross axis=-2",
        _broadcast_pair(3),
        lambda xp, a, b: xp.linalg.cross(_columns(xp, a), _columns(xp, b), axis=-2),
    ),
]


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, tuple) else (out,)


def _draw_inputs(
    data: Any, case: Case, cplx: bool = False
) -> tuple[np.random.Generator, tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    return rng, case.build(rng, data.draw, cplx)


def _random_like(rng: np.random.Generator, x: Any) -> np.ndarray:
    values = rng.standard_normal(tuple(x.shape))
    if np.iscomplexobj(np.asarray(x)):
        values = values + 1j * rng.standard_normal(tuple(x.shape))
    return values


# -- numerical checks, first and second order, on every backend --------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=repr)
@EXAMPLES
@given(data=st.data())
def test_gradients_match_central_differences(backend: str, case: Case, data: Any) -> None:
    raw = backend_namespace(backend)
    rng, inputs = _draw_inputs(data, case)
    xs = [raw.asarray(a) for a in inputs]
    xp = agnograd.namespace(xs[0])

    def f(*args: Any) -> Any:
        return case.fn(xp, *args)

    with agnograd.no_backprop_mode():
        outs = _as_tuple(f(*[agnograd.Variable(x) for x in xs]))
    gys = [raw.asarray(rng.standard_normal(tuple(y.shape))) for y in outs]
    check_backward(f, xs, gys, atol=1e-5, rtol=1e-4)
    ggs = [raw.asarray(rng.standard_normal(tuple(x.shape))) for x in xs]
    check_double_backward(f, xs, gys, ggs, atol=1e-4, rtol=1e-3)


# -- torch.autograd as the oracle --------------------------------------------------------


def _hermitian_part(g: np.ndarray) -> np.ndarray:
    return (g + np.conj(np.swapaxes(g, -1, -2))) / 2


def _compare_with_torch(
    case: Case,
    inputs: tuple[np.ndarray, ...],
    rng: np.random.Generator,
    order: int = 2,
    hermitian_only: bool = False,
) -> None:
    """agnograd on NumPy against torch.autograd on the same expression, to ``order``."""
    xp = agnograd.namespace(np)
    xs = [agnograd.Variable(a) for a in inputs]
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    outs = _as_tuple(case.fn(xp, *xs))
    touts = _as_tuple(case.fn(tnp, *ts))
    for y, ty in zip(outs, touts, strict=True):
        np.testing.assert_allclose(y.array, _numpy(ty), rtol=1e-9, atol=1e-10)
    seeds = [_random_like(rng, y.array) for y in outs]
    grads = agnograd.grad(
        list(outs),
        xs,
        [np.asarray(s, dtype=y.dtype) for s, y in zip(seeds, outs, strict=True)],
        enable_double_backprop=order > 1,
    )
    tgrads = torch.autograd.grad(
        touts,
        ts,
        [torch.tensor(s, dtype=ty.dtype) for s, ty in zip(seeds, touts, strict=True)],
        create_graph=order > 1,
    )
    project = _hermitian_part if hermitian_only else (lambda g: g)
    for g, tg in zip(grads, tgrads, strict=True):
        np.testing.assert_allclose(project(g.array), project(_numpy(tg)), rtol=1e-7, atol=1e-9)
    if order == 1:
        return
    # Second order: the gradient of the real loss Re<v, grad> with respect to the inputs.
    vs = [_random_like(rng, x.array) for x in xs]
    loss = sum(xp.sum(xp.real(g * np.conj(v))) for g, v in zip(grads, vs, strict=True))
    tloss = sum(
        torch.sum((tg * torch.tensor(v).conj()).real) for tg, v in zip(tgrads, vs, strict=True)
    )
    second = agnograd.grad([loss], xs)
    # A gradient that is constant in the inputs (linear functions) has no graph.
    tsecond = (
        torch.autograd.grad([tloss], ts, allow_unused=True)
        if tloss.requires_grad
        else [None] * len(ts)
    )
    for x, g, tg in zip(xs, second, tsecond, strict=True):
        expected = np.zeros_like(x.array) if tg is None else _numpy(tg)
        actual = np.zeros_like(expected) if g is None else g.array
        np.testing.assert_allclose(project(actual), project(expected), rtol=1e-6, atol=1e-8)


def _numpy(t: torch.Tensor) -> np.ndarray:
    # force: torch hands out lazy zero tensors for gradients that are identically 0.
    return t.detach().resolve_conj().numpy(force=True)


@pytest.mark.parametrize("case", CASES, ids=repr)
@EXAMPLES
@given(data=st.data())
def test_gradients_match_torch(case: Case, data: Any) -> None:
    rng, inputs = _draw_inputs(data, case)
    _compare_with_torch(case, inputs, rng)


_REAL_SPECTRUM = {"linalg.eigh", "linalg.svd", "linalg.svd full"}


def _complex_params() -> list[Any]:
    params = []
    for case in CASES:
        affected = "norm" in case.name or case.name in _REAL_SPECTRUM
        if affected:
            params.append(pytest.param(case, 1, id=f"{case.name}-order1"))
        params.append(pytest.param(case, 2, id=f"{case.name}-order2"))
    return params


# Complex inputs: the conjugate Wirtinger convention, checked against torch.autograd.
# Complex cholesky gradients are compared on Hermitian matrices only: PyTorch's
# carries an extra skew-Hermitian part on the diagonal that no Hermitian input sees.
@pytest.mark.parametrize(("case", "order"), _complex_params())
# No shrinking: the expected failures would spend their time there.
@settings(max_examples=2, deadline=None, database=None, phases=[Phase.generate])
@given(data=st.data())
def test_complex_gradients_match_torch(case: Case, order: int, data: Any) -> None:
    rng, inputs = _draw_inputs(data, case, cplx=True)
    _compare_with_torch(case, inputs, rng, order, hermitian_only="cholesky" in case.name)


# -- non-differentiable results, named tuples, the namespace -----------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_matrix_rank_and_ord_zero_carry_no_gradient(backend: str) -> None:
    raw = backend_namespace(backend)
    x = agnograd.Variable(raw.asarray(np.array([[1.0, 2.0], [2.0, 4.0]])))
    xp = agnograd.namespace(x)
    rank = xp.linalg.matrix_rank(x)
    assert int(rank) == 1
    assert not rank.requires_grad
    count = xp.linalg.vector_norm(x, ord=0)
    assert float(count) == 4.0
    assert not count.requires_grad


def test_named_tuples_keep_their_fields() -> None:
    xp = agnograd.namespace(np)
    a = agnograd.Variable(hermitian(np.random.default_rng(0), (), 3))
    assert xp.linalg.slogdet(a).logabsdet.shape == ()
    assert xp.linalg.eigh(a).eigenvectors.shape == (3, 3)
    assert xp.linalg.qr(a).R.shape == (3, 3)
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    assert xp.linalg.svd(a)._fields == ("U", "S", "Vh")
    np.testing.assert_allclose(((u * s) @ vh).array, a.array, atol=1e-12)


def test_every_linear_algebra_name_is_in_the_tables() -> None:
    for name in (*LINEAR_ALGEBRA, *LINALG):
        assert (name in DIFFERENTIABLE) != (name in NON_DIFFERENTIABLE), name
    xp = agnograd.namespace(np)
    assert xp.linalg.inv is _linalg_inverse.inv
    assert xp.linalg.matmul is xp.matmul
    assert xp.linalg.matrix_rank is _linalg_norms.matrix_rank


def test_define_then_run_infers_shapes() -> None:
    rng = np.random.default_rng(1)
    a = agnograd.Variable(conditioned(rng, (2,), 3, 2))
    xp = agnograd.namespace(np)
    with agnograd.auto_forward(False):
        u, s, vh = xp.linalg.svd(a)
        q, r = xp.linalg.qr(a)
        outs = [
            u,
            s,
            vh,
            q,
            r,
            xp.linalg.pinv(a),
            xp.linalg.matrix_norm(a, ord="nuc"),
            xp.linalg.diagonal(a, offset=-1),
            xp.tensordot(a, a, axes=([0, 1], [0, 1])),
            xp.linalg.matrix_rank(a),
        ]
    shapes = [o.shape for o in outs]
    for o in outs:
        o.forward()
    assert shapes == [tuple(o.array.shape) for o in outs]
    assert shapes[:5] == [(2, 3, 3), (2, 2), (2, 2, 2), (2, 3, 2), (2, 2, 2)]


def test_errors_name_the_function_and_argument() -> None:
    xp = agnograd.namespace(np)
    with pytest.raises(ValueError, match=r"linalg\.inv: x must be a stack of square"):
        xp.linalg.inv(np.ones((2, 3)))
    with pytest.raises(ValueError, match="tensordot: axis 1 of x1"):
        xp.tensordot(np.ones((2, 3)), np.ones((2, 2)), axes=([1], [0]))
    with pytest.raises(ValueError, match=r"linalg\.matrix_norm: ord"):
        xp.linalg.matrix_norm(np.ones((2, 2)), ord=3)
    with pytest.raises(TypeError, match=r"linalg\.matrix_power: n must be an int"):
        xp.linalg.matrix_power(np.eye(2), 1.5)
    q, _ = xp.linalg.qr(agnograd.Variable(np.eye(3, 2) + 0.5), mode="complete")
    with pytest.raises(NotImplementedError, match="mode='complete'"):
        xp.sum(q).backward()


def test_matrix_power_zero_is_the_identity() -> None:
    xp = agnograd.namespace(np)
    a = agnograd.Variable(np.ones((2, 3, 3)))
    y = xp.linalg.matrix_power(a, 0)
    np.testing.assert_array_equal(y.array, np.broadcast_to(np.eye(3), (2, 3, 3)))
    assert not y.requires_grad


@pytest.mark.parametrize("order", [2, 1, 3, 0.5, math.inf, -math.inf])
def test_vector_norm_gradient_at_zero_is_zero(order: float) -> None:
    xp = agnograd.namespace(np)
    x = agnograd.Variable(np.zeros((2, 3)))
    y = xp.linalg.vector_norm(x, axis=1, ord=order)
    (g,) = agnograd.grad([xp.sum(y)], [x])
    np.testing.assert_array_equal(g.array, np.zeros((2, 3)))
    t = torch.zeros((2, 3), dtype=torch.float64, requires_grad=True)
    torch.linalg.vector_norm(t, dim=1, ord=order).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), g.array)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "matrix",
    [
        [[1.0, 2.0], [2.0, 4.0]],  # rank 1
        [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],  # rank 2
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],  # adjugate zero, Hessian not
        [[[2.0, 1.0], [1.0, 3.0]], [[1.0, -1.0], [-2.0, 2.0]]],  # one invertible, one not
    ],
    ids=["rank1", "rank2", "zero", "stack"],
)
def test_det_is_differentiable_at_singular_matrices(backend: str, matrix: Any) -> None:
    # det is a polynomial: its gradient adj(x)^T exists everywhere, though inv does not.
    # (torch.linalg.det answers zeros here, so central differences are the oracle.)
    raw = backend_namespace(backend)
    x = raw.asarray(np.array(matrix))
    xp = agnograd.namespace(x)
    rng = np.random.default_rng(0)
    gys = [raw.asarray(rng.standard_normal(tuple(x.shape[:-2])))]
    check_backward(xp.linalg.det, [x], gys, atol=1e-6, rtol=1e-5)
    ggs = [raw.asarray(rng.standard_normal(tuple(x.shape)))]
    check_double_backward(xp.linalg.det, [x], gys, ggs, atol=1e-6, rtol=1e-5)


def test_det_gradient_at_a_large_singular_matrix_is_the_adjugate() -> None:
    # Above 3 x 3 the adjugate comes from the SVD: check it against the cofactors.
    rng = np.random.default_rng(1)
    a = rng.standard_normal((18, 18))
    a[-1] = a[0] - 2.0 * a[1]
    x = agnograd.Variable(a.copy())
    agnograd.namespace(np).linalg.det(x).backward()
    # Only the rows in the dependency (0, 1, 17) have nonzero cofactors.
    for i, j in [(0, 5), (1, 0), (17, 17), (4, 2)]:
        minor = np.delete(np.delete(a, i, axis=0), j, axis=1)
        cofactor = (-1) ** (i + j) * np.linalg.det(minor)
        np.testing.assert_allclose(x.grad[i, j], cofactor, rtol=1e-8, atol=1e-6)
    assert np.abs(x.grad).max() > 1.0  # not the zeros torch gives


def test_det_gradient_of_a_badly_scaled_invertible_matrix_uses_the_inverse() -> None:
    # Columns scaled over two decades make |det| tiny next to Hadamard's bound, yet the
    # matrix is well conditioned: the gradient must stay that of det * inv.
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((8, 8)) * np.logspace(0, 2, 8)).astype(np.float32)
    x = agnograd.Variable(a.copy())
    agnograd.namespace(np).linalg.det(x).backward()
    a64 = a.astype(np.float64)
    want = np.linalg.det(a64) * np.linalg.inv(a64).T
    np.testing.assert_allclose(x.grad, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_det_second_derivative_at_a_singular_complex_matrix_above_3x3_is_refused() -> None:
    rng = np.random.default_rng(2)
    c = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
    c[-1] = c[0]
    x = agnograd.Variable(c)
    y = agnograd.namespace(np).linalg.det(x)
    with pytest.raises(ValueError, match=r"linalg.det: no second derivative .* complex"):
        agnograd.grad([y], [x], grad_outputs=[np.asarray(1.0 + 0j)], enable_double_backprop=True)
    # The first derivative is there: the conjugated cofactors.
    (g,) = agnograd.grad([y], [x], grad_outputs=[np.asarray(1.0 + 0j)])
    cofactors = [
        [(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(c, i, 0), j, 1)) for j in range(4)]
        for i in range(4)
    ]
    np.testing.assert_allclose(g.array, np.conj(cofactors), atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_det_second_derivative_of_a_mixed_stack_above_3x3(backend: str) -> None:
    # The identity beside a singular matrix: the SVD path must not see the identity
    # (repeated singular values), or its masked-out derivative is 0 * inf = NaN.
    rng = np.random.default_rng(3)
    a = np.stack([np.eye(4), rng.standard_normal((4, 4))])
    a[1, -1] = a[1, 0]
    raw = backend_namespace(backend)
    x = raw.asarray(a)
    xp = agnograd.namespace(x)
    gys = [raw.asarray(rng.standard_normal(2))]
    ggs = [raw.asarray(rng.standard_normal(a.shape))]
    check_backward(xp.linalg.det, [x], gys, atol=1e-6, rtol=1e-5)
    check_double_backward(xp.linalg.det, [x], gys, ggs, atol=1e-6, rtol=1e-5)
