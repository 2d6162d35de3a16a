"""The statistical chapter of agnograd's namespace: every reduction, to second order.

Each function is checked on numpy, array_api_strict and torch against central
differences (first and second order, float64) on hypothesis-drawn shapes (0-d
included), axes and ``keepdims``; and against torch.autograd, to first and second
order. The conventions are pinned by explicit cases: ``prod`` and
``cumulative_prod`` with one and with two zeros, ``max``/``min`` with ties (shared
evenly, as ``torch.amax``), ``var``/``std`` with ``correction=1``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agnograd
from agnograd import Variable
from agnograd.testing import backend_namespace, check_backward, check_double_backward
from agnograd.testing import strategies as ags

torch = pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")
EXAMPLES = settings(max_examples=6, deadline=None)

ANY = st.floats(-2.0, 2.0, allow_nan=False, allow_subnormal=False)
# Zero or away from it: the second derivative of cumulative_prod divides by x, which
# is ill-conditioned for tiny nonzero x (as in PyTorch).
ZERO_OR_NOT_TINY = st.just(0.0) | st.floats(0.25, 2.0) | st.floats(-2.0, -0.25)
# Distinct values at least 0.05 apart: no ties within the finite-difference step.
SPREAD = st.integers(-40, 40).map(lambda k: k * 0.05)


def namespace(backend: str) -> Any:
    return agnograd.namespace(backend_namespace(backend))


def to_backend(backend: str, a: np.ndarray) -> Any:
    return backend_namespace(backend).asarray(a)


def to_numpy(a: Any) -> np.ndarray:
    a = a.array if isinstance(a, Variable) else a
    if isinstance(a, torch.Tensor):
        return a.detach().resolve_conj().numpy()
    return np.asarray(a)


def seeds(seed: int, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.uniform(-1.0, 1.0, shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.uniform(-1.0, 1.0, shape)
    return np.asarray(values, dtype=dtype)


def axes_of(ndim: int) -> st.SearchStrategy[Any]:
    if ndim == 0:
        return st.none()
    single = st.integers(-ndim, ndim - 1)
    several = st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True)
    return st.none() | single | several.map(tuple)


def reduced_size(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        axis = tuple(range(len(shape)))
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([shape[a] for a in axes]))


# -- torch twins ----------------------------------------------------------------------


def torch_dims(x: Any, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    return tuple(a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis))


def torch_prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    # torch.prod reduces one dim at a time: move the reduced dims last and flatten.
    if x.ndim == 0:
        return x
    dims = torch_dims(x, axis)
    keep = [d for d in range(x.ndim) if d not in dims]
    moved = x.permute(*keep, *dims).reshape(*[x.shape[d] for d in keep], -1)
    out = torch.prod(moved, dim=-1)
    if keepdims:
        out = out.reshape([1 if d in dims else s for d, s in enumerate(x.shape)])
    return out


def torch_cumulative(fn: Callable[..., Any], initial: float) -> Callable[..., Any]:
    def call(x: Any, axis: int, include_initial: bool = False) -> Any:
        out = fn(x, dim=axis)
        if include_initial:
            shape = list(x.shape)
            shape[axis] = 1
            out = torch.cat([torch.full(shape, initial, dtype=x.dtype), out], dim=axis)
        return out

    return call


def torch_reduction(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(x: Any, axis: Any = None, keepdims: bool = False, **kwargs: Any) -> Any:
        return fn(x, dim=torch_dims(x, axis), keepdim=keepdims, **kwargs)

    return call


# -- cases --------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A function, how to draw its input and keyword arguments, and its torch twin."""

    name: str
    inputs: st.SearchStrategy[tuple[np.ndarray, dict[str, Any]]]
    torch: Callable[..., Any]
    #: False where central differences carry a visible O(eps**2) error
    tight: bool = True

    def __str__(self) -> str:
        return self.name


def reduction(
    elements: st.SearchStrategy[float], *, correction: bool = False
) -> st.SearchStrategy[tuple[np.ndarray, dict[str, Any]]]:
    @st.composite
    def draw(draw: Any) -> tuple[np.ndarray, dict[str, Any]]:
        shape = draw(ags.shapes(max_dims=3, max_side=3))
        x = draw(hnp.arrays(np.float64, shape, elements=elements, unique=elements is SPREAD))
        kwargs = {"axis": draw(axes_of(len(shape))), "keepdims": draw(st.booleans())}
        if correction:
            n = reduced_size(shape, kwargs["axis"])
            kwargs["correction"] = draw(st.sampled_from([c for c in (0, 1, 0.5) if c < n]))
        return x, kwargs

    return draw()


