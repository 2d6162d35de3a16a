"""The linters and the type checker pass: ruff (lint and format) and mypy, as in CI.

Each runs as its own process from the repository root, with the settings of
pyproject.toml; a failure shows the tool's report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Everything ruff covers; mypy checks the package only.
LINTED = ("agnograd", "backends", "conformance", "tests", "benchmarks", "examples")


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def assert_clean(result: subprocess.CompletedProcess[str]) -> None:
    command = " ".join(result.args[2:])
    assert result.returncode == 0, (
        f"`{command}` exited with {result.returncode}:\n{result.stdout}{result.stderr}"
    )


def test_ruff_check() -> None:
    pytest.importorskip("ruff")
    assert_clean(run_tool("ruff", "check", *LINTED))


def test_ruff_format() -> None:
    pytest.importorskip("ruff")
    assert_clean(run_tool("ruff", "format", "--check", *LINTED))


@pytest.mark.slow  # about half a minute without mypy's cache
def test_mypy() -> None:
    pytest.importorskip("mypy")
    assert_clean(run_tool("mypy", "agnograd"))


def test_package_ships_py_typed() -> None:
    """PEP 561: ``agnograd/py.typed`` exists and is package data, so ``pip install``
    installs it and type checkers read agnograd's annotations."""
    import importlib.resources
    import tomllib

    assert importlib.resources.files("agnograd").joinpath("py.typed").is_file()
    with open(ROOT / "pyproject.toml", "rb") as file:
        package_data = tomllib.load(file)["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data.get("agnograd", [])
