"""Peak memory of forward + backward through 50 layers of ``tanh(x @ W)``.

``x`` is (512, 2048) float32, each ``W`` (2048, 2048) float32 (50 of them: 800 MiB),
the backward is seeded with ones and computes the gradient of every ``W`` (not of
``x``). Each contestant runs alone in a fresh subprocess, one per measurement.

What is measured (the *window* is one forward + backward, started after the
inputs exist, ended while the output and the gradients are still held):

* ``tracemalloc`` (NumPy-based contestants): the peak of the bytes traced in the
  window. NumPy reports every data buffer to tracemalloc, so this is exact for
  arrays (plus the few Python objects the window creates).
* ``rss`` (every contestant, the only one for torch, which has no CPU allocator
  statistics): the high-water mark of the resident set in the window, ``VmHWM``
  after ``VmRSS`` before, with the mark reset at the window's start through
  ``/proc/self/clear_refs``. glibc is told to serve every block of 64 KiB or more
  by ``mmap`` (``MALLOC_MMAP_THRESHOLD_``), so freed arrays leave the resident set
  at once instead of staying in the heap; a warm-up on a small problem pages in
  code and caches first. For NumPy contestants it agrees with tracemalloc.

The reported peak is the inputs (Ws, x, seed) plus the window's peak. It is
compared with the least memory any implementation needs, computed step by step
(``must_keep``) with ``act`` = one (512, 2048) array and ``w`` = one W:

* forward: layer i holds its input chain plus ``z = h @ W`` and ``tanh(z)``; the
  pre-activation ``z`` is not kept (tanh's rule reads its output, matmul's rule
  its input), so the layer outputs h_1..h_L are what backward needs.
* backward, layer j = L..1: ``gz = gh * (1 - h * h)`` (a fused kernel: gh and gz
  live), then ``gW = h_prev.T @ gz`` (gh freed), then ``gh_prev = gz @ W.T``
  (not for layer 1: x needs no gradient); the gradients of the W stay.
* ``kept``: the graph stays alive until backward ends (Chainer's semantics, which
  agnograd follows: the caller holds the output and may backprop again), so all
  of h_1..h_L are held throughout. Peak at the last step: inputs + L * act +
  L * w + act.
* ``kept_min``: saved arrays are freed as soon as backward has used them (what
  torch.autograd does, and agnograd with ``backward(clear_buffer=True)``, the
  contestant ``agnograd-numpy clear_buffer``); only the output h_L, held by the
  caller, stays.

Target (issue 2): peak / kept at most 1.05 (peak / kept_min for the contestants
that free as they go).

Run ``python benchmarks/bench_memory.py [--layers L] [--quick]``.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded. Two BLAS
# threads stall on a busy two-core machine, and one thread makes contestants comparable.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import argparse
import gc
import importlib.util
import math
import statistics
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import _harness
import numpy as np

LAYERS = 50
BATCH = 512
WIDTH = 2048
QUICK = (3, 16, 32)
TARGET = 1.05
MIB = 2**20

#: contestant -> (module it needs, measurements)
CONTESTANTS = {
    "hand-numpy": ("numpy", ("tracemalloc", "rss")),
    "agnograd-numpy": ("agnograd", ("tracemalloc", "rss")),
    # nnabla's option: saved arrays are freed as backward consumes them.
    "agnograd-numpy clear_buffer": ("agnograd", ("tracemalloc",)),
    "torch.autograd": ("torch", ("rss",)),
    "agnograd-torch": ("torch", ("rss",)),
    "autograd": ("autograd", ("tracemalloc", "rss")),
    "mygrad": ("mygrad", ("tracemalloc", "rss")),
}

#: Whether the resident-set high-water mark can be reset (Linux 4.0 and later).
HAS_RSS = os.path.exists("/proc/self/clear_refs")

Problem = tuple[np.ndarray, list[np.ndarray], np.ndarray]


def problem(layers: int, batch: int, width: int) -> Problem:
    """Input ``x``, the weights and the seed gradient (ones), all float32."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    scale = np.float32(1.0 / math.sqrt(width))  # keeps tanh away from saturation
    ws = []
    for _ in range(layers):
        w = rng.standard_normal((width, width), dtype=np.float32)
        w *= scale  # in place: no float64 or second temporary at this size
        ws.append(w)
    return x, ws, np.ones((batch, width), dtype=np.float32)


