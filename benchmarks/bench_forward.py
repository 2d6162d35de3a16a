"""Forward mode: jvps of the 200-op chain of ``bench_overhead`` and of an MLP.

The chain, on an (8,) float64 array, measures the cost per operation. Contestants:
agnograd's forward-mode ``jvp`` (tangents pushed with the values in one pass), a jvp
written by hand with NumPy (each op's value and tangent), agnograd's eager forward
of the chain alone (no tangent, no graph recorded: the inputs require no gradient),
and ``agnograd.functional``'s ``jvp``, ``hvp`` (forward over reverse) and
``jacobian(strategy="forward-mode")`` (a jvp per column), each beside what it
computed before agnograd had forward mode (the double-backward trick: what
``strict=True`` still runs).

The MLP 784-1024-1024-10, batch 256, float32 (tanh; its logits), with tangents on
all weights and biases, measures the cost where the matrix products dominate.

Targets: the chain's jvp at most 2.0x the hand-written one and 3.0x agnograd's eager
forward; ``hvp`` and the forward-mode ``jacobian`` at most half of their time before
forward mode; the MLP's jvp at most 1.15x the hand-written one.

Run ``python benchmarks/bench_forward.py [--rounds N] [--quick]``.
"""

import os

os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

from collections.abc import Callable
from typing import Any

import _harness
import numpy as np
from bench_mlp import problem
from bench_overhead import BLOCK, OPS, chain

import agnograd
import agnograd.functional
import agnograd.functions as F
from agnograd.transforms._forward import jvp

TARGETS = {"hand": 2.0, "eager": 3.0, "before": 0.5, "mlp": 1.15}
MLP_SIZES, MLP_BATCH = (784, 1024, 1024, 10), 256
QUICK_MLP_SIZES, QUICK_MLP_BATCH = (20, 16, 16, 10), 8


def hand_jvp(x: Any, v: Any, w: Any, blocks: int) -> tuple[Any, Any]:
    """The chain's value and tangent written by hand (``w`` a constant)."""
    h, th = x, v
    for _ in range(blocks):
        a = np.tanh(h)
        ta = (1.0 - a * a) * th
        b = a * 0.5
        tb = ta * 0.5
        c = np.exp(b)
        tc = c * tb
        d = c - 1.0
        e = d * w
        te = tc * w
        f = e + x
        tf = te + v
        g = np.sin(f)
        tg = np.cos(f) * tf
        h = g + b
        th = tg + tb
    return h, th


def contestants(ops: int) -> dict[str, Callable[[], Any]]:
    """The chain's contestants."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, 8)
    v = rng.uniform(-1.0, 1.0, 8)
    w = rng.uniform(-1.0, 1.0, 8)
    blocks = ops // BLOCK
    wv = agnograd.Variable(w, requires_grad=False)
    xv = agnograd.Variable(x, requires_grad=False)

    def f(a: Any) -> Any:
        return chain(a, a, wv, F.tanh, F.exp, F.sin, blocks)

    def total(a: Any) -> Any:
        return F.sum(f(a))

    functional = agnograd.functional
    steps = {
        "hand-jvp": lambda: hand_jvp(x, v, w, blocks),
        "agnograd-jvp": lambda: jvp(f, (x,), (v,)),
        "agnograd-eager-forward": lambda: f(xv),
        "functional.jvp": lambda: functional.jvp(f, x, v),
        "functional.hvp": lambda: functional.hvp(total, x, v),
        "functional.hvp (before)": lambda: functional.hvp(total, x, v, strict=True),
        "functional.jacobian (forward-mode)": lambda: functional.jacobian(
            f, x, strategy="forward-mode"
        ),
        "functional.jacobian (forward-mode, before)": lambda: functional.jacobian(
            f, x, strategy="forward-mode", strict=True
        ),
    }
    want = hand_jvp(x, v, w, blocks)
    _harness.check_close("agnograd-jvp", jvp(f, (x,), (v,)), want, rtol=1e-9)
    hvp_now, hvp_before = steps["functional.hvp"](), steps["functional.hvp (before)"]()
    _harness.check_close("functional.hvp", hvp_now[1], hvp_before[1], rtol=1e-9)
    return steps


def hand_mlp_jvp(x: Any, params: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    """The MLP's logits and their tangent, written by hand with NumPy."""
    (W1, b1, W2, b2, W3, b3), (V1, c1, V2, c2, V3, c3) = params, tangents
    h1 = np.tanh(x @ W1 + b1)
    t1 = (1.0 - h1 * h1) * (x @ V1 + c1)
    h2 = np.tanh(h1 @ W2 + b2)
    t2 = (1.0 - h2 * h2) * (t1 @ W2 + h1 @ V2 + c2)
    return h2 @ W3 + b3, t2 @ W3 + h2 @ V3 + c3


