"""The manipulation chapter of agnograd's namespace: every function, to second order.

Each differentiable function is checked on numpy, array_api_strict and torch against
central differences (first and second order, float64) on hypothesis-drawn shapes
(0-d included where the function allows it) and arguments, and against
torch.autograd (``torch.flip``, ``torch.roll``, ``torch.repeat_interleave``,
``torch.tile``, ``torch.movedim``, ``torch.unbind``, ...). ``broadcast_shapes`` is
a pure function of shapes, checked against NumPy.
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
from agnograd.functions._table import DIFFERENTIABLE, NON_DIFFERENTIABLE
from agnograd.testing import backend_namespace, check_backward, check_double_backward
from agnograd.testing import strategies as ags
from agnograd.testing.strategies import FunctionCase

torch = pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")
EXAMPLES = settings(max_examples=6, deadline=None)
ANY = st.floats(-2.0, 2.0, allow_nan=False, allow_subnormal=False)


def namespace(backend: str) -> Any:
    return agnograd.namespace(backend_namespace(backend))


def to_backend(backend: str, a: np.ndarray) -> Any:
    return backend_namespace(backend).asarray(a)


def to_numpy(a: Any) -> np.ndarray:
    a = a.array if isinstance(a, Variable) else a
    if isinstance(a, torch.Tensor):
        return a.detach().resolve_conj().numpy()
    return np.asarray(a)


def as_tuple(y: Any) -> tuple[Any, ...]:
    return tuple(y) if isinstance(y, list | tuple) else (y,)


def seeds(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def check_orders(fn: Callable[..., Any], arrays: tuple[Any, ...], backend: str, seed: int) -> None:
    """First and second order against central differences, every output seeded."""
    ys = as_tuple(fn(*arrays))
    gys = tuple(to_backend(backend, seeds(seed + k, tuple(y.shape))) for k, y in enumerate(ys))
    ggx = tuple(
        to_backend(backend, seeds(seed + 100 + k, tuple(a.shape))) for k, a in enumerate(arrays)
    )
    check_backward(fn, arrays, gys, atol=1e-7, rtol=1e-6)
    check_double_backward(fn, arrays, gys, ggx, atol=1e-6, rtol=1e-5)


def compare_with_torch(
    ours: Callable[..., Any], theirs: Callable[..., Any], arrays: tuple[np.ndarray, ...], seed: int
) -> None:
    """Values and gradients against torch.autograd, on the torch backend."""
    xs = [Variable(torch.asarray(a)) for a in arrays]
    ys = as_tuple(ours(*xs))
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    tys = as_tuple(theirs(*ts))
    assert len(ys) == len(tys)
    for y, t in zip(ys, tys, strict=True):
        assert tuple(y.shape) == tuple(t.shape)
        np.testing.assert_array_equal(to_numpy(y), to_numpy(t))
    gys = [seeds(seed + k, tuple(t.shape)) for k, t in enumerate(tys)]
    ours_grads = agnograd.grad(
        list(ys), xs, [torch.asarray(g).to(y.dtype) for g, y in zip(gys, ys, strict=True)]
    )
    theirs_grads = torch.autograd.grad(
        tys,
        ts,
        [torch.asarray(g).to(t.dtype) for g, t in zip(gys, tys, strict=True)],
        allow_unused=True,
    )
    for a, b, x in zip(ours_grads, theirs_grads, arrays, strict=True):
        a = np.zeros(x.shape) if a is None else to_numpy(a)
        b = np.zeros(x.shape) if b is None else to_numpy(b)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# -- the torch twin of each function, called like a FunctionCase ---------------------


def torch_flip(t: Any, axis: Any = None) -> Any:
    dims = tuple(range(t.ndim)) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    return torch.flip(t, dims=dims)


def torch_squeeze(t: Any, axis: Any) -> Any:
    return torch.squeeze(t, dim=axis)


TORCH: dict[str, Callable[..., Any]] = {
    "astype": lambda t, dtype: t.to(torch.float32),
    "broadcast_to": lambda t, shape: torch.broadcast_to(t, shape),
    "concat": lambda ts, axis: torch.cat(ts, dim=axis),
    "expand_dims": lambda t, axis: torch.unsqueeze(t, axis),
    "flip": torch_flip,
    "matrix_transpose": lambda t: t.mT,
    "moveaxis": lambda t, source, destination: torch.movedim(t, source, destination),
    "permute_dims": lambda t, axes: torch.permute(t, axes),
    "repeat": lambda t, repeats, axis=None: torch.repeat_interleave(t, repeats, dim=axis),
    "reshape": lambda t, shape: torch.reshape(t, shape),
    "roll": lambda t, shift, axis=None: torch.roll(t, shift, dims=axis),
    "squeeze": torch_squeeze,
    "stack": lambda ts, axis: torch.stack(ts, dim=axis),
    "tile": lambda t, reps: torch.tile(t, reps),
    "unstack": lambda t, axis: torch.unbind(t, dim=axis),
}


def torch_twin(case: FunctionCase) -> Callable[..., Any]:
    fn = TORCH[case.name]
    if case.sequence:
        return lambda *ts: fn(list(ts), *case.args, **case.kwargs)
    return lambda *ts: fn(*ts, *case.args, **case.kwargs)


# -- inputs: the testing kit's registered domains, plus the arguments they leave out ---


@st.composite
def more_arguments(draw: Any, name: str) -> FunctionCase:
    """Calls the registered domains do not make: roll over several axes or the
    flattened array, moveaxis of several axes, repeat with an array of counts or of
    the flattened array, broadcast_arrays."""
    if name == "roll":
        shape = draw(ags.shapes(min_dims=1, max_dims=3, max_side=3))
        axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
        shift = tuple(draw(st.integers(-4, 4)) for _ in axes)
        kwargs = draw(st.sampled_from([{"axis": tuple(axes)}, {}]))
        x = draw(hnp.arrays(np.float64, shape, elements=ANY))
        return FunctionCase(name, (x,), (shift if kwargs else shift[0],), kwargs)
    if name == "moveaxis":
        shape = draw(ags.shapes(min_dims=2, max_dims=4, max_side=3))
        n = len(shape)
        source = tuple(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))
        destination = tuple(
            draw(
                st.lists(
                    st.integers(-n, -1), min_size=len(source), max_size=len(source), unique=True
                )
            )
        )
        x = draw(hnp.arrays(np.float64, shape, elements=ANY))
        return FunctionCase(name, (x,), (source, destination))
    if name == "repeat":
        shape = draw(ags.shapes(min_dims=0, max_dims=3, max_side=3))
        x = draw(hnp.arrays(np.float64, shape, elements=ANY))
        if draw(st.booleans()) or not shape:  # over the flattened array
            counts = draw(hnp.arrays(np.int64, (x.size,), elements=st.integers(0, 3)))
            return FunctionCase(name, (x,), (counts,))
        axis = draw(st.integers(-len(shape), len(shape) - 1))
        counts = draw(hnp.arrays(np.int64, (shape[axis],), elements=st.integers(0, 3)))
        return FunctionCase(name, (x,), (counts,), {"axis": axis})
    assert name == "broadcast_arrays"
    shapes = draw(ags.mutually_broadcastable_shapes(3, max_dims=3, max_side=3)).input_shapes
    xs = tuple(draw(hnp.arrays(np.float64, s, elements=ANY)) for s in shapes)
    return FunctionCase(name, xs)


NAMES = sorted(TORCH)
MORE = ["broadcast_arrays", "moveaxis", "repeat", "roll"]


def bound(backend: str, case: FunctionCase) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """agnograd's function of ``case`` on ``backend`` and its inputs there; integer
    array arguments (repeat's counts) move to the backend too."""
    fn = getattr(namespace(backend), case.name)
    args = tuple(to_backend(backend, a) if isinstance(a, np.ndarray) else a for a in case.args)
    moved = FunctionCase(case.name, (), args, case.kwargs, case.sequence, fn)
    inputs = tuple(to_backend(backend, np.asarray(x)) for x in case.inputs)
    return moved, inputs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
@EXAMPLES
@given(data=st.data())
def test_gradients_match_central_differences(name: str, backend: str, data: Any) -> None:
    case = data.draw(ags.function_inputs(np, name, dtype="float64"), label="case")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    fn, inputs = bound(backend, case)
    if name == "astype":  # float64 -> float32 as the domain draws it, on this backend
        fn = fn.with_function(
            lambda x, _: namespace(backend).astype(x, backend_namespace(backend).float32)
        )
    check_orders(fn, inputs, backend, seed)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MORE)
