"""Every name of the array API standard (2024.12) is accounted for exactly once."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import agnograd
from agnograd.functions import _standard, _table

TABLES = {
    "differentiable": set(_table.DIFFERENTIABLE),
    "non-differentiable": set(_table.NON_DIFFERENTIABLE),
    "unsupported": set(_table.UNSUPPORTED),
    "passed through": set(_table.PASSTHROUGH) | {"asarray"},
}


@pytest.mark.parametrize("name", _standard.ALL)
def test_each_name_is_in_exactly_one_list(name: str) -> None:
    holders = [table for table, names in TABLES.items() if name in names]
    assert len(holders) == 1, f"{name!r} is in {holders or 'no list'}"


def test_no_differentiable_function_is_unsupported() -> None:
    # The target of issue 3: whatever has a derivative has a rule.
    assert not _table.UNSUPPORTED


def test_the_lists_hold_only_names_of_the_standard() -> None:
    standard = set(_standard.ALL)
    for table, names in TABLES.items():
        assert names <= standard | {"__array_api_version__"}, table


@pytest.mark.parametrize("name", sorted(set(_standard.ALL) - set(_standard.DATA_TYPES)))
def test_every_name_resolves_in_the_namespace(name: str) -> None:
    obj = agnograd.namespace(np)
    *parents, last = name.split(".")
    for part in parents:
        obj = getattr(obj, part)
    assert hasattr(obj, last)


@pytest.mark.parametrize(
    "name", sorted(n for n in _table.DIFFERENTIABLE if n in set(_standard.ELEMENTWISE))
)
def test_signatures_keep_the_positional_only_marker(name: str) -> None:
    # The standard's elementwise functions take their arrays positionally only.
    fn = _table.DIFFERENTIABLE[name]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        pytest.skip(f"{name} has no introspectable signature")
    arrays = [p for p in params if p.name in ("x", "x1", "x2")]
    assert arrays, f"{name} has no x/x1/x2 parameter: {params}"
    assert all(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in arrays), name
