"""Hypothesis strategies for agnograd: arrays and Variables of any namespace and device.

Built on :mod:`hypothesis.extra.array_api`, so they work for every library that
implements the array API standard. Arrays are drawn on the namespace's default
device and moved to ``device`` with :func:`array_api_compat.to_device`.

Examples
--------
>>> import numpy as np
>>> from hypothesis import given, settings
>>> import agnograd.functions as F
>>> from agnograd.testing import check_backward, strategies as ags
>>> @settings(max_examples=5, database=None)
... @given(x=ags.variables(np, shape=ags.shapes(max_dims=2)))
... def test_tanh(x):
...     check_backward(F.tanh, x.array, np.ones(x.shape))
>>> test_tanh()
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from typing import Any

import array_api_compat
from hypothesis import strategies as st
from hypothesis.errors import HypothesisWarning
from hypothesis.extra.array_api import make_strategies_namespace
from hypothesis.vendor.pretty import for_type_by_name

from agnograd.backends import _backend
from agnograd.core import _variable
from agnograd.testing import _backends, _cases
from agnograd.testing._cases import FunctionCase, function_inputs, registered_domains

#: Elements drawn by default: moderate, finite, no subnormals, so that gradients are
#: well-conditioned on every backend and dtype.
DEFAULT_ELEMENTS: dict[str, Any] = {"min_value": -2.0, "max_value": 2.0, "allow_subnormal": False}


def _compliant(xp: Any) -> Any:
    """The namespace a backend's arrays report, for the library's own module
    (``numpy``, ``torch``, ``dask.array``: array-api-compat's wrapper); any other
    namespace as it is."""
    library = getattr(xp, "__name__", "").partition(".")[0]
    for adapter in _backend.adapters():
        if library in adapter.modules:
            return adapter.get_namespace()
    return xp


def _pretty_dask_array(x: Any, printer: Any, cycle: bool) -> None:
    # Hypothesis prints a falsifying example with repr(), which for a Dask array
    # describes the task graph, not the values: compute them instead.
    chunks = f", chunks={x.chunks}" if x.npartitions > 1 else ""
    values = _cases.values_text(x)
    printer.text(f"dask.array({values}, dtype={_backend.dtype_name(x.dtype)}{chunks})")


# By name, so that Dask is not imported here.
for_type_by_name("dask.array.core", "Array", _pretty_dask_array)


@functools.cache
def _xps(xp: Any) -> Any:
    with warnings.catch_warnings():
        # PyTorch tensors have no __array_namespace__, so hypothesis cannot confirm
        # that array-api-compat's torch namespace is one; it works nonetheless.
        warnings.simplefilter("ignore", HypothesisWarning)
        return make_strategies_namespace(xp)


def array_api_strategies(xp: Any) -> Any:
    """Hypothesis's array API strategies namespace for ``xp`` (cached).

    Examples
    --------
    >>> import array_api_strict
    >>> from agnograd.testing import strategies as ags
    >>> ags.array_api_strategies(array_api_strict).name
    'array_api_strict'
    """
    return _xps(_compliant(xp))


def _resolve_dtype(xp: Any, dtype: Any, device: Any) -> Any:
    if dtype is None:
        return _backends.default_float(xp, device)
    if dtype == "float64" and not _backends.supports_float64(xp, device):
        raise ValueError(
            f"float64 is not supported on device {device} of {getattr(xp, '__name__', xp)}"
        )
    return _backends.dtype_of(xp, dtype)


def _inward(xp: Any, dtype: Any, elements: Mapping[str, Any]) -> dict[str, Any]:
    """``elements`` with its bounds rounded inwards to values of ``dtype``: hypothesis
    refuses a bound that ``dtype`` cannot hold exactly (0.2 in float32), and rounding
    inwards keeps every drawn value within the bounds asked for."""
    bits = int(xp.finfo(dtype).bits)
    rounded = dict(elements)
    for key, up in (("min_value", True), ("max_value", False)):
        if rounded.get(key) is not None:
            rounded[key] = _cases._representable(float(rounded[key]), bits, up=up)
    return rounded


def shapes(
    *, min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4
) -> st.SearchStrategy[tuple[int, ...]]:
    """Small array shapes (defaults keep gradient checks fast).

    Examples
    --------
    >>> from agnograd.testing import strategies as ags
    >>> s = ags.shapes(min_dims=2, max_dims=2, max_side=3)
    """
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(
        tuple
    )


def mutually_broadcastable_shapes(
    num_shapes: int,
    *,
    base_shape: tuple[int, ...] = (),
    min_dims: int = 0,
    max_dims: int = 3,
    min_side: int = 1,
    max_side: int = 4,
) -> st.SearchStrategy[Any]:
    """Shapes that broadcast together; ``.input_shapes`` and ``.result_shape``.

    Examples
    --------
    >>> from agnograd.testing import strategies as ags
    >>> s = ags.mutually_broadcastable_shapes(2)
    """
    import array_api_strict  # any namespace: the shapes do not depend on it

    return array_api_strategies(array_api_strict).mutually_broadcastable_shapes(
        num_shapes,
        base_shape=base_shape,
        min_dims=min_dims,
        max_dims=max_dims,
        min_side=min_side,
        max_side=max_side,
    )


def _flip_negative_steps(index: Any) -> Any:
    def fix(k: Any) -> Any:
        if isinstance(k, slice) and k.step is not None and k.step < 0:
            return slice(k.stop, k.start, -k.step)
        return k

    return tuple(fix(k) for k in index) if isinstance(index, tuple) else fix(index)


def indices(
    shape: tuple[int, ...],
    *,
    min_dims: int = 0,
    max_dims: int | None = None,
    allow_newaxis: bool = False,
    allow_ellipsis: bool = True,
    allow_negative_step: bool = True,
) -> st.SearchStrategy[Any]:
    """Basic index expressions (integers, slices, ``...``, ``None``) valid for ``shape``.

    ``allow_negative_step=False`` turns negative slice steps positive, for libraries
    that do not support them (PyTorch).

    Examples
    --------
    >>> from agnograd.testing import strategies as ags
    >>> s = ags.indices((3, 4), allow_negative_step=False)
    """
    import array_api_strict

    strategy = array_api_strategies(array_api_strict).indices(
        shape,
        min_dims=min_dims,
        max_dims=max_dims,
        allow_newaxis=allow_newaxis,
        allow_ellipsis=allow_ellipsis,
    )
    return strategy if allow_negative_step else strategy.map(_flip_negative_steps)


def floating_dtypes(xp: Any, device: Any = None) -> st.SearchStrategy[Any]:
    """The real floating dtypes ``device`` supports (float32, and float64 where it can).

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from hypothesis import find
    >>> from agnograd.testing import strategies as ags
    >>> find(ags.floating_dtypes(xp, xp.Device("no_float64")), lambda dtype: True)
    array_api_strict.float32
    """
    xp = _compliant(xp)
    choices = [xp.float32]
    if _backends.supports_float64(xp, device):
        choices.append(xp.float64)
    return st.sampled_from(choices)


def arrays(
    xp: Any,
    dtype: Any = None,
    shape: Any = None,
    elements: Mapping[str, Any] | st.SearchStrategy[Any] | None = None,
    device: Any = None,
) -> st.SearchStrategy[Any]:
    """Arrays of ``xp`` with ``dtype`` (default: float64 where ``device`` supports it,
    else float32), ``shape`` (a shape or a strategy; default :func:`shapes`) and
    ``elements`` (hypothesis ``from_dtype`` keywords or a strategy; default
    :data:`DEFAULT_ELEMENTS` for floating dtypes), on ``device``. Bounds that the
    dtype cannot hold exactly (``min_value=0.2`` in float32) are rounded inwards to
    the nearest values it can.

    Examples
    --------
    >>> import array_api_strict as xp
    >>> from agnograd.testing import strategies as ags
    >>> from hypothesis import find
    >>> a = find(ags.arrays(xp, "float32", (2, 3), device=xp.Device("device1")), lambda a: True)
    >>> a.shape, a.dtype, a.device
    ((2, 3), array_api_strict.float32, array_api_strict.Device('device1'))
    """
    xp = _compliant(xp)
    xps = array_api_strategies(xp)
    if isinstance(dtype, st.SearchStrategy):
        return dtype.flatmap(lambda d: arrays(xp, d, shape, elements, device))
    dtype = _resolve_dtype(xp, dtype, device)
    if shape is None:
        shape = shapes()
    if xp.isdtype(dtype, "real floating"):
        if elements is None:
            elements = DEFAULT_ELEMENTS
        elif isinstance(elements, Mapping):
            elements = _inward(xp, dtype, elements)
    strategy = xps.arrays(dtype, shape, elements=elements)
    if device is None:
        return strategy
    return strategy.map(lambda a: array_api_compat.to_device(a, device))


def variables(
    xp: Any,
    dtype: Any = None,
    shape: Any = None,
    elements: Mapping[str, Any] | st.SearchStrategy[Any] | None = None,
    device: Any = None,
    *,
    requires_grad: bool = True,
    name: str | None = None,
) -> st.SearchStrategy[_variable.Variable]:
    """Variables holding arrays drawn by :func:`arrays`.

    Examples
    --------
    >>> import torch
    >>> from agnograd.testing import strategies as ags
    >>> from hypothesis import find
    >>> v = find(ags.variables(torch, "float32", (2,), name="v"), lambda v: True)
    >>> v.shape, v.dtype, v.name
    ((2,), torch.float32, 'v')
    """
    return arrays(xp, dtype, shape, elements, device).map(
        lambda a: _variable.Variable(a, name=name, requires_grad=requires_grad)
    )


__all__ = [
    "DEFAULT_ELEMENTS",
    "FunctionCase",
    "array_api_strategies",
    "arrays",
    "floating_dtypes",
    "function_inputs",
    "indices",
    "mutually_broadcastable_shapes",
    "registered_domains",
    "shapes",
    "variables",
]
