"""A custom agnograd FunctionNode, trained with JAX through the bridge.

Run it with ``python examples/jax_custom_node.py``; it needs JAX, and exits with
status 1 if a check fails.

``LogCosh`` below is an agnograd :class:`~agnograd.FunctionNode` with a forward
and a backward written by hand (``log(cosh(r))`` computed stably, and its
derivative ``tanh(r)``): JAX has never seen it. ``agnograd.interop.jax.function``
makes a robust regression loss built on it a JAX function, and the script checks
what JAX computes with it against a pure-JAX version of the same loss and against
central differences in float64:

- the gradient under ``jax.jit(jax.grad(...))``;
- per-example gradients under ``jax.jit(jax.vmap(jax.grad(...)))``;
- the Hessian under ``jax.jit(jax.hessian(...))``: JAX differentiates agnograd's
  backward pass, which runs on JAX tracers;
- 200 steps of gradient descent under ``jax.jit``, whose loss must decrease.

Each check prints one line, ``<check>: ok (...)``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

import agnograd
import agnograd.functions as F


class LogCosh(agnograd.FunctionNode):
    """``log(cosh(x))``; its derivative is ``tanh(x)``."""

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        xp = self.xp
        self.retain_inputs((0,))
        a = xp.abs(x)
        # log(cosh(x)) = |x| + log(1 + exp(-2|x|)) - log(2), which never overflows
        return (a + xp.log1p(xp.exp(-2 * a)) - math.log(2.0),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = self.get_retained_inputs()
        (gy,) = grad_outputs
        return (gy * F.tanh(x),)


def robust_loss(w: Any, x: Any, t: Any) -> Any:
    """Mean log-cosh penalty of the residuals of the linear model ``x @ w``."""
    (penalty,) = LogCosh().apply((x @ w - t,))
    return F.mean(penalty)


def main() -> int:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("skipped: JAX is not installed (pip install jax)")
        return 0
    import agnograd.interop.jax as bridge

    loss = bridge.function(robust_loss)

    def reference(w: Any, x: Any, t: Any) -> Any:
        r = x @ w - t
        return jnp.mean(jnp.logaddexp(r, -r) - math.log(2.0))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    w_true = np.array([1.5, -2.0, 0.5, 3.0], dtype=np.float32)
    t = x @ w_true + rng.standard_normal(32).astype(np.float32)
    w = jnp.zeros(4)
    failures = 0

    def report(check: str, error: float, tolerance: float) -> None:
        nonlocal failures
        status = "ok" if error <= tolerance else f"FAILED (tolerance {tolerance:.0e})"
        failures += status != "ok"
        print(f"{check}: {status} (max error {error:.1e})")

    def max_error(a: Any, b: Any) -> float:
        return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))

    w0 = jnp.asarray(rng.standard_normal(4).astype(np.float32))
    grad = jax.jit(jax.grad(loss))
    expected = jax.jit(jax.grad(reference))(w0, x, t)
    report("jit(grad) vs pure JAX", max_error(grad(w0, x, t), expected), 1e-5)

    with jax.enable_x64(True):  # float64 for the central differences
        w64, x64, t64 = (jnp.asarray(np.asarray(a, dtype=np.float64)) for a in (w0, x, t))
        g64 = jax.jit(jax.grad(loss))(w64, x64, t64)

        @jax.jit
        def central_differences(w: Any) -> Any:
            eps = 1e-6
            steps = eps * jnp.eye(w.shape[0], dtype=w.dtype)
            along = jax.vmap(lambda e: loss(w + e, x64, t64) - loss(w - e, x64, t64))
            return along(steps) / (2 * eps)

        numerical = central_differences(w64)
        report("jit(grad) vs central differences (float64)", max_error(g64, numerical), 1e-8)

    per_example = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    expected = jax.jit(jax.vmap(jax.grad(reference), in_axes=(None, 0, 0)))(w0, x, t)
    report("jit(vmap(grad)) vs pure JAX", max_error(per_example(w0, x, t), expected), 1e-5)

    hessian = jax.jit(jax.hessian(loss))(w0, x, t)
    expected = jax.jit(jax.hessian(reference))(w0, x, t)
    report("jit(hessian) vs pure JAX", max_error(hessian, expected), 1e-4)

    @jax.jit
    def step(w: Any) -> tuple[Any, Any]:
        value, g = jax.value_and_grad(loss)(w, x, t)
        return value, w - 1.0 * g

    first, _ = step(w)
    for _ in range(200):
        value, w = step(w)
    ok = float(value) < 0.5 * float(first)
    failures += not ok
    print(
        f"gradient descent under jit: {'ok' if ok else 'FAILED'} "
        f"(loss {float(first):.3f} -> {float(value):.3f})"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
