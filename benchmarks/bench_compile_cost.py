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

Then the first call of ``agnograd.jit`` as the graph grows: ``bench_jit``'s step
(``value_and_grad`` of the chain of 8-op blocks, ``x`` and ``w`` (8,) float64) at
``--jit-sizes`` operations of the chain (about 2.5 functions each, with the
gradient), each call in a fresh process, in CPU time, the processes of one size
interleaved over ``--rounds`` rounds:

- ``eager``: one call of the step without ``jit``;
- ``jit``: the first call of ``jit(step)``, its graph bounded by ``max_functions``
  (``LARGEST`` by default): a larger graph runs eagerly, its trace stopped at the
  bound;
- ``unbounded``: the first call of ``jit(step, max_functions=None)``, which traces
  and compiles the whole graph (per operation: flat if that cost is linear), and
  its second call, the plan's run;
- ``MiB``: each process's peak resident memory during the call over what it held
  before (``ru_maxrss``).

Targets at 50,000 operations: the first call of ``jit`` at most 10x the eager call's
time and at most 2x its peak memory.

Run ``python benchmarks/bench_compile_cost.py [--sizes N ...] [--jit-sizes N ...]
[--rounds R] [--quick]``; the last line is one ``BENCHMARK_JSON`` record.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import _harness

SIZES = (2_000, 20_000, 100_000)
QUICK = (200, 2_000)
JIT_SIZES = (5_000, 20_000, 50_000)
JIT_QUICK = (200, 800)
#: With --quick, the bound of jit's graphs: the larger quick chain passes it.
QUICK_BOUND = 1_000
JIT_MODES = ("eager", "jit", "unbounded")
#: At the largest of JIT_SIZES: jit's first call over the eager call, in time and
#: in peak memory.
JIT_TARGETS = {"time": 10.0, "memory": 2.0}


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


