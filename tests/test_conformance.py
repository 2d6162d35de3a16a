"""The conformance suite: it runs on every installed backend with no unexpected result,
catches a wrong backward, and its xfail lists, reports and command line work."""

from __future__ import annotations

import doctest
import importlib
import importlib.metadata
import json
import subprocess
import sys

import pytest
from agnograd.conformance import (
    CHECKS,
    XFAIL_DIR,
    Report,
    Result,
    _checks,
    _distributions,
    apply_xfail,
    load_xfails,
    parse_xfails,
    run_conformance,
    summary_table,
)
from agnograd.conformance import __main__ as cli

import agnograd
from agnograd import Adapter
from agnograd.backends._backend import adapter_names, adapters
from agnograd.functions._table import DIFFERENTIABLE
from agnograd.testing import backend_namespace

# Hypothesis examples per check. JAX compiles every operation once per new shape
# and Dask builds a graph per operation: one example keeps them to seconds.
EXAMPLES = {"numpy": 3, "array_api_strict": 3, "torch": 3, "jax": 1, "dask": 1}
# JAX compiles each linear algebra and FFT kernel for seconds, and Dask lacks most
# of them: they run the sample without those chapters (the command line runs all).
LIGHT = {"jax", "dask"}

# One or two functions of each chapter of the standard, and the kinds of rules that
# differ most (broadcasting, reductions, indexing scatter, matrix solves, complex
# transforms). The whole table runs in test_whole_table_on_numpy and on the command
# line (python -m agnograd.conformance --backend all).
SAMPLE = [
    "abs", "add", "divide", "exp", "maximum", "real",
    "sum", "max", "cumulative_sum",
    "broadcast_to", "concat", "reshape", "flip",
    "where", "take", "sort",
    "matmul", "linalg.solve", "linalg.eigh", "linalg.det",
    "fft.rfft", "fft.fftn",
]  # fmt: skip


def _check(report: Report) -> None:
    unexpected = "\n".join(
        f"{r.function}::{r.check} {r.status}: {r.reason}" for r in report.unexpected
    )
    assert report.ok, f"unexpected results on {report.label}:\n{unexpected}"
    cross = [r for r in report.results if r.check == "cross_device"]
    assert all(r.status in ("pass", "skip", "xfail") for r in cross)


def test_suite_has_no_unexpected_result(agnograd_backend):
    name = agnograd_backend.name
    functions = [f for f in SAMPLE if f in DIFFERENTIABLE]
    if name in LIGHT:
        functions = [f for f in functions if not f.startswith(("linalg.", "fft."))]
    report = run_conformance(
        name,
        device=agnograd_backend.device,
        functions=functions,
        max_examples=EXAMPLES.get(name, 1),
    )
    _check(report)
    assert {(r.function, r.check) for r in report.results} == {
        (f, c) for f in functions for c in CHECKS
    }


@pytest.mark.slow
def test_whole_table_on_numpy():
    report = run_conformance("numpy", max_examples=1)
    _check(report)
    cells = {(r.function, r.check) for r in report.results}
    assert cells == {(f, c) for f in DIFFERENTIABLE for c in CHECKS}
    assert not report.stale_xfails, f"xfail entries for no function: {report.stale_xfails}"


def test_suite_on_a_device_without_float64():
    report = run_conformance(
        "array_api_strict", device="no_float64", max_examples=1, checks=["backward"]
    )
    assert report.ok, [r for r in report.unexpected]
    assert report.dtype == "float32"
    assert report.label == "array_api_strict:no_float64"


# -- the suite catches mistakes ---------------------------------------------------


class WrongExp(agnograd.FunctionNode):
    def forward(self, inputs):
        self.retain_outputs((0,))
        return (self.xp.exp(inputs[0]),)

    def backward(self, indexes, grad_outputs):
        (y,) = self.get_retained_outputs()
        return (grad_outputs[0] * y * 1.5,)


def test_a_wrong_backward_fails_both_orders():
    xp = backend_namespace("numpy")
    target = _checks.Target("numpy", xp, "cpu", xp.float64, max_examples=3)
    wrong = lambda x: WrongExp().apply((x,))[0]  # noqa: E731
    status, reason = _checks.run_check(target, "exp", wrong, "backward")
    assert status == "fail"
    assert "disagrees with central differences" in reason
    # agnograd's note names the function and its shrunk input (hypothesis's own
    # wording of the example is not agnograd's to test).
    assert "exp(float64" in reason
    assert _checks.run_check(target, "exp", agnograd.functions.exp, "double_backward")[0] == "pass"


