"""Run Chainer's own tests on agnograd, through a ``chainer`` shim of agnograd's names.

``python -m agnograd.conformance.chainer_tests --suite PATH`` runs the test files of
`chainer/chainer <https://github.com/chainer/chainer>`_ (``PATH`` is the
``tests/chainer_tests`` folder of a checkout, fetched for the run; its
``chainer/testing`` package, Chainer's test helpers, is loaded from the same
checkout) on NumPy, with ``import chainer`` answered by
:mod:`agnograd.conformance.chainer_shim`. The GPU, ChainerX and iDeep tests are
deselected. It prints, per test file, how many tests ran and passed, failed, failed
as expected or were skipped, then every failure grouped by its cause (the exception
type and the first line of its message, with numbers and addresses normalised).

Expected failures are listed in ``conformance/chainer_xfails.txt`` (or ``--xfails``),
one ``test-id-pattern  # reason`` per line. A pattern with ``*`` (any characters) covers a
class of tests of which some may pass; an exact test id is strict, and reported as
``xpassed`` (a stale entry) when the test passes. The exit status is 1 when a test
fails unexpectedly or an exact entry passes.

Chainer's test helpers import ``six``, ``mock`` and ``pkg_resources``: install them
(``pip install six mock 'setuptools<81'``) or put a folder holding them on
``PYTHONPATH``. The suite is not part of agnograd; fetch it for the run::

    git clone --depth 1 https://github.com/chainer/chainer /tmp/chainer
    pip install --target /tmp/chainer-deps six mock 'setuptools<81'
    PYTHONPATH=/tmp/chainer-deps python -m agnograd.conformance.chainer_tests \\
        --suite /tmp/chainer/tests/chainer_tests

The hooks at the end make this module the pytest plugin of the run
(``-p agnograd.conformance.chainer_tests``): it installs the shim before the test
files are imported and, in that process only, restores ``numpy.product`` (removed
in NumPy 2.0, still called by Chainer's tests) as ``numpy.prod``. Chainer's own
``conftest.py`` is not loaded (``--noconftest``): it only turns ChainerX marks into
skips and checks the CUDA device, and those tests are deselected here.

Examples
--------
>>> from agnograd.conformance.chainer_tests import cause_of, parse_xfails
>>> cause_of("AttributeError: module 'chainer' has no attribute 'Parameter'")
"AttributeError: module 'chainer' has no attribute 'Parameter'"
>>> cause_of("AssertionError: \\nNot equal to tolerance rtol=0.0001, atol=1e-05\\n...")
'AssertionError: Not equal to tolerance rtol=N, atol=N'
>>> parse_xfails("test_sum.py::TestSum_*::test_backward  # F.sum lacks keepdims\\n")
{'test_sum.py::TestSum_*::test_backward': 'F.sum lacks keepdims'}
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

XFAILS = Path(__file__).parent / "chainer_xfails.txt"

#: The test files run by default, relative to ``tests/chainer_tests``.
DEFAULT_FILES: tuple[str, ...] = (
    "test_variable.py",
    "test_function_node.py",
    "test_function_hook.py",
    "test_computational_graph.py",
    "test_backprop.py",
    "test_backprop_utils.py",
    "functions_tests/math_tests/test_basic_math.py",
    "functions_tests/math_tests/test_exponential.py",
    "functions_tests/math_tests/test_trigonometric.py",
    "functions_tests/math_tests/test_sum.py",
    "functions_tests/math_tests/test_matmul.py",
    "functions_tests/activation_tests/test_sigmoid.py",
    "functions_tests/activation_tests/test_relu.py",
    "functions_tests/activation_tests/test_tanh.py",
    "functions_tests/array_tests/test_reshape.py",
    "functions_tests/array_tests/test_transpose.py",
    "functions_tests/array_tests/test_broadcast.py",
    "functions_tests/array_tests/test_get_item.py",
    "functions_tests/array_tests/test_concat.py",
)

#: Tests that need hardware or libraries other than NumPy on the CPU (Chainer's marks).
DESELECT = "not gpu and not cudnn and not chainerx and not ideep and not multi_gpu"

# Chainer's own pytest settings (its setup.cfg), less what names Chainer's modules.
_INI = """\
[pytest]
python_files = test_*.py
python_classes = Test
python_functions = test
filterwarnings =
    error
    default::ImportWarning
    ignore:Some of grads are ignored by chainer\\.backward\\.:RuntimeWarning
    ignore:pkg_resources is deprecated as an API:UserWarning
