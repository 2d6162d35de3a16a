"""``check_backward``: Chainer's directional-derivative check of a backward pass.

A random unit direction ``d`` over every differentiable input and parameter is drawn;
the backward pass gives ``<J^T y_grad, d>`` and central differences of
``t -> <y_grad, func(x + t d)>`` give the same number numerically. One scalar per
check keeps it cheap (two evaluations of ``func``) whatever the input sizes; when it
fails, the elementwise numerical gradient is computed to point at the worst element.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import array_api_compat
import numpy

import agnograd
from agnograd._backend import raw_namespace
from agnograd._variable import Variable
from agnograd.testing._backends import dtype_label
from agnograd.testing._numerical import (
    ROUNDING_FACTOR,
    NondifferentiableError,
    Projection,
    as_tuple,
    central_difference_and_bend,
    from_host,
    host64,
    inner,
    is_complex,
    is_float,
    numerical_grad,
    roundoff,
)

#: Above this many elements the elementwise gradient is not computed on failure.
_WORST_ELEMENT_LIMIT = 4096
#: Unit roundoff of the evaluation dtype relative to eps beyond which a check is void.
_RESOLUTION_LIMIT = 1e-3


def _describe(x: Any) -> str:
    return f"({', '.join(map(str, x.shape))}), {dtype_label(x.dtype)}"


def _preview(x: Any, limit: int = 6) -> str:
    values = host64(x).ravel()
    shown = ", ".join(f"{v:.4g}" for v in values[:limit])
    return f"[{shown}{', ...' if values.size > limit else ''}]"


class _Operand:
    """One differentiable input or parameter: its data, direction and gradient."""

    def __init__(self, kind: str, index: int, data: Any, eval_dtype: Any) -> None:
        self.kind = kind
        self.index = index
        self.label = f"{kind} {index}"
        self.data = data
        self.host = host64(data)
        self.xp = raw_namespace(data)
        self.device = array_api_compat.device(data)
        self.eval_dtype = eval_dtype
        self.shape = tuple(data.shape)
        self.direction = numpy.zeros(self.shape)
        self.gradient: Any = None

    def at(self, t: float) -> Any:
        """``data + t * direction`` in the evaluation dtype, on the data's device."""
        return from_host(self.xp, self.host + t * self.direction, self.eval_dtype, self.device)

    def evaluated(self) -> Any:
        return self.at(0.0)


def _eval_dtype(x: Any, dtype: Any, op: str) -> Any:
    if dtype is None or not is_float(x):
        return x.dtype
    xp = raw_namespace(x)
    if isinstance(dtype, str):
        dtype = getattr(xp, dtype)
    if not xp.isdtype(dtype, "real floating"):
        raise ValueError(f"{op}: dtype must be a real floating dtype, got {dtype}")
    if is_complex(x):
        # A complex input is evaluated in the complex dtype of the same precision.
        return xp.complex128 if dtype == xp.float64 else xp.complex64
    return dtype


