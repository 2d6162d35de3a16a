"""The command line: ``python -m agnograd demo`` and ``--help``."""

from __future__ import annotations

import doctest
import importlib.metadata
import subprocess
import sys

import pytest

import agnograd
import agnograd.__main__ as cli


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agnograd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow  # imports every installed library: torch and jax take seconds each
def test_demo_runs_on_every_installed_backend() -> None:
    result = run("demo")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[3:] if line.strip()}
    for backend in cli.BACKENDS:
        assert backend.name in rows, result.stdout
        if cli._installed(backend.package) and backend.name != "cupy":
            assert " ok (max error " in rows[backend.name], result.stdout
    assert "FAIL" not in result.stdout
    assert "checks passed" in result.stdout


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


def test_missing_backend_is_not_imported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    imported: list[str] = []
    real_import = cli.importlib.import_module

    def recording_import(name: str) -> object:
        imported.append(name)
        return real_import(name)

    monkeypatch.setattr(cli, "_installed", lambda package: package != "array_api_strict")
    monkeypatch.setattr(cli.importlib, "import_module", recording_import)
    assert cli.main(["demo", "--backend", "numpy", "--backend", "array_api_strict"]) == 0
    out = capsys.readouterr().out
    assert "array_api_strict  -" in out
    assert "not installed" in out
    assert imported == ["array_api_compat.numpy"]


def test_installed_never_imports() -> None:
    code = (
        "import sys, agnograd.__main__ as m; "
        "assert m._installed('numpy') and not m._installed('surely_not_a_package'); "
        "m._installed('jax'); m._installed('torch'); "
        "print(sorted({'jax', 'torch', 'dask', 'cupy'} & set(sys.modules)))"
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
