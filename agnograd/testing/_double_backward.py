"""``check_double_backward``: second-order gradients, checked as the first-order
gradient's own backward (Chainer's method)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import agnograd
from agnograd.backends._backend import raw_namespace
from agnograd.core._variable import Variable
from agnograd.testing._gradient_check import (
    _check_backward,
    _grad_outputs,
    _outputs,
    checked_no_grads,
    raw_array,
)
from agnograd.testing._numerical import as_tuple


def check_double_backward(
    func: Callable[..., Any],
    x_data: Any,
    y_grad: Any,
    x_grad_grad: Any,
    params: Sequence[Variable] | Variable = (),
    params_grad_grad: Any = (),
    eps: float = 1e-3,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    no_grads: Sequence[bool] | None = None,
    dtype: Any = None,
    detect_nondifferentiable: bool = False,
    *,
    seed: int | None = 0,
) -> None:
    """Check second-order gradients: :func:`check_backward` of the first-order gradient.

    The first-order gradient is computed with ``enable_double_backprop=True`` as a
    function of the inputs and of ``y_grad``, ``(x, gy) -> (gx, gparams)``, and its
    own backward is checked against central differences, with ``x_grad_grad`` and
    ``params_grad_grad`` as its output gradients (Chainer's method). A wrong
    first-order rule is :func:`check_backward`'s to find; this checks that the
    rule's own derivative is right.

    Parameters
    ----------
    func, x_data, params, eps, atol, rtol, dtype, detect_nondifferentiable, seed
        As in :func:`check_backward`.
    y_grad : array, tuple of arrays, or None
        Output gradients; they are inputs of the checked function (the first-order
        gradient is linear in them). ``None`` alone seeds one-element outputs with
        constant ones.
    x_grad_grad : array or tuple of arrays
        Gradient of each first-order input gradient: one per entry of ``x_data``
        (``None`` for non-differentiable inputs) or one per differentiable input.
    params_grad_grad : array or tuple of arrays
        Gradient of each parameter's first-order gradient.
    no_grads : sequence of bool, optional
        One per entry of ``x_data``: inputs whose first-order gradient is not taken
        and that must receive no gradient (default: non-floating ones).

    Examples
    --------
    >>> import numpy as np, agnograd.functions as F
    >>> from agnograd.testing import check_double_backward
    >>> x = np.array([0.5, -1.0, 2.0])
    >>> check_double_backward(F.tanh, x, np.ones(3), np.array([1.0, 0.5, -2.0]))
    """
    op = "check_double_backward"
    xs = tuple(raw_array(x) for x in as_tuple(x_data))
    params = tuple(as_tuple(params)) if params is not None else ()
    n = len(xs)
    no_grads = checked_no_grads(no_grads, xs, op)
    differentiable = [i for i in range(n) if not no_grads[i]]

    constant_gys: list[Any] | None = None
    gys: list[Any] = []
    if y_grad is None:
        with agnograd.no_backprop_mode():
            outputs = _outputs(func(*[Variable(x) for x in xs]), op)
        constant_gys = _grad_outputs(None, outputs, op)
    else:
        gys = [raw_array(g) for g in as_tuple(y_grad)]
    present = [k for k, g in enumerate(gys) if g is not None]

    ggx = list(as_tuple(x_grad_grad))
    if len(ggx) == n and len(differentiable) != n:
        for i in range(n):
            if no_grads[i] and ggx[i] is not None:
                raise ValueError(
                    f"{op}: x_grad_grad[{i}] is given but input {i} is not differentiable "
                    "(no_grads); pass None there"
                )
        ggx = [ggx[i] for i in differentiable]
    if len(ggx) != len(differentiable):
        raise ValueError(
            f"{op}: x_grad_grad has {len(ggx)} entries; give one per input ({n}) or one "
            f"per differentiable input ({len(differentiable)})"
        )
    ggp = list(as_tuple(params_grad_grad))
    if len(ggp) != len(params):
        raise ValueError(
            f"{op}: params_grad_grad has {len(ggp)} entries but params has {len(params)}"
        )

    def first_order(*inputs: Variable) -> tuple[Variable, ...]:
        x_vars = inputs[:n]
        if constant_gys is not None:
            seeds: list[Any] = list(constant_gys)
        else:
            rest = iter(inputs[n:])
            seeds = [None if g is None else next(rest) for g in gys]
        ys = _outputs(func(*x_vars), op)
        if len(ys) != len(seeds):
            raise ValueError(
                f"{op}: func returned {len(ys)} outputs but y_grad has {len(seeds)} entries"
            )
        used = [k for k, s in enumerate(seeds) if s is not None]
        targets = [x_vars[i] for i in differentiable] + list(params)
        grads = agnograd.grad(
            [ys[k] for k in used], targets, [seeds[k] for k in used], enable_double_backprop=True
        )
        result = []
        for target, g in zip(targets, grads, strict=True):
            if g is None:
                data = target.array
                g = Variable(raw_namespace(data).zeros_like(data), requires_grad=False)
            result.append(g)
        return tuple(result)

    # Checked under this function's name, so that a failure says which check failed.
    _check_backward(
        op,
        first_order,
        (*xs, *[gys[k] for k in present]),
        (*ggx, *ggp),
        params,
        eps=eps,
        atol=atol,
        rtol=rtol,
        no_grads=[*no_grads, *([False] * len(present))],
        dtype=dtype,
        detect_nondifferentiable=detect_nondifferentiable,
        seed=seed,
    )
