"""Run array-api-extra's own tests with agnograd's namespace as one more backend.

``python -m agnograd.conformance.array_api_extra_tests --suite PATH`` runs the tests
of `data-apis/array-api-extra <https://github.com/data-apis/array-api-extra>`_
(``PATH`` is a checkout, fetched for the run; its ``src`` folder is put first on the
path so that the tests meet the library of their own commit) twice over: on raw NumPy
(array-api-compat's namespace, as array-api-extra runs it) and on agnograd's namespace
over NumPy, where every array the tests make is a :class:`~agnograd.Variable`. The
other backends of array-api-extra's own list are deselected. It prints the counts per
test file of each backend, then every failure grouped by its cause; the exit status is
1 when a test fails on agnograd's namespace but not on raw NumPy, and is not one of
:data:`NEEDS_NUMPY` (reported as expected failures).

The suite is not part of agnograd; fetch it for the run::

    git clone --depth 1 https://github.com/data-apis/array-api-extra /tmp/array-api-extra
    python -m agnograd.conformance.array_api_extra_tests --suite /tmp/array-api-extra

The hooks at the end make this module the pytest plugin of the run
(``-p agnograd.conformance.array_api_extra_tests``): before array-api-extra's
``conftest.py`` is imported, it adds ``AGNOGRAD`` to array-api-extra's list of test
backends (its ``Backend`` enum), so that every test parametrized over the backends
also runs with ``xp`` being agnograd's namespace. array-api-extra treats that backend
as a library of its own: tests that ask for NumPy itself (``library.like(NUMPY)``) do
not take their NumPy branch there.

Examples
--------
>>> from agnograd.conformance.array_api_extra_tests import backend_of
>>> backend_of("tests/main/test_at.py::test_copy[agnograd]")
'agnograd'
>>> backend_of("tests/main/test_at.py::test_update_ops[numpy-add-1]")
'numpy'
>>> backend_of("tests/main/test_version.py::test_version") is None
True
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import re
import subprocess
import sys
import tempfile
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agnograd.conformance.chainer_tests import Outcome, format_summary, outcomes_of

#: The backends compared: array-api-extra's own NumPy, and agnograd's namespace over it.
BACKENDS = ("numpy", "agnograd")

#: The module that array-api-extra's ``xp`` fixture imports for the agnograd backend:
#: its ``empty(0)`` is a Variable, whose namespace the fixture then takes.
SHIM = "agnograd_over_numpy"

#: Tests that need NumPy itself, so that they cannot pass on another library's namespace.
NEEDS_NUMPY = {
    "tests/main/test_set.py::TestNUnique::test_delegates[agnograd]": (
        "checks that array-api-extra delegates to NumPy's own function"
    ),
    "tests/main/test_testing.py::test_lazy_xp_function_cython_ufuncs[agnograd]": (
        "calls a SciPy ufunc (compiled for NumPy arrays) on the namespace's arrays"
    ),
}


def backend_of(test: str) -> str | None:
    """The backend a test id ran on (its ``library`` parameter), None for a test that
    is not parametrized over the backends."""
    for backend in BACKENDS:
        if re.search(rf"[\[-]{backend}[\]-]", test):
            return backend
    return None


def run_suite(suite: Path, pytest_args: Sequence[str] = ()) -> dict[str, Any]:
    """Run array-api-extra's ``tests`` under ``suite`` on raw NumPy and on agnograd's
    namespace; the pytest-json-report report."""
    tests = suite / "tests"
    if not (tests / "main" / "conftest.py").is_file():
        raise FileNotFoundError(
            f"run_suite: {suite} is not a checkout of array-api-extra (no tests/main/conftest.py)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [
            sys.executable, "-m", "pytest", str(tests / "main"), f"--rootdir={suite}",
            "-q", "-p", "no:cacheprovider", "-p", "no:agnograd",
            "-p", "agnograd.conformance.array_api_extra_tests", "--agnograd-backend-of-xpx",
            "--json-report", f"--json-report-file={report}",
            "--json-report-omit", "keywords", "streams", "log", "warnings", "traceback",
            *pytest_args,
        ]  # fmt: skip
        path = [str(suite / "src"), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        done = subprocess.run(
            command, cwd=suite, env=env, check=False, capture_output=True, text=True
        )
        if done.returncode not in (0, 1) or not report.exists():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
            raise RuntimeError(
                f"array-api-extra's tests did not run (pytest exit code {done.returncode}); "
                f"is {suite} a checkout of array-api-extra? pytest said:\n{tail}"
            )
        result: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return result


def compare(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """The tests that fail on agnograd's namespace where the same test passes (or
    is skipped) on raw NumPy."""
    on_numpy = {
        o.test.replace("[numpy", "[").replace("-numpy", "-"): o.status
        for o in outcomes
        if backend_of(o.test) == "numpy"
    }
    return [
        o
        for o in outcomes
        if backend_of(o.test) == "agnograd"
        and o.status == "failed"
        and on_numpy.get(o.test.replace("[agnograd", "[").replace("-agnograd", "-")) != "failed"
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agnograd.conformance.array_api_extra_tests",
        description=(__doc__ or "").split("\n")[0],
    )
    parser.add_argument("--suite", type=Path, required=True, help="an array-api-extra checkout")
    args, extra = parser.parse_known_args(argv)
    outcomes = outcomes_of(run_suite(args.suite.resolve(), extra), NEEDS_NUMPY)
    for backend in BACKENDS:
        mine = [o for o in outcomes if backend_of(o.test) == backend]
        print(f"== {backend} ({'raw' if backend == 'numpy' else 'agnograd over NumPy'})")
        print(format_summary(mine, show_xfailed=True), end="\n\n")
    worse = compare(outcomes)
    print(f"{len(worse)} tests fail on agnograd's namespace and not on raw NumPy.")
    return int(bool(worse))


# --- pytest plugin: loaded in the pytest process of the run (-p) ---------------------------


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--agnograd-backend-of-xpx",
        action="store_true",
        help="add agnograd's namespace over NumPy to array-api-extra's test backends",
    )


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Sequence[str]) -> None:
    # Before array-api-extra's conftest.py, which makes its backend fixture of the list.
    if "--agnograd-backend-of-xpx" not in args:
        return
    import numpy as np
    from array_api_extra._lib import _backends

    import agnograd

    shim = types.ModuleType(SHIM, "array-api-extra's fixture imports this for agnograd")
    shim.empty = lambda shape: agnograd.Variable(np.empty(shape))  # type: ignore[attr-defined]
    sys.modules[SHIM] = shim
    # Enum classes cannot gain members: the list is made anew, with the same methods.
    original = _backends.Backend
    body = enum.EnumMeta.__prepare__("Backend", (enum.Enum,))
    for member in original:
        body[member.name] = member.value
    body["AGNOGRAD"] = SHIM
    for name in ("modname", "like", "pytest_param", "__doc__", "__module__"):
        body[name] = original.__dict__[name]
    _backends.Backend = enum.EnumMeta("Backend", (enum.Enum,), body)  # type: ignore[misc]


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Keep the tests of the compared backends (and those of none)."""
    if not config.getoption("--agnograd-backend-of-xpx"):
        return
    kept, dropped = [], []
    for item in items:
        backend = backend_of(item.nodeid)
        params = getattr(getattr(item, "callspec", None), "params", {})
        others = any(
            isinstance(v, enum.Enum) and type(v).__name__ == "Backend" for v in params.values()
        )
        (kept if backend is not None or not others else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


if __name__ == "__main__":
    sys.exit(main())