def measure_jit(ops: int, mode: str, bound: int | None) -> dict[str, Any]:
    """One call of bench_jit's step on a chain of ``ops`` operations, in this fresh
    process: eager, or the first call of ``jit`` (``mode`` ``jit``: bounded by
    ``bound``, None for jit's default; ``unbounded``: ``max_functions=None``, then a
    second call). Checked against the eager call's results, bit for bit."""
    import warnings

    import bench_jit
    import bench_overhead
    import numpy as np

    import agnograd
    from agnograd.functional import value_and_grad

    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, bench_overhead.SIZE)
    w = rng.uniform(0.5, 1.5, bench_overhead.SIZE)

    def step_of(blocks: int) -> Any:
        return value_and_grad(bench_jit.chain_loss(blocks), argnums=(0, 1))

    def jitted(blocks: int) -> Any:
        if mode == "unbounded":
            return agnograd.jit(step_of(blocks), max_functions=None)
        if bound is None:
            return agnograd.jit(step_of(blocks))
        return agnograd.jit(step_of(blocks), max_functions=bound)

    # The same small calls in every process first: imports and first-use caches.
    step_of(2)(x, w)
    jitted(2)(x, w)
    step = step_of(ops // bench_overhead.BLOCK)
    fun = step if mode == "eager" else jitted(ops // bench_overhead.BLOCK)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jit's JitWarning past its bound
        got = fun(x, w)
    seconds = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    record: dict[str, Any] = {"s": seconds, "mib": (peak - before) / 1024}
    if mode != "eager":
        info = fun.cache_info()
        record["eager_calls"] = info.eager
        if info.eager == 0:
            (entry,) = fun._cache.values()
            record["functions"] = len(entry.plan._funcs)
        start = time.process_time()
        again = fun(x, w)
        record["later_s"] = time.process_time() - start
        want = bench_jit.flat(step(x, w))
        for result in (got, again):
            _harness.check_close(f"jit, {ops} ops", bench_jit.flat(result), want, rtol=0.0)
    return record


def jit_costs(sizes: tuple[int, ...], rounds: int, bound: int | None) -> dict[str, Any]:
    """:func:`measure_jit` of each mode at each size, in fresh processes interleaved
    over ``rounds``; the medians, and the ratios of jit's first call to eager."""
    results: dict[str, Any] = {}
    rows = []
    for ops in sizes:
        runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in JIT_MODES}
        for _ in range(rounds):
            for mode in JIT_MODES:
                worker = [sys.executable, __file__, "--jit-one", str(ops), mode]
                if bound is not None:
                    worker += ["--bound", str(bound)]
                out = subprocess.run(worker, capture_output=True, text=True, check=True).stdout
                runs[mode].append(json.loads(out.splitlines()[-1]))
        med = {
            mode: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            for mode, rs in runs.items()
        }
        eager, jit, whole = med["eager"], med["jit"], med["unbounded"]
        record = {
            **{f"{mode}_{k}": v for mode, m in med.items() for k, v in m.items()},
            "time_ratio": jit["s"] / eager["s"],
            "memory_ratio": jit["mib"] / eager["mib"] if eager["mib"] > 0 else None,
            "unbounded_us_per_op": whole["s"] / ops * 1e6,
        }
        results[str(ops)] = record
        rows.append(
            [
                ops,
                whole["functions"],
                eager["s"],
                jit["s"],
                record["time_ratio"],
                "eager" if jit["eager_calls"] else "plan",
                eager["mib"],
                jit["mib"],
                whole["s"],
                record["unbounded_us_per_op"],
                whole["mib"],
                whole["later_s"] * 1e3,
            ]
        )
    print(
        "\njit's first call of value_and_grad of bench_jit's chain, CPU seconds (medians of "
        f"{rounds} rounds of fresh processes); max_functions={bound or 'LARGEST'}"
    )
    headers = [
        "ops",
        "functions",
        "eager s",
        "jit s",
        "x eager",
        "jit runs",
        "eager MiB",
        "jit MiB",
        "unbounded s",
        "us/op",
        "unbounded MiB",
        "plan ms",
    ]
    print(_harness.table(headers, rows))
    largest = results[str(max(sizes))]
    summary = {
        "ops": max(sizes),
        "time_ratio": largest["time_ratio"],
        "memory_ratio": largest["memory_ratio"],
        "time_target": JIT_TARGETS["time"],
        "memory_target": JIT_TARGETS["memory"],
    }
    memory = largest["memory_ratio"]
    print(
        f"at {max(sizes)} ops, jit's first call: {largest['time_ratio']:.2f}x eager's time "
        f"(target {JIT_TARGETS['time']:g}x), "
        + ("n/a" if memory is None else f"{memory:.2f}x")
        + f" its peak memory (target {JIT_TARGETS['memory']:g}x)"
    )
    return {"sizes": results, "largest": summary}


def main(argv: list[str]) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="functions per chain")
    p.add_argument(
        "--jit-sizes", type=int, nargs="+", default=JIT_SIZES, help="ops of jit's chains"
    )
    p.add_argument("--rounds", type=int, default=3, help="rounds of jit's processes")
    p.add_argument("--quick", action="store_true", help=f"sizes {QUICK} (smoke test)")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a worker: one size
    p.add_argument("--jit-one", nargs=2, help=argparse.SUPPRESS)  # a worker: ops, mode
    p.add_argument("--bound", type=int, help=argparse.SUPPRESS)  # its max_functions
    args = p.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one)))
        return {}
    if args.jit_one is not None:
        ops, mode = args.jit_one
        print(json.dumps(measure_jit(int(ops), mode, args.bound)))
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
    jit = jit_costs(
        JIT_QUICK if args.quick else tuple(args.jit_sizes),
        1 if args.quick else args.rounds,
        QUICK_BOUND if args.quick else None,
    )
    return _harness.emit("compile_cost", {"quick": args.quick, "sizes": record, "jit": jit})


if __name__ == "__main__":
    main(sys.argv[1:])