def check_backward(
    func: Callable[..., Any],
    x_data: Any,
    y_grad: Any,
    params: Sequence[Variable] | Variable = (),
    eps: float = 1e-3,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    no_grads: Sequence[bool] | None = None,
    dtype: Any = None,
    detect_nondifferentiable: bool = False,
    *,
    seed: int | None = 0,
) -> None:
    """Check the backward of ``func`` against central differences (Chainer's test).

    A random unit direction ``d`` over all differentiable inputs and ``params`` is
    drawn. The gradients from backprop give ``<grads, d>``; central differences of
    ``t -> <y_grad, func(x + t d)>`` give the same directional derivative
    numerically (accumulated in float64 on the host). They must agree within
    ``atol + rtol * |numerical|`` plus the rounding error of the dtypes ``func`` runs
    in -- negligible in float64, about ``5e-4 * ||y_grad * y||`` in float32 with
    ``eps=1e-3`` -- so float32 code passes without hand-tuned tolerances and a wrong
    gradient still fails. Pass ``dtype=float64`` for a tight check of float32 code.
    Complex inputs move along complex directions; their gradient is compared as
    ``dL/dRe + i dL/dIm`` for ``L = Re(sum(conj(y_grad) * y))`` (PyTorch's convention).

    Parameters
    ----------
    func : callable
        ``func(*xs)`` takes one Variable per entry of ``x_data`` and returns a
        Variable or a tuple of Variables.
    x_data : array or tuple of arrays
        Inputs, of any array API library and device.
    y_grad : array, tuple of arrays, or None
        Gradient of each output (``None`` entries leave an output out). ``None``
        alone means every output has one element and is seeded with ones.
    params : Variable or sequence of Variables
        Parameters ``func`` reads (layer weights); their gradients are checked too.
        Their ``.array`` is rebound during the check and restored; their ``.grad``
        is left untouched.
    eps : float
        Step of the central differences along the direction.
    atol, rtol : float
        Tolerances on the directional derivative.
    no_grads : sequence of bool, optional
        One per input: ``True`` where ``func`` must not produce a gradient (the
        input must get ``None``). Default: ``True`` for inputs without a real
        floating dtype. A gradient that reaches such an input is reported.
    dtype : dtype or str, optional
        Evaluate the numerical gradient with the floating inputs and ``params`` cast
        to this dtype (the backward still runs in the original dtypes).
    detect_nondifferentiable : bool
        Raise :class:`NondifferentiableError` when ``func`` has a kink or jump
        within ``2 * eps`` along the direction instead of comparing.
    seed : int or None
        Seed of the direction (a fixed default keeps hypothesis replays exact);
        ``None`` draws a fresh one.

    Raises
    ------
    AssertionError
        When the derivatives disagree (the message gives both values, the
        direction and the worst element), or a gradient has the wrong shape, dtype,
        library or device, or reaches an input listed in ``no_grads``.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> from agnograd.testing import check_backward
    >>> x = np.array([[0.5, -1.0], [2.0, 0.25]])
    >>> check_backward(F.tanh, x, np.ones((2, 2)))
    >>> w = agnograd.Variable(np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> check_backward(lambda x: F.matmul(x, w), x, np.ones((2, 2)), params=w)

    A wrong backward rule is caught, and the message points at the worst element:

    >>> class Square(agnograd.FunctionNode):
    ...     def forward(self, inputs):
    ...         self.retain_inputs((0,))
    ...         return (inputs[0] ** 2,)
    ...     def backward(self, indexes, grad_outputs):
    ...         (x,) = self.get_retained_inputs()
    ...         return (3 * x * grad_outputs[0],)  # should be 2 * x
    >>> check_backward(lambda x: Square().apply((x,))[0], x, np.ones((2, 2)))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: check_backward: the gradient from backward disagrees with central differences...
      analytic  <grads, d>             = 6.684690362
      numerical d/dt <y_grad, f(x+td)> = 4.456460241 (eps=0.001)
    ...
      worst element: input 0 at (1, 0): analytic 6.0, numerical 4.0...
    """
    op = "check_backward"
    xs = tuple(raw_array(x) for x in as_tuple(x_data))
    params = tuple(as_tuple(params)) if params is not None else ()
    for j, p in enumerate(params):
        if not isinstance(p, Variable):
            raise TypeError(f"{op}: params[{j}] must be a Variable, got {type(p).__name__}")
    if no_grads is None:
        no_grads = [not is_float(x) for x in xs]
    elif len(no_grads) != len(xs):
        raise ValueError(f"{op}: no_grads has {len(no_grads)} entries but x_data has {len(xs)}")

    # -- backward -------------------------------------------------------------------
    variables = [Variable(x) for x in xs]  # floating ones require a gradient
    outputs = _outputs(func(*variables), op)
    gys = _grad_outputs(y_grad, outputs, op)
    used = [k for k, gy in enumerate(gys) if gy is not None]
    targets = [*variables, *params]
    grads: list[Any] = [None] * len(targets)
    if used:
        found = agnograd.grad([outputs[k] for k in used], targets, [gys[k] for k in used])
        grads = [None if g is None else g.array for g in found]

    problems = []
    operands: list[_Operand] = []
    for i, (x, g) in enumerate(zip(xs, grads, strict=False)):
        if no_grads[i]:
            if g is not None:
                problems.append(
                    f"input {i} ({_describe(x)}) must get no gradient (it is listed in "
                    f"no_grads) but received {_preview(g)}"
                )
            continue
        if not is_float(x):
            raise ValueError(
                f"{op}: input {i} has dtype {dtype_label(x.dtype)}, which cannot be "
                "perturbed; list it in no_grads"
            )
        operands.append(_Operand("input", i, x, _eval_dtype(x, dtype, op)))
        operands[-1].gradient = g
    for j, p in enumerate(params):
        if p.array is not None and is_float(p.array):
            operands.append(_Operand("param", j, p.array, _eval_dtype(p.array, dtype, op)))
            operands[-1].gradient = grads[len(xs) + j]
    for operand in operands:
        problems.extend(_gradient_problems(operand))
    if problems:
        raise AssertionError(f"{op}: " + "\n  ".join(problems))
    if not used or sum(math.prod(o.shape) for o in operands) == 0:
        return

    # -- central differences along d --------------------------------------------------
    rng = numpy.random.default_rng(seed)
    for operand in operands:
        operand.direction = rng.standard_normal(operand.shape)
        if is_complex(operand.data):
            operand.direction = operand.direction + 1j * rng.standard_normal(operand.shape)
    norm = math.sqrt(sum(float(numpy.sum(numpy.abs(o.direction) ** 2)) for o in operands))
    for operand in operands:
        operand.direction /= norm
    # dL/dt along d is <grad, d>: Re(sum(conj(grad) * d)) for complex inputs too.
    analytic = sum(
        (inner(host64(o.gradient), o.direction) for o in operands if o.gradient is not None),
        start=0.0,
    )
    by_input = {o.index: o for o in operands if o.kind == "input"}
    param_operands = [o for o in operands if o.kind == "param"]
    moved_params = [params[o.index] for o in param_operands]
    originals = [p.array for p in moved_params]
    others = [
        raw_namespace(x).astype(x, _eval_dtype(x, dtype, op)) if is_float(x) else x for x in xs
    ]
    position = [0.0]

    def evaluate() -> Any:
        t = position[0]
        args = [by_input[i].at(t) if i in by_input else x for i, x in enumerate(others)]
        for p, o in zip(moved_params, param_operands, strict=True):
            p.array = o.at(t)
        return func(*[Variable(a) for a in args])

    def move(t: float) -> float:
        position[0] = t
        return t

    def restore() -> None:
        position[0] = 0.0
        for p, data in zip(moved_params, originals, strict=True):
            p.array = data

    try:
        projection = Projection(evaluate, tuple(gys), op)
        u_inputs = max(roundoff(o.xp, o.eval_dtype) for o in operands)
        numerical, bend = central_difference_and_bend(
            projection,
            move,
            restore,
            eps,
            detect_nondifferentiable,
            u_inputs,
            "the direction d",
        )
    finally:
        restore()

    u = max(projection.roundoff, u_inputs)
    if u / eps > _RESOLUTION_LIMIT:
        raise ValueError(
            f"{op}: a step of eps={eps} is below the resolution of the dtypes func runs "
            f"in (unit roundoff {u:.3g}); pass dtype='float64' (or 'float32') to evaluate "
            "the numerical gradient in a wider dtype, or a larger eps"
        )
    # Rounding each input element to its dtype moves <y_grad, f> by about
    # u * |x * df/dx|, rounding each output by about u * |y_grad * y|; the errors of
    # different elements are independent, so they add as a root-sum-square, and the
    # central difference divides them by the step.
    input_spread = math.sqrt(
        sum(
            (
                float(numpy.sum(numpy.abs(host64(o.gradient) * o.host) ** 2))
                for o in operands
                if o.gradient is not None
            ),
            start=0.0,
        )
    )
    allowance = ROUNDING_FACTOR * u / eps * (projection.spread + input_spread)
    tolerance = atol + rtol * abs(numerical) + allowance
    difference = abs(analytic - numerical)
    if difference <= tolerance:
        return
    if detect_nondifferentiable and difference <= 2 * bend:
        # A kink too faint to flag by itself moves a central difference by up to
        # half the change of slope: it, not the rule, may explain the difference.
        raise NondifferentiableError(
            f"{op}: f bends by {bend:.3g} within +-{2 * eps:g} along the direction d, "
            f"enough to explain the difference {difference:.3g} between the analytic "
            f"({_number(analytic)}) and numerical ({_number(numerical)}) derivatives"
        )
    raise AssertionError(
        _failure_message(
            analytic,
            numerical,
            tolerance,
            (atol, rtol, allowance, eps),
            operands,
            lambda: _elementwise(func, others, params, operands, gys, eps),
        )
    )


