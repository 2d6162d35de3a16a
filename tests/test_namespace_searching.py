"""Functions without a gradient in the searching, sorting, set and utility chapters.

``argmax``, ``argmin``, ``count_nonzero``, ``nonzero``, ``searchsorted``,
``argsort``, ``isin``, ``unique_*``, ``all`` and ``any`` must return the backend's
own results as Variables that require no gradient, even from inputs that do; the
``unique_*`` results keep the standard's field names. Also: every name of these
chapters (and of statistical, manipulation and indexing) is in exactly one table.
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
from agnograd.functions import _standard
from agnograd.functions._table import DIFFERENTIABLE, NON_DIFFERENTIABLE, UNSUPPORTED
from agnograd.testing import backend_namespace
from agnograd.testing import strategies as ags

torch = pytest.importorskip("torch")

BACKENDS = ("numpy", "array_api_strict", "torch")
# Few distinct values: ties, repeats and zeros are likely.
VALUES = st.sampled_from([-1.5, 0.0, 0.5, 2.0])


def namespace(backend: str) -> Any:
    return agnograd.namespace(backend_namespace(backend))


def to_numpy(a: Any) -> np.ndarray:
    a = a.array if isinstance(a, Variable) else a
    if isinstance(a, torch.Tensor):
        return a.detach().numpy()
    return np.asarray(a)


def same(ours: Any, theirs: Any) -> None:
    """``ours`` (Variables) holds ``theirs`` (the backend's arrays) and needs no gradient."""
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            same(a, b)
        return
    assert isinstance(ours, Variable)
    assert not ours.requires_grad
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(to_numpy(ours), to_numpy(theirs))


@st.composite
def drawn(draw: Any) -> tuple[np.ndarray, Any]:
    shape = draw(ags.shapes(min_dims=1, max_dims=3, max_side=4))
    x = draw(hnp.arrays(np.float64, shape, elements=VALUES))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return x, axis


CALLS = {
    "argmax": lambda xp, x, axis: xp.argmax(x, axis=axis, keepdims=True),
    "argmin": lambda xp, x, axis: xp.argmin(x, axis=axis),
    "count_nonzero": lambda xp, x, axis: xp.count_nonzero(x, axis=axis, keepdims=True),
    "nonzero": lambda xp, x, axis: xp.nonzero(x),
    "argsort": lambda xp, x, axis: xp.argsort(x, axis=axis, descending=True),
    "all": lambda xp, x, axis: xp.all(x, axis=axis),
    "any": lambda xp, x, axis: xp.any(x, keepdims=True),
    "unique_values": lambda xp, x, axis: xp.unique_values(x),
    # array-api-strict allows integers only
    "isin": lambda xp, x, axis: xp.isin(xp.astype(x, xp.int64), xp.asarray([-1, 2])),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=5, deadline=None)
@given(case=drawn())
def test_results_are_the_backends_and_need_no_gradient(
    name: str, backend: str, case: tuple[np.ndarray, Any]
) -> None:
    values, axis = case
    raw = backend_namespace(backend)
    x = Variable(raw.asarray(values))
    ours = CALLS[name](namespace(backend), x, axis)
    theirs = CALLS[name](raw, raw.asarray(values), axis)
    same(ours, theirs)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=5, deadline=None)
@given(case=drawn(), side=st.sampled_from(["left", "right"]))
def test_searchsorted(backend: str, case: tuple[np.ndarray, Any], side: str) -> None:
    values, _ = case
    raw = backend_namespace(backend)
    sorted_values = raw.asarray(np.sort(values.ravel()))
    queries = raw.asarray(values)
    ours = namespace(backend).searchsorted(Variable(sorted_values), Variable(queries), side=side)
    same(ours, raw.searchsorted(sorted_values, queries, side=side))


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=5, deadline=None)
@given(case=drawn())
def test_unique_results_keep_their_field_names(backend: str, case: tuple[np.ndarray, Any]) -> None:
    values, _ = case
    raw = backend_namespace(backend)
    xp = namespace(backend)
    x = Variable(raw.asarray(values))
    unique, first, inverse, counts = np.unique(
        values, return_index=True, return_inverse=True, return_counts=True
    )
    result = xp.unique_all(x)
    assert result._fields == ("values", "indices", "inverse_indices", "counts")
    for field, expected in zip(
        result._fields, (unique, first, inverse.reshape(values.shape), counts), strict=True
    ):
        got = getattr(result, field)
        assert not got.requires_grad
        np.testing.assert_array_equal(to_numpy(got), expected, err_msg=field)
    counted = xp.unique_counts(x)
    assert counted._fields == ("values", "counts")
    np.testing.assert_array_equal(to_numpy(counted.counts), counts)
    inverted = xp.unique_inverse(x)
    assert inverted._fields == ("values", "inverse_indices")
    np.testing.assert_array_equal(to_numpy(inverted.inverse_indices), inverse.reshape(values.shape))


def test_unique_all_keeps_nans_distinct_on_torch() -> None:
    """array-api-compat's torch namespace lacks unique_all: agnograd sorts instead."""
    x = torch.asarray([2.0, float("nan"), 1.0, 2.0, float("nan")])
    result = namespace("torch").unique_all(x)
    np.testing.assert_array_equal(to_numpy(result.values), [1.0, 2.0, np.nan, np.nan])
    np.testing.assert_array_equal(to_numpy(result.counts), [1, 2, 1, 1])
    np.testing.assert_array_equal(to_numpy(result.indices), [2, 0, 1, 4])
    np.testing.assert_array_equal(to_numpy(result.inverse_indices), [1, 2, 0, 1, 3])


def test_every_name_of_these_chapters_is_in_one_table() -> None:
    chapters = (
        _standard.STATISTICAL
        + _standard.MANIPULATION
        + _standard.INDEXING
        + _standard.SEARCHING
        + _standard.SORTING
        + _standard.SET
        + _standard.UTILITY
    )
    for name in chapters:
        places = [name in DIFFERENTIABLE, name in NON_DIFFERENTIABLE, name in UNSUPPORTED]
        assert sum(places) == 1, name
        assert name not in UNSUPPORTED, name
    for name in ("sort", "take", "take_along_axis", "diff", "where", "prod", "cumulative_prod"):
        assert name in DIFFERENTIABLE, name