@EXAMPLES
@given(data=st.data())
def test_more_arguments_match_central_differences(name: str, backend: str, data: Any) -> None:
    case = data.draw(more_arguments(name), label="case")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    fn, inputs = bound(backend, case)
    check_orders(fn, inputs, backend, seed)


@pytest.mark.parametrize("name", NAMES)
@EXAMPLES
@given(data=st.data())
def test_gradients_match_torch_autograd(name: str, data: Any) -> None:
    case = data.draw(ags.function_inputs(np, name, dtype="float64"), label="case")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    fn, _ = bound("torch", case)
    if name == "astype":
        fn = fn.with_function(lambda x, _: namespace("torch").astype(x, torch.float32))
    compare_with_torch(fn, torch_twin(case), tuple(np.asarray(x) for x in case.inputs), seed)


@pytest.mark.parametrize("name", MORE)
@EXAMPLES
@given(data=st.data())
def test_more_arguments_match_torch_autograd(name: str, data: Any) -> None:
    case = data.draw(more_arguments(name), label="case")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    fn, _ = bound("torch", case)
    if name == "broadcast_arrays":
        theirs: Callable[..., Any] = torch.broadcast_tensors
    else:
        args = tuple(torch.asarray(a) if isinstance(a, np.ndarray) else a for a in case.args)
        theirs = torch_twin(FunctionCase(name, case.inputs, args, case.kwargs))
    compare_with_torch(fn, theirs, case.inputs, seed)