def raw_array(x: Any) -> Any:
    return x.array if isinstance(x, Variable) else x


def _outputs(result: Any, op: str) -> tuple[Variable, ...]:
    outputs = as_tuple(result)
    for k, y in enumerate(outputs):
        if not isinstance(y, Variable):
            raise TypeError(
                f"{op}: func must return Variables, but output {k} is a "
                f"{type(y).__module__}.{type(y).__qualname__}"
            )
    return outputs


def _grad_outputs(y_grad: Any, outputs: tuple[Variable, ...], op: str) -> list[Any]:
    if y_grad is None:
        for k, y in enumerate(outputs):
            if math.prod(y.array.shape) != 1:
                raise ValueError(
                    f"{op}: y_grad is None but output {k} has shape {y.shape}; give y_grad "
                    "unless every output has one element"
                )
        return [raw_namespace(y.array).ones_like(y.array) for y in outputs]
    gys = [raw_array(g) for g in as_tuple(y_grad)]
    if len(gys) != len(outputs):
        raise ValueError(
            f"{op}: func returned {len(outputs)} outputs but y_grad has {len(gys)} "
            "entries; give one per output (None to leave one out)"
        )
    for k, (y, gy) in enumerate(zip(outputs, gys, strict=True)):
        if gy is not None and tuple(gy.shape) != tuple(y.array.shape):
            raise ValueError(
                f"{op}: y_grad[{k}] has shape {tuple(gy.shape)} but output {k} has shape {y.shape}"
            )
    return gys