def build(name: str, x: np.ndarray, ws: list[np.ndarray], seed: np.ndarray) -> Callable[[], Any]:
    """The contestant's forward + backward; it returns (output, gradients of the Ws)."""
    if name == "hand-numpy":

        def run() -> Any:
            hs = [x]
            for w in ws:
                hs.append(np.tanh(hs[-1] @ w))
            g = seed
            gws: list[Any] = [None] * len(ws)
            for i in reversed(range(len(ws))):
                h = hs[i + 1]
                gz = g * (1.0 - h * h)
                gws[i] = hs[i].T @ gz
                if i:
                    g = gz @ ws[i].T
            return hs[-1], gws

        return run
    if name.startswith(("agnograd-numpy", "agnograd-torch")):
        import agnograd
        import agnograd.functions as F

        clear_buffer = name.endswith("clear_buffer")
        if name == "agnograd-torch":
            torch = _harness.torch_single_thread()
            assert torch is not None
            x, seed = torch.from_numpy(x), torch.from_numpy(seed)
            ws = [torch.from_numpy(w) for w in ws]
        variables = [agnograd.Variable(w) for w in ws]

        def run() -> Any:
            h: Any = x
            for v in variables:
                h = F.tanh(F.matmul(h, v))
            h.grad = seed
            if clear_buffer:
                h.backward(clear_buffer=True)
            else:
                h.backward()
            return h, [v.grad for v in variables]

        return run
    if name == "torch.autograd":
        torch = _harness.torch_single_thread()
        assert torch is not None
        xt, st = torch.from_numpy(x), torch.from_numpy(seed)
        tensors = [torch.from_numpy(w).requires_grad_() for w in ws]

        def run() -> Any:
            h = xt
            for w in tensors:
                h = torch.tanh(h @ w)
            h.backward(st)
            return h, [w.grad for w in tensors]

        return run
    if name == "autograd":
        import autograd
        import autograd.numpy as anp

        def forward(weights: list[Any]) -> Any:
            h = x
            for w in weights:
                h = anp.tanh(anp.dot(h, w))
            return h

        def run() -> Any:
            vjp, y = autograd.make_vjp(forward)(list(ws))
            return y, vjp(seed)

        return run
    if name == "mygrad":
        import mygrad as mg

        tensors = [mg.Tensor(w, copy=False) for w in ws]

        def run() -> Any:
            h: Any = x
            for w in tensors:
                h = mg.tanh(mg.matmul(h, w))
            h.backward(seed)
            return h, [w.grad for w in tensors]

        return run
    raise ValueError(f"bench_memory: unknown contestant {name!r}; known: {', '.join(CONTESTANTS)}")


def _proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for text in f:
            if text.startswith(field + ":"):
                return int(text.split()[1])
    raise RuntimeError(f"bench_memory: /proc/self/status has no {field} line")


def measure(run: Callable[[], Any], method: str) -> int:
    """Peak bytes allocated during ``run()`` (see the module docstring)."""
    gc.collect()
    gc.freeze()  # later collections skip the objects of the imports (torch has many)
    if method == "tracemalloc":
        tracemalloc.start()
        try:
            result = run()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    elif method == "rss":
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current VmRSS (Linux >= 4.0)
        before = _proc_status_kib("VmRSS")
        result = run()
        peak = (_proc_status_kib("VmHWM") - before) * 1024
    else:
        raise ValueError(f"bench_memory: unknown method {method!r}; use tracemalloc or rss")
    del result
    return peak


def worker(jobs: list[tuple[str, str]], layers: int, batch: int, width: int) -> None:
    """Measure each (contestant, method) in turn; print one JSON line per job.

    Separate processes per job are what measuring needs; several jobs in one
    process are for ``--quick``, which only proves the code runs.
    """
    for name, method in jobs:
        # Warm up on a small problem (imports, code pages and caches stay out of
        # the window); check the contestant's gradients against hand-written ones.
        small = problem(2, 4, 8)
        want = build("hand-numpy", *small)()[1]
        got = build(name, *small)()[1]
        _harness.check_close(name, got, want, rtol=1e-4)
        del small, want, got
        x, ws, seed = problem(layers, batch, width)
        run = build(name, x, ws, seed)
        peak = measure(run, method)
        del x, ws, seed, run
        record = {"contestant": name, "method": method, "window_peak": peak}
        _harness.emit("memory-worker", record)


def _has_clear_buffer() -> bool:
    import inspect

    import agnograd

    return "clear_buffer" in inspect.signature(agnograd.Variable.backward).parameters


def must_keep(layers: int, batch: int, width: int) -> dict[str, int]:
    """Bytes of the inputs and the least peaks of the two models of the docstring."""
    act = batch * width * 4
    w = width * width * 4

    def least_peak(keep_graph: bool) -> int:
        peak = (layers + 1) * act  # forward, last layer: h_1..h_L and z_L
        for j in range(layers, 0, -1):
            grads = (layers - j) * w  # the gradients of W_(j+1)..W_L
            if keep_graph:
                h_during = h_after = layers
            else:  # h_1..h_j (plus h_L, held by the caller), then h_j is freed
                h_during, h_after = j + (j < layers), j
            g_in = act if j < layers else 0  # the seed is an input
            peak = max(peak, h_during * act + grads + g_in + act)  # gz from gh
            peak = max(peak, h_after * act + grads + act + w)  # gW from gz
            if j > 1:
                peak = max(peak, h_after * act + grads + w + 2 * act)  # gh_prev from gz
        return peak

    inputs = layers * w + 2 * act
    return {
        "inputs": inputs,
        "kept": inputs + least_peak(keep_graph=True),
        "kept_min": inputs + least_peak(keep_graph=False),
    }


