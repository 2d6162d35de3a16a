"""Peak memory of define-then-run with and without clearing buffers, next to eager mode.

A deep chain: ``h = tanh(h @ W_i)`` for ``L`` layers, each with its own ``W_i``,
then ``y = sum(h)``. ``x`` is (batch, width), each ``W_i`` (width, width), float32;
``x`` needs no gradient, every ``W_i`` does. Each mode is measured once with
``tracemalloc`` (NumPy reports every data buffer to it, so the figures are exact
for arrays; the graph's Python objects add a few KiB per layer):

inference (forward only; the output is kept)
    * eager, under ``no_backprop_mode`` (no graph: each layer frees the last);
    * eager with the graph recorded (as a training step would, minus backward);
    * define-then-run ``forward()``: every buffer of the graph stays;
    * define-then-run ``forward(clear_buffer=True)``.

training (forward + backward; the output and the gradients of the W are kept)
    * eager, ``backward()`` and ``backward(clear_buffer=True)``;
    * define-then-run ``forward()`` + ``backward()``;
    * define-then-run ``forward(clear_no_need_grad=True)`` + ``backward(clear_buffer=True)``.

The window of each measurement is one run, started once the inputs exist (and,
for define-then-run, once the graph is built: building allocates no array) and
ended while the output and the gradients are still held. The peak reported is the
inputs (x and the W) plus the window's peak.

Theoretical minimum, counted in arrays that must coexist, with ``a`` = one
(batch, width) activation and ``w`` = one (width, width) weight or gradient, and
elementwise steps fused (no temporaries; NumPy's add one or two ``a`` at times):

* inference: ``a`` for ``z = h @ W`` while ``h`` is alive, then ``a`` for
  ``tanh(z)`` while ``z`` is: inputs + 2a whatever the depth.
* training, free as you go (``min``): the forward must keep h_1..h_L for the
  backward (tanh's rule reads its output, matmul's its input; z need not be
  kept), so it peaks at inputs + (L + 1) a; the backward, layer j = L..1, makes
  ``gz = gh * (1 - h_j**2)`` (then frees gh and h_j), ``gW_j = h_(j-1).T @ gz``
  and ``gh = gz @ W_j.T``, keeping the gradients of the W; see ``minimum``.
* training with the graph kept until backward ends (``kept``: Chainer's and
  agnograd's eager semantics, where the caller may backprop again): h_1..h_L
  stay during the whole backward.

Run ``python benchmarks/bench_define_then_run_memory.py [--layers L] [--batch B]
[--width N] [--quick]``; the last line is one ``BENCHMARK_JSON`` record.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import argparse
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import _harness
import numpy as np

LAYERS = 100
BATCH = 512
WIDTH = 512
QUICK = (4, 8, 8)
MIB = 2**20

#: mode -> (kind, description); the order of the table.
MODES = {
    "eager no_backprop_mode": ("inference", "eager forward, no graph"),
    "eager graph": ("inference", "eager forward, graph recorded"),
    "dtr forward()": ("inference", "define-then-run forward()"),
    "dtr forward(clear_buffer)": ("inference", "define-then-run forward(clear_buffer=True)"),
    "eager backward()": ("training", "eager forward + backward()"),
    "eager backward(clear_buffer)": ("training", "eager forward + backward(clear_buffer=True)"),
    "dtr forward()+backward()": ("training", "define-then-run forward() + backward()"),
    "dtr clear_no_need_grad+clear_buffer": (
        "training",
        "define-then-run forward(clear_no_need_grad=True) + backward(clear_buffer=True)",
    ),
}

Problem = tuple[np.ndarray, list[np.ndarray]]


def problem(layers: int, batch: int, width: int) -> Problem:
    """Input ``x`` and the weights, float32, scaled to keep tanh out of saturation."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    scale = np.float32(1.0 / np.sqrt(width))
    ws = []
    for _ in range(layers):
        w = rng.standard_normal((width, width), dtype=np.float32)
        w *= scale  # in place: no float64 temporary
        ws.append(w)
    return x, ws