markers =
    chainerx: Tests to use ChainerX
    cudnn: Tests to use cuDNN
    gpu: Tests to run on GPU
    ideep: Tests to use IDeep
    theano: Tests to use Theano
    multi_gpu: Tests to uses multi GPUs
    slow: Tests thats takes time
    parametrize_device: Parametrize ChainerX devices
    parametrize_device_name: Parametrize ChainerX device names
"""

#: The part of a backend-injected test's name that says "NumPy on the CPU"; printed
#: as ``_<numpy>``.
CPU_SUFFIX = (
    "_use_chainerx_false__chainerx_device_None__use_cuda_false__cuda_device_None__use_cudnn_never"
    "__cudnn_deterministic_false__autotune_false__cudnn_fast_batch_normalization_false"
    "__use_ideep_never"
)

STATUSES = ("passed", "failed", "xfailed", "xpassed", "skipped")


@dataclass(frozen=True)
class Outcome:
    """One test's result: its pytest id, status (one of :data:`STATUSES`) and, for a
    failure, its cause (:func:`cause_of`) and the reason of the entry that covers it."""

    test: str
    status: str
    cause: str = ""
    reason: str = ""

    @property
    def file(self) -> str:
        return self.test.partition("::")[0]


def parse_xfails(text: str, source: str = "<xfails>") -> dict[str, str]:
    """Parse an xfail list: ``test-id-pattern  # reason`` per line; blank lines and
    lines that are only a comment are skipped; every entry needs a reason. A test
    file that fails to import is one outcome whose id is the file (``test_x.py``).

    Examples
    --------
    >>> from agnograd.conformance.chainer_tests import parse_xfails
    >>> parse_xfails("# comment\\n\\ntest_a.py::T::test_x  # missing F.foo\\n")
    {'test_a.py::T::test_x': 'missing F.foo'}
    """
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        pattern, _, reason = line.partition(" #")
        pattern, reason = pattern.strip(), reason.strip()
        if not pattern or pattern.startswith("#"):
            continue
        if ".py" not in pattern and not pattern.startswith("*"):
            raise ValueError(
                f"{source}:{number}: expected 'file.py::Class::test  # reason', got {line!r}"
            )
        if not reason:
            raise ValueError(f"{source}:{number}: the entry {pattern!r} needs a reason after '#'")
        entries[pattern] = reason
    return entries


def load_xfails(path: str | Path | None = None) -> dict[str, str]:
    """The expected failures of ``path`` (default ``conformance/chainer_xfails.txt``)."""
    file = Path(path) if path is not None else XFAILS
    return parse_xfails(file.read_text(encoding="utf-8"), str(file))


def _is_pattern(entry: str) -> bool:
    # Only ``*`` is a wildcard: test ids hold brackets (``slices=[...]``) and ``?``.
    return "*" in entry


@functools.cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(map(re.escape, pattern.split("*"))), re.DOTALL)


def match_xfail(test: str, xfails: Mapping[str, str]) -> tuple[str, str] | None:
    """The entry (and its reason) that covers ``test``: an exact id first, else the
    first pattern that matches.

    Examples
    --------
    >>> from agnograd.conformance.chainer_tests import match_xfail
    >>> match_xfail("t.py::TestA_param_0::test_x", {"t.py::TestA_*": "why"})
    ('t.py::TestA_*', 'why')
    """
    if test in xfails:
        return test, xfails[test]
    for entry, reason in xfails.items():
        if _is_pattern(entry) and _regex(entry).fullmatch(test):
            return entry, reason
    return None


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?(?![\w])")
_CAUSED_BY = "(caused by)"
_TYPED = re.compile(r"([A-Za-z_][\w.]*)(?::(.*))?$")


def cause_of(message: str) -> str:
    """The cause of a failure from its exception text (``Type: message``): the type
    and the first non-empty line of the message, with numbers (not digits inside
    names) written ``N`` and addresses ``0x…``. Chainer's test kit wraps the error
    of a check in a ``FunctionTestError`` whose message names the original under
    ``(caused by)`` (nested once per wrapping): the innermost is the cause.

    Examples
    --------
    >>> from agnograd.conformance.chainer_tests import cause_of
    >>> cause_of("ValueError: shapes (2, 3) and (4,) differ at 0x7f00ab")
    'ValueError: shapes (N, N) and (N,) differ at 0x…'
    >>> cause_of("FunctionTestError: backward failed\\n\\n(caused by)\\nTypeError: bad float32")
    'TypeError: bad float32'
    """
    lines = [line.strip() for line in message.splitlines()]
    if _CAUSED_BY in lines:  # the innermost, when nested
        lines = lines[len(lines) - lines[::-1].index(_CAUSED_BY) :]
    lines = [line for line in lines if line]
    if not lines:
        return "(no message)"
    typed = _TYPED.match(lines[0])
    if typed is None:  # a bare ``assert`` reports its expression without the type
        text = lines[0]
    else:
        kind, first = typed.group(1).rpartition(".")[2], typed.group(2) or ""
        first = first.strip() or (lines[1] if len(lines) > 1 else "")
        text = f"{kind}: {first}" if first else kind
    text = _NUMBER.sub("N", _ADDRESS.sub("0x…", text))
    # The padding of array reprs, which changes with the values.
    text = re.sub(r"\s+([,)\]])|([(\[])\s+", r"\1\2", re.sub(r"\s+", " ", text))
    return text if len(text) <= 160 else text[:157] + "..."


def outcomes_of(report: Mapping[str, Any], xfails: Mapping[str, str]) -> list[Outcome]:
    """Each test of a pytest-json-report ``report``, its xfail entry applied; a test
    file that failed to import is one ``failed`` outcome named after the file."""
    results = []
    for collector in report.get("collectors", []):
        if collector.get("outcome") == "failed" and collector.get("nodeid", "").endswith(".py"):
            text = collector.get("longrepr", "")
            last = [line for line in text.splitlines() if line.startswith("E ")]
            message = last[-1][1:].strip() if last else text
            results.append(
                _apply(Outcome(collector["nodeid"], "failed", cause_of(message)), xfails)
            )
    for test in report.get("tests", []):
        status = test["outcome"]
        cause = ""
        if status in ("failed", "error"):
            status = "failed"
            stage: Mapping[str, Any] = next(
                (test[s] for s in ("setup", "call", "teardown") if _failed(test.get(s))), {}
            )
            crash = stage.get("crash") or {}
            cause = cause_of(crash.get("message") or stage.get("longrepr", ""))
        elif status not in STATUSES:
            status = "failed"
        results.append(_apply(Outcome(test["nodeid"], status, cause), xfails))
    return results


def _failed(stage: Mapping[str, Any] | None) -> bool:
    return stage is not None and stage.get("outcome") in ("failed", "error")


def _apply(outcome: Outcome, xfails: Mapping[str, str]) -> Outcome:
    entry = match_xfail(outcome.test, xfails)
    if entry is None or outcome.status not in ("failed", "passed"):
        return outcome
    pattern, reason = entry
    if outcome.status == "failed":
        return Outcome(outcome.test, "xfailed", outcome.cause, reason)
    if _is_pattern(pattern):
        return outcome
    return Outcome(outcome.test, "xpassed", "", f"listed ({reason}) but passed: remove the entry")


def counts_by_file(outcomes: Iterable[Outcome]) -> dict[str, Counter[str]]:
    """Per test file, how many tests ran (``collected``) and how many of each status.

    Examples
    --------
    >>> from agnograd.conformance.chainer_tests import Outcome, counts_by_file
    >>> counts_by_file([Outcome("a.py::t1", "passed"), Outcome("a.py::t2", "failed", "E")])
    {'a.py': Counter({'collected': 2, 'passed': 1, 'failed': 1})}
    """
    table: dict[str, Counter[str]] = {}
    for outcome in outcomes:
        counts = table.setdefault(outcome.file, Counter())
        counts["collected"] += 1
        counts[outcome.status] += 1
    return table


def group_by_cause(
    outcomes: Iterable[Outcome], statuses: Sequence[str] = ("failed",)
) -> list[tuple[str, list[Outcome]]]:
    """The outcomes of ``statuses`` grouped by cause, the cause breaking most tests first.

    Examples
    --------
    >>> from agnograd.conformance.chainer_tests import Outcome, group_by_cause
    >>> found = [Outcome("a::1", "failed", "E1"), Outcome("a::2", "failed", "E2"),
    ...          Outcome("a::3", "failed", "E2"), Outcome("a::4", "passed")]
    >>> [(cause, len(tests)) for cause, tests in group_by_cause(found)]
    [('E2', 2), ('E1', 1)]
    """
    groups: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        if outcome.status in statuses:
            groups[outcome.cause].append(outcome)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


def format_summary(outcomes: Sequence[Outcome], *, show_xfailed: bool = False) -> str:
    """The report the runner prints: the counts per file, then the failures by cause."""
    table = counts_by_file(outcomes)
    columns = ("collected", *STATUSES)
    width = max([len("total"), *map(len, table)])
    lines = [f"{'file':{width}}  " + "  ".join(f"{c:>9}" for c in columns)]
    total: Counter[str] = Counter()
    for file, counts in table.items():
        total.update(counts)
        lines.append(f"{file:{width}}  " + "  ".join(f"{counts[c]:>9}" for c in columns))
    lines.append(f"{'total':{width}}  " + "  ".join(f"{total[c]:>9}" for c in columns))
    sections = [("failed", "Unexpected failures"), ("xpassed", "Stale entries (passed)")]
    if show_xfailed:
        sections.append(("xfailed", "Expected failures"))
    for status, title in sections:
        groups = group_by_cause(outcomes, (status,))
        if not groups:
            continue
        count = sum(len(tests) for _, tests in groups)
        lines += ["", f"{title}: {count} tests, {len(groups)} causes"]
        for cause, tests in groups:
            files = Counter(t.file for t in tests)
            where = ", ".join(f"{f.rpartition('/')[2]} {n}" for f, n in files.most_common())
            lines.append(f"  {len(tests):5}  {cause or tests[0].reason}  [{where}]")
            lines += [f"           {_shown(t.test)}" for t in tests if status != "xfailed"]
    if any(CPU_SUFFIX in o.test for o in outcomes if o.status in ("failed", "xpassed")):
        lines += ["", f"(_<numpy> stands for {CPU_SUFFIX})"]
    return "\n".join(lines)


def _shown(test: str) -> str:
    """A test id on one line (parameter reprs hold newlines), its CPU suffix short."""
    return test.replace(CPU_SUFFIX, "_<numpy>").replace("\n", "\\n")


def run_suite(
    suite: Path,
    testing: Path,
    files: Sequence[str] = DEFAULT_FILES,
    pytest_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Run Chainer's test ``files`` (relative to ``suite``) through the shim; the
    pytest-json-report report."""
    missing = [f for f in files if not (suite / f).is_file()]
    if missing:
        raise FileNotFoundError(f"run_suite: no {', '.join(missing)} under {suite}")
    with tempfile.TemporaryDirectory() as tmp:
        ini, report = Path(tmp) / "pytest.ini", Path(tmp) / "report.json"
        ini.write_text(_INI, encoding="utf-8")
        command = [
            sys.executable, "-m", "pytest", *files, "-c", str(ini), f"--rootdir={suite}",
            # Chainer's conftest only turns ChainerX marks into skips and checks the
            # CUDA device: those tests are deselected here instead.
            "--noconftest", "-m", DESELECT, "-q", "-p", "no:cacheprovider", "-p", "no:agnograd",
            "-p", "agnograd.conformance.chainer_tests", f"--chainer-testing={testing}",
            "--json-report", f"--json-report-file={report}",
            "--json-report-omit", "keywords", "streams", "log", "warnings", "traceback",
            *pytest_args,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            command, cwd=suite, env=env, check=False, capture_output=True, text=True
        )
        # 0: all passed, 1: some failed; anything else means the run itself went wrong.
        if done.returncode not in (0, 1) or not report.exists():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
            raise RuntimeError(
                f"Chainer's tests did not run (pytest exit code {done.returncode}); is {suite} "
                f"the tests/chainer_tests folder of a chainer/chainer checkout, with its "
                f"chainer/testing at {testing}? pytest said:\n{tail}"
            )
        result: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agnograd.conformance.chainer_tests",
        description=(__doc__ or "").split("\n")[0],
    )
    parser.add_argument(
        "--suite", type=Path, required=True, help="tests/chainer_tests of a Chainer checkout"
    )
    parser.add_argument(
        "--testing",
        type=Path,
        default=None,
        help="Chainer's chainer/testing package (default: SUITE/../../chainer/testing)",
    )
    parser.add_argument(
        "--files", nargs="+", default=list(DEFAULT_FILES), help="test files, relative to SUITE"
    )
    parser.add_argument("--xfails", type=Path, default=XFAILS, help="expected failures")
    parser.add_argument("--no-xfails", action="store_true", help="expect no failure")
    parser.add_argument(
        "--show-xfailed", action="store_true", help="also list expected failures by cause"
    )
    parser.add_argument("--json", type=Path, default=None, help="write each test's outcome here")
    args, extra = parser.parse_known_args(argv)
    suite = args.suite.resolve()
    testing = (args.testing or suite.parent.parent / "chainer" / "testing").resolve()
    xfails = {} if args.no_xfails else load_xfails(args.xfails)
    report = run_suite(suite, testing, args.files, extra)
    outcomes = outcomes_of(report, xfails)
    print(format_summary(outcomes, show_xfailed=args.show_xfailed))
    deselected = report.get("summary", {}).get("deselected", 0)
    print(f"\n{deselected} GPU, ChainerX and iDeep tests deselected.")
    used = {match_xfail(o.test, xfails) for o in outcomes}
    unused = [entry for entry in xfails if (entry, xfails[entry]) not in used]
    if unused:
        print(f"{len(unused)} xfail entries matched no test that ran: {', '.join(unused)}")
    if args.json is not None:
        args.json.write_text(
            json.dumps([o.__dict__ for o in outcomes], indent=1) + "\n", encoding="utf-8"
        )
    return int(any(o.status in ("failed", "xpassed") for o in outcomes))


# --- pytest plugin: loaded in the pytest process of the run (-p) ---------------------------


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--chainer-testing",
        default=None,
        help="Chainer's chainer/testing folder; install agnograd's chainer shim",
    )


def pytest_configure(config: Any) -> None:
    testing = config.getoption("--chainer-testing")
    if testing is None:
        return
    import numpy
    from agnograd.conformance import chainer_shim

    chainer_shim.install(testing)
    # Chainer's tests (2022) call numpy.product, which NumPy 2.0 removed; without it
    # 176 tests of FunctionNode and backprop would measure NumPy's API change, not
    # agnograd. Restored as numpy.prod, in this test process only.
    if not hasattr(numpy, "product"):
        setattr(numpy, "product", numpy.prod)  # noqa: B010 - NumPy 2's stubs lack it


if __name__ == "__main__":
    sys.exit(main())
