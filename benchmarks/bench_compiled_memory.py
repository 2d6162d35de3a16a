"""Peak memory of one training step: eager, static graphs and a compiled plan.

One step is forward + backward into the gradients of the parameters, from cleared
gradients (no optimizer update), of two networks, float32:

- mlp: ``bench_mlp``'s 784-1024-1024-10 tanh MLP with softmax cross entropy, batch 256;
- deep: ``L`` layers of ``h = tanh(h @ W_i + b_i)``, then ``sum(h)``; x (batch, width)
  needs no gradient, every W_i (width, width) and b_i (width,) does.

Modes:

- eager: the graph is recorded as the step runs, then ``loss.backward()``;
- static: the graph built once under ``auto_forward(False)``, then ``y.forward();
  y.backward()`` each step;
- static clear: nnabla's ``y.forward(clear_no_need_grad=True);
  y.backward(clear_buffer=True)``;
- compiled: ``plan = agnograd.compile(y)`` once, then ``plan.run()`` each step.

Each mode runs two steps under ``tracemalloc`` (NumPy reports every data buffer to
it, so the figures are exact for arrays; Python objects add a few KiB); the first
step's peak (``first``), what the mode holds between steps (``held``: the gradients,
and, for a static graph, the arrays of its last run) and the second step's peak
(``step``, what a training loop pays each step), each plus the inputs (x, labels,
parameters), which exist before the window (the table's ``held`` is over them).
Graphs and plans are made before it.

Floors, from the graph (``must_keep``): ``saved`` is the arrays backward reads (what
the functions that need a gradient retain, leaves aside), all alive when backward
starts; ``kept`` adds every gradient of the parameters, as when the graph is held
until backward ends (eager and static without options, which the caller may
backprop again); ``min`` frees each saved array after its last reader and each
gradient once used, a step at a time, in the engine's order by rank. None counts the
temporaries inside a function (NumPy's ``a @ W + b`` holds two arrays at once).

Issue 20's target: compiled's step peak at most eager's.

Run ``python benchmarks/bench_compiled_memory.py [--layers L] [--batch B] [--width N]
[--quick]``; the last line is one ``BENCHMARK_JSON`` record.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import argparse
import gc
import heapq
import itertools
import math
import sys
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import _harness
import bench_mlp
import numpy as np

import agnograd
import agnograd.functions as F
from agnograd.core._graph import functions_of

LAYERS = 50
BATCH = 256
WIDTH = 256
QUICK = (3, 8, 16)
MIB = 2**20

MODES = {
    "eager": "eager, loss.backward()",
    "static": "y.forward(); y.backward()",
    "static clear": "y.forward(clear_no_need_grad=True); y.backward(clear_buffer=True)",
    "compiled": "agnograd.compile(y).run()",
}


@dataclass
class Network:
    """A training problem: data (no gradient), parameters and the loss of both."""

    name: str
    description: str
    data: list[np.ndarray]
    params: list[np.ndarray]
    loss: Callable[[Sequence[Any], Sequence[Any]], Any]
    grads: Callable[[], list[np.ndarray]]  # the parameters' gradients, by hand

    @property
    def input_bytes(self) -> int:
        return sum(a.nbytes for a in [*self.data, *self.params])


def mlp(quick: bool) -> Network:
    sizes = bench_mlp.QUICK_SIZES if quick else bench_mlp.SIZES
    batch = bench_mlp.QUICK_BATCH if quick else bench_mlp.BATCH
    x, t, params = bench_mlp.problem(sizes, batch)

    def loss(data: Sequence[Any], p: Sequence[Any]) -> Any:
        return bench_mlp.agnograd_loss(*data, p)

    shape = "-".join(map(str, sizes))
    return Network(
        "mlp",
        f"MLP {shape}, batch {batch}, tanh, softmax cross entropy",
        [x, t],
        params,
        loss,
        lambda: bench_mlp.hand_numpy(x, t, params)()[1],
    )


def deep(layers: int, batch: int, width: int) -> Network:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    params = []
    for _ in range(layers):
        w = rng.standard_normal((width, width), dtype=np.float32)
        w *= np.float32(1.0 / math.sqrt(width))  # keeps tanh out of saturation
        params += [w, np.zeros(width, dtype=np.float32)]

    def loss(data: Sequence[Any], p: Sequence[Any]) -> Any:
        h = data[0]
        for i in range(0, len(p), 2):
            h = F.tanh(F.matmul(h, p[i]) + p[i + 1])
        return F.sum(h)

    def grads() -> list[np.ndarray]:
        hs = [x]
        for i in range(0, len(params), 2):
            hs.append(np.tanh(hs[-1] @ params[i] + params[i + 1]))
        g = np.ones_like(hs[-1])
        out: list[Any] = [None] * len(params)
        for j in reversed(range(layers)):
            gz = g * (1 - hs[j + 1] * hs[j + 1])
            out[2 * j], out[2 * j + 1] = hs[j].T @ gz, gz.sum(axis=0)
            g = gz @ params[2 * j].T
        return out

    return Network(
        "deep",
        f"{layers} layers of tanh(h @ W_i + b_i), then sum; x ({batch}, {width})",
        [x],
        params,
        loss,
        grads,
    )


def prepare(mode: str, net: Network) -> Callable[[], Any]:
    """One training step of ``mode``: it returns the loss and the gradients. Graphs
    and plans are made here, outside the measured window."""
    variables = [agnograd.Variable(p) for p in net.params]
    data = [agnograd.Variable(a, requires_grad=False) for a in net.data]

    def cleared() -> None:
        for v in variables:
            v.cleargrad()

    if mode == "eager":

        def eager() -> Any:
            cleared()
            y = net.loss(data, variables)
            y.backward()
            return y, [v.grad for v in variables]

        return eager

    with agnograd.auto_forward(False):
        y = net.loss(data, variables)
    if mode == "compiled":
        plan = agnograd.compile(y)

        def compiled() -> Any:
            cleared()
            plan.run()
            return y, [v.grad for v in variables]

        return compiled
    clear = mode == "static clear"

    def static() -> Any:
        cleared()
        y.forward(clear_no_need_grad=clear)
        y.backward(clear_buffer=clear)
        return y, [v.grad for v in variables]

    return static


def measure(run: Callable[[], Any]) -> dict[str, int]:
    """Traced bytes: the first step's peak, what is held after it, the second's peak."""
    gc.collect()
    tracemalloc.start()
    try:
        result = run()
        first = tracemalloc.get_traced_memory()[1]
        del result  # a training loop drops the last step's gradients (cleargrad)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = run()
        step = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return {"first": first, "held": held, "step": step}


def must_keep(net: Network) -> dict[str, int]:
    """The floors of the module docstring, in bytes over the inputs, from the graph."""
    variables = [agnograd.Variable(p) for p in net.params]
    data = [agnograd.Variable(a, requires_grad=False) for a in net.data]
    with agnograd.auto_forward(False):
        y = net.loss(data, variables)
    y.forward()  # a function may choose what it retains as it runs
    out: Any = y.node

    def size(node: Any) -> int:
        return math.prod(node.shape) * np.dtype(node.dtype).itemsize

    # Which inputs a gradient reaches (in forward order), and who reads each array
    # that backward needs (the leaves are inputs: counted already).
    indexes: dict[Any, list[int]] = {}
    readers: dict[Any, set[Any]] = {}
    for f in functions_of([out]):
        ins: Any = f.inputs
        indexes[f] = [
            i
            for i, x in enumerate(ins)
            if x.requires_grad and (x.creator_node is None or indexes[x.creator_node])
        ]
        if indexes[f]:
            outs: Any = f.outputs
            retained = [ins[i] for i in f._retain_in] + [outs[i]() for i in f._retain_out]
            for node in retained:
                if node is not None and node.creator_node is not None:
                    readers.setdefault(node, set()).add(f)
    saved = sum(size(n) for n in readers) + size(out)  # and the output, which the caller holds

    def peak(free: bool) -> int:
        """Backward in the engine's order (highest rank first, then first queued),
        one function at a time: its output's gradient, the saved arrays, the gradients
        waiting and the new ones are alive at once."""
        waiting = {n: set(r) for n, r in readers.items()}
        grads = {out: size(out)}  # gradients not used yet, and the leaves'
        now = top = saved + size(out)
        heap = [(-out.creator_node.rank, 0, out.creator_node)]
        count = itertools.count(1)
        done = set()
        while heap:
            f = heapq.heappop(heap)[2]
            if f in done:  # queued by a second output
                continue
            done.add(f)
            outs: Any = f.outputs
            gy = sum(grads.pop(r(), 0) for r in outs if r() is not None)
            ins: Any = f.inputs
            new = sum(size(ins[i]) for i in indexes[f])
            top = max(top, now + new)
            now += new - gy
            for i in indexes[f]:
                x = ins[i]
                if x in grads:  # prev + gx: three arrays for a moment, then one
                    top = max(top, now + size(x))
                    now -= size(x)
                else:
                    grads[x] = size(x)
                    if x.creator_node is not None:
                        heapq.heappush(heap, (-x.creator_node.rank, next(count), x.creator_node))
            for node, who in waiting.items() if free else ():
                if f in who:
                    who.discard(f)
                    now -= 0 if who else size(node)
        return top

    return {"saved": saved, "kept": peak(free=False), "min": peak(free=True)}


def check(mode: str, net: Network) -> None:
    """The mode's gradients against the hand-written ones (on the small problem)."""
    _, grads = prepare(mode, net)()
    _harness.check_close(f"{net.name} {mode}", grads, net.grads(), rtol=1e-3)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=LAYERS, help=f"deep: depth (default {LAYERS})")
    p.add_argument("--batch", type=int, default=BATCH, help=f"deep: rows of x (default {BATCH})")
    p.add_argument("--width", type=int, default=WIDTH, help=f"deep: columns (default {WIDTH})")
    p.add_argument("--quick", action="store_true", help=f"tiny sizes, deep {QUICK} (smoke test)")
    p.add_argument("--skip", default="", help="comma-separated modes or networks to leave out")
    args = p.parse_args(argv)
    if args.quick:
        args.layers, args.batch, args.width = QUICK
    skip = _harness.skipped(args)
    unknown = skip - set(MODES) - {"mlp", "deep"}
    if unknown:
        raise SystemExit(f"--skip: unknown {sorted(unknown)}; known: {[*MODES, 'mlp', 'deep']}")
    networks = [
        n
        for n in (mlp(args.quick), deep(args.layers, args.batch, args.width))
        if n.name not in skip
    ]
    small = {"mlp": mlp(True), "deep": deep(*QUICK)}
    modes = [m for m in MODES if m not in skip]

    print("Peak memory of one training step (tracemalloc), float32; modes:")
    for mode in modes:
        print(f"  {mode}: {MODES[mode]}")
    print(
        "columns: the first step's peak, the second's (step), what the mode holds between "
        "steps over the inputs, the step's peak over the floor min and over eager's"
    )
    record: dict[str, Any] = {"quick": args.quick, "dtype": "float32", "networks": {}}
    for net in networks:
        inputs = net.input_bytes
        floors = {k: inputs + v for k, v in must_keep(net).items()}
        results = {}
        for mode in modes:
            check(mode, small[net.name])  # also warms up code paths outside the window
            traced = measure(prepare(mode, net))
            results[mode] = {k: inputs + v for k, v in traced.items()}
        eager = results.get("eager", {}).get("step")
        print(f"\n{net.description}")
        print(
            f"inputs {inputs / MIB:.2f} MiB; floors: saved {floors['saved'] / MIB:.2f}, "
            f"kept {floors['kept'] / MIB:.2f}, min {floors['min'] / MIB:.2f} MiB"
        )
        rows: list[list[Any]] = [
            [
                mode,
                r["first"] / MIB,
                r["step"] / MIB,
                (r["held"] - inputs) / MIB,
                r["step"] / floors["min"],
                None if eager is None else r["step"] / eager,
            ]
            for mode, r in results.items()
        ]
        rows += [
            [f"floor: {k}", None, v / MIB, None, v / floors["min"], None] for k, v in floors.items()
        ]
        headers = ["mode", "first MiB", "step MiB", "held MiB", "/ min", "/ eager"]
        print(_harness.table(headers, rows))
        compiled = results.get("compiled", {}).get("step")
        record["networks"][net.name] = {
            "description": net.description,
            "input_bytes": inputs,
            "floor_bytes": floors,
            "peak_bytes": results,
            "compiled_over_eager": None if compiled is None or eager is None else compiled / eager,
        }
    record.update(layers=args.layers, batch=args.batch, width=args.width)
    return _harness.emit("compiled-memory", record)


if __name__ == "__main__":
    main(sys.argv[1:])