def _gradient_problems(operand: _Operand) -> list[str]:
    g = operand.gradient
    if g is None:
        return []
    problems = []
    label = operand.label
    if tuple(g.shape) != operand.shape:
        problems.append(
            f"the gradient of {label} has shape {tuple(g.shape)}, the {label} {operand.shape}"
        )
    if g.dtype != operand.data.dtype:
        problems.append(
            f"the gradient of {label} has dtype {dtype_label(g.dtype)}, the {label} "
            f"{dtype_label(operand.data.dtype)}"
        )
    if raw_namespace(g) is not operand.xp:
        problems.append(
            f"the gradient of {label} is a {type(g).__module__} array, the {label} a "
            f"{type(operand.data).__module__} array"
        )
    elif array_api_compat.device(g) != operand.device:
        problems.append(
            f"the gradient of {label} is on device {array_api_compat.device(g)}, the "
            f"{label} on {operand.device}"
        )
    return problems


def _elementwise(
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


def _number(value: complex) -> str:
    """Ten significant digits, written as a float (``6.0``, not ``6``)."""
    if isinstance(value, complex):
        if value.imag == 0:
            return _number(value.real)
        return (
            f"({_number(value.real)}{'+' if value.imag >= 0 else '-'}{_number(abs(value.imag))}j)"
        )
    text = f"{value:.10g}"
    return f"{text}.0" if text.lstrip("-").isdigit() else text


def _failure_message(
    analytic: float,
    numerical: float,
    tolerance: float,
    settings: tuple[float, float, float, float],
    operands: list[_Operand],
    elementwise: Callable[[], list[Any]],
) -> str:
    atol, rtol, allowance, eps = settings
    lines = [
        "check_backward: the gradient from backward disagrees with central differences "
        "along a random unit direction d",
        f"  analytic  <grads, d>             = {_number(analytic)}",
        f"  numerical d/dt <y_grad, f(x+td)> = {_number(numerical)} (eps={eps:g})",
        f"  |difference| {abs(analytic - numerical):.6g} > tolerance {tolerance:.6g} "
        f"(atol {atol:g} + rtol {rtol:g} * |numerical| + rounding allowance {allowance:.3g})",
        "  direction d:",
    ]
    for o in operands:
        lines.append(f"    {o.label} {_describe(o.data)}: {_preview(o.direction)}")
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
            f"  worst element: {label} at {k}: analytic {_number(a_k)}, "
            f"numerical {_number(n_k)}{note}"
        )
    return "\n".join(lines)
