"""Run every benchmark, one after the other, each in its own process.

Each benchmark's table is printed as it comes; the machine-readable records are
collected and, with ``--out FILE``, written as one JSON document.
``--same-process`` runs them in this process instead, one import of torch for
all: quicker, for the smoke test; measurements belong in separate processes.

With ``--plot FILE`` (and matplotlib installed) the per-op and MLP figures are
drawn side by side as bars, each contestant as a multiple of hand-written NumPy;
``docs/performance.png`` is made this way.

Run ``python benchmarks/run_all.py [--quick] [--rounds N] [--only overhead,mlp]
[--out results.json] [--plot FILE] [--same-process]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from typing import Any

import _harness

HERE = os.path.dirname(os.path.abspath(__file__))

#: name -> (script, whether it takes --rounds as interleaved timing rounds)
BENCHMARKS = {
    "overhead": ("bench_overhead.py", True),
    "namespace": ("bench_namespace.py", True),
    "mlp": ("bench_mlp.py", True),
    "memory": ("bench_memory.py", False),
    "views": ("bench_views.py", True),
    "long_chain": ("bench_long_chain.py", False),
    "graph_size": ("bench_graph_size.py", True),
    "checkpoint": ("bench_checkpoint.py", True),
    "bridge": ("bench_bridge.py", True),
    "bridge_jax": ("bench_bridge_jax.py", True),
    "compiled": ("bench_compiled.py", True),
    "compiled_memory": ("bench_compiled_memory.py", False),
    "compiled_jax": ("bench_compiled_jax.py", True),
    "compile_cost": ("bench_compile_cost.py", False),
    "jit": ("bench_jit.py", True),
    "forward": ("bench_forward.py", True),
    "vmap": ("bench_vmap.py", True),
    "transforms": ("bench_transforms.py", True),
}


def arguments(name: str, quick: bool, rounds: int | None) -> list[str]:
    """The command-line arguments of one benchmark."""
    argv = ["--quick"] if quick else []
    if rounds is not None and BENCHMARKS[name][1]:
        argv += ["--rounds", str(rounds)]
    return argv


def run(name: str, quick: bool, rounds: int | None) -> dict[str, Any]:
    """Run one benchmark script in a subprocess; echo its output, return its record."""
    cmd = [sys.executable, os.path.join(HERE, BENCHMARKS[name][0])]
    cmd += arguments(name, quick, rounds)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    shown = [t for t in proc.stdout.splitlines() if not t.startswith(_harness.JSON_PREFIX)]
    print(f"== {name} ({' '.join(cmd[1:])}), {elapsed:.1f} s")
    print("\n".join(shown), flush=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"run_all: benchmark {name} failed with exit code {proc.returncode}:\n{proc.stderr}"
        )
    return _harness.parse_emitted(proc.stdout)


def run_here(name: str, quick: bool, rounds: int | None) -> dict[str, Any]:
    """Run one benchmark's ``main`` in this process and return its record."""
    module = importlib.import_module(BENCHMARKS[name][0].removesuffix(".py"))
    argv = arguments(name, quick, rounds)
    print(f"== {name} ({' '.join(argv)}), in this process", flush=True)
    record: dict[str, Any] = module.main(argv)
    return record


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    p.add_argument("--rounds", type=int, help="interleaved rounds of the timing benchmarks")
    p.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    p.add_argument("--out", help="write all records to this JSON file")
    p.add_argument("--plot", help="draw the overhead and MLP figures into this image file")
    p.add_argument("--same-process", action="store_true", help="run the benchmarks in this process")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(
            f"--only: unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}"
        )
    runner = run_here if args.same_process else run
    records = {name: runner(name, args.quick, args.rounds) for name in names}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(records, f, indent=2, sort_keys=True)
        print(f"records written to {args.out}")
    if args.plot:
        plot(records, args.plot)
    return records


#: record name -> (its medians, the unit, the panel's title, agnograd-numpy's target)
PANELS = {
    "overhead": ("us_per_op_median", "us/op", "per op, 200-op chain on (8,) float64", 4.5),
    "mlp": ("ms_per_step_median", "ms/step", "MLP step, 784-1024-1024-10, batch 256", 1.05),
}


def plot(records: dict[str, Any], path: str) -> None:
    """Bars of each contestant's median as a multiple of hand-written NumPy."""
    if _harness.optional_import("matplotlib") is None:
        print("--plot: matplotlib is not installed; no plot drawn")
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(name, *PANELS[name]) for name in PANELS if name in records]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (name, key, unit, title, target) in zip(axes[0], panels, strict=True):
        medians = {k: v for k, v in records[name][key].items() if "(forward)" not in k}
        hand = medians["hand-numpy"]
        # JAX without jit (hundreds of times hand-written) would flatten every other bar.
        medians = {k: v for k, v in medians.items() if v <= 20 * hand}
        labels = sorted(medians, key=lambda k: k != "hand-numpy")  # hand-written first
        ratios = [medians[k] / hand for k in labels]
        bars = ax.barh(labels, ratios, color=["#888" if k.startswith("hand") else "#3a7" if
                       k.startswith("agnograd") else "#57a" for k in labels])  # fmt: skip
        for bar, k in zip(bars, labels, strict=True):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                    f" {bar.get_width():.2f}x ({medians[k]:.3g} {unit})", va="center")  # fmt: skip
        ax.axvline(target, color="#c33", linestyle="--", linewidth=1)
        ax.text(target, len(labels) - 0.4, f" target {target}x", color="#c33", va="bottom")
        ax.set_title(title)
        ax.set_xlabel("x hand-written NumPy (lower is better)")
        ax.set_xlim(0, max(ratios) * 1.6)
        ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
