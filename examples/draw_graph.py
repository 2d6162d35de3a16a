"""Draw the picture of docs/graph.md: an MLP's loss, and a gradient's own graph.

The left part is the graph of a two-layer perceptron's loss (``linear -> tanh ->
linear -> softmax_cross_entropy``); the right part is ``y = sum(tanh(z))`` with
the gradient ``gz`` computed with ``enable_double_backprop=True``: the gradient is
a graph of its own, hanging off the forward one, and can be differentiated again.
One call of ``build_computational_graph`` gets both.

Run it with ``python examples/draw_graph.py [OUTPUT]`` (default: docs/graph.svg).
It prints the DOT text, and draws OUTPUT (SVG, PNG, ... after its suffix) when the
graphviz Python package and Graphviz's ``dot`` program are installed (``pip install
agnograd[graph]`` and ``apt-get install graphviz``); without them it says so and
only prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import agnograd
import agnograd.functions as F
from agnograd.computational_graph import ComputationalGraph, build_computational_graph

DOCS = Path(__file__).resolve().parent.parent / "docs"


def mlp_loss() -> agnograd.Variable:
    """The loss of a 2-3-2 perceptron on four points (float32, NumPy)."""
    rng = np.random.default_rng(0)
    x = agnograd.Variable(rng.standard_normal((4, 2), dtype=np.float32), name="x")
    t = np.array([0, 1, 1, 0])
    W1 = agnograd.Variable(rng.standard_normal((3, 2), dtype=np.float32), name="W1")
    b1 = agnograd.Variable(np.zeros(3, dtype=np.float32), name="b1")
    W2 = agnograd.Variable(rng.standard_normal((2, 3), dtype=np.float32), name="W2")
    b2 = agnograd.Variable(np.zeros(2, dtype=np.float32), name="b2")
    h = F.tanh(F.linear(x, W1, b1))
    loss = F.softmax_cross_entropy(F.linear(h, W2, b2), t)
    loss.name = "loss"
    return loss


def double_backprop() -> tuple[agnograd.Variable, agnograd.Variable]:
    """``y = sum(tanh(z))`` and its gradient ``gz``, itself in the graph."""
    z = agnograd.Variable(np.array([0.5, -1.0]), name="z")
    y = F.sum(F.tanh(z))
    y.name = "y"
    (gz,) = agnograd.grad([y], [z], enable_double_backprop=True)
    gz.name = "gz"
    return y, gz


def picture() -> ComputationalGraph:
    y, gz = double_backprop()
    return build_computational_graph([mlp_loss(), y, gz])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "output",
        nargs="?",
        type=Path,
        default=DOCS / "graph.svg",
        help="the image to draw (default: docs/graph.svg)",
    )
    args = parser.parse_args(argv)
    graph = picture()
    print(graph.dump())
    try:
        graph.render(args.output)
    except (ImportError, RuntimeError) as error:
        print(f"not drawn: {error}", file=sys.stderr)
        return 0
    print(f"drew {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
