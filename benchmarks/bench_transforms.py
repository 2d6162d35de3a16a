"""The transforms' cost over the graph they build: the 200-op chain, eager.

``bench_overhead``'s chain summed, as a function of ``(x, w)`` on (8,) float64,
differentiated with respect to both: built by hand as a graph of Variables with
``y.backward()`` (the reference), and through ``agnograd.func``'s
``value_and_grad``, ``grad`` and ``vjp`` and ``agnograd.functional``'s
``value_and_grad`` and ``vjp``, each of which builds that graph and runs its
backward pass. What a transform adds is what it does once per call (its arguments
made leaves, its results given back) and what its backward pass asks each node.

Target: each transform at most 1.15x the hand-built graph and ``y.backward()``.

Time ratios move with the load of a shared machine; instructions do not. To count
them, run one contestant alone under callgrind with ``--run NAME --steps N``, for
two values of N, and divide the difference by the difference of N times the ops::

    valgrind --tool=callgrind python benchmarks/bench_transforms.py --run backward --steps 2
    valgrind --tool=callgrind python benchmarks/bench_transforms.py --run backward --steps 12

Run ``python benchmarks/bench_transforms.py [--rounds N] [--quick]``.
"""

import os

os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import statistics
import sys
from collections.abc import Callable
from typing import Any

import _harness
import numpy as np
from bench_overhead import BLOCK, OPS, SIZE, chain

import agnograd
import agnograd.func
import agnograd.functional
import agnograd.functions as F

TARGET = 1.15
REFERENCE = "backward"


def contestants(blocks: int) -> dict[str, Callable[[], Any]]:
    """Each step returns the gradients with respect to ``x`` and ``w``."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, SIZE)
    w = rng.uniform(0.5, 1.5, SIZE)
    one = np.ones(())

    def f(xv: Any, wv: Any) -> Any:
        return F.sum(chain(xv, xv, wv, F.tanh, F.exp, F.sin, blocks))

    def backward() -> tuple[Any, ...]:
        xv, wv = agnograd.Variable(x), agnograd.Variable(w)
        y = f(xv, wv)
        y.backward()
        return xv.grad, wv.grad

    func_vag = agnograd.func.value_and_grad(f, argnums=(0, 1))
    func_grad = agnograd.func.grad(f, argnums=(0, 1))
    functional_vag = agnograd.functional.value_and_grad(f, argnums=(0, 1))

    def func_value_and_grad() -> tuple[Any, ...]:
        return func_vag(x, w)[1]

    def func_vjp() -> tuple[Any, ...]:
        _, vjp_fn = agnograd.func.vjp(f, x, w)
        return vjp_fn(one)

    def functional_value_and_grad() -> tuple[Any, ...]:
        return functional_vag(x, w)[1]

    def functional_vjp() -> tuple[Any, ...]:
        return agnograd.functional.vjp(f, (x, w), one)[1]

    return {
        REFERENCE: backward,
        "func.value_and_grad": func_value_and_grad,
        "func.grad": lambda: func_grad(x, w),
        "func.vjp": func_vjp,
        "functional.value_and_grad": functional_value_and_grad,
        "functional.vjp": functional_vjp,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=31, batch_seconds=0.01, alone=True)
    args = p.parse_args(argv)
    blocks = 1 if args.quick else OPS // BLOCK
    ops = blocks * BLOCK
    steps = contestants(blocks)
    if _harness.run_alone(args, steps):  # for an instruction count (see the docstring)
        return {}
    want = steps[REFERENCE]()
    for name, step in steps.items():
        _harness.check_close(name, step(), want, rtol=1e-12)
    batch = 0.001 if args.quick else args.batch_seconds
    times = _harness.interleaved(steps, rounds=args.rounds, batch_seconds=batch, warm_up=True)
    summary = _harness.ratio_summary(
        times, [(name, REFERENCE, TARGET) for name in steps if name != REFERENCE]
    )
    print(
        f"Transforms: {ops}-op chain on ({SIZE},) float64, value and gradient with "
        f"respect to (x, w), eager, {args.rounds} interleaved rounds"
    )
    medians = {k: statistics.median(v) / ops * 1e6 for k, v in times.items()}
    rows = [[k, medians[k], medians[k] / medians[REFERENCE]] for k in steps]
    print(_harness.table(["contestant", "us/op median", f"x {REFERENCE}"], rows))
    print()
    print(_harness.ratio_table(summary))
    return _harness.emit(
        "transforms",
        {
            "ops": ops,
            "shape": [SIZE],
            "dtype": "float64",
            "rounds": args.rounds,
            "quick": args.quick,
            "us_per_op_median": medians,
            "ratios": summary,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
