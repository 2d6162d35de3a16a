"""Compiled plans on JAX lowered to XLA: the chain and the MLP step, against jax.jit.

A define-then-run graph on JAX arrays, built once, is re-run four ways: eager
agnograd (the graph recorded anew at every step), static (``y.forward();
y.backward()``, which compile the graph after ``compile_after`` runs), the
compiled plan (``agnograd.compile(y).run()``, which on JAX runs its lowering with
the plan's checks first) and the lowering alone, one XLA program
(``agnograd.static._compiled_jax.lower(plan).run()``). Each
is timed, interleaved, with ``jax.jit`` of JAX's own forward and backward, and
reported as multiples of it measured in the same rounds. Every step waits for its
arrays (``jax.block_until_ready``): JAX dispatches asynchronously.

- chain: ``bench_overhead``'s 200-op chain (25 blocks of ``tanh, *0.5, exp, -1.0,
  *w, +x, sin, +b``) on (8,) float64, its value and the gradients of ``x`` and
  ``w`` for a seed; for JAX, ``jax.jit`` of ``jax.vjp``.
- mlp: ``bench_mlp``'s step, 784-1024-1024-10, batch 256, float32: the loss and
  the gradients of the weights and biases; for JAX, ``jax.jit(jax.value_and_grad)``.

Target (issue 20): lowered at most 1.5x ``jax.jit`` on both.

Run ``python benchmarks/bench_compiled_jax.py [--rounds N] [--quick]``.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded. Two BLAS
# threads stall on a busy two-core machine, and one thread makes contestants comparable.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)
# XLA's CPU client: one thread too, for the same reason.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

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
from agnograd.static._compiled_jax import lower

TARGET = 1.5
JIT = "jax.jit"


def ready(result: Any) -> Any:
    import jax

    return jax.block_until_ready(result)


def plan_steps(
    plan: Any, params: list[agnograd.Variable], value: Callable[[], Any]
) -> dict[str, Callable[[], Any]]:
    """The plan's ``run()``, and its lowering's (the plan's own if it has one)."""
    lowered = getattr(plan, "_lowered", None) or lower(plan)
    assert lowered is not None, "the plan's arrays are JAX arrays on one device"

    def step(run: Callable[[], None]) -> Callable[[], Any]:
        def go() -> Any:
            for p in params:
                p.cleargrad()
            run()
            return ready((value(), [p.grad for p in params]))

        return go

    return {"compiled": step(plan.run), "lowered": step(lowered.run)}


def chain_steps(blocks: int) -> dict[str, Callable[[], Any]]:
    """Each contestant's step of the chain, returning (y, [gx, gw])."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.uniform(-1.0, 1.0, bench_overhead.SIZE))
    w = jnp.asarray(rng.uniform(0.5, 1.5, bench_overhead.SIZE))
    seed = jnp.ones(bench_overhead.SIZE)

    def value_and_vjp(x: Any, w: Any, seed: Any) -> Any:
        y, vjp = jax.vjp(
            lambda x, w: bench_overhead.chain(x, x, w, jnp.tanh, jnp.exp, jnp.sin, blocks), x, w
        )
        return y, list(vjp(seed))

    jitted = jax.jit(value_and_vjp)
    xv, wv = agnograd.Variable(x), agnograd.Variable(w)

    def eager() -> Any:
        xv.cleargrad()
        wv.cleargrad()
        y = bench_overhead.chain(xv, xv, wv, F.tanh, F.exp, F.sin, blocks)
        y.grad = seed
        y.backward()
        return ready((y.array, [xv.grad, wv.grad]))

    with agnograd.auto_forward(False):
        y = bench_overhead.chain(xv, xv, wv, F.tanh, F.exp, F.sin, blocks)
    y.grad = seed

    def static() -> Any:
        xv.cleargrad()
        wv.cleargrad()
        y.forward()
        y.backward()
        return ready((y.array, [xv.grad, wv.grad]))

    steps = {JIT: lambda: ready(jitted(x, w, seed)), "eager": eager, "static": static}
    return steps | plan_steps(compile_graph(y), [xv, wv], lambda: y.array)


def mlp_steps(quick: bool) -> dict[str, Callable[[], Any]]:
    """Each contestant's MLP step, returning (loss, grads)."""
    import jax
    import jax.numpy as jnp

    sizes = bench_mlp.QUICK_SIZES if quick else bench_mlp.SIZES
    batch = bench_mlp.QUICK_BATCH if quick else bench_mlp.BATCH
    x_np, t_np, params_np = bench_mlp.problem(sizes, batch)
    x, t = jnp.asarray(x_np), jnp.asarray(t_np)
    params = [jnp.asarray(p) for p in params_np]
    rows = jnp.arange(batch)

    def loss_fn(ps: list[Any]) -> Any:
        W1, b1, W2, b2, W3, b3 = ps
        h1 = jnp.tanh(x @ W1 + b1)
        h2 = jnp.tanh(h1 @ W2 + b2)
        z = h2 @ W3 + b3
        return jnp.mean(jax.nn.logsumexp(z, axis=1) - z[rows, t])

    jitted = jax.jit(jax.value_and_grad(loss_fn))
    variables = [agnograd.Variable(p) for p in params]

    def eager() -> Any:
        for v in variables:
            v.cleargrad()
        loss = bench_mlp.agnograd_loss(x, t, variables)
        loss.backward()
        return ready((loss.array, [v.grad for v in variables]))

    xv = agnograd.Variable(x, requires_grad=False)
    with agnograd.auto_forward(False):
        loss = bench_mlp.agnograd_loss(xv, t, variables)

    def static() -> Any:
        for v in variables:
            v.cleargrad()
        loss.forward()
        loss.backward()
        return ready((loss.array, [v.grad for v in variables]))

    steps = {JIT: lambda: ready(jitted(params)), "eager": eager, "static": static}
    return steps | plan_steps(compile_graph(loss), variables, lambda: loss.array)


def check(steps: dict[str, Callable[[], Any]], rtol: float) -> None:
    """Every contestant's value and gradients are jax.jit's, to ``rtol``."""
    value, grads = steps[JIT]()
    want = [np.asarray(value), *[np.asarray(g) for g in grads]]
    for name, step in steps.items():
        value, grads = step()
        got = [np.asarray(value), *[np.asarray(g) for g in grads]]
        _harness.check_close(name, got, want, rtol=rtol)


def measure(steps: dict[str, Callable[[], Any]], rounds: int, batch: float) -> dict[str, Any]:
    times = _harness.interleaved(steps, rounds=rounds, batch_seconds=batch, warm_up=True)
    pairs = [(k, JIT, TARGET if k == "lowered" else None) for k in steps if k != JIT]
    summary = _harness.ratio_summary(times, pairs)
    rows = [
        [
            k,
            statistics.median(times[k]) * 1e6,
            min(times[k]) * 1e6,
            statistics.median(_harness.ratios(times, k, JIT) or [1.0]),
        ]
        for k in steps
    ]
    print(_harness.table(["contestant", "us median", "us min", "x jax.jit"], rows))
    print(_harness.ratio_table(summary))
    return {
        "us_median": {k: statistics.median(v) * 1e6 for k, v in times.items()},
        "ratios": summary,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=31, batch_seconds=0.02)
    p.add_argument("--no-mlp", action="store_true", help="time the chain only")
    args = p.parse_args(argv)
    jax = _harness.optional_import("jax")
    if jax is None:
        print("jax is not installed: nothing to compare")
        return _harness.emit("compiled_jax", {"quick": args.quick, "skipped": "no jax"})
    skip = _harness.skipped(args) - {JIT}
    batch = 0.001 if args.quick else args.batch_seconds
    blocks = 1 if args.quick else bench_overhead.OPS // bench_overhead.BLOCK
    record: dict[str, Any] = {"rounds": args.rounds, "quick": args.quick, "jax": jax.__version__}

    # float64 in a block of its own: other benchmarks may share the process.
    with jax.enable_x64(True):
        chain = {k: v for k, v in chain_steps(blocks).items() if k not in skip}
        check(chain, 1e-12)
        print(
            f"Chain of {blocks * bench_overhead.BLOCK} ops on ({bench_overhead.SIZE},) "
            f"float64, value and gradients, {args.rounds} interleaved rounds"
        )
        record["chain"] = measure(chain, args.rounds, batch)
    if not args.no_mlp:
        mlp = {k: v for k, v in mlp_steps(args.quick).items() if k not in skip}
        check(mlp, 1e-4)
        print("\nMLP step, 784-1024-1024-10, batch 256, float32, loss and gradients")
        rounds = args.rounds if args.quick else max(5, args.rounds // 3)
        record["mlp"] = measure(mlp, rounds, 0.001 if args.quick else 0.2)
    return _harness.emit("compiled_jax", record)


if __name__ == "__main__":
    main(sys.argv[1:])
