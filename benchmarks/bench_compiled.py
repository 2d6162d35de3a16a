"""Compiled re-runs of a static graph: the chain and the MLP step, against NumPy by hand.

A define-then-run graph built once is re-run with ``y.forward(); y.backward()``:
walking the graph (static walk, ``compile_after=None``) or, as these calls do by
default once the graph has run ``compile_after`` times, through a compiled plan
(static); or with the plan of ``agnograd.compile(y)`` (compiled: straight-line
code with every per-op decision taken once). Both are timed with eager agnograd and
the hand-written NumPy, interleaved, and reported as multiples of the hand-written
NumPy measured in the same rounds.

- chain: ``bench_overhead``'s 200-op chain (25 blocks of ``tanh, *0.5, exp, -1.0,
  *w, +x, sin, +b``) on (8,) float64, forward and backward. Target: compiled at
  most 1.3x hand-written NumPy.
- chain on torch: the same chain on float64 torch tensors, against it written by
  hand with torch, and torch.autograd. Target: compiled at most 1.5x the
  hand-written torch.
- mlp: ``bench_mlp``'s step, 784-1024-1024-10, batch 256, float32. Target: compiled
  at most 1.02x hand-written NumPy.
- chain, written elsewhere: the chain's eager step and its plans, each with and
  without an intermediate of another graph written in place (``h[0:2] = 5.0``) and
  alive while they run, interleaved in the same rounds. A write costs the graphs
  that read the written memory, not every graph in the process. Target: each at
  most 1.05x itself without the write.

Time ratios move with the load of a shared machine; instructions do not. To count
them, run one of the chain's contestants alone under callgrind with ``--run NAME
--steps N`` for two values of N, and divide the difference by the difference of N
times the ops::

    valgrind --tool=callgrind python benchmarks/bench_compiled.py --run static --steps 2
    valgrind --tool=callgrind python benchmarks/bench_compiled.py --run static --steps 12

Run ``python benchmarks/bench_compiled.py [--rounds N] [--quick] [--profile]
[--run NAME --steps N]``.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded. Two BLAS
# threads stall on a busy two-core machine, and one thread makes contestants comparable.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import statistics
import sys
from collections.abc import Callable
from typing import Any

import _harness
import bench_mlp
import bench_overhead
import numpy as np

import agnograd
import agnograd.functions as F
from agnograd.static._compiled import compile as compile_graph

TARGETS = {"chain": 1.3, "chain on torch": 1.5, "mlp": 1.02, "written elsewhere": 1.05}
WRITTEN = ", written elsewhere"


def reruns(y: Any, variables: list[Any]) -> dict[str, Callable[[], Any]]:
    """The three ways of re-running the static graph behind ``y``: the walk
    (``y.forward(); y.backward()`` with ``compile_after=None``), the same calls by
    default (a plan once the graph has run ``compile_after`` times: warmed up here)
    and ``agnograd.compile(y).run()``. Each returns the gradients of ``variables``."""
    plan = compile_graph(y)

    def step() -> list[Any]:
        for v in variables:
            v.cleargrad()
        y.forward()
        y.backward()
        return [v.grad for v in variables]

    def walk() -> list[Any]:
        with agnograd.using_config("compile_after", None):
            return step()

    def compiled() -> list[Any]:
        for v in variables:
            v.cleargrad()
        plan.run()
        return [v.grad for v in variables]

    for _ in range(agnograd.config.compile_after + 1):
        step()
    return {"static walk": walk, "static": step, "compiled": compiled}


def chain_steps(blocks: int, torch: Any = None) -> dict[str, Callable[[], Any]]:
    """The chain written by hand (the reference of the report's ratios), eager
    agnograd, its walk and its plans, each returning (gx, gw): on float64 NumPy
    arrays, or with ``torch`` on float64 tensors (then torch.autograd runs too)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, bench_overhead.SIZE)
    w = rng.uniform(0.5, 1.5, bench_overhead.SIZE)
    seed = np.ones(bench_overhead.SIZE)
    steps: dict[str, Callable[[], Any]] = {}
    if torch is None:
        steps["hand-numpy"] = bench_overhead.hand_numpy(x, w, seed, blocks)
    else:
        steps["hand-torch"] = bench_overhead.hand_numpy(
            torch.tensor(x), torch.tensor(w), torch.tensor(seed), blocks, torch
        )
        steps["torch.autograd"] = bench_overhead.torch_step(torch, x, w, seed, blocks)
        x, w, seed = torch.tensor(x), torch.tensor(w), torch.tensor(seed)
    xv = agnograd.Variable(x)
    wv = agnograd.Variable(w)
    with agnograd.auto_forward(False):
        y = bench_overhead.chain(xv, xv, wv, F.tanh, F.exp, F.sin, blocks)
    y.grad = seed
    steps["eager"] = bench_overhead.agnograd_step(x, w, seed, blocks)
    return {**steps, **reruns(y, [xv, wv])}


