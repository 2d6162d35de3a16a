"""A two-layer perceptron trained with plain gradient descent on NumPy.

The model is ``linear -> tanh -> linear`` with Chainer's weight layout ``(out, in)``
and ``softmax_cross_entropy`` as the loss; the task is to tell apart two
interleaved half-moons. Parameters are updated in place from ``.grad`` and then
cleared with ``cleargrad()``, as in Chainer.

Run it with ``python examples/mlp.py [--steps N]``; it exits with status 1 if
the loss did not go down.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import agnograd
import agnograd.functions as F


def half_moons(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in 2-D on two interleaved arcs, with labels 0 and 1."""
    t = rng.uniform(0, np.pi, n)
    label = rng.integers(0, 2, n)
    x = np.stack([np.cos(t) + label, np.sin(t) * (1 - 2 * label) + 0.5 * label], axis=1)
    return x + 0.1 * rng.standard_normal((n, 2)), label


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="gradient steps (default 200)")
    parser.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    x, t = half_moons(256, rng)
    hidden = 16
    params = {
        "W1": agnograd.Variable(rng.standard_normal((hidden, 2)) / np.sqrt(2), name="W1"),
        "b1": agnograd.Variable(np.zeros(hidden), name="b1"),
        "W2": agnograd.Variable(rng.standard_normal((2, hidden)) / np.sqrt(hidden), name="W2"),
        "b2": agnograd.Variable(np.zeros(2), name="b2"),
    }

    def forward(x: np.ndarray) -> agnograd.Variable:
        h = F.tanh(F.linear(x, params["W1"], params["b1"]))
        return F.linear(h, params["W2"], params["b2"])

    losses = []
    for step in range(args.steps + 1):
        loss = F.softmax_cross_entropy(forward(x), t)
        losses.append(loss.item())
        if step % max(args.steps // 5, 1) == 0:
            with agnograd.no_backprop_mode():
                accuracy = np.mean(np.argmax(forward(x).array, axis=1) == t)
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {accuracy:.3f}")
        if step == args.steps:
            break
        loss.backward()
        for p in params.values():
            p.array -= args.lr * p.grad  # in place: the graph of this step is discarded
            p.cleargrad()

    if not losses[-1] < losses[0]:
        print(f"FAIL: the loss went from {losses[0]:.4f} to {losses[-1]:.4f}")
        return 1
    print(f"loss decreased from {losses[0]:.4f} to {losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