def test_function_without_domain_fails():
    report = run_conformance("numpy", functions=["relu"], max_examples=1)
    statuses = {r.check: (r.status, r.reason) for r in report.results}
    assert statuses["backward"] == ("fail", "no domain registered")
    assert statuses["cross_device"] == ("fail", "no domain registered")
    assert not report.ok


# -- xfail lists -------------------------------------------------------------------


def test_parse_xfails():
    text = "exp::backward  # reason one\n\n# comment\nsum::*  # reason two\n"
    assert parse_xfails(text) == {
        ("exp", "backward"): "reason one",
        ("sum", "*"): "reason two",
    }
    with pytest.raises(ValueError, match=r"<xfails>:1: the entry 'exp::dlpack' needs a reason"):
        parse_xfails("exp::dlpack\n")
    with pytest.raises(ValueError, match="unknown check 'grad'"):
        parse_xfails("exp::grad  # why\n")
    with pytest.raises(ValueError, match="expected 'function::check  # reason'"):
        parse_xfails("exp  # why\n")


def test_apply_xfail():
    xfails = {("exp", "dlpack"): "known", ("*", "devices"): "no devices"}
    failed = Result("exp", "dlpack", "fail", "boom")
    assert apply_xfail(failed, xfails) == Result("exp", "dlpack", "xfail", "known", "boom")
    passed = apply_xfail(Result("exp", "dlpack", "pass"), xfails)  # exact entry: strict
    assert passed.status == "xpass"
    assert "remove the entry" in passed.reason
    covered = Result("log", "devices", "pass")  # a * entry lets the cells it covers pass
    assert apply_xfail(covered, xfails) is covered
    assert apply_xfail(Result("log", "devices", "fail", "x"), xfails).status == "xfail"
    skipped = Result("log", "devices", "skip", "n/a")
    assert apply_xfail(skipped, xfails) is skipped
    untouched = Result("log", "backward", "fail", "boom")
    assert apply_xfail(untouched, xfails) is untouched


@pytest.mark.parametrize("backend", sorted(p.stem for p in XFAIL_DIR.glob("*.txt")))
def test_shipped_xfail_lists_parse(backend):
    assert backend in adapter_names()  # each list belongs to a backend of the registry
    entries = load_xfails(backend)
    assert all(f == "*" or f in DIFFERENTIABLE for f, _ in entries), entries


# -- report and command line --------------------------------------------------------


def test_report_formats(tmp_path):
    report = Report(
        "numpy",
        "",
        "float64",
        3,
        [
            Result("exp", "backward", "pass"),
            Result("exp", "dlpack", "xfail", "0-d | scalars", "AttributeError"),
            Result("log", "backward", "fail", "AssertionError: wrong\nFalsifying example: x"),
        ],
    )
    assert report.counts() == {"pass": 1, "fail": 1, "xfail": 1, "xpass": 0, "skip": 0}
    assert not report.ok
    md = report.to_markdown()
    assert "| exp | pass | xfail [1] |" in md
    assert "| log | **FAIL** [2] |  |" in md
    assert r"1. 0-d \| scalars" in md
    assert "   Falsifying example: x" in md
    data = json.loads(report.to_json())
    assert data["summary"]["fail"] == 1
    assert data["results"][1]["detail"] == "AttributeError"
    md_path, json_path = report.write(tmp_path)
    assert md_path.name == "conformance-numpy.md"
    assert json_path.exists()
    assert "| numpy | float64 | 1 | 1 | 1 | 0 | 0 |" in summary_table([report])


def test_command_line(tmp_path, capsys):
    args = ["--backend", "numpy", "--function", "exp", "--max-examples", "2", "--out"]
    assert cli.main([*args, str(tmp_path)]) == 0
    data = json.loads((tmp_path / "conformance-numpy.json").read_text())
    assert {r["check"] for r in data["results"]} == set(CHECKS)
    assert (tmp_path / "conformance-numpy.md").exists()

    xfails = tmp_path / "xfails.txt"
    xfails.write_text("exp::backward  # pretend it fails\n")
    assert cli.main([*args, str(tmp_path), "--xfails", str(xfails), "--check", "backward"]) == 1
    assert "XPASS exp::backward" in capsys.readouterr().out


def test_the_report_names_the_distribution_of_the_backend():
    report = run_conformance("numpy", functions=["exp"], checks=["backward"], max_examples=1)
    assert report.environment["numpy"] == importlib.metadata.version("numpy")
    assert _distributions("no_such_backend") == ["no_such_backend"]


