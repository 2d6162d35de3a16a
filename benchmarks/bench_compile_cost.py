"""What compiling a static graph costs, and when it pays, as the graph grows.

For chains of ``n`` functions on (8,) float64 (``x * 1.0001`` and ``sin`` in turn,
then ``sum``), built once under ``auto_forward(False)``:

- ``walk``: one ``y.forward(); y.backward()`` walking the graph (the second of two);
- ``compile``: ``agnograd.compile(y)``, the plan's generated code compiled by Python;
- ``plan``: one ``plan.run()`` (the second of two);
- ``pays after``: the runs after which compiling has paid for itself,
  ``compile / (walk - plan)``;
- ``memory``: the peak of the process's resident memory while compiling, over what
  it held before (the graph and its arrays), in MiB and per function.

``y.forward()`` compiles a graph by itself only up to ``agnograd.static._replay.LARGEST``
functions: time pays back after about ten runs at any size, memory grows with the
graph. Each size runs in a fresh process, so that one size's peak does not hide the
next's.

Run ``python benchmarks/bench_compile_cost.py [--sizes N ...] [--quick]``; the last
line is one ``BENCHMARK_JSON`` record.
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

import _harness

SIZES = (2_000, 20_000, 100_000)
QUICK = (200, 2_000)


def measure(n: int) -> dict[str, float]:
    """The costs of one chain of ``n`` functions, in this process."""
    import numpy as np

    import agnograd
    import agnograd.functions as F

    x = agnograd.Variable(np.ones(8))
    with agnograd.auto_forward(False):
        y = x
        for i in range(n):
            y = F.sin(y) if i % 2 else y * 1.0001
        y = F.sum(y)
    with agnograd.using_config("compile_after", None):
        for _ in range(2):
            x.cleargrad()
            start = time.perf_counter()
            y.forward()
            y.backward()
            walk = time.perf_counter() - start
    walked = x.grad.copy()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    plan = agnograd.compile(y)
    compiled = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(2):
        x.cleargrad()
        start = time.perf_counter()
        plan.run()
        run = time.perf_counter() - start
    _harness.check_close(f"chain of {n}", [x.grad], [walked], rtol=0.0)
    memory = (after - before) / 1024  # ru_maxrss is in KiB on Linux
    return {"walk_s": walk, "compile_s": compiled, "plan_s": run, "memory_mib": memory}


def main(argv: list[str]) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="functions per chain")
    p.add_argument("--quick", action="store_true", help=f"sizes {QUICK} (smoke test)")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a worker: one size
    args = p.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one)))
        return {}
    sizes = QUICK if args.quick else args.sizes
    results = {}
    for n in sizes:
        worker = [sys.executable, __file__, "--one", str(n)]
        out = subprocess.run(worker, capture_output=True, text=True, check=True).stdout
        results[n] = json.loads(out.splitlines()[-1])
    rows = []
    for n, r in results.items():
        saved = r["walk_s"] - r["plan_s"]
        pays = r["compile_s"] / saved if saved > 0 else float("inf")
        ms = [r[k] * 1e3 for k in ("walk_s", "compile_s", "plan_s")]
        rows.append([n, *ms, pays, r["memory_mib"], r["memory_mib"] * 1024 / n])
    print("chains of n functions on (8,) float64")
    headers = ["n", "walk ms", "compile ms", "plan ms", "pays after", "memory MiB", "kB/fn"]
    print(_harness.table(headers, rows))
    record = {str(n): r for n, r in results.items()}
    return _harness.emit("compile_cost", {"quick": args.quick, "sizes": record})


if __name__ == "__main__":
    main(sys.argv[1:])