def run_worker(jobs: list[tuple[str, str]], args: argparse.Namespace) -> dict[str, int]:
    """Run ``jobs`` in a fresh worker process; the window peak of each job."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(64 * 1024))
    spec = ",".join(f"{name}:{method}" for name, method in jobs)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", spec]
    cmd += ["--layers", str(args.layers), "--batch", str(args.batch), "--width", str(args.width)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"bench_memory: the worker for {spec} failed with exit code "
            f"{proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    peaks = {}
    for text in proc.stdout.splitlines():
        if text.startswith(_harness.JSON_PREFIX):
            record = _harness.parse_emitted(text)
            peaks[f"{record['contestant']}:{record['method']}"] = record["window_peak"]
    return peaks


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=LAYERS, help=f"default {LAYERS}")
    p.add_argument("--batch", type=int, default=BATCH, help=f"rows of x (default {BATCH})")
    p.add_argument("--width", type=int, default=WIDTH, help=f"columns of x (default {WIDTH})")
    p.add_argument("--rounds", type=int, default=1, help="measurements per contestant (median)")
    p.add_argument("--quick", action="store_true", help=f"tiny sizes {QUICK} (smoke test)")
    p.add_argument("--skip", default="", help="comma-separated contestants to leave out")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.layers, args.batch, args.width = QUICK
    if args.worker:
        pairs = [job.partition(":") for job in args.worker.split(",")]
        worker([(name, method) for name, _, method in pairs], args.layers, args.batch, args.width)
        return {}

    skip = _harness.skipped(args)
    sizes = must_keep(args.layers, args.batch, args.width)
    jobs: list[tuple[str, str]] = []
    for name, (module, methods) in CONTESTANTS.items():
        if name in skip:
            continue
        if importlib.util.find_spec(module) is None:
            print(f"skipped {name}: {module} is not installed")
            continue
        if name.endswith("clear_buffer") and not _has_clear_buffer():
            print(f"skipped {name}: this agnograd's backward has no clear_buffer option")
            continue
        if not HAS_RSS:
            methods = tuple(m for m in methods if m != "rss")
            if not methods:
                print(f"skipped {name}: measuring it needs /proc/self/clear_refs (Linux)")
                continue
        jobs += [(name, m) for m in (methods[:1] if args.quick else methods)]
    if args.quick:  # one process for all: proves the code runs, measures nothing
        peaks = {k: [v] for k, v in run_worker(jobs, args).items()}
    else:  # a fresh process per measurement
        peaks = {f"{n}:{m}": [] for n, m in jobs}
        for _ in range(args.rounds):
            for job in jobs:
                for key, peak in run_worker([job], args).items():
                    peaks[key].append(peak)
    results: dict[str, dict[str, float]] = {}
    for name, method in jobs:
        total = sizes["inputs"] + statistics.median(peaks[f"{name}:{method}"])
        results.setdefault(name, {})[method] = total

    print(
        f"Peak memory, forward + backward of {args.layers} layers of tanh(x @ W), "
        f"x ({args.batch}, {args.width}) float32, W ({args.width}, {args.width}) float32"
    )
    print(
        f"inputs {sizes['inputs'] / MIB:.1f} MiB, kept {sizes['kept'] / MIB:.1f} MiB, "
        f"kept_min {sizes['kept_min'] / MIB:.1f} MiB"
    )
    rows = []
    summary: list[dict[str, Any]] = []
    for name, by_method in results.items():
        for method, total in by_method.items():
            ratio = total / sizes["kept"]
            rows.append(
                [
                    name,
                    method,
                    total / MIB,
                    ratio,
                    total / sizes["kept_min"],
                    (total - sizes["kept"]) / MIB,
                ]
            )
            summary.append(
                {
                    "contestant": name,
                    "method": method,
                    "peak_bytes": total,
                    "peak_over_kept": ratio,
                    "peak_over_kept_min": total / sizes["kept_min"],
                    "target": TARGET,
                    "meets_target": ratio <= TARGET,
                }
            )
    headers = ["contestant", "method", "peak MiB", "/ kept", "/ kept_min", "MiB over kept"]
    print(_harness.table(headers, rows))
    return _harness.emit(
        "memory",
        {
            "layers": args.layers,
            "batch": args.batch,
            "width": args.width,
            "dtype": "float32",
            "quick": args.quick,
            "must_keep_bytes": sizes,
            "results": summary,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
