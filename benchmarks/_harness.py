"""Shared helpers of the benchmarks: options, interleaved timing, tables, JSON.

The benchmark scripts set the BLAS thread variables themselves, at their very top,
before anything imports NumPy; this module imports no array library at load time.

Timing is interleaved: every round times one batch of each contestant in turn, so
a slow phase of a busy machine hits all contestants alike. Absolute times swing by
2x on a shared machine; the per-round ratios are what the benchmarks report.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

#: Prefix of the one machine-readable line each benchmark prints last.
JSON_PREFIX = "BENCHMARK_JSON "


def parser(
    description: str, *, rounds: int, batch_seconds: float, alone: bool = False
) -> argparse.ArgumentParser:
    """The options every timing benchmark accepts.

    ``--rounds``, ``--batch-seconds``, ``--quick`` and ``--skip``; with ``alone``,
    ``--run NAME --steps N`` too, for a benchmark that passes its contestants to
    :func:`run_alone`.
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--rounds", type=int, default=rounds, help=f"interleaved rounds (default {rounds})"
    )
    p.add_argument(
        "--batch-seconds",
        type=float,
        default=batch_seconds,
        help="length of one contestant's batch in a round; short batches interleave "
        f"finely, so a burst of load hits every contestant alike (default {batch_seconds})",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes and short batches: proves the script runs, measures nothing",
    )
    p.add_argument(
        "--skip",
        default="",
        help="comma-separated contestants to leave out (e.g. 'mygrad,autograd')",
    )
    if not alone:
        return p
    p.add_argument(
        "--run",
        metavar="NAME",
        help="run the contestant NAME --steps times, untimed, for an instruction count",
    )
    p.add_argument("--steps", type=int, default=10, help="how many times --run runs it")
    return p


def run_alone(args: argparse.Namespace, steps: dict[str, Callable[[], Any]]) -> bool:
    """With ``--run NAME``, run that contestant of ``steps`` ``3 + --steps`` times and
    say so (the caller then stops): the way to count its instructions on a busy
    machine, where times swing and instructions do not. Under callgrind, the
    difference of two runs (``--steps 2`` and ``--steps 12``) divided by ten steps'
    operations is the count per operation, imports and warm-up cancelled::

        valgrind --tool=callgrind python benchmarks/bench_overhead.py --run agnograd-numpy --steps 2
    """
    if args.run is None:
        return False
    if args.run not in steps:
        raise SystemExit(f"--run {args.run!r}: the contestants are {', '.join(steps)}")
    step = steps[args.run]
    for _ in range(3 + args.steps):  # three to warm up: N and N + k differ by k steps
        step()
    return True


