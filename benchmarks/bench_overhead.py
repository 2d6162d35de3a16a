"""Per-op overhead: a 200-op elementwise chain on an (8,) float64 array.

Forward and backward of the chain, in microseconds per op, for agnograd on NumPy
arrays, hand-written NumPy (forward storing intermediates, backward by hand),
torch.autograd on float64 CPU tensors, agnograd on torch tensors, and, when they
are installed, JAX's eager ``jax.vjp`` (no ``jit``), HIPS autograd and mygrad. The
arrays are so small that the time is almost all Python overhead: graph recording,
dispatch and the backward loop.

Targets: agnograd-numpy at most 4.5x the hand-written NumPy; agnograd on torch
tensors at most 1.4x torch.autograd.

``--freeze`` calls ``gc.freeze()`` before timing, as a long-running program can
after its imports: Python's cyclic garbage collector then no longer walks every
object of the loaded libraries each time the graphs' objects trigger a full
collection.

``--no-collector`` turns the collector off while timing: a recorded operation leaves
Python objects alive until its backward (agnograd on torch also keeps its tensors,
which the collector walks), and a chain of more than about 200 operations makes
them trigger young collections.

``--after-write`` makes one of agnograd's writes in place before timing, into an
array of no graph (``p.array -= 0.0 * p.array``, as the first parameter update of a
training loop): what catching writes into the arrays nodes keep costs once agnograd
has written somewhere (on NumPy, each node then records the write clock).

Run ``python benchmarks/bench_overhead.py [--rounds N] [--quick] [--profile] [--freeze]
[--no-collector] [--after-write]``.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded. Two BLAS
# threads stall on a busy two-core machine, and one thread makes contestants comparable.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import gc
import statistics
import sys
from collections.abc import Callable
from typing import Any

import _harness
import numpy as np

import agnograd
import agnograd.functions as F

SIZE = 8
BLOCK = 8  # ops per block of the chain (see chain)
OPS = 200
TARGETS = {"hand": 4.5, "torch": 1.4}


def chain(h: Any, x: Any, w: Any, tanh: Any, exp: Any, sin: Any, blocks: int) -> Any:
    """The benchmarked computation: ``blocks`` blocks of eight elementwise ops.

    Each block mixes unary functions, operations with Python scalars and with
    other Variables (a leaf ``w``, the input ``x`` and a skip connection), and
    keeps values in a bounded range however long the chain is.
    """
    for _ in range(blocks):
        a = tanh(h)
        b = a * 0.5
        c = exp(b)
        d = c - 1.0
        e = d * w
        f = e + x
        g = sin(f)
        h = g + b
    return h


def hand_forward(x: Any, w: Any, blocks: int, lib: Any = np) -> tuple[Any, list[Any]]:
    """The chain's forward written by hand with ``lib`` (NumPy, or torch on its
    tensors), keeping what the backward needs."""
    saved = []
    h = x
    for _ in range(blocks):
        a = lib.tanh(h)
        b = a * 0.5
        c = lib.exp(b)
        d = c - 1.0
        e = d * w
        f = e + x
        g = lib.sin(f)
        h = g + b
        saved.append((a, c, d, f))
    return h, saved


def hand_numpy(x: Any, w: Any, seed: Any, blocks: int, lib: Any = np) -> Callable[[], Any]:
    """The chain written by hand: forward keeps what the backward needs (``lib``: as
    in :func:`hand_forward`)."""

    def step() -> tuple[Any, Any]:
        _, saved = hand_forward(x, w, blocks, lib)
        gx = lib.zeros_like(x)
        gw = lib.zeros_like(w)
        gh = seed
        for a, c, d, f in reversed(saved):
            # h = g + b: both get gh; g = sin(f); f = e + x; e = d * w; d = c - 1
            gf = gh * lib.cos(f)
            gx += gf
            gw += gf * d
            gc = gf * w
            gb = gh + gc * c  # b feeds exp (through c) and the skip connection
            ga = gb * 0.5
            gh = ga * (1.0 - a * a)
        gx += gh  # h0 is x itself
        return gx, gw

    return step


def forward_only(x: np.ndarray, w: np.ndarray, blocks: int, torch: Any) -> dict[str, Any]:
    """The forward alone (graph recorded, no backward), to split the time by phase."""
    xv = agnograd.Variable(x)
    wv = agnograd.Variable(w)
    steps = {
        "hand-numpy (forward)": lambda: hand_forward(x, w, blocks),
        "agnograd-numpy (forward)": lambda: chain(xv, xv, wv, F.tanh, F.exp, F.sin, blocks),
    }
    if torch is not None:
        xt = torch.tensor(x, requires_grad=True)
        wt = torch.tensor(w, requires_grad=True)
        steps["torch.autograd (forward)"] = lambda: chain(
            xt, xt, wt, torch.tanh, torch.exp, torch.sin, blocks
        )
    return steps


def agnograd_step(x: Any, w: Any, seed: Any, blocks: int) -> Callable[[], Any]:
    """agnograd on the arrays' own library (NumPy or torch)."""
    xv = agnograd.Variable(x)
    wv = agnograd.Variable(w)

    def step() -> tuple[Any, Any]:
        xv.cleargrad()
        wv.cleargrad()
        y = chain(xv, xv, wv, F.tanh, F.exp, F.sin, blocks)
        y.grad = seed
        y.backward()
        return xv.grad, wv.grad

    return step


