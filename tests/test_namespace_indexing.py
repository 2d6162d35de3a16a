"""Indexing, sorting, ``where`` and ``diff`` in agnograd's namespace, to second order.

``take`` and ``take_along_axis`` (with repeated indices, which must accumulate),
``sort`` (through its permutation), ``where`` (broadcasting, scalar branches),
``diff`` (``n``, ``axis``, ``prepend``, ``append``) and integer-array / boolean
indexing are checked on numpy, array_api_strict and torch against central
differences (first and second order, float64) on hypothesis-drawn inputs, and
against torch.autograd (``torch.index_select``, ``torch.take_along_dim``,
``torch.sort``, ``torch.where``, ``torch.diff``).
"""

from __future__ import annotations

from collections.abc import Callable
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
# Distinct values at least 0.05 apart: sort is not differentiable at ties.
SPREAD = st.integers(-40, 40).map(lambda k: k * 0.05)


def namespace(backend: str) -> Any:
    return agnograd.namespace(backend_namespace(backend))


def to_backend(backend: str, a: Any) -> Any:
    return backend_namespace(backend).asarray(a) if isinstance(a, np.ndarray) else a


def to_numpy(a: Any) -> np.ndarray:
    a = a.array if isinstance(a, Variable) else a
    if isinstance(a, torch.Tensor):
        return a.detach().resolve_conj().numpy()
    return np.asarray(a)


