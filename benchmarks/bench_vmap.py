"""vmap: per-sample gradients of an MLP, batched in one pass.

The MLP 784-128-128-10 (tanh; float32) with a squared error against one-hot
targets, its gradient with respect to the weights for each sample of a batch of
64 and of 256. Contestants: the gradients written by hand as batched NumPy (the
per-sample outer products), ``agnograd.vmap(agnograd.func.grad(loss))`` on NumPy
and on torch tensors, and ``torch.func.vmap(torch.func.grad(loss))``.

Then the Jacobian of the 256 samples' losses with respect to the weights (the
same numbers as the per-sample gradients), by
``agnograd.functional.jacobian(..., vectorize=True)``: all its rows from one batched
backward pass, beside the per-sample gradients and beside the loop of
``vectorize=False``; and of the first 64, 128 and 256 losses of those samples, whose
times give the cost per row (the slope) of the first and second half: their ratio is
1 for a cost linear in the output size. A dense Jacobian of the losses does a
backward pass of the whole batch per row, so its arithmetic grows with the square
of the batch (as jax.jacrev's and torch.func.jacrev's do): the per-sample gradients
are the way to those numbers. So beside it, the Jacobian of a function of one
sample with a 256-element output (the MLP 784-128-128-256, with respect to its
weights), which does the arithmetic of 256 per-sample gradients (one forward, 256
rows of backward through it, batched).

Targets: at 256 samples, agnograd's at most 4.5x the hand-written NumPy and, on
torch tensors, at most 1.5x torch.func's; at 64 samples, at most 2.0x torch.func's;
the Jacobian of a 256-element output at most 1.2x the per-sample gradients at 256
samples.

Run ``python benchmarks/bench_vmap.py [--rounds N] [--quick]``.
"""

import itertools
import os

os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

from collections.abc import Callable
from typing import Any

import _harness
import numpy as np

import agnograd
import agnograd.functions as F

SIZES, BATCHES = (784, 128, 128, 10), (64, 256)
QUICK_SIZES, QUICK_BATCHES = (12, 8, 8, 4), (4, 8)
TARGETS = {("numpy", 256): 4.5, ("torch", 256): 1.5, ("torch", 64): 2.0, ("jacobian", 256): 1.2}
ROWS = (64, 128, 256)  # the Jacobian's output sizes, at the largest batch
QUICK_ROWS = (2, 4, 8)


def loss(ws: Any, x: Any, y: Any, tanh: Any = F.tanh, total: Any = F.sum) -> Any:
    """One sample's loss: the MLP's squared error (agnograd's functions, or
    ``tanh`` and ``total`` of another library)."""
    h = x
    for i, w in enumerate(ws):
        h = h @ w
        if i < len(ws) - 1:
            h = tanh(h)
    d = h - y
    return total(d * d)


def hand(ws: list[Any], x: Any, y: Any) -> list[Any]:
    """Each sample's gradients, written by hand as batched NumPy."""
    hs, acts = [x], []
    h = x
    for i, w in enumerate(ws):
        h = h @ w
        if i < len(ws) - 1:
            h = np.tanh(h)
            acts.append(h)
        hs.append(h)
    g = 2.0 * (h - y)
    grads = []
    for i in range(len(ws) - 1, -1, -1):
        grads.append(hs[i][:, :, None] * g[:, None, :])
        if i:
            a = acts[i - 1]
            g = (g @ ws[i].T) * (1.0 - a * a)
    return grads[::-1]


def contestants(sizes: Any, batch: int) -> dict[str, Callable[[], Any]]:
    """The contestants at ``batch`` samples."""
    rng = np.random.default_rng(0)
    ws = [
        (rng.standard_normal((a, b)) * a**-0.5).astype(np.float32)
        for a, b in itertools.pairwise(sizes)
    ]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    per_sample = agnograd.vmap(agnograd.func.grad(loss), in_axes=(None, 0, 0))
    steps = {
        f"hand numpy B={batch}": lambda: hand(ws, x, y),
        f"agnograd numpy B={batch}": lambda: per_sample(ws, x, y),
    }
    want = hand(ws, x, y)
    _harness.check_close("agnograd numpy", per_sample(ws, x, y), want, rtol=1e-4)
    torch = _harness.torch_single_thread()
    if torch is not None:
        import torch.func

        tws, tx, ty = [torch.from_numpy(w) for w in ws], torch.from_numpy(x), torch.from_numpy(y)

        def torch_loss(ws: Any, x: Any, y: Any) -> Any:
            return loss(ws, x, y, torch.tanh, torch.sum)

        torch_per_sample = torch.func.vmap(torch.func.grad(torch_loss), in_dims=(None, 0, 0))
        steps[f"torch.func B={batch}"] = lambda: torch_per_sample(tws, tx, ty)
        steps[f"agnograd torch B={batch}"] = lambda: per_sample(tws, tx, ty)
        for name in (f"torch.func B={batch}", f"agnograd torch B={batch}"):
            got = [g.numpy() for g in steps[name]()]
            _harness.check_close(name, got, want, rtol=1e-3)
    return steps


