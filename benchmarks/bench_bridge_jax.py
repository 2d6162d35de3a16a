"""Cost of the JAX bridge (agnograd.interop.jax): a bridged call next to JAX alone.

The computation is ``loss(w) = sum(tanh(x @ w) ** 2)`` with ``x`` of shape
``(n, n)`` and ``w`` of shape ``(n,)``, float32, for a small ``n`` (8: the
bridge's overhead) and a large one (1024: the computation). Each contestant
computes the loss and its gradient with respect to ``w``:

- agnograd inside JAX: ``jax.value_and_grad`` of the pure-JAX loss and of
  ``bridge.function(loss written with agnograd)``, each jitted and eager. The
  bridge recomputes the forward in its backward (it saves only the inputs).
  "agnograd on jax jit" is agnograd's own ``backward`` on JAX arrays under
  ``jax.jit``, without the bridge: what the operations agnograd's rules emit cost
  in XLA, apart from the bridge.
- JAX inside agnograd: agnograd on NumPy arrays (``F.*``, forward and backward)
  next to the same loss with the ``tanh(x @ w)`` part as
  ``bridge.node(jax.jit(...))`` on the same NumPy arrays (64-byte aligned, so
  DLPack shares them with JAX without a copy).

Results wait for JAX's asynchronous dispatch (``block_until_ready``).

Run ``python benchmarks/bench_bridge_jax.py [--rounds N] [--quick]``.
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
import numpy as np

import agnograd
import agnograd.functions as F


def aligned(a: np.ndarray, alignment: int = 64) -> np.ndarray:
    """A copy of ``a`` whose buffer starts on an ``alignment``-byte boundary."""
    raw = np.empty(a.nbytes + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def contestants(n: int, skip: set[str]) -> dict[str, Callable[[], Any]]:
    """One call per contestant (loss and gradient); the names say what is timed."""
    import jax
    import jax.numpy as jnp

    import agnograd.interop.jax as bridge

    rng = np.random.default_rng(0)
    x_np = aligned((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32))
    w_np = aligned(rng.standard_normal(n).astype(np.float32))
    x, w = jnp.asarray(x_np), jnp.asarray(w_np)

    def jax_loss(w: Any, x: Any) -> Any:
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    def ag_loss(w: Any, x: Any) -> Any:
        return F.sum(F.tanh(x @ w) ** 2)

    bridged = bridge.function(ag_loss)
    jax_jit = jax.jit(jax.value_and_grad(jax_loss))
    bridge_jit = jax.jit(jax.value_and_grad(bridged))
    jax_eager = jax.value_and_grad(jax_loss)
    bridge_eager = jax.value_and_grad(bridged)
    hidden = bridge.node(jax.jit(lambda w, x: jnp.tanh(x @ w)))

    def agnograd_numpy() -> Any:
        v = agnograd.Variable(w_np)
        loss = ag_loss(v, x_np)
        loss.backward()
        return loss.array, v.grad

    def agnograd_node() -> Any:
        v = agnograd.Variable(w_np)
        loss = F.sum(hidden(v, x_np) ** 2)
        loss.backward()
        return loss.array, v.grad

    @jax.jit
    def agnograd_on_jax(w: Any, x: Any) -> Any:
        v = agnograd.Variable(w)
        loss = ag_loss(v, x)
        (g,) = agnograd.grad([loss], [v])
        assert g is not None
        return loss.array, g.array

    steps: dict[str, Callable[[], Any]] = {
        "jax jit": lambda: jax.block_until_ready(jax_jit(w, x)),
        "agnograd on jax jit": lambda: jax.block_until_ready(agnograd_on_jax(w, x)),
        "bridge.function jit": lambda: jax.block_until_ready(bridge_jit(w, x)),
        "jax eager": lambda: jax.block_until_ready(jax_eager(w, x)),
        "bridge.function eager": lambda: jax.block_until_ready(bridge_eager(w, x)),
        "agnograd numpy": agnograd_numpy,
        "agnograd numpy + bridge.node": agnograd_node,
    }
    want_value, want_grad = (np.asarray(a) for a in jax_jit(w, x))
    for name, step in steps.items():
        value, g = step()
        _harness.check_close(
            name, [np.asarray(value), np.asarray(g)], [want_value, want_grad], 1e-4
        )
    return {k: v for k, v in steps.items() if k not in skip}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=21, batch_seconds=0.02)
    args = p.parse_args(argv)
    sizes = (8, 64) if args.quick else (8, 1024)
    batch = 0.001 if args.quick else args.batch_seconds
    results: dict[str, Any] = {}
    summaries: dict[str, Any] = {}
    for n in sizes:
        steps = contestants(n, _harness.skipped(args))
        times = _harness.interleaved(steps, rounds=args.rounds, batch_seconds=batch, warm_up=True)
        us = {k: [t * 1e6 for t in v] for k, v in times.items()}
        medians = {k: statistics.median(v) for k, v in us.items()}
        summary = _harness.ratio_summary(
            times,
            [
                ("bridge.function jit", "jax jit", None),
                ("bridge.function jit", "agnograd on jax jit", None),
                ("bridge.function eager", "jax eager", None),
                ("agnograd numpy + bridge.node", "agnograd numpy", None),
            ],
        )
        print(
            f"JAX bridge, loss and gradient of sum(tanh(x @ w) ** 2), x ({n}, {n}) float32, "
            f"{args.rounds} interleaved rounds"
        )
        rows = [[name, medians[name], min(us[name])] for name in steps]
        print(_harness.table(["contestant", "us/call median", "us/call min"], rows))
        print()
        print(_harness.ratio_table(summary))
        print()
        results[str(n)] = medians
        summaries[str(n)] = summary
    import jax

    return _harness.emit(
        "bridge_jax",
        {
            "sizes": list(sizes),
            "dtype": "float32",
            "rounds": args.rounds,
            "quick": args.quick,
            "jax": jax.__version__,
            "us_per_call_median": results,
            "ratios": summaries,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
