"""The runner of Chainer's own tests (``agnograd.conformance.chainer_tests``) and its
``chainer`` shim, without a checkout of Chainer: the xfail list, the causes of
failures, the report, the shim's names, and one run on a stand-in checkout."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from agnograd.conformance import chainer_shim
from agnograd.conformance.chainer_tests import (
    CPU_SUFFIX,
    XFAILS,
    Outcome,
    cause_of,
    counts_by_file,
    format_summary,
    group_by_cause,
    load_xfails,
    main,
    match_xfail,
    outcomes_of,
    parse_xfails,
)

import agnograd


@pytest.fixture
def chainer():
    """The shim, installed for one test and removed after it."""
    module = chainer_shim.install()
    try:
        yield module
    finally:
        chainer_shim.uninstall()


# --- the xfail list -------------------------------------------------------------------


def test_parse_xfails_reads_patterns_and_reasons():
    text = textwrap.dedent("""\
        # a comment line

        test_a.py::TestA_*::test_x  # missing: F.foo
        test_b.py::TestB::test_y   #   bug: the reason, # with a hash
        """)
    assert parse_xfails(text) == {
        "test_a.py::TestA_*::test_x": "missing: F.foo",
        "test_b.py::TestB::test_y": "bug: the reason, # with a hash",
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("test_a.py::T::test_x", "needs a reason"),
        ("test_a.py::T::test_x  #   ", "needs a reason"),
        ("TestA::test_x  # no file", "expected 'file.py::Class::test"),
    ],
)
def test_parse_xfails_refuses_entries_without_id_or_reason(line, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_xfails(f"# header\n{line}\n", "list.txt")
    assert "list.txt:2" in str(info.value)


def test_match_xfail_prefers_the_exact_id_and_takes_brackets_literally():
    xfails = {
        "t.py::TestA_*": "pattern",
        "t.py::TestA_param_0_{s=[1]}::test_x": "exact",
        "t.py::TestB_*slices=[(1, 2)]*": "brackets",
    }
    assert match_xfail("t.py::TestA_param_0_{s=[1]}::test_x", xfails) == (
        "t.py::TestA_param_0_{s=[1]}::test_x",
        "exact",
    )
    assert match_xfail("t.py::TestA_param_1::test_x", xfails) == ("t.py::TestA_*", "pattern")
    # ``[...]`` is not a character class: only ``*`` is a wildcard.
    assert match_xfail("t.py::TestB_{slices=[(1, 2)]}::t", xfails)[1] == "brackets"
    assert match_xfail("t.py::TestB_{slices=1}::t", xfails) is None
    # A test id may hold newlines (the repr of an array parameter).
    assert match_xfail("t.py::TestA_{x=array([[1],\n [2]])}::t", xfails)[1] == "pattern"


def test_the_shipped_xfail_list_gives_every_entry_a_classified_reason():
    entries = load_xfails()
    assert XFAILS.name == "chainer_xfails.txt"
    assert entries
    for pattern, reason in entries.items():
        assert "::" in pattern
        assert reason.split(":")[0] in {"missing", "bug", "deliberate"}, (pattern, reason)


# --- causes, outcomes and the report -----------------------------------------------------


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        (
            "AttributeError: module 'chainer' has no attribute 'Parameter'",
            "AttributeError: module 'chainer' has no attribute 'Parameter'",
        ),
        # numbers become N, digits inside names stay, addresses are hidden
        (
            "ValueError: shapes (2, 3) and (4,) differ for float32 at 0x7f3a2b",
            "ValueError: shapes (N, N) and (N,) differ for float32 at 0x…",
        ),
        # the first line of a message that starts on the next line
        (
            "AssertionError: \nNot equal to tolerance rtol=1e-07, atol=0\nMismatched",
            "AssertionError: Not equal to tolerance rtol=N, atol=N",
        ),
        # Chainer's test kit nests the real error under "(caused by)"
        (
            "chainer.testing.function_link.FunctionTestError: Parameterized test failed.\n\n"
            "(caused by)\nFunctionTestError: backward is not implemented correctly\n\n"
            "(caused by)\nTypeError: bad output 3\nActual: float16",
            "TypeError: bad output N",
        ),
        # a bare assert reports its expression; array reprs' padding is dropped
        ("assert array([ 1. , 10. ]) is None\n +  where", "assert array([N, N]) is None"),
        ("", "(no message)"),
    ],
)
def test_cause_of_normalises_the_first_line(message, cause):
    assert cause_of(message) == cause


def _report() -> dict:
    """A pytest-json-report report: one file failed to import, four tests ran."""

    def failing(message: str, stage: str = "call") -> dict:
        return {stage: {"outcome": "failed", "crash": {"message": message}}}

    return {
        "collectors": [
            {"nodeid": "", "outcome": "passed"},
            {
                "nodeid": "broken.py",
                "outcome": "failed",
                "longrepr": "broken.py:3: in <module>\nE   ImportError: no module x",
            },
        ],
        "tests": [
            {"nodeid": "a.py::T::test_pass", "outcome": "passed"},
            {"nodeid": "a.py::T::test_stale", "outcome": "passed"},
            {"nodeid": "a.py::T::test_known", "outcome": "failed", **failing("TypeError: 1")},
            {
                "nodeid": "b.py::U::test_new",
                "outcome": "error",
                **failing("KeyError: 'x'", stage="setup"),
            },
            {"nodeid": "b.py::U::test_skip", "outcome": "skipped"},
        ],
    }


def test_outcomes_apply_the_xfail_list():
    xfails = {"a.py::T::test_known": "bug: known", "a.py::T::test_stale": "missing: fixed now"}
    found = {o.test: o for o in outcomes_of(_report(), xfails)}
    assert found["broken.py"] == Outcome("broken.py", "failed", "ImportError: no module x")
    assert found["a.py::T::test_pass"].status == "passed"
    assert found["a.py::T::test_known"] == Outcome(
        "a.py::T::test_known", "xfailed", "TypeError: N", "bug: known"
    )
    assert found["a.py::T::test_stale"].status == "xpassed"  # an exact entry is strict
    assert found["b.py::U::test_new"] == Outcome("b.py::U::test_new", "failed", "KeyError: 'x'")
    assert found["b.py::U::test_skip"].status == "skipped"
    # a pattern covers a class of tests, of which some may pass
    assert {o.status for o in outcomes_of(_report(), {"a.py::*": "bug: all"})} >= {"passed"}


def test_failures_are_grouped_by_cause_most_tests_first():
    found = [
        Outcome("a.py::t1", "failed", "E1"),
        Outcome("b.py::t2", "failed", "E2"),
        Outcome("a.py::t3", "failed", "E2"),
        Outcome("a.py::t4", "xfailed", "E1", "bug: why"),
        Outcome("a.py::t5", "passed"),
    ]
    groups = group_by_cause(found)
    assert [(cause, [o.test for o in tests]) for cause, tests in groups] == [
        ("E2", ["b.py::t2", "a.py::t3"]),
        ("E1", ["a.py::t1"]),
    ]
    assert [cause for cause, _ in group_by_cause(found, ("xfailed",))] == ["E1"]
    assert counts_by_file(found)["a.py"] == {
        "collected": 4,
        "failed": 2,
        "xfailed": 1,
        "passed": 1,
    }


def test_summary_counts_per_file_and_lists_every_failure_on_one_line():
    test = f"a.py::TestA{CPU_SUFFIX}_param_0_{{x=array([1,\n 2])}}::test_forward"
    found = [
        Outcome(test, "failed", "TypeError: bad"),
        Outcome("a.py::T::test_b", "xfailed", "E", "bug: why"),
        Outcome("b.py::T::test_c", "passed"),
    ]
    text = format_summary(found, show_xfailed=True)
    lines = text.splitlines()
    assert lines[0].split() == [
        "file", "collected", "passed", "failed", "xfailed", "xpassed", "skipped",
    ]  # fmt: skip
    assert lines[1].split() == ["a.py", "2", "0", "1", "1", "0", "0"]
    assert lines[3].split() == ["total", "3", "1", "1", "1", "0", "0"]
    assert "Unexpected failures: 1 tests, 1 causes" in text
    shown = "a.py::TestA_<numpy>_param_0_{x=array([1,\\n 2])}::test_forward"
    assert shown in [line.strip() for line in lines]
    assert any("Expected failures: 1 tests" in line for line in lines)


def test_main_prints_the_report_and_fails_on_unexpected_failures(monkeypatch, tmp_path, capsys):
    from agnograd.conformance import chainer_tests

    seen = {}

    def run_suite(suite, testing, files, pytest_args):
        seen.update(suite=suite, testing=testing, files=files, args=pytest_args)
        return {**_report(), "summary": {"deselected": 7}}

    monkeypatch.setattr(chainer_tests, "run_suite", run_suite)
    xfails = tmp_path / "x.txt"
    xfails.write_text("a.py::T::test_known  # bug: known\n")
    suite = tmp_path / "tests" / "chainer_tests"
    status = main(["--suite", str(suite), "--xfails", str(xfails), "-k", "forward"])
    out = capsys.readouterr().out
    assert status == 1  # b.py and broken.py fail unexpectedly
    assert seen["testing"] == (tmp_path / "chainer" / "testing").resolve()
    assert seen["args"] == ["-k", "forward"]
    assert "7 GPU, ChainerX and iDeep tests deselected" in out
    assert "KeyError: 'x'" in out
    (tmp_path / "all.txt").write_text("*  # bug: everything, a file that fails to import too\n")
    assert main(["--suite", str(suite), "--xfails", str(tmp_path / "all.txt")]) == 0


# --- the shim ---------------------------------------------------------------------------


def test_importing_agnograd_installs_no_chainer_module():
    code = (
        "import sys, agnograd, agnograd.conformance.chainer_tests, "
        "agnograd.conformance.chainer_shim; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('chainer', 'chainerx')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_the_shim_forwards_agnograd_names(chainer):
    import chainer as imported
    import chainer.functions as F
    from chainer import backend, gradient_check, variable
    from chainer.backends import cuda

    assert imported is chainer
    assert chainer.Variable is agnograd.Variable
    assert variable.VariableNode is agnograd.VariableNode
    assert chainer.FunctionNode is agnograd.FunctionNode
    assert (chainer.grad, chainer.backward) == (agnograd.grad, agnograd.backward)
    assert chainer.config is agnograd.config
    assert chainer.using_config is agnograd.using_config
    assert F.exp is agnograd.functions.exp
    assert (
        gradient_check.check_backward is importlib.import_module("agnograd.testing").check_backward
    )
    assert chainer.function_hooks.PrintHook is agnograd.PrintHook
    assert chainer.computational_graph.build_computational_graph is (
        agnograd.build_computational_graph
    )
    assert backend.CpuDevice() == agnograd.get_device("@numpy")
    assert cuda.available is False
    assert sys.modules["chainerx"].is_available() is False


def test_a_name_agnograd_lacks_fails_when_used_not_when_named(chainer):
    from chainer.utils import type_check

    class Mine(chainer.Link):  # a test module subclasses it at import time
        pass

    with pytest.raises(NotImplementedError, match=r"chainer\.Link: agnograd has no"):
        Mine()
    with pytest.raises(NotImplementedError, match=r"chainer\.functions\.convolution_2d"):
        chainer.functions.convolution_2d(1.0)
    # an exception type, so that pytest.raises(InvalidType) lets agnograd's error through
    assert issubclass(type_check.InvalidType, Exception)
    with pytest.raises(ValueError, match="agnograd's"), pytest.raises(type_check.InvalidType):
        raise ValueError("agnograd's")
    with pytest.raises(AttributeError):
        chainer.__wrapped__  # noqa: B018 - dunders stay absent (inspect, mock ask for them)


def test_install_loads_chainer_testing_from_the_checkout(tmp_path):
    testing = tmp_path / "chainer" / "testing"
    testing.mkdir(parents=True)
    (testing / "__init__.py").write_text("from chainer.testing.helper import device\n")
    (testing / "helper.py").write_text(
        "from chainer import backend\ndevice = backend.CpuDevice()\n"
    )
    try:
        chainer_shim.install(testing)
        import chainer.testing

        assert chainer.testing.device.supported_array_types
        assert Path(chainer.testing.__file__) == testing / "__init__.py"
    finally:
        chainer_shim.uninstall()
    assert "chainer.testing.helper" not in sys.modules
    with pytest.raises(FileNotFoundError, match="no Chainer test helpers"):
        chainer_shim.install(tmp_path / "nowhere")
    chainer_shim.uninstall()


def test_install_refuses_a_real_chainer(monkeypatch):
    monkeypatch.setitem(sys.modules, "chainer", types.ModuleType("chainer"))
    with pytest.raises(RuntimeError, match="real chainer module"):
        chainer_shim.install()
    chainer_shim.uninstall()  # leaves a module it did not install alone
    assert "chainer" in sys.modules


@pytest.mark.parametrize(
    "name", ["agnograd.conformance.chainer_tests", "agnograd.conformance.chainer_shim"]
)
def test_runner_doctests(name):
    # conformance/ is outside pytest's testpaths, so its examples run here.
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0


# --- one run on a stand-in checkout ----------------------------------------------------


def test_a_run_on_a_stand_in_checkout(tmp_path, capsys):
    """A checkout with Chainer's layout: the shim is installed in pytest's process,
    GPU tests are deselected, the xfail list applies."""
    pytest.importorskip("pytest_jsonreport")
    suite = tmp_path / "tests" / "chainer_tests"
    suite.mkdir(parents=True)
    testing = tmp_path / "chainer" / "testing"
    testing.mkdir(parents=True)
    (testing / "__init__.py").write_text("")
    (suite / "test_stand_in.py").write_text(
        textwrap.dedent("""\
            import numpy
            import pytest
            import chainer
            import chainer.functions as F
            import chainer.testing

            def test_exp():
                x = chainer.Variable(numpy.ones(2))
                F.sum(F.exp(x)).backward()
                numpy.testing.assert_allclose(x.grad, numpy.exp(1.0) * numpy.ones(2))

            def test_link():
                chainer.Link()

            @pytest.mark.gpu
            def test_on_gpu():
                raise AssertionError("deselected")
            """)
    )
    xfails = tmp_path / "xfails.txt"
    xfails.write_text("test_stand_in.py::test_link  # missing: chainer.Link\n")
    status = main(["--suite", str(suite), "--files", "test_stand_in.py", "--xfails", str(xfails)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[1].split() == ["test_stand_in.py", "2", "1", "0", "1", "0", "0"]
    assert "1 GPU, ChainerX and iDeep tests deselected" in out
