"""Checkpointing: a 100-layer MLP trained with and without ``agnograd.checkpoint``.

The network is 100 layers of ``h = tanh(h @ W)``, width 256, batch 64, float32;
a step is the forward, ``sum(h)`` and the backward (the gradients of every ``W``;
no update). ``checkpoint`` runs the layers in segments of ``sqrt(100) = 10``, each
through ``agnograd.checkpoint``, the segment's weights passed as a list (the
parameters are found and differentiated as closed-over Variables). ``plain`` is
the same network without checkpointing. Before measuring, the gradients of the two
are compared.

Memory (each contestant alone in a fresh subprocess, as in ``bench_memory.py``):
``tracemalloc`` traces one step -- the window starts once x and the Ws exist and
ends while the loss and the gradients are still held -- and reports its peak. The
*activation* peak is that peak less the gradients of the Ws (``layers * W``
bytes), which both contestants hold at the end of the step and which is when the
peak comes in both (the last layers backpropagated, or the last segment
recomputed, while nearly every gradient exists). It is compared with the
activations that must be kept, in units of ``act`` (one ``(batch, width)`` array):

* ``plain``: ``layers * act``, the layer outputs h_1..h_L (tanh's rule reads its
  output, matmul's its input; the pre-activations are freed).
* ``checkpoint``: ``(layers / segment + segment) * act``: the outputs of the
  segments (kept as the next segments' inputs) plus, during the backward of one
  segment, the ``segment`` activations of its recomputation -- ``2 sqrt(N)`` for
  segments of ``sqrt(N)`` layers. Target: the measured activation peak within
  1.5x of that.

Time: interleaved rounds (``_harness.interleaved``) of a plain step, a
checkpointed step and a plain forward alone. Checkpointing should cost about one
more forward: the report gives the ratio of the steps and the extra time in units
of the forward, ``(checkpoint - plain) / forward`` (expected about 1).

Run ``python benchmarks/bench_checkpoint.py [--layers L] [--segment K] [--quick]``.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded. Two BLAS
# threads stall on a busy two-core machine, and one thread makes contestants comparable.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import argparse
import gc
import math
import statistics
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import _harness
import numpy as np

import agnograd
import agnograd.functions as F
from agnograd import checkpoint

LAYERS = 100
WIDTH = 256
BATCH = 64
QUICK = (9, 4, 16)  # layers, batch, width
TARGET = 1.5
MIB = 2**20
CONTESTANTS = ("plain", "checkpoint")

Step = Callable[[], tuple[Any, list[Any]]]


def problem(layers: int, batch: int, width: int) -> tuple[np.ndarray, list[agnograd.Variable]]:
    """The input and the weights (scaled so that tanh stays out of saturation)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    ws = [
        agnograd.Variable(rng.standard_normal((width, width), dtype=np.float32) / math.sqrt(width))
        for _ in range(layers)
    ]
    return x, ws


def layers_of(h: Any, ws: list[agnograd.Variable]) -> Any:
    """``tanh(h @ W)`` for each W in turn: one segment, or the whole network."""
    for w in ws:
        h = F.tanh(F.matmul(h, w))
    return h


def forward(name: str, x: np.ndarray, ws: list[agnograd.Variable], segment: int) -> Any:
    """The loss of contestant ``name``."""
    if name == "plain":
        h = layers_of(x, ws)
    elif name == "checkpoint":
        h = x
        for start in range(0, len(ws), segment):
            h = checkpoint(layers_of, h, ws[start : start + segment])
    else:
        raise ValueError(f"bench_checkpoint: unknown contestant {name!r}; known: {CONTESTANTS}")
    return F.sum(h)


def step(name: str, x: np.ndarray, ws: list[agnograd.Variable], segment: int) -> Step:
    """One training step of contestant ``name``: forward and backward."""

    def run() -> tuple[Any, list[Any]]:
        for w in ws:
            w.cleargrad()
        loss = forward(name, x, ws, segment)
        loss.backward()
        return loss, [w.grad for w in ws]

    return run


def check(segment: int) -> None:
    """Stop unless the two contestants' gradients agree (on a small problem)."""
    x, ws = problem(2 * segment + 1, 4, 8)
    want = step("plain", x, ws, segment)()[1]
    got = step("checkpoint", x, ws, segment)()[1]
    _harness.check_close("checkpoint", got, want, rtol=1e-4)


def measure(run: Step) -> int:
    """Peak bytes traced during ``run()``, the loss and gradients still held."""
    gc.collect()
    gc.freeze()
    tracemalloc.start()
    try:
        result = run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return peak


def worker(names: list[str], layers: int, batch: int, width: int, segment: int) -> None:
    """Measure each contestant in turn; print one JSON line per contestant."""
    for name in names:
        check(segment)  # also warms up: imports and code stay out of the window
        x, ws = problem(layers, batch, width)
        run = step(name, x, ws, segment)
        peak = measure(run)
        del x, ws, run
        _harness.emit("checkpoint-worker", {"contestant": name, "window_peak": peak})


