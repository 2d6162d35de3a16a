"""Cost of the bridges between agnograd and torch.autograd (agnograd.interop.torch).

One call, forward + backward, of ``loss = sum(tanh(x) * w)`` with float64 ``x`` and
``w`` that require a gradient, on a small ``(8,)`` and a large ``(1000, 1000)``
shape, through each way of computing it:

* ``torch alone``: torch.autograd, the reference;
* ``function, torch backend``: ``agnograd.interop.torch.function(f)`` called with
  the tensors, ``f`` computing with agnograd on torch Variables;
* ``function, numpy backend``: the same with ``backend="numpy"``: ``f`` computes on
  NumPy views of the tensors (DLPack, no copy);
* ``node, numpy Variables``: ``agnograd.interop.torch.node(fn)`` with ``fn`` the torch
  code, called with NumPy Variables, backward from agnograd;
* ``agnograd-numpy alone``: agnograd on NumPy, no torch (the reference for ``node``).

Gradients are cleared after each call (``x.grad = None``, ``cleargrad()``). Every
contestant's gradients are checked against hand-written NumPy before timing. The
ratios to ``torch alone`` are per round; for the small shape they are the bridges'
fixed cost, for the large one what remains of it next to the arithmetic.

Run ``python benchmarks/bench_bridge.py [--rounds N] [--quick]``.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded. Two BLAS
# threads stall on a busy two-core machine, and one thread makes contestants comparable.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import statistics
import sys
from collections.abc import Callable
from typing import Any

import _harness
import numpy as np

import agnograd
import agnograd.functions as F

SHAPES = [(8,), (1000, 1000)]
QUICK_SHAPES = [(8,), (64, 64)]


def label(shape: tuple[int, ...]) -> str:
    return f"({', '.join(map(str, shape))})" if len(shape) > 1 else f"({shape[0]},)"


def contestants(shape: tuple[int, ...], skip: set[str]) -> dict[str, Callable[[], Any]]:
    """One forward + backward per contestant, each checked before it is timed."""
    torch = _harness.torch_single_thread()
    if torch is None:
        raise SystemExit("bench_bridge: torch is not installed; the bridges need it")
    from agnograd.interop.torch import function, node

    rng = np.random.default_rng(0)
    a, b = rng.uniform(-2.0, 2.0, shape), rng.uniform(-1.0, 1.0, shape)
    want = [(1.0 - np.tanh(a) ** 2) * b, np.tanh(a)]

    x = torch.tensor(a, requires_grad=True)
    w = torch.tensor(b, requires_grad=True)

    def agnograd_loss(u: agnograd.Variable, v: agnograd.Variable) -> agnograd.Variable:
        return F.sum(F.tanh(u) * v)

    def torch_loss(u: Any, v: Any) -> Any:
        return (torch.tanh(u) * v).sum()

    bridged = {
        "function, torch backend": function(agnograd_loss),
        "function, numpy backend": function(agnograd_loss, backend="numpy"),
    }
    xv, wv = agnograd.Variable(a.copy()), agnograd.Variable(b.copy())
    torch_node = node(torch_loss)

    def step_torch(loss: Callable[[Any, Any], Any]) -> Callable[[], Any]:
        def step() -> Any:
            loss(x, w).backward()
            grads = x.grad, w.grad
            x.grad = w.grad = None
            return grads

        return step

    def step_agnograd(loss: Callable[[Any, Any], Any]) -> Callable[[], Any]:
        def step() -> Any:
            loss(xv, wv).backward()
            grads = xv.grad, wv.grad
            xv.cleargrad()
            wv.cleargrad()
            return grads

        return step

    steps: dict[str, Callable[[], Any]] = {"torch alone": step_torch(torch_loss)}
    steps.update({name: step_torch(loss) for name, loss in bridged.items()})
    steps["node, numpy Variables"] = step_agnograd(torch_node)
    steps["agnograd-numpy alone"] = step_agnograd(agnograd_loss)
    for name, step in steps.items():
        _harness.check_close(name, list(step()), want, rtol=1e-12)
    return {k: v for k, v in steps.items() if k not in skip}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=15, batch_seconds=0.05)
    args = p.parse_args(argv)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    batch = 0.001 if args.quick else args.batch_seconds
    rounds = 1 if args.quick else args.rounds
    us: dict[str, dict[str, float]] = {}
    summaries: dict[str, list[dict[str, Any]]] = {}
    for shape in shapes:
        steps = contestants(shape, _harness.skipped(args))
        times = _harness.interleaved(steps, rounds=rounds, batch_seconds=batch, warm_up=True)
        us[label(shape)] = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        pairs = [(name, "torch alone", None) for name in steps if name != "torch alone"]
        pairs.append(("node, numpy Variables", "agnograd-numpy alone", None))
        summaries[label(shape)] = _harness.ratio_summary(times, pairs)
        del steps, times
    names = list(next(iter(us.values())))
    print(
        "Forward + backward of sum(tanh(x) * w), float64, microseconds per call (median), "
        f"{rounds} interleaved rounds"
    )
    headers = ["contestant", *us]
    rows = [[name, *(us[shape].get(name) for shape in us)] for name in names]
    print(_harness.table(headers, rows))
    for shape, summary in summaries.items():
        print(f"\nratios, {shape}")
        print(_harness.ratio_table(summary))
    return _harness.emit(
        "bridge",
        {
            "quick": args.quick,
            "rounds": rounds,
            "dtype": "float64",
            "shapes": [list(s) for s in shapes],
            "us_per_call_median": us,
            "ratios": summaries,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
