"""The conformance suite as pytest tests, one per function and check.

Run it against one backend with the plugin's option::

    pytest conformance/test_suite.py --agnograd-backend torch
    pytest conformance/test_suite.py --agnograd-backend array_api_strict:no_float64

Entries of the backend's xfail list become pytest xfails; a listed entry that
passes fails the test, like pytest's strict xfail. Hypothesis examples per check
follow the loaded hypothesis profile (``ci``: 10, ``local``: 25).
"""

from __future__ import annotations

import pytest
from agnograd.conformance import CHECKS, run_conformance
from hypothesis import settings

from agnograd.functions._table import DIFFERENTIABLE


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("function", sorted(DIFFERENTIABLE))
def test_conformance(agnograd_backend: object, function: str, check: str) -> None:
    report = run_conformance(
        agnograd_backend.name,  # type: ignore[attr-defined]
        device=agnograd_backend.device,  # type: ignore[attr-defined]
        functions=[function],
        checks=[check],
        max_examples=settings().max_examples,
    )
    (result,) = report.results
    if result.status == "skip":
        pytest.skip(result.reason)
    if result.status == "xfail":
        pytest.xfail(result.reason)
    if result.status in ("fail", "xpass"):
        pytest.fail(f"{function}::{check} on {report.label}: {result.reason}", pytrace=False)