@st.composite
def cumulative(draw: Any) -> tuple[np.ndarray, dict[str, Any]]:
    shape = draw(ags.shapes(min_dims=1, max_dims=3, max_side=4))
    x = draw(hnp.arrays(np.float64, shape, elements=ZERO_OR_NOT_TINY))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return x, {"axis": axis, "include_initial": draw(st.booleans())}


CASES = [
    Case("sum", reduction(ANY), torch_reduction(torch.sum)),
    Case("mean", reduction(ANY), torch_reduction(torch.mean)),
    # prod is a polynomial: zeros (which hypothesis likes to draw) are no kink. Tiny
    # values are left out because torch.prod's gradient is 0 where the product
    # underflows (agnograd's is not).
    # Products are polynomials of high degree: loose tolerances for their O(eps**2)
    # central-difference error.
    Case("prod", reduction(ZERO_OR_NOT_TINY), torch_prod, tight=False),
    Case("max", reduction(SPREAD), torch_reduction(torch.amax)),
    Case("min", reduction(SPREAD), torch_reduction(torch.amin)),
    Case("var", reduction(ANY, correction=True), torch_reduction(torch.var)),
    # Distinct values keep the standard deviation away from 0, its kink; it can still
    # be small (0.04), and then curved enough on the scale of eps for loose tolerances.
    Case("std", reduction(SPREAD, correction=True), torch_reduction(torch.std), tight=False),
    Case("cumulative_sum", cumulative(), torch_cumulative(torch.cumsum, 0.0)),
    Case("cumulative_prod", cumulative(), torch_cumulative(torch.cumprod, 1.0), tight=False),
]


def check_orders(
    fn: Callable[..., Any], arrays: tuple[Any, ...], backend: str, seed: int, *, tight: bool = True
) -> None:
    """First and second order against central differences (``tight`` tolerances for
    functions whose finite-difference error is small at the point)."""
    y = fn(*arrays)
    gy = to_backend(backend, seeds(seed, tuple(y.shape)))
    ggx = tuple(
        to_backend(backend, seeds(seed + 1 + k, tuple(a.shape))) for k, a in enumerate(arrays)
    )
    first, second = (
        ({"atol": 1e-7, "rtol": 1e-6}, {"atol": 1e-6, "rtol": 1e-5}) if tight else ({}, {})
    )
    check_backward(fn, arrays, gy, **first)
    check_double_backward(fn, arrays, gy, ggx, **second)


def compare_with_torch(
    ours: Callable[..., Any], theirs: Callable[..., Any], arrays: tuple[np.ndarray, ...], seed: int
) -> None:
    """Value, first- and second-order gradients against torch.autograd (torch backend)."""
    xs = [Variable(torch.asarray(a)) for a in arrays]
    y = ours(*xs)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    t = theirs(*ts)
    np.testing.assert_allclose(to_numpy(y), to_numpy(t), rtol=1e-12, atol=1e-12)
    dtype = np.complex128 if t.is_complex() else np.float64
    gy = seeds(seed, tuple(t.shape), dtype)
    ggx = [seeds(seed + 1 + k, a.shape, a.dtype) for k, a in enumerate(arrays)]
    first = agnograd.grad([y], xs, [torch.asarray(gy)], enable_double_backprop=True)
    t_first = torch.autograd.grad(t, ts, torch.asarray(gy), create_graph=True, allow_unused=True)
    for a, b in zip(first, t_first, strict=True):
        expected = np.zeros(a.shape) if b is None else to_numpy(b)
        np.testing.assert_allclose(to_numpy(a), expected, rtol=1e-9, atol=1e-12)
    pairs = [(g, gg) for g, gg in zip(first, ggx, strict=True) if g.requires_grad]
    t_pairs = [
        (g, gg) for g, gg in zip(t_first, ggx, strict=True) if g is not None and g.requires_grad
    ]
    if not pairs or not t_pairs:
        return
    second = agnograd.grad([g for g, _ in pairs], xs, [torch.asarray(gg) for _, gg in pairs])
    t_second = torch.autograd.grad(
        [g for g, _ in t_pairs], ts, [torch.asarray(gg) for _, gg in t_pairs], allow_unused=True
    )
    for a, b, x in zip(second, t_second, arrays, strict=True):
        a = np.zeros(x.shape) if a is None else to_numpy(a)
        b = np.zeros(x.shape) if b is None else to_numpy(b)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


# -- hypothesis: central differences on every backend, torch.autograd -----------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=str)
@EXAMPLES
@given(data=st.data())
def test_gradients_match_central_differences(case: Case, backend: str, data: Any) -> None:
    x, kwargs = data.draw(case.inputs, label="input")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    fn = getattr(namespace(backend), case.name)
    check_orders(
        lambda a: fn(a, **kwargs), (to_backend(backend, x),), backend, seed, tight=case.tight
    )


