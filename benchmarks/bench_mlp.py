"""MLP training step: 784-1024-1024-10, batch 256, float32, tanh, softmax cross entropy.

Forward and backward (the gradients of all weights and biases; no optimizer
update, the same for every contestant) for agnograd on NumPy arrays, hand-written
NumPy, torch.autograd, agnograd on torch tensors, and HIPS autograd and mygrad
when they are installed. At these sizes the time is the matrix products; what is
measured is the framework's cost on top of them.

Targets (issue 14): agnograd-numpy within 1.05x of the hand-written NumPy, and
agnograd-torch within 1.05x of torch.autograd.

Run ``python benchmarks/bench_mlp.py [--rounds N] [--quick]``.
"""

import os

# Before anything imports NumPy: BLAS reads these once, when it is loaded. Two BLAS
# threads stall on a busy two-core machine, and one thread makes contestants comparable.
os.environ.update(
    dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)

import itertools
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

import _harness
import numpy as np

import agnograd
import agnograd.functions as F

SIZES = (784, 1024, 1024, 10)
BATCH = 256
QUICK_SIZES = (20, 16, 16, 10)
QUICK_BATCH = 8
TARGET = 1.05

Step = Callable[[], tuple[Any, list[Any]]]


def problem(sizes: Sequence[int], batch: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Random inputs, labels and parameters ``[W1, b1, W2, b2, W3, b3]`` (W is in x out)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, sizes[0]), dtype=np.float32)
    t = rng.integers(0, sizes[-1], batch)
    params = []
    for n_in, n_out in itertools.pairwise(sizes):
        params.append(rng.standard_normal((n_in, n_out), dtype=np.float32) / math.sqrt(n_in))
        params.append(np.zeros(n_out, dtype=np.float32))
    return x, t, params


def hand_numpy(x: np.ndarray, t: np.ndarray, params: list[np.ndarray]) -> Step:
    """The step written by hand, as an engineer would with NumPy alone."""
    W1, b1, W2, b2, W3, b3 = params
    rows = np.arange(x.shape[0])
    n = x.shape[0]

    def step() -> tuple[Any, list[Any]]:
        h1 = np.tanh(x @ W1 + b1)
        h2 = np.tanh(h1 @ W2 + b2)
        z = h2 @ W3 + b3
        m = z.max(axis=1, keepdims=True)
        e = np.exp(z - m)
        s = e.sum(axis=1, keepdims=True)
        loss = np.mean(np.log(s[:, 0]) + m[:, 0] - z[rows, t])
        g3 = e / s  # the softmax; its gradient is softmax - onehot, averaged
        g3[rows, t] -= 1.0
        g3 /= n
        g2 = (g3 @ W3.T) * (1.0 - h2 * h2)
        g1 = (g2 @ W2.T) * (1.0 - h1 * h1)
        grads = [x.T @ g1, g1.sum(axis=0), h1.T @ g2, g2.sum(axis=0), h2.T @ g3, g3.sum(axis=0)]
        return loss, grads

    return step


def agnograd_loss(x: Any, t: Any, params: Any) -> Any:
    """The MLP's loss with agnograd's functions (``params``: W1, b1, W2, b2, W3, b3)."""
    W1, b1, W2, b2, W3, b3 = params
    h1 = F.tanh(F.matmul(x, W1) + b1)
    h2 = F.tanh(F.matmul(h1, W2) + b2)
    return F.softmax_cross_entropy(F.matmul(h2, W3) + b3, t)


def agnograd_step(x: Any, t: Any, params: list[Any]) -> Step:
    """agnograd on the arrays' own library (NumPy or torch)."""
    variables = [agnograd.Variable(p) for p in params]

    def step() -> tuple[Any, list[Any]]:
        for v in variables:
            v.cleargrad()
        loss = agnograd_loss(x, t, variables)
        loss.backward()
        return loss.array, [v.grad for v in variables]

    return step


def torch_step(torch: Any, x: np.ndarray, t: np.ndarray, params: list[np.ndarray]) -> Step:
    xt = torch.from_numpy(x)
    tt = torch.from_numpy(t)
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    W1, b1, W2, b2, W3, b3 = tensors
    cross_entropy = torch.nn.functional.cross_entropy

    def step() -> tuple[Any, list[Any]]:
        for p in tensors:
            p.grad = None
        h1 = torch.tanh(xt @ W1 + b1)
        h2 = torch.tanh(h1 @ W2 + b2)
        loss = cross_entropy(h2 @ W3 + b3, tt)
        loss.backward()
        return loss.detach(), [p.grad for p in tensors]

    return step