def test_all_is_every_usable_backend_of_the_registry(scratch_registry, capsys):
    scratch_registry(Adapter(name="no_gpu_lib", modules=("numpy",), unusable=lambda: "no GPU"))
    scratch_registry(Adapter(name="missing_lib", modules=("surely_not_an_installed_lib",)))
    targets = cli._targets(["all"])
    assert [name for name, _ in targets] == [
        a.name for a in adapters() if a.is_installed() and a.why_unusable() is None
    ]
    assert ("numpy", None) in targets
    assert "no_gpu_lib" not in dict(targets)
    assert "missing_lib" not in dict(targets)
    assert "skipping no_gpu_lib: no GPU" in capsys.readouterr().out


def test_python_dash_m(tmp_path):
    command = [sys.executable, "-m", "agnograd.conformance", "--backend", "numpy"]
    command += ["--function", "sum", "--check", "backward", "--max-examples", "1"]
    result = subprocess.run(
        [*command, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| numpy | float64 | 1 | 0 | 0 | 0 | 0 |" in result.stdout
    assert (tmp_path / "conformance-numpy.md").exists()


@pytest.mark.parametrize(
    "name",
    [
        "agnograd.conformance",
        "agnograd.conformance._report",
        "agnograd.conformance.array_api_tests",
    ],
)
def test_conformance_doctests(name):
    # conformance/ is outside pytest's testpaths, so its examples run here.
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_array_api_tests_runner_compares_raw_and_agnograd(tmp_path, capsys, monkeypatch):
    # A stand-in for data-apis/array-api-tests: one test passes only through agnograd,
    # one passes on both, one reads the version both runs must share (the backend's).
    pytest.importorskip("pytest_jsonreport")
    # The runner starts a dozen pytest processes here. Autoloading every installed
    # plug-in (hypothesis's imports hypothesis: most of a second each) is not what this
    # test is about: they load only the one whose report the runner reads, as named.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTEST_PLUGINS", "pytest_jsonreport.plugin")
    from agnograd.conformance import array_api_tests

    (tmp_path / "array_api_tests").mkdir()
    (tmp_path / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--max-examples')\n"
        "    parser.addoption('--derandomize', action='store_true')\n"
        "    parser.addoption('--disable-deadline', action='store_true')\n"
    )
    version = array_api_tests.version_of("numpy")
    (tmp_path / "array_api_tests" / "test_fake.py").write_text(
        "import os\n"
        "MODULE = os.environ['ARRAY_API_TESTS_MODULE']\n"
        "def test_both():\n"
        f"    assert os.environ['ARRAY_API_TESTS_VERSION'] == {version!r}\n"
        "def test_only_agnograd():\n    assert 'agnograd.namespace(numpy)' in MODULE\n"
    )
    run = ["--suite", str(tmp_path), "--backend", "numpy", "--recheck", "1"]
    assert array_api_tests.main(run) == 0
    out = capsys.readouterr().out
    assert "raw       numpy: 1 failed, 1 passed" in out
    assert "agnograd  numpy: 2 passed" in out
    assert "1 tests differ" in out
    assert "failed   -> passed   array_api_tests/test_fake.py::test_only_agnograd" in out
    # A test the backend passes and agnograd fails makes the exit status 1.
    (tmp_path / "array_api_tests" / "test_fake.py").write_text(
        "import os\ndef test_raw_only():\n"
        "    assert 'agnograd' not in os.environ['ARRAY_API_TESTS_MODULE']\n"
    )
    assert array_api_tests.main(run) == 1
    assert "passed   -> failed   array_api_tests/test_fake.py::test_raw_only" in (
        capsys.readouterr().out
    )
    # A test whose outcome changes from run to run is marked flaky and not held against
    # agnograd: here it fails on the second run of every three, counted in a file.
    (tmp_path / "array_api_tests" / "test_fake.py").write_text(
        "from pathlib import Path\n"
        "def test_flaky():\n"
        "    count = Path(__file__).with_name('count')\n"
        "    n = int(count.read_text()) if count.exists() else 0\n"
        "    count.write_text(str(n + 1))\n"
        "    assert n % 3 != 1\n"
    )
    assert array_api_tests.main(run) == 0
    assert "test_flaky  (flaky: raw passed; agnograd failed/passed)" in (capsys.readouterr().out)


def test_array_api_tests_runner_says_when_the_suite_is_missing(tmp_path):
    from agnograd.conformance import array_api_tests

    with pytest.raises(RuntimeError, match=r"did not run on 'numpy' \(pytest exit code 4\)"):
        array_api_tests.run_suite(tmp_path, "numpy", "2024.12", [])