def seeds(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def check_orders(fn: Callable[..., Any], arrays: tuple[Any, ...], backend: str, seed: int) -> None:
    """First and second order against central differences."""
    y = fn(*arrays)
    gy = to_backend(backend, seeds(seed, tuple(y.shape)))
    ggx = tuple(
        to_backend(backend, seeds(seed + 100 + k, tuple(a.shape))) for k, a in enumerate(arrays)
    )
    check_backward(fn, arrays, gy, atol=1e-7, rtol=1e-6)
    check_double_backward(fn, arrays, gy, ggx, atol=1e-6, rtol=1e-5)


def compare_with_torch(
    ours: Callable[..., Any], theirs: Callable[..., Any], arrays: tuple[np.ndarray, ...], seed: int
) -> None:
    """Values and first-order gradients against torch.autograd, on the torch backend."""
    xs = [Variable(torch.asarray(a)) for a in arrays]
    y = ours(*xs)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    t = theirs(*ts)
    np.testing.assert_array_equal(to_numpy(y), to_numpy(t))
    gy = seeds(seed, tuple(t.shape))
    mine = agnograd.grad([y], xs, [torch.asarray(gy)])
    expected = torch.autograd.grad(t, ts, torch.asarray(gy), allow_unused=True)
    for a, b, x in zip(mine, expected, arrays, strict=True):
        a = np.zeros(x.shape) if a is None else to_numpy(a)
        b = np.zeros(x.shape) if b is None else to_numpy(b)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# -- cases: (agnograd call, torch call, float inputs) --------------------------------

Drawn = tuple[Callable[[Any, Any], Any], Callable[..., Any], tuple[np.ndarray, ...]]


def index_array(draw: Any, size: int, shape: tuple[int, ...]) -> np.ndarray:
    """In-range indices, repeats likely (hypothesis favours small integers)."""
    return draw(hnp.arrays(np.int64, shape, elements=st.integers(0, size - 1)))


@st.composite
def take_case(draw: Any) -> Drawn:
    shape = draw(ags.shapes(min_dims=1, max_dims=3, max_side=3))
    x = draw(hnp.arrays(np.float64, shape, elements=ANY))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    idx = index_array(draw, shape[axis], (draw(st.integers(0, 5)),))
    if len(shape) == 1 and draw(st.booleans()):
        return (
            (lambda xp, a: xp.take(a, to_local(xp, idx))),
            (lambda t: torch.take(t, torch.asarray(idx))),
            (x,),
        )
    return (
        lambda xp, a: xp.take(a, to_local(xp, idx), axis=axis),
        lambda t: torch.index_select(t, axis, torch.asarray(idx)),
        (x,),
    )


@st.composite
def take_along_axis_case(draw: Any) -> Drawn:
    shape = draw(ags.shapes(min_dims=1, max_dims=3, max_side=3))
    x = draw(hnp.arrays(np.float64, shape, elements=ANY))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    idx_shape = list(shape)
    idx_shape[axis] = draw(st.integers(0, 4))
    idx = index_array(draw, shape[axis], tuple(idx_shape))
    return (
        lambda xp, a: xp.take_along_axis(a, to_local(xp, idx), axis=axis),
        lambda t: torch.take_along_dim(t, torch.asarray(idx), dim=axis),
        (x,),
    )


@st.composite
def sort_case(draw: Any) -> Drawn:
    shape = draw(ags.shapes(min_dims=1, max_dims=3, max_side=4))
    x = draw(hnp.arrays(np.float64, shape, elements=SPREAD, unique=True))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    descending = draw(st.booleans())
    return (
        lambda xp, a: xp.sort(a, axis=axis, descending=descending),
        lambda t: torch.sort(t, dim=axis, descending=descending, stable=True).values,
        (x,),
    )


@st.composite
def where_case(draw: Any) -> Drawn:
    shapes = draw(ags.mutually_broadcastable_shapes(3, max_dims=3, max_side=3)).input_shapes
    condition = draw(hnp.arrays(np.bool_, shapes[0]))
    x1 = draw(hnp.arrays(np.float64, shapes[1], elements=ANY))
    x2 = draw(hnp.arrays(np.float64, shapes[2], elements=ANY))
    if draw(st.booleans()):  # a Python scalar branch
        return (
            lambda xp, a: xp.where(to_local(xp, condition), a, 0.5),
            lambda t: torch.where(torch.asarray(condition), t, 0.5),
            (x1,),
        )
    return (
        lambda xp, a, b: xp.where(to_local(xp, condition), a, b),
        lambda t, u: torch.where(torch.asarray(condition), t, u),
        (x1, x2),
    )


@st.composite
def diff_case(draw: Any) -> Drawn:
    shape = draw(ags.shapes(min_dims=1, max_dims=3, max_side=4))
    x = draw(hnp.arrays(np.float64, shape, elements=ANY))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    n = draw(st.integers(0, 4))
    inputs = [x]
    with_prepend, with_append = draw(st.booleans()), draw(st.booleans())
    for flag in (with_prepend, with_append):
        if flag:
            extra = list(shape)
            extra[axis] = draw(st.integers(1, 2))
            inputs.append(draw(hnp.arrays(np.float64, tuple(extra), elements=ANY)))

    def split(arrays: tuple[Any, ...]) -> dict[str, Any]:
        rest = iter(arrays)
        return {
            "prepend": next(rest) if with_prepend else None,
            "append": next(rest) if with_append else None,
        }

    return (
        lambda xp, a, *more: xp.diff(a, axis=axis, n=n, **split(more)),
        lambda t, *more: torch.diff(t, n=n, dim=axis, **split(more)) if n else t,
        tuple(inputs),
    )


def to_local(xp: Any, a: np.ndarray) -> Any:
    """A NumPy index or condition array on the backend of the namespace ``xp``."""
    return xp._raw.asarray(a)


CASES = {
    "take": take_case(),
    "take_along_axis": take_along_axis_case(),
    "sort": sort_case(),
    "where": where_case(),
    "diff": diff_case(),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
@EXAMPLES
@given(data=st.data())
def test_gradients_match_central_differences(name: str, backend: str, data: Any) -> None:
    ours, _, arrays = data.draw(CASES[name], label="case")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    xp = namespace(backend)
    check_orders(
        lambda *a: ours(xp, *a), tuple(to_backend(backend, a) for a in arrays), backend, seed
    )


@pytest.mark.parametrize("name", sorted(CASES))
@EXAMPLES
@given(data=st.data())
def test_gradients_match_torch_autograd(name: str, data: Any) -> None:
    ours, theirs, arrays = data.draw(CASES[name], label="case")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    xp = namespace("torch")
    compare_with_torch(lambda *a: ours(xp, *a), theirs, arrays, seed)


# -- specific behaviour ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_indices_accumulate(backend: str) -> None:
    xp = namespace(backend)
    raw = backend_namespace(backend)
    x = Variable(raw.asarray(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])))
    idx = raw.asarray(np.array([2, 0, 2, 2]))
    y = xp.take(x, idx, axis=1)
    np.testing.assert_array_equal(to_numpy(y), [[3.0, 1.0, 3.0, 3.0], [6.0, 4.0, 6.0, 6.0]])
    xp.sum(y * y).backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [[2.0, 0.0, 18.0], [8.0, 0.0, 36.0]])
    x2 = Variable(raw.asarray(np.array([[1.0, 2.0], [3.0, 4.0]])))
    y2 = xp.take_along_axis(x2, raw.asarray(np.array([[1, 1, 1], [0, 1, 0]])), axis=1)
    xp.sum(y2).backward()
    np.testing.assert_array_equal(to_numpy(x2.grad), [[0.0, 3.0], [2.0, 1.0]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_array_and_mask_indexing(backend: str) -> None:
    raw = backend_namespace(backend)
    values = np.array([0.5, -1.0, 2.0, 1.5])
    x = raw.asarray(values)
    idx = raw.asarray(np.array([3, 0, 3]))
    mask = raw.asarray(values > 0)
    check_orders(lambda a: a[idx] * a[idx], (x,), backend, 5)
    check_orders(lambda a: a[mask] * a[mask], (x,), backend, 6)


def test_sort_ties_are_stable() -> None:
    """Tied elements keep their order, so each output's gradient goes to the element
    that was first among equals (torch's stable sort agrees)."""
    values = np.array([2.0, 1.0, 2.0, 1.0])
    xp = namespace("numpy")
    x = Variable(values)
    gy = np.array([1.0, 10.0, 100.0, 1000.0])
    agnograd.backward([xp.sort(x)], [gy])
    np.testing.assert_array_equal(x.grad, [100.0, 1.0, 1000.0, 10.0])
    t = torch.tensor(values, requires_grad=True)
    torch.sort(t, stable=True).values.backward(torch.asarray(gy))
    np.testing.assert_array_equal(x.grad, t.grad.numpy())


def test_take_needs_an_axis_beyond_one_dimension() -> None:
    xp = namespace("numpy")
    with pytest.raises(ValueError, match=r"take: axis is required for an array of 2"):
        xp.take(np.zeros((2, 2)), np.array([0]))
    with pytest.raises(TypeError, match=r"take: indices must be an integer array"):
        xp.take(np.zeros(3), [0, 1])
    with pytest.raises(ValueError, match=r"take_along_axis: axis 1 is out of range"):
        xp.take_along_axis(np.zeros(3), np.array([0]), axis=1)
    with pytest.raises(ValueError, match=r"diff: n must be a non-negative int"):
        xp.diff(np.zeros(3), n=-1)
    with pytest.raises(TypeError, match=r"diff: prepend must be an array"):
        xp.diff(np.zeros(3), prepend=0.0)


def test_diff_gradient_reaches_prepend_and_append() -> None:
    xp = namespace("numpy")
    x, p, a = Variable(np.array([1.0, 4.0])), Variable(np.array([0.0])), Variable(np.array([9.0]))
    y = xp.diff(x, prepend=p, append=a)
    np.testing.assert_array_equal(y.array, [1.0, 3.0, 5.0])
    agnograd.backward([y], [np.array([1.0, 10.0, 100.0])])
    np.testing.assert_array_equal(p.grad, [-1.0])
    np.testing.assert_array_equal(x.grad, [-9.0, -90.0])
    np.testing.assert_array_equal(a.grad, [100.0])
    x = Variable(np.array([1.0, 4.0, 9.0]))
    y = xp.diff(x, n=4)  # longer than x: empty, and no gradient reaches x
    assert y.shape == (0,)
    agnograd.backward([y], [np.zeros(0)])
    np.testing.assert_array_equal(x.grad, np.zeros(3))


def test_indexing_defers_in_define_then_run() -> None:
    xp = namespace("numpy")
    values = np.array([[3.0, 1.0, 2.0], [0.5, 2.5, -1.0]])
    idx = np.array([2, 2, 0])
    x = Variable.from_array(values, need_grad=True)
    with agnograd.auto_forward(False):
        y = xp.sum(xp.sort(x, axis=1) * xp.take(x, idx, axis=1) + xp.diff(x, axis=1, n=3, append=x))
    y.forward()
    y.backward()
    eager = Variable(values.copy())
    expected = xp.sum(
        xp.sort(eager, axis=1) * xp.take(eager, idx, axis=1)
        + xp.diff(eager, axis=1, n=3, append=eager)
    )
    np.testing.assert_allclose(y.d, expected.array)
    expected.backward()
    np.testing.assert_allclose(x.g, eager.grad)