def hips_step(x: np.ndarray, t: np.ndarray, params: list[np.ndarray]) -> Step:
    import autograd
    import autograd.numpy as anp

    rows = np.arange(x.shape[0])

    def loss_fn(ps: list[Any]) -> Any:
        W1, b1, W2, b2, W3, b3 = ps
        h1 = anp.tanh(anp.dot(x, W1) + b1)
        h2 = anp.tanh(anp.dot(h1, W2) + b2)
        z = anp.dot(h2, W3) + b3
        m = anp.max(z, axis=1, keepdims=True)
        lse = anp.log(anp.sum(anp.exp(z - m), axis=1)) + m[:, 0]
        return anp.mean(lse - z[rows, t])

    value_and_grad = autograd.value_and_grad(loss_fn)

    def step() -> tuple[Any, list[Any]]:
        loss, grads = value_and_grad(list(params))
        return loss, list(grads)

    return step


def mygrad_step(x: np.ndarray, t: np.ndarray, params: list[np.ndarray]) -> Step:
    import mygrad as mg
    from mygrad.nnet.losses import softmax_crossentropy

    tensors = [mg.Tensor(p) for p in params]
    W1, b1, W2, b2, W3, b3 = tensors

    def step() -> tuple[Any, list[Any]]:
        h1 = mg.tanh(mg.matmul(x, W1) + b1)
        h2 = mg.tanh(mg.matmul(h1, W2) + b2)
        loss = softmax_crossentropy(mg.matmul(h2, W3) + b3, t)
        loss.backward()
        return loss.data, [p.grad for p in tensors]

    return step


def contestants(sizes: Sequence[int], batch: int, skip: set[str]) -> dict[str, Step]:
    """The contestants' step functions, checked against the hand-written gradients."""
    x, t, params = problem(sizes, batch)
    steps: dict[str, Step] = {
        "hand-numpy": hand_numpy(x, t, params),
        "agnograd-numpy": agnograd_step(x, t, params),
    }
    torch = _harness.torch_single_thread()
    if torch is not None:
        steps["torch.autograd"] = torch_step(torch, x, t, params)
        steps["agnograd-torch"] = agnograd_step(
            torch.from_numpy(x), torch.from_numpy(t), [torch.from_numpy(p) for p in params]
        )
    if _harness.optional_import("autograd") is not None:
        steps["autograd"] = hips_step(x, t, params)
    if _harness.optional_import("mygrad") is not None:
        steps["mygrad"] = mygrad_step(x, t, params)
    steps = {k: v for k, v in steps.items() if k not in skip or k == "hand-numpy"}
    want_loss, want = steps["hand-numpy"]()
    for name, step in steps.items():
        loss, grads = step()
        _harness.check_close(name, [loss], [np.asarray(want_loss)], rtol=1e-4)
        _harness.check_close(name, grads, want, rtol=1e-3)
    return steps


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = _harness.parser(__doc__.splitlines()[0], rounds=21, batch_seconds=0.05)
    args = p.parse_args(argv)
    sizes, batch = (QUICK_SIZES, QUICK_BATCH) if args.quick else (SIZES, BATCH)
    steps = contestants(sizes, batch, _harness.skipped(args))
    batch_seconds = 0.001 if args.quick else args.batch_seconds
    times = _harness.interleaved(steps, rounds=args.rounds, batch_seconds=batch_seconds)

    ms = {k: [s * 1e3 for s in v] for k, v in times.items()}
    medians = {k: statistics.median(v) for k, v in ms.items()}
    summary = _harness.ratio_summary(
        times,
        [
            ("agnograd-numpy", "hand-numpy", TARGET),
            ("agnograd-torch", "torch.autograd", TARGET),
            ("torch.autograd", "hand-numpy", None),
            ("autograd", "hand-numpy", None),
            ("mygrad", "hand-numpy", None),
        ],
    )
    shape = "-".join(map(str, sizes))
    print(
        f"MLP step {shape}, batch {batch}, float32, tanh, softmax cross entropy, "
        f"forward + backward, {args.rounds} interleaved rounds"
    )
    rows = [
        [name, medians[name], min(ms[name]), medians[name] / medians["hand-numpy"]]
        for name in steps
    ]
    print(_harness.table(["contestant", "ms/step median", "ms/step min", "x hand"], rows))
    print()
    print(_harness.ratio_table(summary))
    return _harness.emit(
        "mlp",
        {
            "sizes": list(sizes),
            "batch": batch,
            "dtype": "float32",
            "rounds": args.rounds,
            "quick": args.quick,
            "ms_per_step_median": medians,
            "ratios": summary,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
