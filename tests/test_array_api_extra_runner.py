"""The runner of array-api-extra's own tests (``agnograd.conformance.array_api_extra_tests``),
without a checkout of array-api-extra: test ids, the comparison with raw NumPy, and one
run on a stand-in checkout whose conftest makes its backends as array-api-extra's does."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from agnograd.conformance.array_api_extra_tests import backend_of, compare, main
from agnograd.conformance.chainer_tests import Outcome

pytest.importorskip("array_api_extra")
pytest.importorskip("pytest_jsonreport")


def test_backend_of_reads_the_library_parameter() -> None:
    assert backend_of("t.py::test_a[numpy]") == "numpy"
    assert backend_of("t.py::test_a[agnograd-add-1]") == "agnograd"
    assert backend_of("t.py::test_a[1-numpy]") == "numpy"
    assert backend_of("t.py::test_a[numpy:readonly]") is None
    assert backend_of("t.py::test_a[torch]") is None


def test_compare_keeps_failures_that_raw_numpy_does_not_have() -> None:
    found = [
        Outcome("t.py::a[numpy-1]", "passed"),
        Outcome("t.py::a[agnograd-1]", "failed", "E"),
        Outcome("t.py::b[numpy]", "failed", "E"),
        Outcome("t.py::b[agnograd]", "failed", "E"),
        Outcome("t.py::c[agnograd]", "passed"),
    ]
    assert [o.test for o in compare(found)] == ["t.py::a[agnograd-1]"]


CONFTEST = """
import pytest
from array_api_extra._lib._backends import Backend
from array_api_extra._lib._compat import array_namespace

@pytest.fixture(params=[b.pytest_param() for b in Backend])
def library(request):
    return request.param

@pytest.fixture
def xp(library):
    module = pytest.importorskip(library.modname)
    return array_namespace(module.empty(0))
"""

TESTS = """
import numpy as np
from array_api_extra._lib._backends import Backend

def test_both(xp):
    assert float(xp.sum(xp.asarray([1.0, 2.0]))) == 3.0

def test_numpy_arrays(xp, library):
    assert isinstance(xp.asarray([1.0]), np.ndarray) or library.like(Backend.NUMPY)

def test_no_backend():
    pass
"""


def test_a_run_on_a_stand_in_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main_tests = tmp_path / "tests" / "main"
    main_tests.mkdir(parents=True)
    (main_tests / "conftest.py").write_text(textwrap.dedent(CONFTEST), encoding="utf-8")
    (main_tests / "test_x.py").write_text(textwrap.dedent(TESTS), encoding="utf-8")
    assert main(["--suite", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "test_numpy_arrays[agnograd]" in out
    assert "1 tests fail on agnograd's namespace and not on raw NumPy." in out
    # Only the two compared backends ran: NumPy's two tests passed, agnograd's one.
    assert out.count("tests/main/test_x.py") == 3  # a row per backend, the failure