def reference(x: np.ndarray, ws: list[np.ndarray]) -> tuple[Any, list[np.ndarray]]:
    """Output and gradients of the W, written out with NumPy (for the checks)."""
    hs = [x]
    for w in ws:
        hs.append(np.tanh(hs[-1] @ w))
    g = np.ones_like(hs[-1])
    grads: list[Any] = [None] * len(ws)
    for i in reversed(range(len(ws))):
        gz = g * (1 - hs[i + 1] * hs[i + 1])
        grads[i] = hs[i].T @ gz
        g = gz @ ws[i].T
    return np.sum(hs[-1]), grads


def prepare(mode: str, x: np.ndarray, ws: list[np.ndarray]) -> Callable[[], Any]:
    """The run of ``mode``; define-then-run graphs are built here, outside the window.

    The run returns what the caller holds at the end: the output and, for
    training, the gradients of the W.
    """
    import agnograd
    import agnograd.functions as F

    xv = agnograd.Variable(x, requires_grad=False)
    params = [agnograd.Variable(w) for w in ws]

    def chain() -> Any:
        h = xv
        for p in params:
            h = F.tanh(F.matmul(h, p))  # rebinding h drops the Variable of the previous layer
        return F.sum(h)

    kind = MODES[mode][0]
    if mode.startswith("eager"):
        clear = mode.endswith("(clear_buffer)")

        def run_eager() -> Any:
            if mode == "eager no_backprop_mode":
                with agnograd.no_backprop_mode():
                    return chain()
            y = chain()
            if kind == "training":
                y.backward(clear_buffer=clear)
                return y, [p.grad for p in params]
            return y

        return run_eager

    with agnograd.auto_forward(False):
        y = chain()
    forward_options = {
        "dtr forward(clear_buffer)": {"clear_buffer": True},
        "dtr clear_no_need_grad+clear_buffer": {"clear_no_need_grad": True},
    }.get(mode, {})
    backward_options = {"clear_buffer": mode == "dtr clear_no_need_grad+clear_buffer"}

    def run_deferred() -> Any:
        # The graph reads its leaves' data through their Variables: hold them.
        assert xv.array is not None
        y.forward(**forward_options)
        if kind == "training":
            y.backward(**backward_options)
            return y, [p.grad for p in params]
        return y

    return run_deferred


def check(mode: str) -> None:
    """Run ``mode`` on a small problem and compare with the NumPy reference."""
    x, ws = problem(3, 4, 8)
    want_y, want_grads = reference(x, ws)
    result = prepare(mode, x, ws)()
    y, grads = result if MODES[mode][0] == "training" else (result, None)
    np.testing.assert_allclose(float(y.array), want_y, rtol=1e-5, err_msg=mode)
    if grads is not None:
        _harness.check_close(mode, grads, want_grads, rtol=1e-4)


def measure(mode: str, layers: int, batch: int, width: int) -> tuple[int, float]:
    """Peak traced bytes of one run of ``mode`` over what existed before; seconds taken."""
    x, ws = problem(layers, batch, width)
    run = prepare(mode, x, ws)
    gc.collect()
    tracemalloc.start()
    try:
        start = time.perf_counter()
        result = run()
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result, run, x, ws
    gc.collect()
    return peak, elapsed


