"""Run the official array API suite on a backend and on agnograd's namespace over it.

``python -m agnograd.conformance.array_api_tests --suite PATH --backend numpy`` runs
`data-apis/array-api-tests <https://github.com/data-apis/array-api-tests>`_ (a checkout
at ``PATH``, with its ``array-api`` submodule and its requirements installed) twice
with the same arguments: once on the backend's own namespace, once on
``agnograd.namespace(backend)``. It prints both counts and every test whose outcome
differs. The tests that differ run again (``--recheck``, 5 times on each side) to
tell the ones whose outcome changes from run to run; the exit status is 1 when
agnograd fails, every time, a test that the backend passes. The suite is not part
of agnograd: it is fetched for the run.

Both runs test the same version of the standard (``--version``; by default the one
agnograd's namespace reports over the backend: the backend's, or agnograd's if older),
use ``--derandomize`` so that hypothesis draws the same examples for both, and leave
agnograd's own pytest plugin out (``-p no:agnograd``), which the suite does not need.

Examples
--------
>>> from agnograd.conformance.array_api_tests import compare, module_for
>>> module_for("numpy", agnograd=True)
"exec('import agnograd, numpy; xp = agnograd.namespace(numpy)')"
>>> compare({"t1": "passed", "t2": "failed"}, {"t1": "passed", "t2": "passed", "t3": "passed"})
[('t2', 'failed', 'passed'), ('t3', None, 'passed')]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from agnograd.functions._standard import VERSION


def module_for(backend: str, *, agnograd: bool) -> str:
    """The suite's ``ARRAY_API_TESTS_MODULE`` for ``backend``, raw or through agnograd."""
    if not agnograd:
        return backend
    return f"exec('import agnograd, {backend}; xp = agnograd.namespace({backend})')"


def version_of(backend: str) -> str:
    """The version of the standard agnograd's namespace reports over ``backend``: the
    backend's own, or agnograd's if that is older.

    Examples
    --------
    >>> from agnograd.conformance.array_api_tests import version_of
    >>> version_of("array_api_strict")
    '2025.12'
    """
    module = importlib.import_module(backend)
    return min(getattr(module, "__array_api_version__", VERSION), VERSION)


def run_suite(
    suite: Path,
    module: str,
    version: str,
    pytest_args: Sequence[str],
    tests: Sequence[str] = ("array_api_tests",),
) -> dict[str, str]:
    """Run the suite (or the ``tests`` named) on ``module``; each test's outcome by id."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        env = {**os.environ, "ARRAY_API_TESTS_MODULE": module, "ARRAY_API_TESTS_VERSION": version}
        command = [
            sys.executable, "-m", "pytest", *tests, "-p", "no:agnograd",
            "-p", "no:cacheprovider", "-q", "--derandomize", "--disable-deadline",
            "--json-report", f"--json-report-file={report}", *pytest_args,
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=suite, env=env, check=False, capture_output=True, text=True
        )
        # pytest exits 0 when all passed and 1 when some failed; anything else (no
        # tests collected, a usage or import error) means the run itself went wrong.
        if done.returncode not in (0, 1) or not report.exists():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
            raise RuntimeError(
                f"array-api-tests did not run on {module!r} (pytest exit code "
                f"{done.returncode}); is {suite} a checkout of the suite with its submodule, "
                f"with its requirements (pytest-json-report) installed? pytest said:\n{tail}"
            )
        results = json.loads(report.read_text())["tests"]
    return {t["nodeid"]: t["outcome"] for t in results}


def compare(raw: dict[str, str], ours: dict[str, str]) -> list[tuple[str, str | None, str | None]]:
    """The tests whose outcome differs: ``(test id, raw outcome, agnograd outcome)``."""
    return [
        (test, raw.get(test), ours.get(test))
        for test in sorted(raw.keys() | ours.keys())
        if raw.get(test) != ours.get(test)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agnograd.conformance.array_api_tests", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--suite", type=Path, required=True, help="checkout of array-api-tests")
    parser.add_argument("--backend", required=True, help="importable namespace: numpy, ...")
    parser.add_argument(
        "--version",
        default=None,
        help="standard version (default: the backend's, as agnograd's namespace reports it)",
    )
    parser.add_argument("--max-examples", type=int, default=20, help="hypothesis examples")
    parser.add_argument(
        "--recheck", type=int, default=5, help="reruns of the tests that differ (default 5)"
    )
    args, extra = parser.parse_known_args(argv)
    if args.version is None:
        args.version = version_of(args.backend)
    pytest_args = [f"--max-examples={args.max_examples}", *extra]
    modules = {
        label: module_for(args.backend, agnograd=through)
        for label, through in (("raw", False), ("agnograd", True))
    }
    outcomes = {
        label: run_suite(args.suite, module, args.version, pytest_args)
        for label, module in modules.items()
    }
    for label, results in outcomes.items():
        counts = ", ".join(f"{n} {k}" for k, n in sorted(Counter(results.values()).items()))
        print(f"{label:9} {args.backend}: {counts}")
    differences = compare(outcomes["raw"], outcomes["agnograd"])
    flaky = _recheck(args, modules, pytest_args, outcomes, [test for test, _, _ in differences])
    print(f"\n{len(differences)} tests differ (raw -> agnograd):")
    for test, before, after in differences:
        note = f"  (flaky: {flaky[test]})" if test in flaky else ""
        print(f"  {before!s:8} -> {after!s:8} {test}{note}")
    # Exit 1 when agnograd fails a test the backend passes, every time.
    return int(
        any(
            before == "passed" and after != "passed" and test not in flaky
            for test, before, after in differences
        )
    )


def _recheck(
    args: argparse.Namespace,
    modules: dict[str, str],
    pytest_args: list[str],
    outcomes: dict[str, dict[str, str]],
    tests: list[str],
) -> dict[str, str]:
    """Run ``tests`` again ``args.recheck`` times on both sides; the ones whose outcome
    changes from run to run (``outcomes`` has the first run's), with the outcomes seen
    on each side. Some of the suite's tests draw their input with hypothesis's
    ``example()``, which ``--derandomize`` does not seed."""
    seen = {test: {label: {outcomes[label].get(test)} for label in modules} for test in tests}
    for _ in range(args.recheck if tests else 0):
        for label, module in modules.items():
            results = run_suite(args.suite, module, args.version, pytest_args, tests)
            for test, outcome in results.items():
                seen[test][label].add(outcome)
    return {
        test: "; ".join(f"{label} {'/'.join(sorted(map(str, o)))}" for label, o in sides.items())
        for test, sides in seen.items()
        if any(len(o) > 1 for o in sides.values())
    }


if __name__ == "__main__":
    sys.exit(main())