# -- specific behaviour ---------------------------------------------------------------


@given(shapes=ags.mutually_broadcastable_shapes(3, max_dims=4))
@settings(max_examples=20, deadline=None)
def test_broadcast_shapes_matches_numpy(shapes: Any) -> None:
    xp = namespace("numpy")
    assert xp.broadcast_shapes(*shapes.input_shapes) == np.broadcast_shapes(*shapes.input_shapes)
    assert xp.broadcast_shapes() == ()


def test_broadcast_shapes_is_a_plain_function() -> None:
    assert "broadcast_shapes" in NON_DIFFERENTIABLE
    assert "broadcast_shapes" not in DIFFERENTIABLE
    with pytest.raises(ValueError, match=r"broadcast_shapes: shapes \(2, 3\), \(4,\) cannot"):
        namespace("numpy").broadcast_shapes((2, 3), (4,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_arrays_returns_a_tuple_and_sums_gradients_back(backend: str) -> None:
    xp = namespace(backend)
    a = Variable(to_backend(backend, np.array([[1.0], [2.0]])))
    b = Variable(to_backend(backend, np.array([1.0, 2.0, 3.0])))
    result = xp.broadcast_arrays(a, b)
    assert isinstance(result, tuple)  # 2025.12 (a list before)
    assert [r.shape for r in result] == [(2, 3), (2, 3)]
    xp.sum(result[0] * result[1]).backward()
    np.testing.assert_array_equal(to_numpy(a.grad), [[6.0], [6.0]])
    np.testing.assert_array_equal(to_numpy(b.grad), [3.0, 3.0, 3.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_unstack_returns_a_tuple_and_unused_parts_get_zeros(backend: str) -> None:
    xp = namespace(backend)
    x = Variable(to_backend(backend, np.arange(6.0).reshape(2, 3)))
    parts = xp.unstack(x, axis=1)
    assert isinstance(parts, tuple)
    assert len(parts) == 3
    xp.sum(parts[1] * 2.0).backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [[0.0, 2.0, 0.0], [0.0, 2.0, 0.0]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeat_with_counts_accumulates(backend: str) -> None:
    xp = namespace(backend)
    x = Variable(to_backend(backend, np.array([[1.0, 2.0], [3.0, 4.0]])))
    counts = to_backend(backend, np.array([0, 3]))
    y = xp.repeat(x, counts, axis=1)
    np.testing.assert_array_equal(to_numpy(y), [[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]])
    xp.sum(y).backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [[0.0, 3.0], [0.0, 3.0]])


def test_errors_name_the_function_and_argument() -> None:
    xp = namespace("numpy")
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"moveaxis: source axis 2 is out of range"):
        xp.moveaxis(x, 2, 0)
    with pytest.raises(ValueError, match=r"moveaxis: source .* and destination .* as many axes"):
        xp.moveaxis(x, (0, 1), 0)
    with pytest.raises(ValueError, match=r"repeat: repeats must not be negative"):
        xp.repeat(x, -1, axis=0)
    with pytest.raises(TypeError, match=r"repeat: repeats must be an int or an integer array"):
        xp.repeat(x, [1, 2], axis=0)
    with pytest.raises(ValueError, match=r"tile: repetitions must be non-negative ints"):
        xp.tile(x, (1, -1))
    with pytest.raises(ValueError, match=r"unstack: the axis 2 is out of range"):
        xp.unstack(x, axis=2)
    with pytest.raises(ValueError, match=r"flip: axis 3 is out of range"):
        xp.flip(x, axis=3)
    with pytest.raises(ValueError, match=r"roll: shift .* and axis .* differ in length"):
        xp.roll(x, (1, 2), axis=(0,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_expand_dims_takes_a_tuple_and_raises_index_error_out_of_range(backend: str) -> None:
    xp = namespace(backend)
    x = Variable(to_backend(backend, np.ones((2, 3))))
    y = xp.expand_dims(x, axis=(0, -1))
    assert y.shape == (1, 2, 3, 1)
    xp.sum(y * 2.0).backward()
    np.testing.assert_array_equal(to_numpy(x.grad), np.full((2, 3), 2.0))
    assert xp.expand_dims(x, axis=-3).shape == (1, 2, 3)
    with pytest.raises(IndexError, match=r"expand_dims: axis 3 is out of range .* 3 dim"):
        xp.expand_dims(x, axis=3)
    with pytest.raises(IndexError, match=r"expand_dims: axis -4 is out of range"):
        xp.expand_dims(x, axis=-4)
    with pytest.raises(ValueError, match=r"expand_dims: axis \(0, -4\) names the same axis"):
        xp.expand_dims(x, axis=(0, -4))


def test_astype_to_an_integer_dtype_has_no_gradient() -> None:
    xp = namespace("numpy")
    x = Variable(np.array([1.5, 2.5]))
    y = xp.astype(x, np.int64)
    assert not y.requires_grad
    np.testing.assert_array_equal(y.array, [1, 2])


def test_manipulation_defers_in_define_then_run() -> None:
    xp = namespace("numpy")
    x = Variable.from_array(np.arange(6.0).reshape(2, 3), need_grad=True)
    with agnograd.auto_forward(False):
        parts = xp.unstack(xp.tile(xp.flip(x, axis=0), (1, 2)), axis=0)
        y = xp.sum(
            xp.repeat(xp.roll(parts[0], 1)[:3], 2)
            * xp.moveaxis(xp.broadcast_to(parts[1], (2, 6)), 0, 1)[:, 0]
        )
    assert [p.shape for p in parts] == [(6,), (6,)]
    y.forward()
    y.backward()
    eager = Variable(np.arange(6.0).reshape(2, 3))
    parts = xp.unstack(xp.tile(xp.flip(eager, axis=0), (1, 2)), axis=0)
    expected = xp.sum(
        xp.repeat(xp.roll(parts[0], 1)[:3], 2)
        * xp.moveaxis(xp.broadcast_to(parts[1], (2, 6)), 0, 1)[:, 0]
    )
    np.testing.assert_allclose(y.d, expected.array)
    expected.backward()
    np.testing.assert_allclose(x.g, eager.grad)


@pytest.mark.parametrize("backend", ["array_api_strict", "torch"])
def test_astype_to_a_dtype_of_another_library_names_both(backend: str) -> None:
    x = Variable(to_backend(backend, np.array([1.0, 2.0])))
    with pytest.raises(TypeError, match=r"astype: .*numpy.float64.* is not a dtype of"):
        agnograd.functions.astype(x, np.float64)
