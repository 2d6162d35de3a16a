"""Zero-copy views between libraries take constant time, from 1 KB to 100 MB.

For each size, float32 buffers (aligned to 64 bytes, which JAX needs) are viewed
across libraries with ``agnograd.view`` (DLPack): numpy→torch, torch→numpy,
torch→jax, jax→torch, jax→numpy, numpy→jax, and a Variable's
``to_chx('torch')`` + ``from_chx()`` round trip (data and gradient). Every view is
checked to share the source buffer before timing. A plain ``numpy.copy`` is timed
next to them as the reference that grows with the size.

Run ``python benchmarks/bench_views.py [--rounds N] [--quick]``.
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

import agnograd
import agnograd.functions._transfer  # installs Variable.to_chx, as `import agnograd` will
from agnograd.backends._backend import adapter_for
from agnograd.backends._device import view

SIZES = [2**10, 10 * 2**10, 100 * 2**10, 2**20, 10 * 2**20, 100 * 2**20]  # bytes
QUICK_SIZES = [2**10, 2**20]


def label(nbytes: int) -> str:
    for unit, scale in (("MB", 2**20), ("KB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def aligned(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start : start + nbytes].view(np.float32)
    out[...] = 1.0
    return out


def address(array: Any) -> int | None:
    adapter = adapter_for(array)
    return None if adapter is None else adapter.get_data_pointer(array)


def contestants(nbytes: int, skip: set[str]) -> dict[str, Callable[[], Any]]:
    """The conversions for one size; each checked to share memory before it is timed."""
    a = aligned(nbytes)
    steps: dict[str, Callable[[], Any]] = {}
    sources: dict[str, Any] = {"numpy": a}
    torch = _harness.torch_single_thread()
    if torch is not None:
        sources["torch"] = torch.from_numpy(aligned(nbytes))
    jax = _harness.optional_import("jax.numpy")
    if jax is not None:
        sources["jax"] = jax.asarray(aligned(nbytes))
    for src, dst in [
        ("numpy", "torch"),
        ("torch", "numpy"),
        ("torch", "jax"),
        ("jax", "torch"),
        ("jax", "numpy"),
        ("numpy", "jax"),
    ]:
        if src in sources and dst in sources:
            x = sources[src]
            steps[f"{src}->{dst}"] = lambda x=x, dst=dst: view(x, dst)
    if "torch" in sources:
        var = agnograd.Variable(aligned(nbytes), grad=aligned(nbytes))

        def round_trip(var: agnograd.Variable = var) -> None:
            var.to_chx("torch")
            var.from_chx()

        steps["Variable to_chx+from_chx"] = round_trip
    steps["numpy.copy (reference)"] = lambda: np.copy(a)
    for name, step in list(steps.items()):
        if "->" in name:
            out = step()
            src = sources[name.partition("->")[0]]
            if address(out) != address(src):
                raise AssertionError(f"{name} did not share the buffer")
    return {k: v for k, v in steps.items() if k not in skip}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=7, batch_seconds=0.02)
    args = p.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    batch = 0.001 if args.quick else args.batch_seconds
    rounds = 1 if args.quick else args.rounds
    us: dict[str, dict[str, float]] = {}
    for nbytes in sizes:
        steps = contestants(nbytes, _harness.skipped(args))
        times = _harness.interleaved(steps, rounds=rounds, batch_seconds=batch)
        for name, values in times.items():
            us.setdefault(name, {})[label(nbytes)] = statistics.median(values) * 1e6
        del steps, times
    names = list(us)
    print(f"Median time per view, microseconds, float32, {rounds} interleaved rounds")
    headers = ["conversion", *(label(n) for n in sizes), "largest / smallest"]
    rows = []
    for name in names:
        row = [us[name][label(n)] for n in sizes]
        rows.append([name, *row, row[-1] / row[0]])
    print(_harness.table(headers, rows))
    return _harness.emit(
        "views",
        {
            "quick": args.quick,
            "rounds": rounds,
            "sizes_bytes": sizes,
            "us_per_view_median": us,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
