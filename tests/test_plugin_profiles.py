"""agnograd's pytest plugin loads its hypothesis profiles only when asked.

The plugin is loaded into every pytest run where agnograd is installed, so it must
not change another project's hypothesis settings: each case runs a tiny project with
pytester and reads the profile in effect there. It runs in this process, as a fresh
interpreter would start it (:func:`run`): a pytest subprocess would cost seconds of
imports each.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Any

import pytest
from hypothesis import settings

pytest_plugins = ["pytester"]

PROBE = """
    from hypothesis import settings

    def test_profile():
        print("PROFILE", settings.get_current_profile_name(), settings().max_examples)
"""

THEIR_CONFTEST = """
    from hypothesis import settings

    settings.register_profile("theirs", max_examples=7)
    settings.load_profile("theirs")
"""


@pytest.fixture(autouse=True)
def _libraries_imported_first() -> None:
    """The libraries the inner runs take, imported before pytester notes the modules
    it will forget when the test ends (an autouse fixture is set up before it):
    forgotten, Dask would be imported again as new modules, whose arrays the objects
    made from the old ones (the plugin's namespaces) no longer recognise."""
    for name in ("dask.array", "array_api_compat.dask.array"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


class _Modules:
    """A plugin of the inner run: the modules imported when it ends."""

    def __init__(self) -> None:
        self.modules: dict[str, Any] = {}

    def pytest_unconfigure(self) -> None:
        self.modules = dict(sys.modules)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest on the tiny project, in this process but as in a fresh interpreter:
    hypothesis's default profile loaded (the plugin's profiles, registered when it
    was imported, are there, as they would be). This process's profile is put back
    after, whatever the run loaded. pytester forgets the modules a run imported;
    those of libraries are kept, since a library half forgotten (``numpy.fft``,
    loaded lazily, gone from ``sys.modules``) breaks the next import of another."""
    ours = settings.get_current_profile_name()
    settings.load_profile("default")
    inner = _Modules()
    try:
        return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args, plugins=[inner])
    finally:
        settings.load_profile(ours)
        project = str(pytester.path)
        for name, module in inner.modules.items():
            if not str(getattr(module, "__file__", None) or "").startswith(project):
                sys.modules.setdefault(name, module)


def profile_in(pytester: pytest.Pytester, *args: str) -> str:
    """Run the probe in the tiny project; ``"name max_examples"`` as it saw them."""
    result = run(pytester, "-s", *args)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    (line,) = [line for line in result.outlines if "PROFILE " in line]
    return line.partition("PROFILE ")[2]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    pytester.makepyfile(test_probe=PROBE)
    return pytester


def test_a_project_keeps_the_profile_its_conftest_loads(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")  # agnograd's "ci" profile would have 10 examples
    project.makeconftest(THEIR_CONFTEST)
    assert profile_in(project) == "theirs 7"
    # Choosing agnograd's backends does not override it either.
    assert profile_in(project, "--agnograd-backend", "numpy") == "theirs 7"


def test_a_project_that_asks_for_nothing_keeps_hypothesis_defaults(
    project: pytest.Pytester,
) -> None:
    assert profile_in(project) == "default 100"


@pytest.mark.parametrize(("ci", "expected"), [("", "local 25"), ("true", "ci 10")])
def test_the_ini_option_auto_loads_agnograd_profiles(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str, expected: str
) -> None:
    monkeypatch.setenv("CI", ci)
    project.makeini("[pytest]\nagnograd_hypothesis_profile = auto\n")
    assert profile_in(project) == expected


def test_hypothesis_option_has_the_last_word(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nagnograd_hypothesis_profile = ci\n")
    assert profile_in(project, "--hypothesis-profile", "local") == "local 25"


def test_the_ini_option_names_a_profile(project: pytest.Pytester) -> None:
    project.makeconftest(
        'from hypothesis import settings\nsettings.register_profile("p3", max_examples=3)\n'
    )
    project.makeini("[pytest]\nagnograd_hypothesis_profile = p3\n")
    assert profile_in(project) == "p3 3"
    project.makeini("[pytest]\nagnograd_hypothesis_profile = nosuchprofile\n")
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*agnograd_hypothesis_profile = nosuchprofile*"])


def test_choosing_backends_loads_agnograd_profile_when_none_is_loaded(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The conformance suite runs with --agnograd-backend and follows the profile.
    monkeypatch.setenv("CI", "true")
    assert profile_in(project, "--agnograd-backend", "numpy") == "ci 10"


COUNTING = """
    from hypothesis import given, strategies as st

    failures = []

    @given(n=st.integers(0, 10**6))
    def test_fails_above_ten(xp, n):
        if n > 10:
            failures.append(n)
            print("FAILURES", len(failures), "LAST", n)
            raise AssertionError("too large")
"""


def failing_runs(pytester: pytest.Pytester, backend: str) -> tuple[int, int]:
    """How often the test failed before pytest reported it, and the reported value."""
    result = run(pytester, "-s", "--agnograd-backend", backend)
    assert result.ret == 1, result.stdout.str() + result.stderr.str()
    last = [line.split() for line in result.outlines if line.startswith("FAILURES ")][-1]
    return int(last[1]), int(last[3])


def test_dask_reports_a_failure_without_shrinking_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("dask")
    monkeypatch.setenv("CI", "true")  # the derandomized "ci" profile
    project.makepyfile(test_counting=COUNTING)
    # NumPy shrinks the failure to the smallest failing value; Dask reports the one
    # found, after a single replay of it.
    assert failing_runs(project, "numpy")[1] == 11
    runs, value = failing_runs(project, "dask")
    assert runs == 2
    assert value > 11
