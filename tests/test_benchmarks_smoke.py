"""Smoke test of benchmarks/: every script runs with tiny sizes and one round.

It proves the scripts still work against the current API (each script checks its
contestants' gradients against hand-written NumPy before timing); it asserts
nothing about speed or memory. Two subprocesses run side by side: the timing
benchmarks in one process (one torch import for all), and the memory benchmark,
which starts a fresh worker per contestant.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _session import computed_once

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
PREFIX = "BENCHMARK_JSON "
HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the benchmarks, both commands at once; their results (``returncode``,
    ``stdout``, ``stderr``) and records. Once in the test session: see
    computed_once."""
    return computed_once(tmp_path_factory, "benchmarks", lambda: _run(tmp_path_factory))


def _run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    records = tmp_path_factory.mktemp("benchmarks") / "records.json"
    commands = {
        "timing": [
            *("run_all.py", "--quick", "--rounds", "1", "--same-process"),
            "--only",
            "overhead,namespace,mlp,long_chain,graph_size,checkpoint,compiled,compiled_memory,"
            "compiled_jax,compile_cost,jit,forward,vmap,transforms",
            *("--out", str(records)),
            *("--plot", str(records.with_suffix(".png"))),
        ],
        "memory": ["bench_memory.py", "--quick"],
    }
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(BENCHMARKS / cmd[0]), *cmd[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=BENCHMARKS,
        )
        for name, cmd in commands.items()
    }
    done: dict[str, Any] = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=300)
            done[name] = {"returncode": proc.returncode, "stdout": out, "stderr": err}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    timing = done["timing"]
    assert timing["returncode"] == 0, timing["stdout"] + timing["stderr"]
    done.update(json.loads(records.read_text()))
    return done


def record(result: dict[str, Any]) -> dict[str, Any]:
    assert result["returncode"] == 0, result["stdout"] + result["stderr"]
    lines = [t for t in result["stdout"].splitlines() if t.startswith(PREFIX)]
    assert lines, f"no {PREFIX.strip()} line in:\n{result['stdout']}"
    parsed: dict[str, Any] = json.loads(lines[-1][len(PREFIX) :])
    return parsed


def expected_contestants() -> set[str]:
    names = {"hand-numpy", "agnograd-numpy"}
    if HAS_TORCH:
        names |= {"torch.autograd", "agnograd-torch"}
    return names


@pytest.mark.parametrize("name", ["overhead", "mlp"])
def test_timing_benchmark_runs(outputs: dict[str, Any], name: str) -> None:
    rec = outputs[name]
    assert rec["benchmark"] == name
    assert rec["quick"] is True
    timings = rec["us_per_op_median" if name == "overhead" else "ms_per_step_median"]
    assert expected_contestants() <= set(timings)
    if name == "overhead" and importlib.util.find_spec("jax") is not None:
        assert "jax-eager" in timings
    assert all(t > 0 for t in timings.values())
    assert any(r["ratio"] == "agnograd-numpy / hand-numpy" for r in rec["ratios"])


def test_namespace_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["namespace"]
    assert rec["benchmark"] == "namespace"
    assert {"numpy.exp(a)", "F.exp(x)", "xp.exp(x)"} <= set(rec["us_per_call_median"])


def test_memory_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = record(outputs["memory"])
    assert rec["benchmark"] == "memory"
    assert rec["layers"] == 3
    measured = {(r["contestant"], r["method"]) for r in rec["results"]}
    assert {("hand-numpy", "tracemalloc"), ("agnograd-numpy", "tracemalloc")} <= measured
    if HAS_TORCH and Path("/proc/self/clear_refs").exists():
        assert ("torch.autograd", "rss") in measured
    # tracemalloc sees every allocation; a peak of resident memory can be 0 where the
    # process reuses pages it already had (torch's allocator keeps freed blocks).
    assert all(r["peak_bytes"] > 0 for r in rec["results"] if r["method"] == "tracemalloc")
    assert all(r["peak_bytes"] >= 0 for r in rec["results"])


def test_long_chain_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["long_chain"]
    assert rec["ops"] == 1000
    assert rec["forward_s"] > 0
    assert rec["backward_s"] > 0


def test_graph_size_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["graph_size"]
    assert rec["benchmark"] == "graph_size"
    assert rec["quick"] is True
    assert set(rec["us_per_op_median"]) == {"1000", "2000"}
    assert all(f["forward"] > 0 and f["backward"] > 0 for f in rec["us_per_op_median"].values())
    assert rec["tracked_per_op"] > 0


def test_checkpoint_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["checkpoint"]
    assert rec["benchmark"] == "checkpoint"
    assert rec["quick"] is True
    assert set(rec["memory"]) == {"plain", "checkpoint"}
    assert all(m["peak_bytes"] > 0 for m in rec["memory"].values())
    assert rec["ms_per_step_median"]["checkpoint"] > 0