def optional_import(name: str) -> ModuleType | None:
    """Import ``name`` if it is installed, else return ``None`` (the contestant is skipped)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def torch_single_thread() -> ModuleType | None:
    """Import torch, if installed, and restrict it to one thread."""
    torch = optional_import("torch")
    if torch is not None:
        torch.set_num_threads(1)
    return torch


def calibrate(fn: Callable[[], Any], batch_seconds: float) -> int:
    """How many calls of ``fn`` fill about ``batch_seconds`` (at least one)."""
    fn()  # warm caches and lazy imports before timing anything
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    return max(1, round(batch_seconds / max(once, 1e-9)))


def interleaved(
    contestants: dict[str, Callable[[], Any]],
    *,
    rounds: int,
    batch_seconds: float,
    warm_up: bool = False,
) -> dict[str, list[float]]:
    """Seconds per call of each contestant, one entry per round.

    Each round times one batch per contestant, in turn. The batch size is
    calibrated once per contestant so that every batch lasts about
    ``batch_seconds``. With ``warm_up``, each batch follows one untimed call, so
    that no contestant pays for refilling the caches the one before it used (in
    batches of a few milliseconds that costs the contestant with the most code
    about a tenth). The garbage collector stays enabled (users run with it; a
    library that makes reference cycles pays for them), but a collection runs
    before every batch so that no batch inherits another one's garbage. The
    objects that exist before the rounds (torch alone makes a million) are
    frozen out of the collector's sight: otherwise every collection, timed or
    not, walks them, which costs a quarter of a second each.
    """
    repeats = {name: calibrate(fn, batch_seconds) for name, fn in contestants.items()}
    times: dict[str, list[float]] = {name: [] for name in contestants}
    gc.collect()
    gc.freeze()
    try:
        for _ in range(rounds):
            for name, fn in contestants.items():
                n = repeats[name]
                gc.collect()
                if warm_up:
                    fn()
                start = time.perf_counter()
                for _ in range(n):
                    fn()
                times[name].append((time.perf_counter() - start) / n)
    finally:
        gc.unfreeze()
    return times


def ratios(times: dict[str, list[float]], num: str, den: str) -> list[float] | None:
    """Per-round ratios ``times[num] / times[den]`` (``None`` if either is missing)."""
    if num not in times or den not in times:
        return None
    return [a / b for a, b in zip(times[num], times[den], strict=True)]


def ratio_summary(
    times: dict[str, list[float]], pairs: Sequence[tuple[str, str, float | None]]
) -> list[dict[str, Any]]:
    """Median, min and max of the per-round ratio of each ``(num, den, target)`` pair."""
    out = []
    for num, den, target in pairs:
        r = ratios(times, num, den)
        if r is None:
            continue
        med = statistics.median(r)
        out.append(
            {
                "ratio": f"{num} / {den}",
                "median": med,
                "min": min(r),
                "max": max(r),
                # The quietest batch of each: the estimate least disturbed by load.
                "of_minimums": min(times[num]) / min(times[den]),
                "target": target,
                "meets_target": None if target is None else med <= target,
            }
        )
    return out


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with columns aligned (numbers right, text left)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]

    def line(values: Sequence[str], raw: Sequence[Any] | None) -> str:
        parts = []
        for i, v in enumerate(values):
            numeric = raw is not None and isinstance(raw[i], int | float)
            parts.append(v.rjust(widths[i]) if numeric else v.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    out = [line(headers, None), line(["-" * w for w in widths], None)]
    out += [line(c, r) for c, r in zip(cells, rows, strict=True)]
    return "\n".join(out)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if abs(v) < 10:
            return f"{v:.3f}"
        return f"{v:.1f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def ratio_table(summary: list[dict[str, Any]]) -> str:
    """The ratio summary as a table."""
    rows = [
        [
            s["ratio"],
            s["median"],
            s["min"],
            s["max"],
            s["of_minimums"],
            s["target"],
            s["meets_target"],
        ]
        for s in summary
    ]
    headers = ["ratio (per round)", "median", "min", "max", "of minimums", "target", "met"]
    return table(headers, rows)


def report(times: dict[str, list[float]], summary: list[dict[str, Any]]) -> dict[str, Any]:
    """Print each contestant's median and best time per call (microseconds) and the
    ratios of ``summary``; return both for a benchmark's record."""
    rows = [[k, statistics.median(v) * 1e6, min(v) * 1e6] for k, v in times.items()]
    print(table(["contestant", "us median", "us min"], rows))
    print(ratio_table(summary))
    return {
        "us_median": {k: statistics.median(v) * 1e6 for k, v in times.items()},
        "ratios": summary,
    }


def environment() -> dict[str, Any]:
    """Versions and settings that the numbers depend on."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "threads": {v: os.environ.get(v) for v in THREAD_VARIABLES},
    }
    for name in ("numpy", "torch", "agnograd", "autograd", "mygrad"):
        if name in sys.modules:  # report only what this benchmark imported
            try:
                env[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                env[name] = "?"
    return env


def emit(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Print the benchmark's machine-readable line (last line of its output)."""
    record = {"benchmark": name, **payload, "environment": environment()}
    print(JSON_PREFIX + json.dumps(record, sort_keys=True), flush=True)
    return record


def parse_emitted(output: str) -> dict[str, Any]:
    """The record of the machine-readable line in a benchmark's output."""
    for text in reversed(output.splitlines()):
        if text.startswith(JSON_PREFIX):
            record: dict[str, Any] = json.loads(text[len(JSON_PREFIX) :])
            return record
    raise ValueError("no line starting with " + JSON_PREFIX.strip() + " in the output")


def skipped(args: argparse.Namespace) -> set[str]:
    """The contestant names given to ``--skip``."""
    return {s.strip() for s in args.skip.split(",") if s.strip()}


def check_close(name: str, got: Sequence[Any], want: Sequence[Any], rtol: float) -> None:
    """Fail loudly when a contestant's gradients differ from the reference.

    A benchmark that times a wrong computation measures nothing; the gradients of
    every contestant are compared with the hand-written NumPy ones before timing.
    """
    import numpy as np

    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g.detach() if hasattr(g, "detach") else g)
        # Entries near zero carry the rounding of the largest ones (float32 sums).
        atol = rtol * float(np.max(np.abs(w), initial=0.0))
        if g.dtype != w.dtype:
            raise AssertionError(
                f"{name}: gradient {i} is {g.dtype}, the hand-written NumPy one {w.dtype}; "
                "a contestant computing in another precision is not comparable"
            )
        if g.shape != w.shape or not np.allclose(g, w, rtol=rtol, atol=atol):
            err = float(np.max(np.abs(g - w))) if g.shape == w.shape else float("nan")
            raise AssertionError(
                f"{name}: gradient {i} differs from the hand-written NumPy one "
                f"(shapes {g.shape} vs {w.shape}, max abs difference {err:.3g})"
            )
