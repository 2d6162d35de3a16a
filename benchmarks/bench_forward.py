"""Forward mode: a jvp of the 200-op chain of ``bench_overhead`` on an (8,) float64 array.

Contestants: agnograd's forward-mode ``jvp`` (tangents pushed with the values in one
pass), a jvp written by hand with NumPy (each op's value and tangent), agnograd's eager
forward of the chain alone (no tangent, no graph recorded: the inputs require no
gradient), and ``agnograd.functional``'s ``jvp``, ``hvp`` (forward over reverse) and
``jacobian(strategy="forward-mode")`` (a jvp per column).

Targets: the forward-mode jvp at most 2.0x the hand-written one, and at most 3.0x
agnograd's eager forward.

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
from bench_overhead import BLOCK, OPS, chain

import agnograd
import agnograd.functional
import agnograd.functions as F
from agnograd.transforms._forward import jvp

TARGETS = {"hand": 2.0, "eager": 3.0}


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
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, 8)
    v = rng.uniform(-1.0, 1.0, 8)
    w = rng.uniform(-1.0, 1.0, 8)
    blocks = ops // BLOCK
    wv = agnograd.Variable(w, requires_grad=False)
    xv = agnograd.Variable(x, requires_grad=False)

    def f(a: Any) -> Any:
        return chain(a, a, wv, F.tanh, F.exp, F.sin, blocks)

    steps = {
        "hand-jvp": lambda: hand_jvp(x, v, w, blocks),
        "agnograd-jvp": lambda: jvp(f, (x,), (v,)),
        "agnograd-eager-forward": lambda: f(xv),
        "functional.jvp": lambda: agnograd.functional.jvp(f, x, v),
        "functional.hvp": lambda: agnograd.functional.hvp(lambda a: F.sum(f(a)), x, v),
        "functional.jacobian (forward-mode)": lambda: agnograd.functional.jacobian(
            f, x, strategy="forward-mode"
        ),
    }
    want = hand_jvp(x, v, w, blocks)
    got = jvp(f, (x,), (v,))
    _harness.check_close("agnograd-jvp", got, want, rtol=1e-9)
    return steps


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=21, batch_seconds=0.02)
    p.add_argument("--ops", type=int, default=OPS, help=f"ops in the chain (default {OPS})")
    args = p.parse_args(argv)
    ops = BLOCK if args.quick else args.ops
    steps = contestants(ops)
    batch = 0.001 if args.quick else args.batch_seconds
    times = _harness.interleaved(steps, rounds=args.rounds, batch_seconds=batch, warm_up=True)
    rows = [[name, f"{min(t) / ops * 1e6:.3f}"] for name, t in times.items()]
    print(_harness.table(["contestant", "us/op (best round)"], rows))
    summary = _harness.ratio_summary(
        times,
        [
            ("agnograd-jvp", "hand-jvp", TARGETS["hand"]),
            ("agnograd-jvp", "agnograd-eager-forward", TARGETS["eager"]),
            ("functional.jvp", "agnograd-jvp", None),
        ],
    )
    print(_harness.ratio_table(summary))
    return _harness.emit("forward", {"ops": ops, "ratios": summary})


if __name__ == "__main__":
    main()
