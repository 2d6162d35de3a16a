"""Comparing arrays of any library and device, against each other or NumPy values."""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy

from agnograd.backends._backend import dtype_name
from agnograd.core._variable import Variable


def to_numpy(x: Any) -> numpy.ndarray:
    """A NumPy array with the values of ``x`` (any array API array, or a Variable).

    CPU arrays come through DLPack or the buffer protocol without a copy where the
    library allows it; arrays on other devices are copied to the host.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from agnograd.testing import to_numpy
    >>> to_numpy(xp.asarray([1.0, 2.0]))
    array([1., 2.])
    """
    if isinstance(x, Variable):
        x = x.array
    if isinstance(x, numpy.ndarray | numpy.generic):
        return numpy.asarray(x)
    if isinstance(x, bool | int | float | complex | list | tuple):
        return numpy.asarray(x)
    errors = []
    try:
        return numpy.from_dlpack(x)
    except Exception as error:
        errors.append(error)
    try:
        # DLPack 1.0 can copy across devices (numpy >= 2.1 asks for it by keyword).
        return numpy.from_dlpack(x, device="cpu", copy=True)
    except Exception as error:
        errors.append(error)
    try:
        return numpy.asarray(array_api_compat.to_device(x, "cpu"))
    except Exception as error:
        errors.append(error)
    try:
        return numpy.asarray(x)
    except Exception as error:
        errors.append(error)
    try:
        # A lazy view the library will not export (PyTorch's conjugate bit):
        # materialise it with the library's own arithmetic first.
        return numpy.from_dlpack(x * 1)
    except Exception as error:
        errors.append(error)
    raise TypeError(
        f"to_numpy: cannot bring a {type(x).__module__}.{type(x).__qualname__} to the host "
        f"({'; '.join(f'{type(e).__name__}: {e}' for e in errors)})"
    )


def _describe(x: Any) -> str:
    if isinstance(x, Variable):
        x = x.array
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, numpy.generic):
        device = ""
        if not isinstance(x, numpy.ndarray):
            try:
                device = f" on {array_api_compat.device(x)}"
            except Exception:
                device = ""
        return (
            f"{type(x).__module__.partition('.')[0]} array of shape {tuple(x.shape)}, "
            f"{dtype_name(x.dtype)}{device}"
        )
    return type(x).__name__


def assert_allclose(
    actual: Any,
    desired: Any,
    *,
    rtol: float = 1e-7,
    atol: float = 0.0,
    check_dtype: bool = False,
    check_shape: bool = True,
    err_msg: str = "",
) -> None:
    """Assert that two arrays of any libraries and devices are elementwise close.

    Values are compared on the host in the wider of the two dtypes, with NumPy's
    rule ``|actual - desired| <= atol + rtol * |desired|``. Shapes must match exactly
    (no broadcasting) unless ``check_shape=False``; dtypes are compared by name
    (``float32`` in torch equals ``float32`` in JAX) when ``check_dtype=True``.

    Examples
    --------
    >>> import numpy as np, torch, array_api_strict as xps
    >>> from agnograd.testing import assert_allclose
    >>> assert_allclose(torch.tensor([1.0, 2.0]), xps.asarray([1.0, 2.0 + 1e-9]), rtol=1e-6)
    >>> assert_allclose(torch.tensor([1.0]), np.array([1.5]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: assert_allclose: 1 of 1 elements differ (actual torch array ...)
      worst at (0,): actual 1.0, desired 1.5, |difference| 0.5 > 1.5e-07 (atol 0 + ...)
    """
    a, d = to_numpy(actual), to_numpy(desired)
    where = f"(actual {_describe(actual)}; desired {_describe(desired)})"
    prefix = f"assert_allclose: {err_msg + ': ' if err_msg else ''}"
    if check_shape and a.shape != d.shape:
        raise AssertionError(f"{prefix}shapes differ, {a.shape} and {d.shape} {where}")
    if check_dtype and dtype_name(_dtype_of(actual)) != dtype_name(_dtype_of(desired)):
        raise AssertionError(
            f"{prefix}dtypes differ, {dtype_name(_dtype_of(actual))} and "
            f"{dtype_name(_dtype_of(desired))} {where}"
        )
    a, d = numpy.broadcast_arrays(a, d)
    if a.size == 0:
        return
    close = numpy.isclose(a, d, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return
    bad = int((~close).sum())
    with numpy.errstate(invalid="ignore", over="ignore"):
        excess = numpy.where(close, -numpy.inf, numpy.abs(a - d) - rtol * numpy.abs(d))
    # A NaN against a number is the worst mismatch there is.
    excess = numpy.where(numpy.isnan(excess), numpy.inf, excess)
    k = numpy.unravel_index(int(numpy.argmax(excess)), a.shape)
    diff = abs(a[k] - d[k])
    raise AssertionError(
        f"{prefix}{bad} of {a.size} elements differ {where}\n"
        f"  worst at {tuple(int(i) for i in k)}: actual {a[k].item()!r}, desired {d[k].item()!r}, "
        f"|difference| {diff:.3g} > {atol + rtol * abs(d[k]):.3g} "
        f"(atol {atol:g} + rtol {rtol:g} * |desired|)"
    )


def assert_array_equal(actual: Any, desired: Any, *, err_msg: str = "") -> None:
    """Assert that two arrays of any libraries and devices hold the same values.

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp
    >>> from agnograd.testing import assert_array_equal
    >>> assert_array_equal(jnp.arange(3), np.arange(3))
    """
    assert_allclose(actual, desired, rtol=0.0, atol=0.0, err_msg=err_msg)


def _dtype_of(x: Any) -> Any:
    if isinstance(x, Variable):
        return x.dtype
    return getattr(x, "dtype", numpy.asarray(x).dtype)