def written_elsewhere(steps: dict[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
    """Each of ``steps`` twice: as it is, and while an intermediate of another graph
    that was written in place is alive (made by the first call of a batch, the
    harness's untimed one, and dropped by the first call of a step without it)."""
    alive: list[Any] = []

    def with_write(step: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            if not alive:
                h = agnograd.Variable(np.ones(bench_overhead.SIZE)) * 1.0
                h[0:2] = 5.0  # a write that the graph follows: h's graph records it
                alive.append(h)
            return step()

        return run

    def without(step: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            if alive:
                alive.clear()  # its memory is freed with it: no write is alive
            return step()

        return run

    paired: dict[str, Callable[[], Any]] = {}
    for name, step in steps.items():
        paired[name] = without(step)
        paired[name + WRITTEN] = with_write(step)
    return paired


def measure_written_elsewhere(blocks: int, rounds: int, batch: float) -> dict[str, Any]:
    """The chain's eager step and plans with and without a written intermediate
    alive elsewhere, interleaved; each ratio is of a step to itself without it."""
    chain = chain_steps(blocks)
    steps = written_elsewhere({k: chain[k] for k in ("eager", "static", "compiled")})
    check({"hand-numpy": chain["hand-numpy"], **steps}, 1e-12, list)
    times = _harness.interleaved(steps, rounds=rounds, batch_seconds=batch, warm_up=True)
    target = TARGETS["written elsewhere"]
    summary = _harness.ratio_summary(
        times, [(k + WRITTEN, k, target) for k in steps if not k.endswith(WRITTEN)]
    )
    return _harness.report(times, summary)


def mlp_steps(quick: bool) -> dict[str, Callable[[], Any]]:
    """hand-numpy, eager, static and compiled MLP steps, returning the gradients."""
    sizes = bench_mlp.QUICK_SIZES if quick else bench_mlp.SIZES
    batch = bench_mlp.QUICK_BATCH if quick else bench_mlp.BATCH
    x, t, params = bench_mlp.problem(sizes, batch)
    variables = [agnograd.Variable(p) for p in params]
    xv = agnograd.Variable(x, requires_grad=False)
    with agnograd.auto_forward(False):
        loss = bench_mlp.agnograd_loss(xv, t, variables)
    return {
        "hand-numpy": bench_mlp.hand_numpy(x, t, params),
        "eager": bench_mlp.agnograd_step(x, t, params),
        **reruns(loss, variables),
    }


def check(steps: dict[str, Callable[[], Any]], rtol: float, grads: Callable[[Any], Any]) -> None:
    want = grads(next(iter(steps.values()))())  # the hand-written step comes first
    for name, step in steps.items():
        _harness.check_close(name, grads(step()), want, rtol=rtol)


def measure(
    name: str, steps: dict[str, Callable[[], Any]], rounds: int, batch: float
) -> dict[str, Any]:
    """Time ``steps`` (the hand-written one first: the reference of the ratios)."""
    hand = next(iter(steps))
    times = _harness.interleaved(steps, rounds=rounds, batch_seconds=batch, warm_up=True)
    ratios = {k: _harness.ratios(times, k, hand) or [] for k in steps}
    planned = ("static", "compiled")  # both run a plan: the targets are theirs
    pairs = [(k, hand, TARGETS[name] if k in planned else None) for k in steps]
    pairs[0] = ("static", "static walk", None)  # instead of hand / hand
    summary = _harness.ratio_summary(times, pairs)
    rows = [
        [k, statistics.median(times[k]) * 1e6, min(times[k]) * 1e6, statistics.median(ratios[k])]
        for k in steps
    ]
    print(_harness.table(["contestant", "us median", "us min", "x hand"], rows))
    print(_harness.ratio_table(summary))
    return {
        "us_median": {k: statistics.median(v) * 1e6 for k, v in times.items()},
        "ratios": summary,
    }


def profile(step: Callable[[], Any], n: int) -> None:
    """Where the compiled re-run spends its time (cProfile, top functions)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        step()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=31, batch_seconds=0.02, alone=True)
    p.add_argument("--profile", action="store_true", help="also cProfile the compiled runs")
    p.add_argument("--no-mlp", action="store_true", help="time the chain only")
    args = p.parse_args(argv)
    batch = 0.001 if args.quick else args.batch_seconds
    blocks = 1 if args.quick else bench_overhead.OPS // bench_overhead.BLOCK
    record: dict[str, Any] = {"rounds": args.rounds, "quick": args.quick}

    chain = chain_steps(blocks)
    check(chain, 1e-12, list)
    if _harness.run_alone(args, chain):  # for an instruction count (see the docstring)
        return {}
    print(
        f"Chain of {blocks * bench_overhead.BLOCK} ops on ({bench_overhead.SIZE},) float64, "
        f"forward + backward, {args.rounds} interleaved rounds"
    )
    record["chain"] = measure("chain", chain, args.rounds, batch)
    if args.profile:
        print("\ncProfile of the compiled chain:")
        profile(chain["compiled"], 2000)
    print("\nThe chain with and without an intermediate of another graph written in place alive")
    record["written elsewhere"] = measure_written_elsewhere(blocks, args.rounds, batch)
    torch = _harness.torch_single_thread()
    if torch is not None and "torch" not in _harness.skipped(args):
        on_torch = chain_steps(blocks, torch)
        check(on_torch, 1e-12, lambda r: [a.numpy() for a in r])
        print("\nThe same chain on float64 torch tensors, against it written with torch")
        record["chain on torch"] = measure("chain on torch", on_torch, args.rounds, batch)
    if not args.no_mlp:
        mlp = mlp_steps(args.quick)
        check(mlp, 1e-4, lambda r: r[1] if isinstance(r, tuple) else r)
        print("\nMLP step, 784-1024-1024-10, batch 256, float32, forward + backward")
        record["mlp"] = measure("mlp", mlp, max(5, args.rounds // 3), 0.001 if args.quick else 0.2)
        if args.profile:
            print("\ncProfile of the compiled MLP step:")
            profile(mlp["compiled"], 20)
    return _harness.emit("compiled", record)


if __name__ == "__main__":
    main(sys.argv[1:])
