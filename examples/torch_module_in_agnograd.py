"""A PyTorch ``nn.Module`` as one layer of an agnograd model on NumPy data.

Run it with ``python examples/torch_module_in_agnograd.py [--steps N]``; it exits
with status 1 if the loss did not go down or a gradient went missing.

The model regresses ``sin(3 x0) + x1**2`` from ``(x0, x1)``: agnograd scales the
inputs by a learned vector ``s``, a torch encoder (``Linear -> Tanh``) wrapped by
``agnograd.interop.torch.node`` maps them to 32 features, and agnograd's
``F.linear`` with weights ``W``, ``b`` reads them out. One ``loss.backward()`` in
agnograd fills both kinds of gradient: ``s.grad``, ``W.grad`` and ``b.grad``
(NumPy arrays, agnograd's) and the encoder's ``param.grad`` (tensors, torch's, as
``loss.backward()`` in torch would). agnograd's parameters are updated by hand and
the encoder's by a torch optimizer.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

import agnograd
import agnograd.functions as F
from agnograd.interop.torch import node


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="gradient steps (default 200)")
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny tensors: more threads only wait for each other
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, (256, 2))
    target = np.sin(3 * x[:, :1]) + x[:, 1:] ** 2

    encoder = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh()).double()
    encode = node(encoder)  # NumPy Variables in, NumPy Variables out
    s = agnograd.Variable(np.ones(2), name="s")
    W = agnograd.Variable(rng.standard_normal((1, 32)) / np.sqrt(32), name="W")
    b = agnograd.Variable(np.zeros(1), name="b")
    optimizer = torch.optim.SGD(encoder.parameters(), lr=args.lr, momentum=0.9)

    losses = []
    for step in range(args.steps + 1):
        prediction = F.linear(encode(x * s), W, b)
        loss = F.mean((prediction - target) ** 2)
        losses.append(loss.item())
        if step % max(args.steps // 5, 1) == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
        if step == args.steps:
            break
        loss.backward()
        missing = [v.name for v in (s, W, b) if v.grad is None]
        missing += [n for n, p in encoder.named_parameters() if p.grad is None]
        if missing:
            print(f"FAIL: no gradient reached {', '.join(missing)}")
            return 1
        for v in (s, W, b):
            v.array -= args.lr * v.grad  # in place: the graph of this step is discarded
            v.cleargrad()
        optimizer.step()
        optimizer.zero_grad()

    print(
        "gradients reached the agnograd leaves (s, W, b: NumPy) and the torch parameters "
        f"({', '.join(n for n, _ in encoder.named_parameters())}: tensors)"
    )
    if not losses[-1] < losses[0]:
        print(f"FAIL: the loss went from {losses[0]:.4f} to {losses[-1]:.4f}")
        return 1
    print(f"loss decreased from {losses[0]:.4f} to {losses[-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