def minimum(layers: int, batch: int, width: int) -> dict[str, int]:
    """Inputs and least peaks (see the module docstring), in bytes."""
    a = batch * width * 4
    w = width * width * 4
    inputs = a + layers * w

    def training(keep_graph: bool) -> int:
        peak = (layers + 1) * a  # forward, last layer: h_1..h_L and z_L
        hs = layers  # h_1..h_L alive when backward starts
        grads = 0
        for j in range(layers, 0, -1):
            gh = a if j < layers else 0  # sum's gradient is a broadcast view
            peak = max(peak, hs * a + grads + gh + a)  # gz = gh * (1 - h_j**2)
            if not keep_graph:
                hs -= 1  # h_j is not needed any more
            peak = max(peak, hs * a + grads + a + w)  # gW_j = h_(j-1).T @ gz
            grads += w
            if j > 1:
                peak = max(peak, hs * a + grads + 2 * a)  # gh = gz @ W_j.T
        return peak

    return {
        "inputs": inputs,
        "inference": inputs + (2 * a if layers else 0),
        "training": inputs + training(keep_graph=False),
        "training_kept": inputs + training(keep_graph=True),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=LAYERS, help=f"depth (default {LAYERS})")
    p.add_argument("--batch", type=int, default=BATCH, help=f"rows of x (default {BATCH})")
    p.add_argument("--width", type=int, default=WIDTH, help=f"columns of x (default {WIDTH})")
    p.add_argument("--quick", action="store_true", help=f"tiny sizes {QUICK} (smoke test)")
    p.add_argument("--skip", default="", help="comma-separated modes to leave out")
    args = p.parse_args(argv)
    if args.quick:
        args.layers, args.batch, args.width = QUICK
    skip = _harness.skipped(args)
    unknown = skip - set(MODES)
    if unknown:
        raise SystemExit(f"--skip: unknown modes {sorted(unknown)}; known: {list(MODES)}")

    least = minimum(args.layers, args.batch, args.width)
    results: list[dict[str, Any]] = []
    for mode in MODES:
        if mode in skip:
            continue
        check(mode)  # also warms up imports and code paths outside the window
        window, seconds = measure(mode, args.layers, args.batch, args.width)
        kind = MODES[mode][0]
        total = least["inputs"] + window
        results.append(
            {
                "mode": mode,
                "kind": kind,
                "description": MODES[mode][1],
                "peak_bytes": total,
                "window_peak_bytes": window,
                "over_minimum": total / least[kind],
                "seconds": seconds,
            }
        )

    a_mib = args.batch * args.width * 4 / MIB
    print(
        f"Peak memory (tracemalloc) of {args.layers} layers of tanh(h @ W_i), then sum; "
        f"x ({args.batch}, {args.width}) and W ({args.width}, {args.width}), float32"
    )
    print(
        f"inputs {least['inputs'] / MIB:.1f} MiB; one activation a = {a_mib:.2f} MiB; "
        f"minimum: inference {least['inference'] / MIB:.1f} MiB, training "
        f"{least['training'] / MIB:.1f} MiB (graph kept: {least['training_kept'] / MIB:.1f})"
    )
    rows = []
    for r in results:
        over_inputs = (r["peak_bytes"] - least["inputs"]) / MIB
        rows.append(
            [
                r["description"],
                r["peak_bytes"] / MIB,
                over_inputs / a_mib,
                r["over_minimum"],
                r["seconds"],
            ]
        )
    for kind in ("inference", "training"):
        rows.append(
            [
                f"theoretical minimum ({kind})",
                least[kind] / MIB,
                (least[kind] - least["inputs"]) / MIB / a_mib,
                1.0,
                None,
            ]
        )
    rows.append(
        [
            "training, graph kept until backward ends",
            least["training_kept"] / MIB,
            (least["training_kept"] - least["inputs"]) / MIB / a_mib,
            least["training_kept"] / least["training"],
            None,
        ]
    )
    headers = ["mode", "peak MiB", "over inputs, in a", "/ minimum", "seconds"]
    print(_harness.table(headers, rows))
    return _harness.emit(
        "define-then-run-memory",
        {
            "layers": args.layers,
            "batch": args.batch,
            "width": args.width,
            "dtype": "float32",
            "quick": args.quick,
            "minimum_bytes": least,
            "results": results,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
