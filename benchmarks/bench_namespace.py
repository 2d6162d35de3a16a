"""Per-call overhead of agnograd's differentiable namespace (forward only).

On an (8,) float64 array that requires a gradient, one call of ``exp`` (and of
``add``) through each way of reaching it: the raw NumPy function, ``F.exp``, the
namespace fetched once (``xp = x.__array_namespace__(); xp.exp(x)``), the
namespace fetched on every call as array API library code does
(``array_api_compat.array_namespace(x).exp(x)``), and torch with ``requires_grad``
for reference. Each call records a graph node; no backward runs.

Run ``python benchmarks/bench_namespace.py [--rounds N] [--quick]``.
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
import array_api_compat
import numpy as np

import agnograd
import agnograd.functions as F

SIZE = 8


def contestants(skip: set[str]) -> dict[str, Callable[[], Any]]:
    """One call per contestant; the names say what is timed."""
    a = np.random.default_rng(0).uniform(-1.0, 1.0, SIZE)
    x = agnograd.Variable(a)
    xp = x.__array_namespace__()
    steps: dict[str, Callable[[], Any]] = {
        "numpy.exp(a)": lambda: np.exp(a),
        "F.exp(x)": lambda: F.exp(x),
        "xp.exp(x)": lambda: xp.exp(x),
        "x.__array_namespace__().exp(x)": lambda: x.__array_namespace__().exp(x),
        "array_namespace(x).exp(x)": lambda: array_api_compat.array_namespace(x).exp(x),
        "numpy.add(a, a)": lambda: np.add(a, a),
        "x + x": lambda: x + x,
        "xp.add(x, x)": lambda: xp.add(x, x),
    }
    torch = _harness.torch_single_thread()
    if torch is not None:
        t = torch.tensor(a, requires_grad=True)
        steps["torch.exp(t), requires_grad"] = lambda: torch.exp(t)
        steps["t + t, requires_grad"] = lambda: t + t
    for name, step in list(steps.items()):
        try:
            got = step()
        except Exception as error:  # reported; the other contestants still run
            print(f"skipped {name}: {type(error).__name__}: {error}")
            del steps[name]
            continue
        got = got.array if isinstance(got, agnograd.Variable) else got
        want = np.exp(a) if "exp" in name else a + a
        _harness.check_close(name, [got], [want], rtol=1e-12)
    return {k: v for k, v in steps.items() if k not in skip}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=51, batch_seconds=0.01)
    args = p.parse_args(argv)
    steps = contestants(_harness.skipped(args))
    batch = 0.001 if args.quick else args.batch_seconds
    times = _harness.interleaved(steps, rounds=args.rounds, batch_seconds=batch)
    us = {k: [t * 1e6 for t in v] for k, v in times.items()}
    medians = {k: statistics.median(v) for k, v in us.items()}
    summary = _harness.ratio_summary(
        times,
        [
            ("xp.exp(x)", "F.exp(x)", None),
            ("x.__array_namespace__().exp(x)", "F.exp(x)", None),
            ("array_namespace(x).exp(x)", "F.exp(x)", None),
            ("F.exp(x)", "numpy.exp(a)", None),
            ("F.exp(x)", "torch.exp(t), requires_grad", None),
            ("xp.add(x, x)", "x + x", None),
            ("x + x", "t + t, requires_grad", None),
        ],
    )
    print(
        f"Namespace per-call overhead, ({SIZE},) float64, forward only, "
        f"{args.rounds} interleaved rounds"
    )
    rows = [[name, medians[name], min(us[name])] for name in steps]
    print(_harness.table(["call", "us/call median", "us/call min"], rows))
    print()
    print(_harness.ratio_table(summary))
    return _harness.emit(
        "namespace",
        {
            "shape": [SIZE],
            "dtype": "float64",
            "rounds": args.rounds,
            "quick": args.quick,
            "us_per_call_median": medians,
            "ratios": summary,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