def torch_step(torch: Any, x: Any, w: Any, seed: Any, blocks: int) -> Callable[[], Any]:
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    st = torch.tensor(seed)

    def step() -> tuple[Any, Any]:
        xt.grad = None
        wt.grad = None
        y = chain(xt, xt, wt, torch.tanh, torch.exp, torch.sin, blocks)
        y.backward(st)
        return xt.grad, wt.grad

    return step


def hips_step(x: np.ndarray, w: np.ndarray, seed: np.ndarray, blocks: int) -> Callable[[], Any]:
    import autograd
    import autograd.numpy as anp

    def f(params: tuple[Any, Any]) -> Any:
        xa, wa = params
        return chain(xa, xa, wa, anp.tanh, anp.exp, anp.sin, blocks)

    def step() -> Any:
        vjp, _ = autograd.make_vjp(f)((x, w))
        return vjp(seed)

    return step


def jax_eager_step(x: np.ndarray, w: np.ndarray, seed: np.ndarray, blocks: int) -> Any:
    """JAX without jit: ``jax.vjp`` traces and runs each operation eagerly."""
    import jax
    import jax.numpy as jnp

    # float64 like the others, for this contestant only (other benchmarks may share
    # the process).
    x64 = jax.enable_x64 if hasattr(jax, "enable_x64") else jax.experimental.enable_x64
    with x64(True):
        xj, wj, sj = jnp.asarray(x), jnp.asarray(w), jnp.asarray(seed)

    def f(xa: Any, wa: Any) -> Any:
        return chain(xa, xa, wa, jnp.tanh, jnp.exp, jnp.sin, blocks)

    def step() -> Any:
        with x64(True):
            _, vjp = jax.vjp(f, xj, wj)
            return tuple(np.asarray(g) for g in vjp(sj))

    return step


def mygrad_step(x: np.ndarray, w: np.ndarray, seed: np.ndarray, blocks: int) -> Callable[[], Any]:
    import mygrad as mg

    xt = mg.Tensor(x)
    wt = mg.Tensor(w)

    def step() -> tuple[Any, Any]:
        y = chain(xt, xt, wt, mg.tanh, mg.exp, mg.sin, blocks)
        y.backward(seed)
        return xt.grad, wt.grad

    return step


#: Every contestant's name, the reference first.
NAMES = (
    *("hand-numpy", "agnograd-numpy", "torch.autograd", "agnograd-torch", "jax-eager"),
    *("autograd", "mygrad"),
)