def run_worker(names: list[str], args: argparse.Namespace) -> dict[str, int]:
    """Run ``names`` in a fresh worker process; the window peak of each."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", ",".join(names)]
    cmd += ["--layers", str(args.layers), "--batch", str(args.batch)]
    cmd += ["--width", str(args.width), "--segment", str(args.segment)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"bench_checkpoint: the worker for {names} failed with exit code "
            f"{proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    peaks = {}
    for text in proc.stdout.splitlines():
        if text.startswith(_harness.JSON_PREFIX):
            record = _harness.parse_emitted(text)
            peaks[record["contestant"]] = record["window_peak"]
    return peaks


def theory(layers: int, batch: int, width: int, segment: int) -> dict[str, int]:
    """Bytes of the activations each contestant must keep (module docstring)."""
    act = batch * width * 4
    return {
        "act": act,
        "gradients": layers * width * width * 4,
        "plain": layers * act,
        "checkpoint": (math.ceil(layers / segment) + min(segment, layers)) * act,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=7, batch_seconds=0.5)
    p.add_argument("--layers", type=int, default=LAYERS, help=f"default {LAYERS}")
    p.add_argument("--batch", type=int, default=BATCH, help=f"rows of x (default {BATCH})")
    p.add_argument("--width", type=int, default=WIDTH, help=f"columns of x (default {WIDTH})")
    p.add_argument("--segment", type=int, help="layers per checkpoint (default sqrt(layers))")
    p.add_argument("--memory-rounds", type=int, default=1, help="measurements per contestant")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.layers, args.batch, args.width = QUICK
    if args.segment is None:
        args.segment = max(1, round(math.sqrt(args.layers)))
    if args.worker:
        worker(args.worker.split(","), args.layers, args.batch, args.width, args.segment)
        return {}

    # Memory: a fresh process per measurement (one for all with --quick).
    if args.quick:
        peaks = {k: [v] for k, v in run_worker(list(CONTESTANTS), args).items()}
    else:
        peaks = {name: [] for name in CONTESTANTS}
        for _ in range(args.memory_rounds):
            for name in CONTESTANTS:
                peaks[name].append(run_worker([name], args)[name])
    sizes = theory(args.layers, args.batch, args.width, args.segment)
    memory: dict[str, dict[str, Any]] = {}
    for name in CONTESTANTS:
        peak = statistics.median(peaks[name])
        activations = peak - sizes["gradients"]
        memory[name] = {
            "peak_bytes": peak,
            "activation_bytes": activations,
            "minimum_bytes": sizes[name],
            "over_minimum": activations / sizes[name],
        }
    saved = memory["plain"]["activation_bytes"] / memory["checkpoint"]["activation_bytes"]
    meets = memory["checkpoint"]["over_minimum"] <= TARGET

    # Time: interleaved rounds of the two steps and of the forward alone.
    check(args.segment)
    x, ws = problem(args.layers, args.batch, args.width)
    contestants = {name: step(name, x, ws, args.segment) for name in CONTESTANTS}
    contestants["plain forward"] = lambda: forward("plain", x, ws, args.segment)
    batch_seconds = 0.001 if args.quick else args.batch_seconds
    times = _harness.interleaved(contestants, rounds=args.rounds, batch_seconds=batch_seconds)
    ms = {k: [s * 1e3 for s in v] for k, v in times.items()}
    medians = {k: statistics.median(v) for k, v in ms.items()}
    summary = _harness.ratio_summary(times, [("checkpoint", "plain", None)])
    extra = [
        (c - p) / f
        for c, p, f in zip(times["checkpoint"], times["plain"], times["plain forward"], strict=True)
    ]
    extra_forwards = statistics.median(extra)

    print(
        f"{args.layers} layers of tanh(h @ W), width {args.width}, batch {args.batch}, float32, "
        f"checkpoints every {args.segment} layers; act = one ({args.batch}, {args.width}) "
        f"array = {sizes['act'] / MIB:.3f} MiB, W gradients {sizes['gradients'] / MIB:.1f} MiB"
    )
    rows = [
        [
            name,
            m["peak_bytes"] / MIB,
            m["activation_bytes"] / MIB,
            m["activation_bytes"] / sizes["act"],
            m["minimum_bytes"] / sizes["act"],
            m["over_minimum"],
        ]
        for name, m in memory.items()
    ]
    headers = ["contestant", "peak MiB", "activations MiB", "/ act", "minimum / act", "x min"]
    print(_harness.table(headers, rows))
    print(
        f"activation memory saved: {saved:.2f}x; checkpoint within {TARGET}x of its "
        f"minimum: {'yes' if meets else 'NO'}"
    )
    print()
    rows = [[name, medians[name], min(ms[name])] for name in contestants]
    print(_harness.table(["step", "ms median", "ms min"], rows))
    print(_harness.ratio_table(summary))
    print(f"extra time of checkpointing, in forwards: {extra_forwards:.2f} (expected about 1)")
    return _harness.emit(
        "checkpoint",
        {
            "layers": args.layers,
            "batch": args.batch,
            "width": args.width,
            "segment": args.segment,
            "dtype": "float32",
            "rounds": args.rounds,
            "quick": args.quick,
            "act_bytes": sizes["act"],
            "gradient_bytes": sizes["gradients"],
            "memory": memory,
            "activation_saving": saved,
            "target": TARGET,
            "meets_target": meets,
            "ms_per_step_median": medians,
            "ratios": summary,
            "extra_forwards": extra_forwards,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
