"""The command line: ``python -m agnograd demo`` and ``--help``."""

from __future__ import annotations

import doctest
import importlib.metadata
import subprocess
import sys
from collections.abc import Callable

import pytest

import agnograd
import agnograd.__main__ as cli
from agnograd import Adapter
from agnograd.backends._backend import adapters


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agnograd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_runs_on_every_installed_backend(capsys: pytest.CaptureFixture[str]) -> None:
    # In this process, which has imported the libraries already (a new interpreter
    # spends seconds on torch and jax); `python -m agnograd` itself is run below and
    # by the README's first command, which .ci/run runs.
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[3:] if line.strip()}
    for adapter in adapters():
        assert adapter.name in rows, out
        if adapter.is_installed() and "skipped: " not in rows[adapter.name]:
            assert " ok (max error " in rows[adapter.name], out
    assert "FAIL" not in out
    assert "checks passed" in out


def test_help() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "usage: agnograd" in result.stdout
    assert "demo" in result.stdout


def test_no_command_is_a_usage_error() -> None:
    result = run()
    assert result.returncode == 2
    assert "required" in result.stderr


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"agnograd {agnograd.__version__}"


def test_console_script_points_to_main() -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="agnograd")
    assert script.value == "agnograd.__main__:main"
    assert script.load() is cli.main


def test_one_backend_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--backend", "numpy", "--backend", "array_api_strict"]) == 0
    out = capsys.readouterr().out
    assert "numpy " in out
    assert "array_api_strict " in out
    assert "torch" not in out


def test_wrong_gradient_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    right = cli.reference_gradients

    def off_by_one(xp: object, *arrays: object) -> tuple[object, ...]:
        gx, gw, gb = right(xp, *arrays)
        return gx + 1, gw, gb

    monkeypatch.setattr(cli, "reference_gradients", off_by_one)
    assert cli.main(["demo", "--backend", "numpy"]) == 1
    out = capsys.readouterr().out
    assert "FAIL (max gradient error" in out
    assert "1 of 1 checks FAILED" in out


def test_error_in_a_backend_is_a_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object) -> object:
        raise RuntimeError("no such op")

    monkeypatch.setattr(cli, "loss", broken)
    assert cli.main(["demo", "--backend", "numpy"]) == 1
    assert "FAIL (RuntimeError: no such op)" in capsys.readouterr().out


def test_the_demo_lists_the_registry_in_its_order(
    scratch_registry: Callable[[Adapter], None], capsys: pytest.CaptureFixture[str]
) -> None:
    # An adapter registered at run time is a backend like the built-in ones: in the
    # --backend choices, in --help, and in the table at its place in the order.
    scratch_registry(Adapter(name="early_lib", modules=("numpy",), order=15))
    assert cli.main(["demo", "--backend", "array_api_strict", "--backend", "early_lib"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[3:-2]]
    assert rows == ["early_lib", "array_api_strict"]
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    assert "early_lib" in capsys.readouterr().out


def test_missing_backend_is_not_imported(
    scratch_registry: Callable[[Adapter], None], capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[str] = []

    def namespace() -> object:
        asked.append("namespace")
        raise AssertionError("the namespace of a missing library was asked for")

    ghost = Adapter(name="ghost", modules=("surely_not_an_installed_lib",), namespace=namespace)
    scratch_registry(ghost)
    assert cli.main(["demo", "--backend", "numpy", "--backend", "ghost"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[3:-2]}
    assert rows["ghost"].split() == ["ghost", "-", "-", "-", "not", "installed"]
    assert asked == []


def test_unusable_backend_is_skipped_with_its_reason(
    scratch_registry: Callable[[Adapter], None], capsys: pytest.CaptureFixture[str]
) -> None:
    # As CuPy is on a machine without a GPU: installed, but its adapter says no.
    scratch_registry(Adapter(name="no_gpu_lib", modules=("numpy",), unusable=lambda: "no GPU"))
    assert cli.main(["demo", "--backend", "no_gpu_lib"]) == 0
    assert "skipped: no GPU" in capsys.readouterr().out


def test_listing_the_backends_never_imports() -> None:
    code = (
        "import sys, agnograd.__main__ as m; "
        "m._parser(); "
        "assert [a.is_installed() for a in m.adapters()][0]; "
        "print(sorted({'jax', 'torch', 'dask', 'cupy', 'array_api_strict'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


def test_docstring_examples() -> None:
    # pytest's --doctest-modules skips files named __main__.py, so run them here.
    failures, tried = doctest.testmod(cli, optionflags=doctest.ELLIPSIS)
    assert tried > 0
    assert failures == 0
