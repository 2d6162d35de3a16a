"""``agnograd.jit(value_and_grad(f))`` against hand-written code and ``jax.jit``.

A training step written as a function, ``value_and_grad`` of the loss, jitted: the
first call traces it into a graph (the loss and its gradient) and compiles the
plan, the later calls run the plan. Each group is timed interleaved with its
reference and reported as multiples of it measured in the same rounds:

- chain: ``bench_overhead``'s 200-op chain (25 blocks of ``tanh, *0.5, exp, -1.0,
  *w, +x, sin, +b``) summed, as a function of ``(x, w)`` on (8,) float64: its value
  and the gradients of ``x`` and ``w``, against the same written by hand in NumPy.
  Target: at most 1.3x.
- chain on torch: the same on float64 torch tensors, against it written by hand
  with torch. Target: at most 1.5x.
- chain on JAX: the same on JAX arrays, against ``jax.jit(jax.value_and_grad(f))``
  of the chain written with ``jax.numpy``; the plan runs as one XLA program.
  Target: at most 1.5x.
- mlp: ``bench_mlp``'s step (784-1024-1024-10, batch 256, float32, the loss and
  the gradients of the weights and biases) against it written by hand in NumPy.
  Target: at most 1.02x.

It also measures what the first call costs (tracing ``value_and_grad`` of the
chain, compiling the plan, one run), per function of the traced graph.

Run ``python benchmarks/bench_jit.py [--rounds N] [--quick] [--skip torch,jax,mlp]``.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded. Two BLAS
# threads stall on a busy two-core machine, and one thread makes contestants comparable.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)
# XLA's CPU client: one thread too, for the same reason.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import _harness
import bench_mlp
import bench_overhead
import numpy as np

import agnograd
from agnograd.functional import value_and_grad
from agnograd.static._compiled import CLEAR, CompiledGraph

TARGETS = {"chain": 1.3, "chain on torch": 1.5, "chain on JAX": 1.5, "mlp": 1.02}
JIT = "agnograd.jit"


def chain_loss(blocks: int) -> Callable[[Any, Any], Any]:
    """The chain summed, as a function of ``(x, w)`` in any namespace."""

    def loss(x: Any, w: Any) -> Any:
        xp = agnograd.namespace(x)
        return xp.sum(bench_overhead.chain(x, x, w, xp.tanh, xp.exp, xp.sin, blocks))

    return loss


def hand_chain(x: Any, w: Any, blocks: int, lib: Any = np) -> Callable[[], Any]:
    """The chain's value and gradients written by hand with ``lib`` (NumPy or torch):
    bench_overhead's forward, keeping what the backward reads, and its backward."""

    def step() -> tuple[Any, tuple[Any, Any]]:
        h, saved = bench_overhead.hand_forward(x, w, blocks, lib)
        gx = lib.zeros_like(x)
        gw = lib.zeros_like(w)
        gh = lib.ones_like(x)
        for a, c, d, f in reversed(saved):
            gf = gh * lib.cos(f)
            gx += gf
            gw += gf * d
            gb = gh + gf * w * c
            gh = gb * 0.5 * (1.0 - a * a)
        gx += gh
        return lib.sum(h), (gx, gw)

    return step


def chain_steps(blocks: int, lib: str) -> dict[str, Callable[[], Any]]:
    """The reference (first) and jit's step, each returning (value, (gx, gw)), on
    ``lib``'s arrays: ``numpy``, ``torch`` or ``jax``."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, bench_overhead.SIZE)
    w = rng.uniform(0.5, 1.5, bench_overhead.SIZE)
    step = agnograd.jit(value_and_grad(chain_loss(blocks), argnums=(0, 1)))
    if lib == "numpy":
        return {"hand-numpy": hand_chain(x, w, blocks), JIT: lambda: step(x, w)}
    if lib == "torch":
        import torch

        xt, wt = torch.tensor(x), torch.tensor(w)
        return {"hand-torch": hand_chain(xt, wt, blocks, torch), JIT: lambda: step(xt, wt)}
    import jax
    import jax.numpy as jnp

    xj, wj = jnp.asarray(x), jnp.asarray(w)
    reference = jax.jit(jax.value_and_grad(chain_loss_jax(blocks), argnums=(0, 1)))
    return {
        "jax.jit": lambda: jax.block_until_ready(reference(xj, wj)),
        JIT: lambda: jax.block_until_ready(step(xj, wj)),
    }


def chain_loss_jax(blocks: int) -> Callable[[Any, Any], Any]:
    import jax.numpy as jnp

    def loss(x: Any, w: Any) -> Any:
        return jnp.sum(bench_overhead.chain(x, x, w, jnp.tanh, jnp.exp, jnp.sin, blocks))

    return loss


def mlp_steps(quick: bool) -> dict[str, Callable[[], Any]]:
    """The MLP step by hand in NumPy and jitted, each returning (loss, grads)."""
    sizes = bench_mlp.QUICK_SIZES if quick else bench_mlp.SIZES
    batch = bench_mlp.QUICK_BATCH if quick else bench_mlp.BATCH
    x, t, params = bench_mlp.problem(sizes, batch)

    def loss(params: list[Any], x: Any, t: Any) -> Any:
        return bench_mlp.agnograd_loss(x, t, params)

    step = agnograd.jit(value_and_grad(loss))
    return {"hand-numpy": bench_mlp.hand_numpy(x, t, params), JIT: lambda: step(params, x, t)}


def flat(result: Any) -> list[Any]:
    """A step's value and gradients as one list of NumPy arrays."""
    value, grads = result
    return [np.asarray(a) for a in (value, *grads)]


