"""A SciPy loss on NumPy, trained through by a PyTorch model and optimizer.

Run it with ``python examples/torch_scipy_loss.py [--steps N]``; it exits with
status 1 if the loss did not go down.

The loss is the negative log-likelihood of a softmax classifier written with
``scipy.special.logsumexp``, which runs on agnograd's Variables because SciPy's
array API support is on (``SCIPY_ARRAY_API=1``, set below before SciPy is
imported). ``agnograd.interop.torch.function(nll, backend="numpy")`` makes it a
torch operation: its forward sees NumPy views of the model's logits (no copy),
and its backward, agnograd's, hands torch the gradient that reaches the model's
``nn.Parameter``s. The task: tell apart three Gaussian blobs in the plane.
"""

from __future__ import annotations

import os

os.environ["SCIPY_ARRAY_API"] = "1"  # SciPy reads it once, when first imported

import argparse
import sys

import numpy as np
import torch
from scipy import special

import agnograd
from agnograd.interop.torch import function


def nll(logits: agnograd.Variable, labels: agnograd.Variable) -> agnograd.Variable:
    """Mean negative log-likelihood of ``labels`` under ``softmax(logits)``."""
    xp = logits.__array_namespace__()
    picked = xp.take_along_axis(logits, xp.expand_dims(labels, axis=1), axis=1)[:, 0]
    return xp.mean(special.logsumexp(logits, axis=1) - picked)


def blobs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points around three centres, with their labels 0, 1 and 2."""
    centres = np.array([[0.0, 2.0], [-2.0, -1.0], [2.0, -1.0]])
    labels = rng.integers(0, 3, n)
    return centres[labels] + rng.standard_normal((n, 2)), labels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps (default 100)")
    parser.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny tensors: more threads only wait for each other
    x, t = blobs(300, np.random.default_rng(0))
    inputs, labels = torch.asarray(x, dtype=torch.float32), torch.asarray(t)
    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = function(nll, backend="numpy")

    losses = []
    for step in range(args.steps + 1):
        optimizer.zero_grad()
        logits = model(inputs)
        loss = loss_fn(logits, labels)  # a torch scalar with grad_fn
        losses.append(loss.item())
        if step % max(args.steps // 5, 1) == 0:
            accuracy = (logits.argmax(dim=1) == labels).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {accuracy:.3f}")
        if step == args.steps:
            break
        loss.backward()  # agnograd's backward, then torch's, into the parameters
        optimizer.step()

    if not losses[-1] < losses[0]:
        print(f"FAIL: the loss went from {losses[0]:.4f} to {losses[-1]:.4f}")
        return 1
    print(f"loss decreased from {losses[0]:.4f} to {losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
