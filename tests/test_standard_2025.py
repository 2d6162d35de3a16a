"""What the array API standard 2025.12 changed, through agnograd's namespace.

The additions with a gradient (``linalg.eig``, ``linalg.eigvals``) have their own
tests (``test_linalg_eig.py``). Here: the version agnograd declares, negative axes of
``permute_dims``, a tuple of axes in ``expand_dims`` (both to second order against
central differences, hypothesis choosing shapes), Python scalars in ``searchsorted``
and ``isin``, the promotion of ``clip``'s scalar bounds and of ``__setitem__``'s
array values (the gradient keeps the value's dtype), and the tuples that
``broadcast_arrays``, ``meshgrid`` and ``devices()`` return.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agnograd
from agnograd import Variable
from agnograd.testing import backend_namespace, check_backward, check_double_backward

BACKENDS = ("numpy", "array_api_strict", "torch")
EXAMPLES = settings(max_examples=8, deadline=None)


def setup(backend: str) -> tuple[Any, Any]:
    """The backend's namespace and agnograd's namespace over it."""
    if backend == "torch":
        pytest.importorskip("torch")
    raw = backend_namespace(backend)
    return raw, agnograd.namespace(raw)


def values(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape)


def check_both_orders(fn: Any, raw: Any, x: np.ndarray, y_shape: tuple[int, ...]) -> None:
    xs = (raw.asarray(x),)
    gy = raw.asarray(values(y_shape, 1))
    ggx = (raw.asarray(values(x.shape, 2)),)
    check_backward(fn, xs, gy, atol=1e-6, rtol=1e-5)
    check_double_backward(fn, xs, gy, ggx, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_namespace_declares_2025_12_when_the_backend_does(backend: str) -> None:
    raw, xp = setup(backend)
    assert raw.__array_api_version__ == "2025.12"
    assert xp.__array_api_version__ == "2025.12"


def test_an_older_backend_keeps_its_version() -> None:
    import array_api_strict

    previous = array_api_strict.get_array_api_strict_flags()["api_version"]
    array_api_strict.set_array_api_strict_flags(api_version="2024.12")
    try:
        assert agnograd.namespace(array_api_strict).__array_api_version__ == "2024.12"
    finally:
        array_api_strict.set_array_api_strict_flags(api_version=previous)


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=3), data=st.data())
def test_permute_dims_takes_negative_axes(
    backend: str, shape: tuple[int, ...], data: st.DataObject
) -> None:
    raw, xp = setup(backend)
    order = data.draw(st.permutations(range(len(shape))))
    axes = tuple(a - len(shape) if data.draw(st.booleans()) else a for a in order)
    x = values(shape, 0)
    expected = np.permute_dims(x, axes)
    np.testing.assert_array_equal(np.asarray(xp.permute_dims(raw.asarray(x), axes).array), expected)
    check_both_orders(lambda v: xp.permute_dims(v, axes), raw, x, expected.shape)


@pytest.mark.parametrize("backend", BACKENDS)
@EXAMPLES
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3), data=st.data())
def test_expand_dims_takes_a_tuple_of_axes(
    backend: str, shape: tuple[int, ...], data: st.DataObject
) -> None:
    raw, xp = setup(backend)
    ndim = len(shape) + data.draw(st.integers(1, 2))
    positions = data.draw(st.lists(st.integers(0, ndim - 1), min_size=ndim - len(shape),
                                   max_size=ndim - len(shape), unique=True))  # fmt: skip
    axis = tuple(p - ndim if data.draw(st.booleans()) else p for p in positions)
    x = values(shape, 0)
    expected = np.expand_dims(x, axis)
    assert xp.expand_dims(raw.asarray(x), axis=axis).shape == expected.shape
    check_both_orders(lambda v: xp.expand_dims(v, axis=axis), raw, x, expected.shape)


@pytest.mark.parametrize("backend", BACKENDS)
def test_expand_dims_refuses_a_repeated_axis(backend: str) -> None:
    raw, xp = setup(backend)
    with pytest.raises(ValueError, match="expand_dims"):
        xp.expand_dims(raw.asarray([1.0, 2.0]), axis=(0, -3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_searchsorted_and_isin_take_python_scalars(backend: str) -> None:
    raw, xp = setup(backend)
    sorted_ = Variable(raw.asarray([1.0, 2.0, 3.0]))
    assert int(xp.searchsorted(sorted_, 2.5).array) == 2
    assert int(xp.searchsorted(sorted_, 2.0, side="right").array) == 2
    x = Variable(raw.asarray([1, 2, 3]))
    assert np.asarray(xp.isin(x, 2).array).tolist() == [False, True, False]
    others = raw.asarray([3, 1])
    # array-api-strict 2.6.1 ignores invert: agnograd gives what the backend gives.
    expected = np.asarray(raw.isin(raw.asarray([1, 2, 3]), others, invert=True))
    assert np.asarray(xp.isin(x, others, invert=True).array).tolist() == expected.tolist()
    assert not xp.isin(x, 2).requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "float32"])
def test_clip_with_scalar_bounds_keeps_the_dtype_of_x(backend: str, dtype: str) -> None:
    raw, xp = setup(backend)
    x = Variable(raw.asarray([0, 5, 9], dtype=getattr(raw, dtype)))
    y = xp.clip(x, 1, 7)
    assert y.dtype == x.dtype
    assert np.asarray(y.array).tolist() == [1, 5, 7]


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_with_scalar_bounds_has_the_gradient_of_x_alone(backend: str) -> None:
    raw, xp = setup(backend)
    x = Variable(raw.asarray([-2.0, 0.5, 3.0], dtype=raw.float32))
    y = xp.clip(x, -1, 1.5)
    assert y.dtype == raw.float32
    xp.sum(y).backward()
    assert np.asarray(x.grad).tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_setitem_promotes_an_array_value_and_its_gradient_keeps_its_dtype(backend: str) -> None:
    raw, xp = setup(backend)
    x = Variable(raw.asarray([1.0, 2.0, 3.0], dtype=raw.float32))
    value = Variable(raw.asarray([5.0], dtype=raw.float64))
    y = x * 1.0
    y[0:1] = value
    assert y.dtype == raw.float32  # "setting array values must not affect the data type"
    xp.sum(y * y).backward()
    assert np.asarray(x.grad).tolist() == [0.0, 4.0, 6.0]
    assert value.grad.dtype == raw.float64
    assert np.asarray(value.grad).tolist() == [10.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcast_arrays_meshgrid_and_devices_return_tuples(backend: str) -> None:
    raw, xp = setup(backend)
    a, b = raw.asarray([[1.0], [2.0]]), raw.asarray([1.0, 2.0, 3.0])
    assert type(xp.broadcast_arrays(a, b)) is tuple
    assert type(xp.meshgrid(b, b)) is tuple
    devices = xp.__array_namespace_info__().devices()
    assert type(devices) is tuple
    assert Variable(a).device in devices
