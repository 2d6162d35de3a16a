"""``linalg.eig`` and ``linalg.eigvals`` (array API 2025.12): forward values and
dtypes, gradients to first and second order against central differences (NumPy,
array-api-strict, PyTorch) and against ``torch.autograd``, for real and complex
inputs, in batches.

The inputs are ``P B P^-1`` with a well-conditioned ``P`` and a block-diagonal ``B``
whose eigenvalues lie apart: real ones and, for real inputs, conjugate pairs
``a +- ib``. Each eigenvector is known up to a phase, and the backends order the
eigenvalues as LAPACK does: losses compared across eigendecompositions (central
differences, NumPy against PyTorch) sum over the eigenpairs (``V diag(f(w)) V^H``,
``|V|^2 @ f(w)``, power sums), which depend on neither. Losses that read the
eigenpairs by position are compared with ``torch.autograd`` on PyTorch itself, where
both differentiate the same decomposition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import array_api_compat.torch as tnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import agnograd
from agnograd.functions import _linalg_eig
from agnograd.functions._linalg_eig import eig, eigvals
from agnograd.testing import (
    backend_namespace,
    check_backward,
    check_double_backward,
    to_numpy,
)
from agnograd.testing import strategies as ags

BACKENDS = ["numpy", "array_api_strict", "torch"]
EXAMPLES = settings(max_examples=4, deadline=None, database=None)

batches = st.lists(st.integers(1, 2), max_size=2).map(tuple)


# -- inputs ------------------------------------------------------------------------------


def spectral_matrices(
    rng: np.random.Generator, batch: tuple[int, ...], n: int, cplx: bool, pairs: int = 0
) -> np.ndarray:
    """``P B P^-1``: eigenvalues with real parts 1.2 apart (and imaginary parts in
    [0.5, 1] for the ``pairs`` conjugate pairs of a real matrix), ``P`` of condition
    number a few units."""
    shape = (*batch, n, n)
    centers = np.arange(n) * 1.2 - 0.6 * (n - 1) + rng.uniform(-0.1, 0.1, (*batch, n))
    b = np.zeros(shape, dtype=complex if cplx else float)
    idx = np.arange(n)
    if cplx:
        b[..., idx, idx] = centers + 1j * rng.uniform(-1.0, 1.0, (*batch, n))
    else:
        b[..., idx, idx] = centers
        for k in range(pairs):  # [[a, -s], [s, a]] has the eigenvalues a +- is
            i, j = 2 * k, 2 * k + 1
            a = (centers[..., i] + centers[..., j]) / 2
            s = rng.uniform(0.5, 1.0, batch)
            b[..., i, i] = b[..., j, j] = a
            b[..., i, j], b[..., j, i] = -s, s
    q, _ = np.linalg.qr(normal(rng, shape, cplx))
    p = q @ (np.eye(n) + 0.3 * np.triu(normal(rng, shape, cplx), 1))
    return p @ b @ np.linalg.inv(p)


def normal(rng: np.random.Generator, shape: tuple[int, ...], cplx: bool) -> np.ndarray:
    a = rng.standard_normal(shape)
    return a + 1j * rng.standard_normal(shape) if cplx else a


@st.composite
def matrices(draw: Any, cplx: bool, max_n: int = 4) -> tuple[np.random.Generator, np.ndarray]:
    """A seeded generator (for output gradients) and a matrix of well-separated
    eigenvalues, from hypothesis-drawn batch shape, size and conjugate pairs."""
    batch, n = draw(batches, label="batch"), draw(st.integers(1, max_n), label="n")
    pairs = 0 if cplx else draw(st.integers(0, n // 2), label="pairs")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    return rng, spectral_matrices(rng, batch, n, cplx, pairs)


def random_like(rng: np.random.Generator, shape: tuple[int, ...], cplx: bool = True) -> Any:
    return normal(rng, shape, cplx)


# -- losses: eig and eigvals of agnograd (or of array_api_compat.torch) -------------------


class Lib(NamedTuple):
    """A namespace with the ``eig`` and ``eigvals`` to call."""

    xp: Any
    eig: Callable[..., Any]
    eigvals: Callable[..., Any]


def agnograd_lib(x: Any) -> Lib:
    return Lib(agnograd.namespace(x), eig, eigvals)


TORCH = Lib(tnp, tnp.linalg.eig, tnp.linalg.eigvals)


def mh(xp: Any, a: Any) -> Any:
    return xp.conj(xp.matrix_transpose(a))


def spectral(lib: Lib, x: Any) -> tuple[Any, ...]:
    """``V diag(w^2) V^H``: every eigenpair, in no order and with no phase."""
    xp = lib.xp
    w, v = lib.eig(x)
    return ((v * xp.expand_dims(w * w, axis=-2)) @ mh(xp, v),)


def moduli(lib: Lib, x: Any) -> tuple[Any, ...]:
    """``|V|^2 @ f(w)`` and ``sum(exp(w))``: moduli of the eigenvectors, real output."""
    xp = lib.xp
    w, v = lib.eig(x)
    f = xp.real(w) ** 2 + xp.imag(w)
    return (xp.abs(v) ** 2 @ xp.expand_dims(f, axis=-1), xp.sum(xp.exp(w), axis=-1))


def power_sums(lib: Lib, x: Any) -> tuple[Any, ...]:
    """``sum(w^2)`` and ``sum(w^3)`` of eigvals."""
    xp = lib.xp
    w = lib.eigvals(x)
    return (xp.sum(w * w, axis=-1), xp.sum(w * w * w, axis=-1))


LOSSES = [spectral, moduli, power_sums]


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, tuple) else (out,)


# -- forward -----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        ("float32", "complex64"),
        ("float64", "complex128"),
        ("complex64", "complex64"),
        ("complex128", "complex128"),
    ],
)
def test_forward_is_an_eigendecomposition_of_the_standards_dtype(
    backend: str, dtype: str, expected: str
) -> None:
    raw = backend_namespace(backend)
    rng = np.random.default_rng(0)
    a = spectral_matrices(rng, (2, 3), 3, dtype.startswith("complex"), pairs=1)
    x = raw.asarray(a.astype(dtype))
    w, v = eig(x)
    assert (w.shape, v.shape) == ((2, 3, 3), (2, 3, 3, 3))
    assert w.dtype == v.dtype == getattr(raw, expected)
    values = eigvals(x)
    assert values.dtype == w.dtype
    tol = 1e-4 if expected == "complex64" else 1e-10
    wn, vn = to_numpy(w), to_numpy(v)
    np.testing.assert_allclose(a @ vn, vn * wn[..., None, :], atol=tol * 10)
    np.testing.assert_allclose(np.linalg.norm(vn, axis=-2), 1.0, rtol=tol)
    np.testing.assert_allclose(np.sort_complex(wn), np.sort_complex(np.linalg.eigvals(a)), atol=tol)
    np.testing.assert_allclose(to_numpy(values), wn, atol=tol)


def test_forward_matches_numpy_and_torch_up_to_order_and_phase() -> None:
    rng = np.random.default_rng(1)
    a = spectral_matrices(rng, (2,), 4, False, pairs=1)
    w, v = (to_numpy(o) for o in eig(a))
    for wr, vr in (np.linalg.eig(a), (o.numpy() for o in torch.linalg.eig(torch.tensor(a)))):
        for k in range(2):
            order = [int(np.argmin(np.abs(wr[k] - value))) for value in w[k]]
            np.testing.assert_allclose(wr[k][order], w[k], atol=1e-12)
            np.testing.assert_allclose(np.abs(vr[k][:, order]), np.abs(v[k]), atol=1e-12)


def test_a_real_spectrum_is_complex_too() -> None:
    # Plain NumPy returns float64 here; the standard wants complex results.
    w, v = eig(np.array([[2.0, 1.0], [0.0, 3.0]]))
    assert w.dtype == v.dtype == np.complex128
    np.testing.assert_array_equal(w.array, [2.0, 3.0])


def test_jax_forward_and_gradient() -> None:
    jnp = pytest.importorskip("jax.numpy")
    a = spectral_matrices(np.random.default_rng(2), (2,), 3, False, pairs=1)
    x = jnp.asarray(a, dtype=jnp.float32)
    w, v = eig(x)
    assert w.dtype == v.dtype == jnp.complex64
    outs = spectral(agnograd_lib(x), x)
    gy = jnp.asarray(random_like(np.random.default_rng(3), tuple(outs[0].shape)), jnp.complex64)
    check_backward(lambda x: spectral(agnograd_lib(x), x), x, gy, atol=1e-3, rtol=1e-2)


# -- gradients against central differences -----------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("cplx", [False, True], ids=["real", "complex"])
@EXAMPLES
@given(data=st.data())
def test_gradients_match_central_differences(
    backend: str, loss: Callable[..., Any], cplx: bool, data: Any
) -> None:
    raw = backend_namespace(backend)
    rng, a = data.draw(matrices(cplx, max_n=3))
    x = raw.asarray(a)

    def f(x: Any) -> Any:
        return loss(agnograd_lib(x), x)

    with agnograd.no_backprop_mode():
        outs = f(agnograd.Variable(x))
    gys = [
        raw.asarray(random_like(rng, tuple(y.shape), raw.isdtype(y.dtype, "complex floating")))
        for y in outs
    ]
    check_backward(f, x, gys, atol=1e-5, rtol=1e-4)
    gg = raw.asarray(random_like(rng, a.shape, cplx))
    check_double_backward(f, x, gys, gg, atol=1e-4, rtol=1e-3)


# -- torch.autograd as the oracle --------------------------------------------------------


def compare_with_torch(
    loss: Callable[..., Any], a: np.ndarray, rng: np.random.Generator, on_torch: bool
) -> None:
    """agnograd (on NumPy, or on the same torch tensor) against torch.autograd, to
    second order: the gradient of ``Re<seeds, loss>``, then that of ``Re<v, grad>``."""
    x = agnograd.Variable(torch.tensor(a) if on_torch else a)
    t = torch.tensor(a, requires_grad=True)
    outs = loss(agnograd_lib(x), x)
    touts = loss(TORCH, t)
    for y, ty in zip(outs, touts, strict=True):
        np.testing.assert_allclose(to_numpy(y), numpy_of(ty), rtol=1e-9, atol=1e-10)
    seeds = [random_like(rng, tuple(ty.shape), ty.is_complex()) for ty in touts]
    as_x = torch.tensor if on_torch else np.asarray
    (g,) = agnograd.grad(list(outs), [x], [as_x(s) for s in seeds], enable_double_backprop=True)
    (tg,) = torch.autograd.grad(touts, [t], [torch.tensor(s) for s in seeds], create_graph=True)
    assert g.dtype == x.dtype  # a real input gets a real gradient
    np.testing.assert_allclose(to_numpy(g), numpy_of(tg), rtol=1e-7, atol=1e-9)
    v = np.conj(random_like(rng, a.shape, np.iscomplexobj(a)))
    xp = agnograd.namespace(x)
    (second,) = agnograd.grad([xp.sum(xp.real(g * as_x(v)))], [x])
    (tsecond,) = torch.autograd.grad([torch.sum((tg * torch.tensor(v)).real)], [t])
    np.testing.assert_allclose(to_numpy(second), numpy_of(tsecond), rtol=1e-6, atol=1e-8)


def numpy_of(t: torch.Tensor) -> np.ndarray:
    return t.detach().resolve_conj().numpy(force=True)


@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("cplx", [False, True], ids=["real", "complex"])
@EXAMPLES
@given(data=st.data())
def test_gradients_on_numpy_match_torch(loss: Callable[..., Any], cplx: bool, data: Any) -> None:
    rng, a = data.draw(matrices(cplx))
    compare_with_torch(loss, a, rng, on_torch=False)


def by_position(lib: Lib, x: Any) -> tuple[Any, ...]:
    """The eigenpairs by position: ``w`` and ``|V|^2``, ``w[..., 0]`` alone."""
    xp = lib.xp
    w, v = lib.eig(x)
    return (w, xp.abs(v) ** 2, xp.real(w[..., 0]))


def eigvals_by_position(lib: Lib, x: Any) -> tuple[Any, ...]:
    return (lib.eigvals(x),)


@pytest.mark.parametrize("loss", [by_position, eigvals_by_position], ids=lambda f: f.__name__)
@pytest.mark.parametrize("cplx", [False, True], ids=["real", "complex"])
@EXAMPLES
@given(data=st.data())
def test_gradients_on_torch_match_torch_by_position(
    loss: Callable[..., Any], cplx: bool, data: Any
) -> None:
    rng, a = data.draw(matrices(cplx))
    compare_with_torch(loss, a, rng, on_torch=True)


# -- the phase convention ----------------------------------------------------------------


def test_a_phase_dependent_loss_gets_the_gradient_of_aligned_phases() -> None:
    """PyTorch refuses ``Re(sum(C * V))``, which depends on the phases; agnograd
    returns the gradient of the loss on eigenvectors ``V D`` whose phases ``D`` make
    the diagonal of ``V0^-1 V D`` real, ``V0`` those at the point."""
    rng = np.random.default_rng(3)
    n = 3
    a = spectral_matrices(rng, (), n, True)
    c = normal(rng, (n, n), True)
    x = agnograd.Variable(a)
    xp = agnograd.namespace(x)
    (g,) = agnograd.grad([xp.sum(xp.real(eig(x).eigenvectors * c))], [x])

    t = torch.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        torch.sum((torch.linalg.eig(t).eigenvectors * torch.tensor(c)).real).backward()

    w0, v0 = np.linalg.eig(a)
    inverse = np.linalg.inv(v0)

    def aligned_loss(b: np.ndarray) -> float:
        w, v = np.linalg.eig(b)
        v = v[:, [int(np.argmin(np.abs(w - value))) for value in w0]]
        v = v * np.exp(-1j * np.angle(np.diagonal(inverse @ v)))
        return float(np.sum(np.real(v * c)))

    eps = 1e-6
    numerical = np.zeros((n, n), dtype=complex)
    for i in range(n):
        for j in range(n):
            for unit in (1.0, 1j):
                step = np.zeros((n, n), dtype=complex)
                step[i, j] = unit * eps
                slope = (aligned_loss(a + step) - aligned_loss(a - step)) / (2 * eps)
                numerical[i, j] += unit * slope
    np.testing.assert_allclose(g.array, numerical, atol=1e-8)


# -- define-then-run, errors, the testing kit's domains ----------------------------------


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_define_then_run_infers_shapes_and_dtypes(dtype: str) -> None:
    a = spectral_matrices(np.random.default_rng(4), (2,), 3, dtype == "complex128").astype(dtype)
    x = agnograd.Variable(a)
    with agnograd.auto_forward(False):
        w, v = eig(x)
        values = eigvals(x)
    expected = np.complex64 if dtype == "float32" else np.complex128
    assert (w.shape, v.shape, values.shape) == ((2, 3), (2, 3, 3), (2, 3))
    assert w.dtype == v.dtype == values.dtype == expected
    assert w.array is None
    for y in (w, v, values):
        y.forward()
    eager = eig(a)
    np.testing.assert_allclose(w.array, eager.eigenvalues.array)
    np.testing.assert_allclose(v.array, eager.eigenvectors.array)


def test_errors_name_the_function() -> None:
    with pytest.raises(ValueError, match=r"linalg\.eig: x must be a stack of square"):
        eig(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"linalg\.eig: x must have at least 2 dimensions"):
        eigvals(np.ones(3))


def test_a_backend_without_eig_is_refused_by_name() -> None:
    da = pytest.importorskip("dask.array")
    with pytest.raises(NotImplementedError, match=r"has no linalg\.eig"):
        eig(da.from_array(np.eye(2)))


def test_named_tuple_and_declared_rows() -> None:
    result = eig(np.eye(2))
    assert result._fields == ("eigenvalues", "eigenvectors")
    assert set(_linalg_eig.ROWS.rows) == {"linalg.eig", "linalg.eigvals"}


def test_the_namespace_serves_them() -> None:
    from agnograd.functions._table import DIFFERENTIABLE

    if "linalg.eig" not in DIFFERENTIABLE:
        pytest.skip("agnograd/functions/_table.py's CHAPTERS does not list linalg_eig yet")
    xp = agnograd.namespace(np)
    assert xp.linalg.eig is eig
    assert xp.linalg.eigvals is eigvals


@pytest.mark.parametrize("name", ["linalg.eig", "linalg.eigvals"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_the_testing_kits_domain_draws_checkable_cases(name: str, backend: str) -> None:
    raw = backend_namespace(backend)
    function = {"linalg.eig": eig, "linalg.eigvals": eigvals}[name]
    assert name in ags.registered_domains()

    @settings(max_examples=8, deadline=None, database=None)
    @given(case=ags.function_inputs(raw, name, function=function), seed=st.integers(0, 2**16))
    def check(case: Any, seed: int) -> None:
        rng = np.random.default_rng(seed)
        with agnograd.no_backprop_mode():
            outs = _as_tuple(case(*[agnograd.Variable(x) for x in case.inputs]))
        gys = [raw.asarray(random_like(rng, tuple(y.shape))) for y in outs]
        (x,) = case.inputs
        gg = raw.asarray(random_like(rng, tuple(x.shape), raw.isdtype(x.dtype, "complex floating")))
        check_backward(case, case.inputs, gys)
        check_double_backward(case, case.inputs, gys, gg, atol=1e-4, rtol=1e-3)

    check()
