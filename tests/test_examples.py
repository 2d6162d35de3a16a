"""The scripts under examples/ run and do what they say."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python examples/NAME ARGS``, run in this process (a new interpreter would
    spend seconds importing torch and jax again): its exit status and output."""
    path = EXAMPLES / name
    out, err = io.StringIO(), io.StringIO()
    status: int | str | None = 0
    argv, sys.argv = sys.argv, [str(path), *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exit_:
        status = exit_.code
    finally:
        sys.argv = argv
    code = status if isinstance(status, int) else int(status is not None)
    return subprocess.CompletedProcess([str(path), *args], code, out.getvalue(), err.getvalue())


def run_example_in_a_new_interpreter(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python examples/NAME ARGS`` in a subprocess, for a script that sets what a
    library reads when it is first imported."""
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_training_lowers_the_loss(result: subprocess.CompletedProcess[str]) -> None:
    """The script ran and printed at least three losses, each lower than the last."""
    assert result.returncode == 0, result.stdout + result.stderr
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", result.stdout)]
    assert len(losses) >= 3
    assert losses == sorted(losses, reverse=True)


def test_every_example_is_tested() -> None:
    scripts = sorted(p.name for p in EXAMPLES.glob("*.py"))
    assert scripts == [
        "array_api_code.py",
        "draw_graph.py",
        "jax_custom_node.py",
        "mlp.py",
        "torch_module_in_agnograd.py",
        "torch_scipy_loss.py",
    ]


def test_array_api_code() -> None:
    result = run_example("array_api_code.py")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = dict(line.split(maxsplit=1) for line in result.stdout.splitlines())
    for library in ("numpy", "array_api_strict", "torch"):
        if importlib.util.find_spec(library) is None:
            assert lines[library] == "skipped: not installed"
        else:
            assert " ok (max error " in lines[library], result.stdout
            assert f"gradients are {library} arrays" in lines[library]
    # Every backend computed the same loss and gradient.
    assert len({line.split(" ok ")[0] for line in lines.values() if " ok " in line}) == 1


def test_mlp_loss_decreases() -> None:
    result = run_example("mlp.py", "--steps", "50")
    assert_training_lowers_the_loss(result)
    assert "loss decreased from" in result.stdout


@pytest.mark.parametrize(
    "name",
    [
        "array_api_code.py",
        "draw_graph.py",
        "jax_custom_node.py",
        "mlp.py",
        "torch_module_in_agnograd.py",
        "torch_scipy_loss.py",
    ],
)
def test_examples_have_a_usage_docstring(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    assert text.startswith('"""')
    assert f"python examples/{name}" in text


def test_draw_graph(tmp_path: Path) -> None:
    # Prints the DOT text always; draws the picture only where Graphviz is installed.
    out = tmp_path / "graph.svg"
    result = run_example("draw_graph.py", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("digraph computational_graph {")
    assert 'label="loss\\nfloat32\\n@numpy"' in result.stdout
    assert 'label="gz\\n(2), float64\\n@numpy"' in result.stdout
    drawn = importlib.util.find_spec("graphviz") is not None and shutil.which("dot") is not None
    assert out.exists() == drawn, result.stderr
    if not drawn:
        assert "not drawn:" in result.stderr


def test_torch_scipy_loss_trains_a_torch_model() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("scipy")
    # It sets SCIPY_ARRAY_API=1 before SciPy is imported, which this process has done.
    result = run_example_in_a_new_interpreter("torch_scipy_loss.py", "--steps", "50")
    assert_training_lowers_the_loss(result)
    assert "loss decreased from" in result.stdout


def test_torch_module_in_agnograd_trains_both_kinds_of_parameter() -> None:
    pytest.importorskip("torch")
    result = run_example("torch_module_in_agnograd.py", "--steps", "50")
    assert_training_lowers_the_loss(result)
    assert "gradients reached the agnograd leaves" in result.stdout
    assert "loss decreased from" in result.stdout


def test_jax_custom_node() -> None:
    pytest.importorskip("jax")
    result = run_example("jax_custom_node.py")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [
        "jit(grad) vs pure JAX",
        "jit(grad) vs central differences (float64)",
        "jit(vmap(grad)) vs pure JAX",
        "jit(hessian) vs pure JAX",
        "gradient descent under jit",
    ]
    assert all(": ok (" in line for line in lines), result.stdout