def measure(
    name: str, steps: dict[str, Callable[[], Any]], rounds: int, batch: float
) -> dict[str, Any]:
    """Time ``steps`` (the reference first) and report jit's ratio to it."""
    reference = next(iter(steps))
    times = _harness.interleaved(steps, rounds=rounds, batch_seconds=batch, warm_up=True)
    summary = _harness.ratio_summary(times, [(JIT, reference, TARGETS[name])])
    return _harness.report(times, summary)


def first_call_cost(blocks: int, repeats: int) -> dict[str, Any]:
    """What the first call of the jitted chain step costs, per function of its graph:
    all of it (trace, compile, one run), the compiling alone, and one later call."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, bench_overhead.SIZE)
    w = rng.uniform(0.5, 1.5, bench_overhead.SIZE)
    step = agnograd.jit(value_and_grad(chain_loss(blocks), argnums=(0, 1)))
    first, compiling, later = [], [], []
    for _ in range(repeats):
        step.clear_cache()
        start = time.perf_counter()
        step(x, w)
        first.append(time.perf_counter() - start)
        start = time.perf_counter()
        step(x, w)
        later.append(time.perf_counter() - start)
        (entry,) = step._cache.values()
        for node, a in zip(entry.inputs, (x, w), strict=True):
            node._data = a  # the plan is made for its inputs' arrays
        start = time.perf_counter()
        CompiledGraph(entry.outputs, keep=CLEAR)
        compiling.append(time.perf_counter() - start)
        for node in entry.inputs:
            node._data = None
    functions = len(entry.plan._funcs)
    total, compiled, run = (statistics.median(v) for v in (first, compiling, later))
    record = {
        "functions": functions,
        "first_call_us": total * 1e6,
        "compile_us": compiled * 1e6,
        "run_us": run * 1e6,
        "trace_us_per_function": (total - compiled - run) / functions * 1e6,
        "compile_us_per_function": compiled / functions * 1e6,
    }
    print(
        f"\nFirst call of the chain's step: {functions} functions traced (the loss and its "
        f"gradient); {total * 1e3:.1f} ms in all: tracing "
        f"{record['trace_us_per_function']:.0f} us and compiling "
        f"{record['compile_us_per_function']:.0f} us per function, then {run * 1e6:.0f} us "
        "per call"
    )
    return record


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=31, batch_seconds=0.02)
    args = p.parse_args(argv)
    skip = _harness.skipped(args)
    batch = 0.001 if args.quick else args.batch_seconds
    blocks = 1 if args.quick else bench_overhead.OPS // bench_overhead.BLOCK
    record: dict[str, Any] = {"rounds": args.rounds, "quick": args.quick}
    print(
        f"Chain of {blocks * bench_overhead.BLOCK} ops on ({bench_overhead.SIZE},) float64, "
        f"value and gradients, {args.rounds} interleaved rounds"
    )
    groups = [("chain", "numpy")]
    if "torch" not in skip and _harness.torch_single_thread() is not None:
        groups.append(("chain on torch", "torch"))
    jax = None if "jax" in skip else _harness.optional_import("jax")
    if jax is not None:
        groups.append(("chain on JAX", "jax"))
    for name, lib in groups:
        # JAX in float64 in a block of its own: other benchmarks may share the process.
        with jax.enable_x64(True) if lib == "jax" else contextlib.nullcontext():
            steps = chain_steps(blocks, lib)
            want = flat(next(iter(steps.values()))())
            _harness.check_close(JIT, flat(steps[JIT]()), want, rtol=1e-12)
            print(f"\n{name}")
            record[name] = measure(name, steps, args.rounds, batch)
    if "mlp" not in skip:
        steps = mlp_steps(args.quick)
        want = flat(steps["hand-numpy"]())
        _harness.check_close(JIT, flat(steps[JIT]()), want, rtol=1e-4)
        print("\nMLP step, 784-1024-1024-10, batch 256, float32, loss and gradients")
        rounds = args.rounds if args.quick else max(5, args.rounds // 3)
        record["mlp"] = measure("mlp", steps, rounds, 0.001 if args.quick else 0.2)
    record["first_call"] = first_call_cost(blocks, 3 if args.quick else 7)
    return _harness.emit("jit", record)


if __name__ == "__main__":
    main(sys.argv[1:])
