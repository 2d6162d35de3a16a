"""README and documentation: the code they show runs, and the docs build cleanly.

The ``>>>`` examples of docs/*.md run as doctests through pytest's
``--doctest-glob=*.md``; this module covers what doctest cannot: README's plain
Python blocks, the Sphinx build with warnings as errors, and that the API
reference and the CI script stay in step with the code and the README.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agnograd

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def readme_python_blocks() -> list[str]:
    return fenced_blocks(README.read_text(), "python")


def test_readme_has_exactly_the_two_setup_commands() -> None:
    (commands,) = fenced_blocks(README.read_text(), "console")
    assert commands.splitlines() == [
        "pip install -e . && python -m agnograd demo",
        'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -n auto',
    ]


@pytest.mark.parametrize("index", range(len(readme_python_blocks())))
def test_readme_python_block(index: int) -> None:
    """Run the block; what it prints must match its ``# -> ...`` comments, in order."""
    code = readme_python_blocks()[index]
    expected = [line.split("# -> ", 1)[1].rstrip() for line in code.splitlines() if "# -> " in line]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md python block {index}", "exec"), {})
    assert [line.rstrip() for line in out.getvalue().splitlines()] == expected


def test_readme_links_exist() -> None:
    for target in re.findall(r"\]\(([^)#]+)\)", README.read_text()):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to missing {target}"


def test_api_reference_covers_the_public_names() -> None:
    api = (DOCS / "api.rst").read_text()
    documented = set(re.findall(r"^\.\. (?:auto\w+|data|function|class):: ([\w.]+)", api, re.M))
    documented = {name.removeprefix("agnograd.") for name in documented}
    missing = [
        name
        for name in agnograd.__all__
        if name not in documented and not hasattr(getattr(agnograd, name), "__path__")
    ]
    assert not missing, f"add these public names of agnograd to docs/api.rst: {missing}"
    assert ".. automodule:: agnograd.functions" in api


def test_what_jit_raises_and_warns_is_a_public_name() -> None:
    # Users catch and filter them: importable from agnograd, not from private modules.
    import numpy as np

    assert {"ConcretizationTypeError", "JitWarning"} <= set(agnograd.__all__)
    with pytest.raises(agnograd.ConcretizationTypeError, match=r"^jit\(<lambda>\): float"):
        agnograd.jit(lambda x: float(x[0]))(np.ones(2))
    double = agnograd.jit(lambda x: x * 2.0, max_traces=1)
    double(np.ones(1))
    with pytest.warns(agnograd.JitWarning):
        double(np.ones(2))


def test_ci_script_runs_the_readme_commands_in_fresh_venvs() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in script
    # The commands come from README.md, not from the script: it installs nothing itself.
    assert "README.md" in script
    assert "pip install" not in script
    assert "-m venv" in script
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```console\n", 1)[1].split("```", 1)[0]
    demo, tests = block.splitlines()
    assert demo == "pip install -e . && python -m agnograd demo"
    # PyTorch first and pinned: later installs then find it instead of a CUDA build.
    assert tests.index("pip install torch==2.13.0") < tests.index('pip install -e ".[test]"')
    # Parallel workers (pytest-xdist, in the test extra): one per core.
    assert tests.endswith("python -m pytest -n auto")


@pytest.mark.slow
def test_sphinx_build_has_no_warnings(tmp_path: Path) -> None:
    if importlib.util.find_spec("myst_parser") is None:
        pytest.fail(
            "myst-parser is not installed, but the docs are Markdown; it belongs in the "
            "'test' and 'docs' extras of pyproject.toml"
        )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(DOCS),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert (tmp_path / "html" / "api.html").exists()