@pytest.mark.parametrize("case", CASES, ids=str)
@EXAMPLES
@given(data=st.data())
def test_gradients_match_torch_autograd(case: Case, data: Any) -> None:
    x, kwargs = data.draw(case.inputs, label="input")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    fn = getattr(namespace("torch"), case.name)
    compare_with_torch(lambda a: fn(a, **kwargs), lambda t: case.torch(t, **kwargs), (x,), seed)


# -- pinned conventions ---------------------------------------------------------------

ZEROS = {
    "one zero": np.array([[1.5, 0.0, -2.0], [0.5, 1.2, 0.8]]),
    "two zeros": np.array([[1.5, 0.0, -2.0, 0.0], [0.0, 1.2, 0.0, 0.7]]),
    "three zeros": np.array([0.0, 1.5, 0.0, -0.5, 0.0, 2.0]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("values", ZEROS.values(), ids=ZEROS.keys())
@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("prod", {}),
        ("prod", {"axis": -1}),
        ("prod", {"axis": 0, "keepdims": True}),
        ("cumulative_prod", {"axis": -1}),
        ("cumulative_prod", {"axis": 0, "include_initial": True}),
    ],
)
def test_products_with_zeros(backend: str, values: np.ndarray, name: str, kwargs: Any) -> None:
    fn = getattr(namespace(backend), name)
    # Several zeros make the product's higher derivatives large relative to its
    # value: central differences then carry an O(eps**2) error, hence the default
    # (looser) tolerances.
    check_orders(lambda a: fn(a, **kwargs), (to_backend(backend, values),), backend, 7, tight=False)


@pytest.mark.parametrize("values", ZEROS.values(), ids=ZEROS.keys())
def test_products_with_zeros_match_torch(values: np.ndarray) -> None:
    xp = namespace("torch")
    axis = values.ndim - 1
    compare_with_torch(xp.prod, torch.prod, (values,), 3)
    compare_with_torch(
        lambda a: xp.prod(a, axis=axis), lambda t: torch.prod(t, dim=axis), (values,), 4
    )
    compare_with_torch(
        lambda a: xp.cumulative_prod(a, axis=axis),
        lambda t: torch.cumprod(t, dim=axis),
        (values,),
        5,
    )


def test_prod_gradient_is_the_product_of_the_others() -> None:
    xp = namespace("numpy")
    x = Variable(np.array([2.0, 0.0, 3.0, 0.0]))
    xp.prod(x).backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0, 0.0, 0.0])
    x = Variable(np.array([2.0, 0.0, 3.0]))
    xp.prod(x).backward()
    np.testing.assert_array_equal(x.grad, [0.0, 6.0, 0.0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["max", "min"])
def test_ties_share_the_gradient_evenly(backend: str, name: str) -> None:
    values = np.array([[1.0, 3.0, 3.0], [-1.0, -1.0, -1.0]])
    if name == "min":
        values = -values
    xp = namespace(backend)
    for kwargs in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}):
        x = Variable(to_backend(backend, values))
        y = getattr(xp, name)(x, **kwargs)
        gy = seeds(1, tuple(y.shape))
        agnograd.backward([y], [to_backend(backend, gy)])
        t = torch.tensor(values, requires_grad=True)
        reduce = torch_reduction(torch.amax if name == "max" else torch.amin)
        reduce(t, **kwargs).backward(torch.asarray(gy))
        np.testing.assert_allclose(to_numpy(x.grad), t.grad.numpy(), rtol=1e-12)


def test_ties_split_evenly_by_value() -> None:
    x = Variable(np.array([1.0, 3.0, 3.0, 3.0]))
    namespace("numpy").max(x).backward()
    np.testing.assert_allclose(x.grad, [0.0, 1 / 3, 1 / 3, 1 / 3])


@pytest.mark.parametrize("backend", BACKENDS)
def test_var_and_std_with_correction_one(backend: str) -> None:
    values = np.array([[1.0, 2.0, 6.0], [0.5, -1.0, 2.5]])
    xp = namespace(backend)
    for name in ("var", "std"):
        for kwargs in ({"correction": 1}, {"axis": 1, "correction": 1, "keepdims": True}):
            fn = getattr(xp, name)
            y = fn(to_backend(backend, values), **kwargs)
            t = torch_reduction(getattr(torch, name))(torch.tensor(values), **kwargs)
            np.testing.assert_allclose(to_numpy(y), t.numpy(), rtol=1e-12)
            check_orders(
                lambda a, fn=fn, kw=kwargs: fn(a, **kw), (to_backend(backend, values),), backend, 2
            )
    x = Variable(np.array([1.0, 2.0, 6.0]))
    xp = namespace("numpy")
    xp.var(x, correction=1).backward()
    np.testing.assert_allclose(x.grad, [-2.0, -1.0, 3.0])


