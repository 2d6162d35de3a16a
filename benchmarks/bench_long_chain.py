"""A 1,000,000-operation chain, forward and backward: no recursion, bounded time.

``y = x`` followed by a million elementwise operations on a ``(1,)`` float64 array
(alternately ``* 1.0`` and ``+ 0.0``), then ``y.backward()`` and the release of the
graph. A recursive engine (or a recursive release of the graph) would overflow the
stack long before the end; the time per operation shows what the graph costs when
it is far larger than the processor's caches.

Run ``python benchmarks/bench_long_chain.py [--ops N] [--quick]``.
"""

import os

os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import argparse
import gc
import sys
import time
from typing import Any

import _harness
import numpy as np

import agnograd

OPS = 1_000_000


def run(ops: int) -> dict[str, float]:
    """Seconds for the forward, the backward and the release of an ``ops``-long chain."""
    x = agnograd.Variable(np.zeros(1))
    gc.collect()
    start = time.perf_counter()
    y = x
    for i in range(ops):
        y = y * 1.0 if i % 2 else y + 0.0
    forward = time.perf_counter()
    y.backward()
    backward = time.perf_counter()
    assert float(x.grad[0]) == 1.0, x.grad
    del y
    released = time.perf_counter()
    return {
        "forward_s": forward - start,
        "backward_s": backward - forward,
        "release_s": released - backward,
    }


def main(argv: list[str]) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=OPS, help=f"operations (default {OPS})")
    p.add_argument("--quick", action="store_true", help="1000 operations (smoke test)")
    args = p.parse_args(argv)
    ops = 1000 if args.quick else args.ops
    times = run(ops)
    total = sum(times.values())
    print(f"{ops}-op chain on (1,) float64: forward + backward + release")
    print(
        _harness.table(
            ["phase", "seconds", "us/op"],
            [[k.removesuffix("_s"), v, v / ops * 1e6] for k, v in times.items()]
            + [["total", total, total / ops * 1e6]],
        )
    )
    return _harness.emit("long_chain", {"ops": ops, "quick": args.quick, **times})


if __name__ == "__main__":
    main(sys.argv[1:])
