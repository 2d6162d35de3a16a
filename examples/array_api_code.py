"""Array API code written once, made differentiable by passing Variables.

``robust_loss`` below is ordinary library code: it asks its inputs for their
namespace (``array_api_compat.array_namespace``) and uses only functions of the
array API standard. Called with NumPy arrays or torch tensors it computes a
value; called with ``agnograd.Variable`` inputs it also records a graph, and
``backward()`` gives the gradients -- on NumPy, array-api-strict and PyTorch,
without a line of backend-specific code.

Run it with ``python examples/array_api_code.py``; it exits with status 1 if a
gradient disagrees with the one derived by hand.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import numpy as np
from array_api_compat import array_namespace

import agnograd

# -- library code: knows nothing about agnograd ----------------------------------------


def huber(r: Any, delta: float = 1.0) -> Any:
    """Huber's penalty: quadratic for ``|r| <= delta``, linear beyond."""
    xp = array_namespace(r)
    a = xp.abs(r)
    return xp.where(a <= delta, 0.5 * r**2, delta * (a - 0.5 * delta))


def robust_loss(x: Any, y: Any, w: Any, b: Any) -> Any:
    """Mean Huber penalty of the residuals of the linear model ``x @ w + b``."""
    xp = array_namespace(x, y, w, b)
    return xp.mean(huber(xp.matmul(x, w) + b - y))


# -- the same gradient, derived by hand, to check against ------------------------------


def expected_gradients(xp: Any, x: Any, y: Any, w: Any, b: Any) -> tuple[Any, Any]:
    r = x @ w + b - y
    g = xp.clip(r, min=-1.0, max=1.0) / r.shape[0]
    return xp.matrix_transpose(x) @ g, xp.sum(g)


def main() -> int:
    rng = np.random.default_rng(0)
    data = {
        "x": rng.standard_normal((8, 3)),
        "y": rng.standard_normal(8) * 3,
        "w": rng.standard_normal(3),
        "b": np.asarray(0.5),
    }
    failures = 0
    for library, namespace in [
        ("numpy", "numpy"),
        ("array_api_strict", "array_api_strict"),
        ("torch", "array_api_compat.torch"),
    ]:
        if importlib.util.find_spec(library) is None:
            print(f"{library:<17} skipped: not installed")
            continue
        xp = importlib.import_module(namespace)
        arrays = {name: xp.asarray(value) for name, value in data.items()}

        # Plain arrays: the library code runs as it always did.
        plain = float(robust_loss(**arrays))

        # Variables: the same code, now differentiable. Data that needs no gradient
        # is wrapped too, so that every argument reports agnograd's namespace.
        x = agnograd.Variable(arrays["x"], requires_grad=False)
        y = agnograd.Variable(arrays["y"], requires_grad=False)
        w = agnograd.Variable(arrays["w"], name="w")
        b = agnograd.Variable(arrays["b"], name="b")
        loss = robust_loss(x, y, w, b)
        loss.backward()

        gw, gb = expected_gradients(xp, *arrays.values())
        error = max(float(xp.max(xp.abs(w.grad - gw))), float(xp.abs(b.grad - gb)))
        ok = abs(loss.item() - plain) < 1e-12 and error < 1e-12
        failures += not ok
        print(
            f"{library:<17} loss {loss.item():.6f}  dloss/db {float(b.grad):+.6f}  "
            f"{'ok' if ok else 'FAIL'} (max error {error:.1e}, "
            f"gradients are {type(w.grad).__module__.partition('.')[0]} arrays)"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