def test_compiled_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["compiled"]
    assert rec["benchmark"] == "compiled"
    for name in ("chain", "mlp"):
        times = rec[name]["us_median"]
        assert set(times) == {"hand-numpy", "eager", "static walk", "static", "compiled"}
        assert all(t > 0 for t in times.values())
    paired = rec["written elsewhere"]["us_median"]
    steps = ("eager", "static", "compiled")
    assert set(paired) == {*steps, *(k + ", written elsewhere" for k in steps)}


def test_compiled_memory_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["compiled_memory"]
    assert rec["benchmark"] == "compiled-memory"
    assert rec["quick"] is True
    for net in ("mlp", "deep"):
        peaks = rec["networks"][net]["peak_bytes"]
        assert set(peaks) == {"eager", "static", "static clear", "compiled"}
        assert all(p["step"] > 0 for p in peaks.values())


def test_compiled_jax_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["compiled_jax"]
    if "skipped" in rec:
        pytest.skip("jax is not installed")
    for part in ("chain", "mlp"):
        assert {"jax.jit", "lowered"} <= set(rec[part]["us_median"])
        assert any(r["ratio"] == "lowered / jax.jit" for r in rec[part]["ratios"])


def test_plot_is_drawn_where_matplotlib_is_installed(outputs: dict[str, Any]) -> None:
    text = outputs["timing"]["stdout"]
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib is not installed" in text
    else:
        assert "plot written to" in text


def test_compile_cost_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["compile_cost"]
    assert rec["benchmark"] == "compile_cost"
    assert set(rec["sizes"]) == {"200", "2000"}
    for costs in rec["sizes"].values():
        # (no comparison of the timings: a smoke test asserts nothing about speed)
        assert costs["compile_s"] > 0
        assert costs["walk_s"] > 0
        assert costs["plan_s"] > 0
    jit = rec["jit"]
    assert set(jit["sizes"]) == {"200", "800"}
    for costs in jit["sizes"].values():
        assert costs["eager_s"] > 0
        assert costs["jit_s"] > 0
        assert costs["unbounded_s"] > 0
        assert costs["unbounded_later_s"] > 0
    # The quick bound (1,000 functions) lies between the two chains' graphs.
    assert jit["sizes"]["200"]["jit_eager_calls"] == 0
    assert jit["sizes"]["800"]["jit_eager_calls"] == 1
    assert jit["largest"]["ops"] == 800


def test_jit_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["jit"]
    assert rec["benchmark"] == "jit"
    assert rec["quick"] is True
    groups = ["chain", "mlp"]
    if HAS_TORCH:
        groups.append("chain on torch")
    for name in groups:
        assert all(t > 0 for t in rec[name]["us_median"].values())
        assert rec[name]["ratios"][0]["ratio"].startswith("agnograd.jit / ")
    assert rec["first_call"]["functions"] > 0
    # A difference of two timings' medians: under load it can come out negative.
    assert math.isfinite(rec["first_call"]["trace_us_per_function"])


def test_forward_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["forward"]
    assert rec["benchmark"] == "forward"
    assert rec["ops"] == 8  # one block of the chain, in quick mode
    names = {r["ratio"] for r in rec["ratios"]}
    assert "agnograd-jvp / hand-jvp" in names
    assert "mlp agnograd-jvp / mlp hand-jvp" in names
    assert all(r["median"] > 0 for r in rec["ratios"])


def test_vmap_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["vmap"]
    assert rec["benchmark"] == "vmap"
    names = {r["ratio"] for r in rec["ratios"]}
    assert "agnograd numpy B=8 / hand numpy B=8" in names
    assert all(r["median"] > 0 for r in rec["ratios"])


def test_transforms_benchmark_runs(outputs: dict[str, Any]) -> None:
    rec = outputs["transforms"]
    assert rec["benchmark"] == "transforms"
    assert rec["ops"] == 8  # one block of the chain, in quick mode
    names = {r["ratio"] for r in rec["ratios"]}
    assert "func.value_and_grad / backward" in names
    assert "functional.vjp / backward" in names
    assert all(r["median"] > 0 for r in rec["ratios"])


def test_a_contestant_runs_alone_for_an_instruction_count() -> None:
    """``--run NAME --steps N`` runs one contestant untimed and prints no record; an
    unknown name is refused with the contestants' names."""
    script = str(BENCHMARKS / "bench_overhead.py")
    alone = subprocess.run(
        [sys.executable, script, "--quick", "--run", "agnograd-numpy", "--steps", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert alone.returncode == 0, alone.stderr
    assert PREFIX not in alone.stdout
    # The optional contestants skipped: the refusal is the same, without importing
    # torch and JAX to build them (five of the six seconds it took).
    optional = "torch.autograd,agnograd-torch,jax-eager,autograd,mygrad"
    wrong = subprocess.run(
        [sys.executable, script, "--quick", "--run", "agnograd", "--skip", optional],
        capture_output=True,
        text=True,
    )
    assert wrong.returncode != 0
    assert "the contestants are hand-numpy, agnograd-numpy" in wrong.stderr