def test_std_of_constant_has_zero_gradient_like_torch() -> None:
    values = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]])
    x = Variable(values)
    agnograd.backward([namespace("numpy").std(x, axis=1)], [np.ones(2)])
    t = torch.tensor(values, requires_grad=True)
    torch.std(t, dim=1, correction=0).backward(torch.ones(2, dtype=torch.float64))
    np.testing.assert_allclose(x.grad, t.grad.numpy())
    assert np.all(x.grad[0] == 0)


@pytest.mark.parametrize(
    "name", ["sum", "mean", "prod", "var", "cumulative_sum", "cumulative_prod"]
)
def test_complex_inputs_match_torch(name: str) -> None:
    """PyTorch's conjugate Wirtinger convention, first and second order."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (3, 4)) + 1j * rng.uniform(-1, 1, (3, 4))
    x[1, 2] = 0.0
    xp = namespace("torch")
    ours: Callable[..., Any] = lambda a: getattr(xp, name)(a, axis=1)  # noqa: E731
    theirs = {
        "sum": lambda t: torch.sum(t, dim=1),
        "mean": lambda t: torch.mean(t, dim=1),
        "prod": lambda t: torch.prod(t, dim=1),
        "var": lambda t: torch.var(t, dim=1, correction=0),
        "cumulative_sum": lambda t: torch.cumsum(t, dim=1),
        "cumulative_prod": lambda t: torch.cumprod(t, dim=1),
    }[name]
    if name == "var":  # real result: second order mixes real and complex, first order only
        y = ours(Variable(torch.asarray(x)))
        np.testing.assert_allclose(to_numpy(y), theirs(torch.asarray(x)).numpy(), rtol=1e-12)
        xv = Variable(torch.asarray(x))
        agnograd.backward([ours(xv)], [torch.ones(3, dtype=torch.float64)])
        t = torch.tensor(x, requires_grad=True)
        theirs(t).backward(torch.ones(3, dtype=torch.float64))
        np.testing.assert_allclose(to_numpy(xv.grad), t.grad.numpy(), rtol=1e-12)
        return
    compare_with_torch(ours, theirs, (x,), 11)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sum_with_dtype_upcasts_and_casts_the_gradient_back(backend: str) -> None:
    xp = namespace(backend)
    raw = backend_namespace(backend)
    x = Variable(raw.asarray(np.array([1.0, 2.0], dtype=np.float32)))
    y = xp.sum(x, dtype=raw.float64)
    assert y.dtype == raw.float64
    y.backward()
    assert x.grad.dtype == raw.float32
    np.testing.assert_array_equal(to_numpy(x.grad), [1.0, 1.0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["sum", "prod", "cumulative_sum", "cumulative_prod"])
def test_a_given_small_integer_dtype_is_kept(backend: str, name: str) -> None:
    # NumPy accumulates uint8 in uint64 unless told the dtype: the caller's wins.
    xp = namespace(backend)
    raw = backend_namespace(backend)
    x = xp.asarray(to_backend(backend, np.array([3, 4], dtype=np.uint8)))
    assert getattr(xp, name)(x, dtype=raw.uint8).dtype == raw.uint8
    assert getattr(xp, name)(x).dtype == getattr(raw, name)(x.array).dtype


def test_cumulative_functions_need_an_axis_beyond_one_dimension() -> None:
    xp = namespace("numpy")
    with pytest.raises(ValueError, match=r"cumulative_sum: axis is required"):
        xp.cumulative_sum(np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"cumulative_prod: axis 2 is out of range"):
        xp.cumulative_prod(np.ones((2, 2)), axis=2)
    np.testing.assert_array_equal(xp.cumulative_sum(np.ones(3)).array, [1.0, 2.0, 3.0])


def test_reductions_defer_in_define_then_run() -> None:
    x = Variable.from_array(np.array([[1.0, 0.0, 3.0], [2.0, 5.0, 4.0]]), need_grad=True)
    xp = namespace("numpy")
    with agnograd.auto_forward(False):
        y = xp.sum(xp.prod(x, axis=1) + xp.max(x, axis=1) + xp.std(x, axis=1, correction=1))
        z = xp.cumulative_prod(x, axis=1, include_initial=True)
    assert z.shape == (2, 4)
    y.forward()
    y.backward()
    eager = Variable(x.d.copy())
    xp.sum(
        xp.prod(eager, axis=1) + xp.max(eager, axis=1) + xp.std(eager, axis=1, correction=1)
    ).backward()
    np.testing.assert_allclose(x.g, eager.grad)