def mlp_contestants(sizes: Any, batch: int) -> dict[str, Callable[[], Any]]:
    """The MLP's contestants: its jvp by hand and by agnograd."""
    x, _, params = problem(sizes, batch)
    rng = np.random.default_rng(1)
    tangents = [rng.standard_normal(p.shape, dtype=np.float32) for p in params]

    def logits(*ps: Any) -> Any:
        W1, b1, W2, b2, W3, b3 = ps
        h1 = F.tanh(F.matmul(x, W1) + b1)
        h2 = F.tanh(F.matmul(h1, W2) + b2)
        return F.matmul(h2, W3) + b3

    steps = {
        "mlp hand-jvp": lambda: hand_mlp_jvp(x, params, tangents),
        "mlp agnograd-jvp": lambda: jvp(logits, tuple(params), tuple(tangents)),
    }
    want = hand_mlp_jvp(x, params, tangents)
    _harness.check_close("mlp agnograd-jvp", steps["mlp agnograd-jvp"](), want, rtol=1e-4)
    return steps


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=21, batch_seconds=0.02, alone=True)
    p.add_argument("--ops", type=int, default=OPS, help=f"ops in the chain (default {OPS})")
    args = p.parse_args(argv)
    ops = BLOCK if args.quick else args.ops
    batch = 0.001 if args.quick else args.batch_seconds
    chain = contestants(ops)
    if _harness.run_alone(args, chain):  # an instruction count (_harness.run_alone)
        return {}
    times = _harness.interleaved(chain, rounds=args.rounds, batch_seconds=batch, warm_up=True)
    sizes, size = (QUICK_MLP_SIZES, QUICK_MLP_BATCH) if args.quick else (MLP_SIZES, MLP_BATCH)
    mlp_times = _harness.interleaved(
        mlp_contestants(sizes, size), rounds=args.rounds, batch_seconds=batch * 10
    )
    rows = [[name, f"{min(t) / ops * 1e6:.3f}"] for name, t in times.items()]
    print(_harness.table(["contestant (the chain)", "us/op (best round)"], rows))
    rows = [[name, f"{min(t) * 1e3:.2f}"] for name, t in mlp_times.items()]
    print(_harness.table(["contestant (the MLP)", "ms (best round)"], rows))
    before = TARGETS["before"]
    summary = _harness.ratio_summary(
        {**times, **mlp_times},
        [
            ("agnograd-jvp", "hand-jvp", TARGETS["hand"]),
            ("agnograd-jvp", "agnograd-eager-forward", TARGETS["eager"]),
            ("functional.jvp", "agnograd-jvp", None),
            ("functional.hvp", "functional.hvp (before)", before),
            (
                "functional.jacobian (forward-mode)",
                "functional.jacobian (forward-mode, before)",
                before,
            ),
            ("mlp agnograd-jvp", "mlp hand-jvp", TARGETS["mlp"]),
        ],
    )
    print(_harness.ratio_table(summary))
    return _harness.emit("forward", {"ops": ops, "ratios": summary})


if __name__ == "__main__":
    main()