def forward(ws: Any, x: Any) -> Any:
    """The MLP's outputs for the samples ``x``."""
    h = x
    for i, w in enumerate(ws):
        h = h @ w
        if i < len(ws) - 1:
            h = F.tanh(h)
    return h


def losses(ws: Any, x: Any, y: Any, rows: int) -> Any:
    """The first ``rows`` samples' losses, computed for the whole batch ``x``."""
    d = forward(ws, x) - y
    every = F.sum(d * d, axis=1)
    if rows == x.shape[0]:
        return every
    # the first rows picked by a product (whose backward is one for any library)
    return np.eye(rows, x.shape[0], dtype=x.dtype) @ every


def jacobian_contestants(sizes: Any, batch: int, rows: Any) -> dict[str, Callable[[], Any]]:
    """The Jacobian of the first ``rows`` losses of ``batch`` samples, batched (and,
    for all of them, as a loop), with respect to the weights."""
    rng = np.random.default_rng(0)
    ws = tuple(
        (rng.standard_normal((a, b)) * a**-0.5).astype(np.float32)
        for a, b in itertools.pairwise(sizes)
    )
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    jacobian = agnograd.functional.jacobian
    steps = {}
    for n in rows:
        f = lambda *ws, n=n: losses(ws, x, y, n)  # noqa: E731
        steps[f"jacobian n={n}"] = lambda f=f: jacobian(f, ws, vectorize=True)
    everything = lambda *ws: losses(ws, x, y, batch)  # noqa: E731
    steps[f"jacobian loop n={batch}"] = lambda: jacobian(everything, ws)
    want = hand(list(ws), x, y)
    _harness.check_close("jacobian", steps[f"jacobian n={batch}"](), want, rtol=1e-3)
    # One sample through the MLP widened to ``batch`` outputs: its Jacobian's rows.
    wide = tuple(
        (rng.standard_normal((a, b)) * a**-0.5).astype(np.float32)
        for a, b in itertools.pairwise((*sizes[:-1], batch))
    )
    one = x[:1]
    mlp = lambda *ws: forward(ws, one)[0]  # noqa: E731
    steps[f"jacobian of one sample, {batch} outputs"] = lambda: jacobian(mlp, wide, vectorize=True)
    rows = jacobian(mlp, wide, vectorize=True)
    loop = jacobian(mlp, wide)
    _harness.check_close("jacobian of one sample", rows, loop, rtol=1e-4)
    return steps


def slope_ratio(times: dict[str, list[float]], rows: Any) -> float:
    """The cost per row from the middle to the most rows over that from the fewest
    to the middle (best rounds): 1 where the cost is linear in the rows."""
    a, b, c = (min(times[f"jacobian n={n}"]) for n in rows)
    if b <= a:  # (tiny sizes, --quick: no cost to measure)
        return float("nan")
    return ((c - b) / (rows[2] - rows[1])) / ((b - a) / (rows[1] - rows[0]))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=9, batch_seconds=0.1)
    args = p.parse_args(argv)
    sizes, batches = (QUICK_SIZES, QUICK_BATCHES) if args.quick else (SIZES, BATCHES)
    batch_seconds = 0.001 if args.quick else args.batch_seconds
    rows_at = QUICK_ROWS if args.quick else ROWS
    times: dict[str, list[float]] = {}
    for batch in batches:
        steps = contestants(sizes, batch)
        if batch == batches[-1]:
            steps.update(jacobian_contestants(sizes, batch, rows_at))
        times.update(_harness.interleaved(steps, rounds=args.rounds, batch_seconds=batch_seconds))
    rows = [[name, f"{min(t) * 1e3:.2f}"] for name, t in times.items()]
    print(_harness.table(["contestant (per-sample gradients)", "ms (best round)"], rows))
    pairs = []
    for batch in batches:
        full = batch if not args.quick else {QUICK_BATCHES[0]: 64, QUICK_BATCHES[1]: 256}[batch]
        pairs.append(
            (
                f"agnograd numpy B={batch}",
                f"hand numpy B={batch}",
                TARGETS.get(("numpy", full)),
            )
        )
        if f"torch.func B={batch}" in times:
            pairs.append(
                (
                    f"agnograd torch B={batch}",
                    f"torch.func B={batch}",
                    TARGETS.get(("torch", full)),
                )
            )
    last = batches[-1]
    pairs.append(
        (
            f"jacobian of one sample, {last} outputs",
            f"agnograd numpy B={last}",
            TARGETS[("jacobian", 256)],
        )
    )
    pairs.append((f"jacobian n={last}", f"agnograd numpy B={last}", None))
    pairs.append((f"jacobian n={last}", f"jacobian loop n={last}", None))
    summary = _harness.ratio_summary(times, pairs)
    print(_harness.ratio_table(summary))
    slope = slope_ratio(times, rows_at)
    a, b, c = rows_at
    print(f"jacobian: cost per row, rows {b}-{c} over rows {a}-{b}: {slope:.2f} (1: linear)")
    record = {
        "sizes": list(sizes),
        "batches": list(batches),
        "ratios": summary,
        "jacobian_rows": list(rows_at),
        "jacobian_slope_ratio": slope,
    }
    return _harness.emit("vmap", record)


if __name__ == "__main__":
    main()