def contestants(
    ops: int, skip: set[str], split: bool, only: str | None = None
) -> tuple[dict[str, Callable[[], Any]], int]:
    """The contestants' step functions, checked against the hand-written gradients;
    with ``only``, one of :data:`NAMES`, that one alone beside the reference (no
    other library imported)."""
    if only not in NAMES:
        only = None
    blocks = max(1, ops // BLOCK)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, SIZE)
    w = rng.uniform(0.5, 1.5, SIZE)
    seed = np.ones(SIZE)

    def wanted(*names: str) -> bool:
        return any(n not in skip and only in (None, n) for n in names)

    steps: dict[str, Callable[[], Any]] = {"hand-numpy": hand_numpy(x, w, seed, blocks)}
    if wanted("agnograd-numpy"):
        steps["agnograd-numpy"] = agnograd_step(x, w, seed, blocks)
    torch = _harness.torch_single_thread() if wanted("torch.autograd", "agnograd-torch") else None
    if torch is not None:
        steps["torch.autograd"] = torch_step(torch, x, w, seed, blocks)
        steps["agnograd-torch"] = agnograd_step(
            torch.tensor(x), torch.tensor(w), torch.tensor(seed), blocks
        )
    if wanted("jax-eager") and _harness.optional_import("jax") is not None:
        steps["jax-eager"] = jax_eager_step(x, w, seed, blocks)
    if wanted("autograd") and _harness.optional_import("autograd") is not None:
        steps["autograd"] = hips_step(x, w, seed, blocks)
    if wanted("mygrad") and _harness.optional_import("mygrad") is not None:
        steps["mygrad"] = mygrad_step(x, w, seed, blocks)
    steps = {k: v for k, v in steps.items() if wanted(k) or k == "hand-numpy"}
    want = steps["hand-numpy"]()
    for name, step in steps.items():
        _harness.check_close(name, step(), want, rtol=1e-9)
    if split:
        steps.update(forward_only(x, w, blocks, torch))
    return steps, blocks * BLOCK


def profile(steps: dict[str, Callable[[], Any]], ops: int) -> None:
    """Print where agnograd-numpy spends its time (cProfile, top functions)."""
    import cProfile
    import pstats

    step = steps["agnograd-numpy"]
    n = max(1, 20000 // ops)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        step()
    prof.disable()
    print(f"\ncProfile of agnograd-numpy, {n} forward+backward passes of {ops} ops:")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=51, batch_seconds=0.01, alone=True)
    p.add_argument("--ops", type=int, default=OPS, help=f"ops in the chain (default {OPS})")
    p.add_argument("--profile", action="store_true", help="also cProfile agnograd-numpy")
    p.add_argument(
        "--cold",
        action="store_true",
        help="no untimed call before each batch: each contestant starts with the caches "
        "the one before it left",
    )
    p.add_argument(
        "--freeze",
        action="store_true",
        help="gc.freeze() before timing: the collector no longer walks the objects of "
        "the libraries loaded so far",
    )
    p.add_argument(
        "--no-collector",
        action="store_true",
        help="gc.disable() while timing: what an operation costs without the young "
        "collections that the graph's objects trigger (every 700 of them)",
    )
    p.add_argument(
        "--split",
        action="store_true",
        help="also time the forward alone (graph recorded) to split forward and backward",
    )
    p.add_argument(
        "--after-write",
        action="store_true",
        help="one write in place into an array of no graph before timing "
        "(p.array -= 0.0 * p.array), as a training loop's first parameter update",
    )
    args = p.parse_args(argv)
    ops = BLOCK if args.quick else args.ops
    steps, ops = contestants(ops, _harness.skipped(args), args.split, args.run)
    if _harness.run_alone(args, steps):  # an instruction count (_harness.run_alone)
        return {}
    written = agnograd.Variable(np.ones(SIZE))  # a local: alive while timing, as a parameter
    if args.after_write:
        written.array -= 0.0 * written.array
    if args.freeze:
        gc.freeze()
    if args.no_collector:
        gc.collect()
        gc.disable()
    batch = 0.001 if args.quick else args.batch_seconds
    times = _harness.interleaved(
        steps, rounds=args.rounds, batch_seconds=batch, warm_up=not args.cold
    )

    us_per_op = {k: [t / ops * 1e6 for t in v] for k, v in times.items()}
    medians = {k: statistics.median(v) for k, v in us_per_op.items()}
    summary = _harness.ratio_summary(
        times,
        [
            ("agnograd-numpy", "hand-numpy", TARGETS["hand"]),
            ("agnograd-numpy", "torch.autograd", None),
            ("torch.autograd", "hand-numpy", None),
            ("agnograd-torch", "torch.autograd", TARGETS["torch"]),
            ("jax-eager", "hand-numpy", None),
            ("autograd", "hand-numpy", None),
            ("mygrad", "hand-numpy", None),
        ],
    )
    print(
        f"Per-op overhead: {ops}-op elementwise chain on ({SIZE},) float64, forward + "
        f"backward, {args.rounds} interleaved rounds"
        + (", after a write in place" if args.after_write else "")
    )
    rows = [
        [name, medians[name], min(us_per_op[name]), medians[name] / medians["hand-numpy"]]
        for name in steps
    ]
    print(_harness.table(["contestant", "us/op median", "us/op min", "x hand"], rows))
    if args.split:
        print("\nby phase (backward = median of per-round total - forward), us/op")
        phases = []
        for name in steps:
            if f"{name} (forward)" in us_per_op:
                fwd = us_per_op[f"{name} (forward)"]
                bwd = [t - f for t, f in zip(us_per_op[name], fwd, strict=True)]
                phases.append([name, statistics.median(fwd), statistics.median(bwd)])
        print(_harness.table(["contestant", "forward", "backward"], phases))
    print()
    print(_harness.ratio_table(summary))
    if args.profile:
        profile(steps, ops)
    return _harness.emit(
        "overhead",
        {
            "ops": ops,
            "shape": [SIZE],
            "dtype": "float64",
            "rounds": args.rounds,
            "batches": "cold" if args.cold else "warm",
            "gc_frozen": args.freeze,
            "gc_disabled": args.no_collector,
            "after_write": args.after_write,
            "quick": args.quick,
            "us_per_op_median": medians,
            "ratios": summary,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
