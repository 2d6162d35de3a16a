"""Cost per operation as the graph grows: 1,000 to 1,000,000 operations, collector on.

The chain of ``bench_long_chain.py`` (``y = x``, then elementwise operations on a
``(1,)`` float64 array, alternately ``* 1.0`` and ``+ 0.0``, then ``y.backward()``)
at several lengths, with Python's garbage collector on and left as it is, as users
run it: nothing is frozen or disabled. Each round builds each length in turn (the
short ones several times, so that every length runs about as many operations), and
the CPU time per operation of the forward and of the backward is the median over
the rounds. It also counts the objects the collector tracks per operation (those
that outlive a collection) and the CPU time of its collections during the forward,
by generation: a full collection walks every tracked object, so a graph that keeps
more of them pays more per operation as it grows.

Targets: the forward per operation at 100,000 operations at most 1.5x that at
1,000, and the forward + backward per operation at 1,000,000 at most 1.5x.

Run ``python benchmarks/bench_graph_size.py [--rounds N] [--sizes 1000,100000]
[--quick]``; the default takes a few minutes and 0.7 GB. ``--build N`` builds one
forward of ``N`` operations and exits, for an instruction count: under valgrind,
``(Ir of --build 200000 - Ir of --build 100000) / 100000`` is the instructions per
operation of a large graph, the collector's included.
"""

import os

os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import argparse
import gc
import statistics
import sys
import time
from typing import Any

import _harness
import numpy as np

import agnograd

SIZES = (1_000, 10_000, 100_000, 1_000_000)
#: About as many operations for each length in a round: the short chains run again.
OPS_PER_ROUND = 100_000
#: (what, at how many operations, against 1,000, at most)
TARGETS = (("forward", 100_000, 1.5), ("forward + backward", 1_000_000, 1.5))

clock = time.process_time  # CPU time: a busy machine's other processes do not count


class CollectionTimer:
    """CPU seconds of the collector's collections, by generation (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = clock()
        else:
            self.seconds[info["generation"]] += clock() - self._start


def chain(x: agnograd.Variable, ops: int) -> agnograd.Variable:
    y = x
    for i in range(ops):
        y = y * 1.0 if i % 2 else y + 0.0
    return y


def run(ops: int, timer: CollectionTimer) -> dict[str, float]:
    """CPU seconds per operation of the forward, its collections and the backward."""
    x = agnograd.Variable(np.zeros(1))
    timer.seconds[:] = [0.0, 0.0, 0.0]
    start = clock()
    y = chain(x, ops)
    forward = clock()
    collections = list(timer.seconds)
    y.backward()
    backward = clock()
    assert float(x.grad[0]) == 1.0, x.grad
    del y  # (the release of the graph is not timed: bench_long_chain.py times it)
    return {
        "forward": (forward - start) / ops,
        "backward": (backward - forward) / ops,
        **{f"gc_gen{g}": s / ops for g, s in enumerate(collections)},
    }


def tracked_per_op(ops: int = 1000) -> float:
    """The objects the collector tracks per operation of a live chain, once a
    collection has untracked those it can (tuples of untracked items)."""
    x = agnograd.Variable(np.zeros(1))
    gc.collect()
    before = len(gc.get_objects())
    y = chain(x, ops)
    gc.collect()
    tracked = len(gc.get_objects()) - before
    del y
    return tracked / ops


def main(argv: list[str]) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    p.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="chain lengths, the first the reference (default %(default)s)",
    )
    p.add_argument("--quick", action="store_true", help="1,000 and 2,000 operations, one round")
    p.add_argument("--build", type=int, help="build one forward of BUILD operations, then exit")
    args = p.parse_args(argv)
    if args.build is not None:
        y = chain(agnograd.Variable(np.zeros(1)), args.build)
        # At once, with the graph alive: the count is the forward's, not the release's.
        os._exit(0 if y.node.rank == args.build else 1)
    sizes = [1000, 2000] if args.quick else [int(s) for s in args.sizes.split(",")]
    rounds = 1 if args.quick else args.rounds
    per_round = 2000 if args.quick else OPS_PER_ROUND

    timer = CollectionTimer()
    gc.callbacks.append(timer)
    try:
        run(sizes[0], timer)  # warm caches and lazy imports
        samples: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
        for _ in range(rounds):
            for n in sizes:
                for _ in range(max(1, per_round // n)):
                    gc.collect()  # no run inherits another's garbage
                    samples[n].append(run(n, timer))
    finally:
        gc.callbacks.remove(timer)
    tracked = tracked_per_op()

    keys = ("forward", "backward", "gc_gen0", "gc_gen1", "gc_gen2")
    us = {
        n: {k: statistics.median(s[k] for s in runs) * 1e6 for k in keys}
        for n, runs in samples.items()
    }
    for figures in us.values():
        figures["forward + backward"] = figures["forward"] + figures["backward"]
    reference = us[sizes[0]]
    print(
        f"chain on (1,) float64, collector on: CPU us per operation (median of {rounds} "
        f"rounds); {tracked:.2f} tracked objects per operation"
    )
    print(
        _harness.table(
            ["ops", "forward", "gc: gen 0, 1, 2", "backward", "fwd+bwd", "x fwd", "x f+b"],
            [
                [
                    n,
                    f["forward"],
                    f"{f['gc_gen0']:.2f}, {f['gc_gen1']:.2f}, {f['gc_gen2']:.2f}",
                    f["backward"],
                    f["forward + backward"],
                    f["forward"] / reference["forward"],
                    f["forward + backward"] / reference["forward + backward"],
                ]
                for n, f in us.items()
            ],
        )
    )
    ratios = []
    for what, n, target in TARGETS:
        if n in us:
            ratio = us[n][what] / reference[what]
            ratios.append({"what": what, "ops": n, "ratio": ratio, "target": target})
            verdict = "met" if ratio <= target else "NOT met"
            print(f"{what} per op at {n:,}: {ratio:.2f}x at {sizes[0]:,} ({target}x: {verdict})")
    return _harness.emit(
        "graph_size",
        {
            "quick": args.quick,
            "rounds": rounds,
            "tracked_per_op": tracked,
            "us_per_op_median": {str(n): f for n, f in us.items()},
            "ratios": ratios,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
