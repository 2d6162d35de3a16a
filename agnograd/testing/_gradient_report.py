"""The failure report of ``check_backward``: the numbers, the direction, and the
worst element of the elementwise numerical gradient (computed only on failure)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy

from agnograd.backends._backend import dtype_name
from agnograd.core._variable import Variable
from agnograd.testing._numerical import host64, numerical_grad

if TYPE_CHECKING:
    from agnograd.testing._gradient_check import _Operand

#: Above this many elements the elementwise gradient is not computed on failure.
_WORST_ELEMENT_LIMIT = 4096


def describe(x: Any) -> str:
    return f"({', '.join(map(str, x.shape))}), {dtype_name(x.dtype)}"


def preview(x: Any, limit: int = 6) -> str:
    values = host64(x).ravel()
    shown = ", ".join(f"{v:.4g}" for v in values[:limit])
    return f"[{shown}{', ...' if values.size > limit else ''}]"


def elementwise_gradient(
    func: Callable[..., Any],
    others: list[Any],
    params: tuple[Variable, ...],
    operands: list[_Operand],
    seeds: list[Any],
    eps: float,
) -> list[Any]:
    """Elementwise numerical gradient of every operand (for the failure message)."""
    holders = [Variable(x) for x in others]
    for o in operands:
        if o.kind == "input":
            holders[o.index].array = o.evaluated()
    param_operands = [o for o in operands if o.kind == "param"]
    moved = [params[o.index] for o in param_operands]
    originals = [p.array for p in moved]
    try:
        for p, o in zip(moved, param_operands, strict=True):
            p.array = o.evaluated()
        targets = [holders[o.index] for o in operands if o.kind == "input"] + moved
        return list(
            numerical_grad(
                lambda: func(*[Variable(h.array) for h in holders]),
                targets,
                seeds,
                eps,
            )
        )
    finally:
        for p, data in zip(moved, originals, strict=True):
            p.array = data


def number(value: complex) -> str:
    """Ten significant digits, written as a float (``6.0``, not ``6``)."""
    if isinstance(value, complex):
        if value.imag == 0:
            return number(value.real)
        return f"({number(value.real)}{'+' if value.imag >= 0 else '-'}{number(abs(value.imag))}j)"
    text = f"{value:.10g}"
    return f"{text}.0" if text.lstrip("-").isdigit() else text


def failure_message(
    op: str,
    analytic: float,
    numerical: float,
    tolerance: float,
    settings: tuple[float, float, float, float],
    operands: list[_Operand],
    elementwise: Callable[[], list[Any]],
) -> str:
    atol, rtol, allowance, eps = settings
    lines = [
        f"{op}: the gradient from backward disagrees with central differences "
        "along a random unit direction d",
        f"  analytic  <grads, d>             = {number(analytic)}",
        f"  numerical d/dt <y_grad, f(x+td)> = {number(numerical)} (eps={eps:g})",
        f"  |difference| {abs(analytic - numerical):.6g} > tolerance {tolerance:.6g} "
        f"(atol {atol:g} + rtol {rtol:g} * |numerical| + rounding allowance {allowance:.3g})",
        "  direction d:",
    ]
    for o in operands:
        lines.append(f"    {o.label} {describe(o.data)}: {preview(o.direction)}")
    total = sum(math.prod(o.shape) for o in operands)
    if total > _WORST_ELEMENT_LIMIT:
        lines.append(f"  (worst element not computed: {total} elements)")
        return "\n".join(lines)
    try:
        numeric = elementwise()
    except Exception as error:
        lines.append(f"  (worst element not computed: {type(error).__name__}: {error})")
        return "\n".join(lines)
    worst: tuple[float, str, tuple[int, ...], complex, complex, bool] | None = None
    for o, ng in zip(operands, numeric, strict=True):
        n = host64(ng)
        a = host64(o.gradient) if o.gradient is not None else numpy.zeros(n.shape)
        diff = numpy.abs(a - n)
        if diff.size == 0:
            continue
        k = tuple(int(i) for i in numpy.unravel_index(int(numpy.argmax(diff)), diff.shape))
        if worst is None or diff[k] > worst[0]:
            worst = (float(diff[k]), o.label, k, a[k].item(), n[k].item(), o.gradient is None)
    if worst is not None:
        _, label, k, a_k, n_k, missing = worst
        note = " (backward gave None, read as 0)" if missing else ""
        lines.append(
            f"  worst element: {label} at {k}: analytic {number(a_k)}, "
            f"numerical {number(n_k)}{note}"
        )
    return "\n".join(lines)
