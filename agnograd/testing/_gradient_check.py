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
from agnograd.backends._backend import dtype_name, raw_namespace
from agnograd.core._variable import Variable
from agnograd.testing._backends import dtype_of
from agnograd.testing._gradient_report import (
    describe,
    elementwise_gradient,
    failure_message,
    number,
    preview,
)
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
    roundoff,
)

#: Unit roundoff of the evaluation dtype relative to eps beyond which a check is void.
_RESOLUTION_LIMIT = 1e-3


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
    dtype = dtype_of(xp, dtype)
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
    expect_no_grads: Sequence[bool] | None = None,
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
        One per input: ``True`` to skip the input, as Chainer's ``no_grads`` does:
        it is not perturbed and its gradient is not checked. Default: ``True`` for
        inputs without a real floating dtype.
    dtype : dtype or str, optional
        Evaluate the numerical gradient with the floating inputs and ``params`` cast
        to this dtype (the backward still runs in the original dtypes).
    detect_nondifferentiable : bool
        Raise :class:`NondifferentiableError` when ``func`` has a kink or jump
        within ``2 * eps`` along the direction instead of comparing.
    seed : int or None
        Seed of the direction (a fixed default keeps hypothesis replays exact);
        ``None`` draws a fresh one.
    expect_no_grads : sequence of bool, optional
        One per input: ``True`` where ``func`` must not produce a gradient (the
        input must get ``None``); a gradient that reaches such an input is reported.

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
    _check_backward(
        "check_backward",
        func,
        x_data,
        y_grad,
        params,
        eps=eps,
        atol=atol,
        rtol=rtol,
        no_grads=no_grads,
        dtype=dtype,
        detect_nondifferentiable=detect_nondifferentiable,
        seed=seed,
        expect_no_grads=expect_no_grads,
    )


def _check_backward(
    op: str,
    func: Callable[..., Any],
    x_data: Any,
    y_grad: Any,
    params: Sequence[Variable] | Variable,
    *,
    eps: float,
    atol: float,
    rtol: float,
    no_grads: Sequence[bool] | None,
    dtype: Any,
    detect_nondifferentiable: bool,
    seed: int | None,
    expect_no_grads: Sequence[bool] | None = None,
) -> None:
    """:func:`check_backward`, its messages titled ``op`` (``check_double_backward``
    checks a first-order gradient with it)."""
    xs = tuple(raw_array(x) for x in as_tuple(x_data))
    params = _checked_params(params, op)
    no_grads = checked_no_grads(no_grads, xs, op)
    none = checked_no_grads(expect_no_grads or [False] * len(xs), xs, op, "expect_no_grads")

    variables = [Variable(x) for x in xs]  # floating ones require a gradient
    outputs = _outputs(func(*variables), op)
    gys = _grad_outputs(y_grad, outputs, op)
    grads = _backward(outputs, gys, [*variables, *params])
    operands = _operands(xs, params, grads, no_grads, none, dtype, op)
    if all(gy is None for gy in gys) or sum(math.prod(o.shape) for o in operands) == 0:
        return

    _draw_direction(operands, seed)
    analytic = _analytic_derivative(operands)
    line = _Line(func, xs, params, operands, dtype, op)
    numerical, bend, allowance = _numerical_derivative(
        line, gys, operands, eps, detect_nondifferentiable, op
    )
    tolerance = _judge(
        (analytic, numerical, bend, allowance),
        (atol, rtol, eps),
        detect_nondifferentiable,
        op,
        ("f", "the direction d", "the analytic derivative", "the numerical one"),
    )
    if tolerance is None:
        return
    raise AssertionError(
        failure_message(
            op,
            analytic,
            numerical,
            tolerance,
            (atol, rtol, allowance, eps),
            operands,
            lambda: elementwise_gradient(func, line.others, params, operands, gys, eps),
        )
    )


def _judge(
    derivatives: tuple[float, float, float, float],
    settings: tuple[float, float, float],
    detect_nondifferentiable: bool,
    op: str,
    names: tuple[str, str, str, str],
) -> float | None:
    """None where the ``analytic`` and ``numerical`` derivatives agree (of
    ``derivatives = (analytic, numerical, bend, allowance)``) within ``atol + rtol *
    |numerical| + allowance`` (``settings = (atol, rtol, eps)``), else that tolerance;
    a ``NondifferentiableError`` where the function's bend explains the difference
    (``names``: the function's, the direction's and the two derivatives')."""
    analytic, numerical, bend, allowance = derivatives
    atol, rtol, eps = settings
    tolerance = atol + rtol * abs(numerical) + allowance
    difference = abs(analytic - numerical)
    if difference <= tolerance:
        return None
    if detect_nondifferentiable and difference <= 2 * bend:
        # A kink too faint to flag by itself moves a central difference by up to
        # half the change of slope: it, not the rule, may explain the difference.
        f, along, first, second = names
        raise NondifferentiableError(
            f"{op}: {f} bends by {bend:.3g} within +-{2 * eps:g} along {along}, enough "
            f"to explain the difference {difference:.3g} between {first} "
            f"({number(analytic)}) and {second} ({number(numerical)})"
        )
    return tolerance


# -- the steps of check_backward, in order ----------------------------------------------


def _checked_params(params: Sequence[Variable] | Variable | None, op: str) -> tuple[Variable, ...]:
    params = tuple(as_tuple(params)) if params is not None else ()
    for j, p in enumerate(params):
        if not isinstance(p, Variable):
            raise TypeError(f"{op}: params[{j}] must be a Variable, got {type(p).__name__}")
    return params


def checked_no_grads(
    no_grads: Sequence[bool] | None, xs: tuple[Any, ...], op: str, name: str = "no_grads"
) -> list[bool]:
    """One flag per input: the given ones, or ``True`` for inputs that are not floating."""
    if no_grads is None:
        return [not is_float(x) for x in xs]
    if len(no_grads) != len(xs):
        raise ValueError(f"{op}: {name} has {len(no_grads)} entries but x_data has {len(xs)}")
    return list(no_grads)


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


def _backward(outputs: tuple[Variable, ...], gys: list[Any], targets: list[Variable]) -> list[Any]:
    """The gradient arrays of ``targets`` (``None`` where none arrives)."""
    used = [k for k, gy in enumerate(gys) if gy is not None]
    if not used:
        return [None] * len(targets)
    found = agnograd.grad([outputs[k] for k in used], targets, [gys[k] for k in used])
    return [None if g is None else g.array for g in found]


def _operands(
    xs: tuple[Any, ...],
    params: tuple[Variable, ...],
    grads: list[Any],
    no_grads: list[bool],
    expect_none: list[bool],
    dtype: Any,
    op: str,
) -> list[_Operand]:
    """The inputs and params to move, with their gradients; an AssertionError lists
    every gradient that should not exist or has the wrong shape, dtype, library or
    device."""
    problems = []
    operands: list[_Operand] = []
    for i, (x, g) in enumerate(zip(xs, grads, strict=False)):
        if expect_none[i] and g is not None:
            problems.append(
                f"input {i} ({describe(x)}) must get no gradient (it is listed in "
                f"expect_no_grads) but received {preview(g)}"
            )
        if no_grads[i] or expect_none[i]:  # skipped: neither perturbed nor checked
            continue
        if not is_float(x):
            raise ValueError(
                f"{op}: input {i} has dtype {dtype_name(x.dtype)}, which cannot be "
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
    return operands


def _draw_direction(operands: list[_Operand], seed: int | None) -> None:
    """Give every operand its part of one random unit direction (complex where the
    operand is complex)."""
    rng = numpy.random.default_rng(seed)
    for operand in operands:
        operand.direction = rng.standard_normal(operand.shape)
        if is_complex(operand.data):
            operand.direction = operand.direction + 1j * rng.standard_normal(operand.shape)
    norm = math.sqrt(sum(float(numpy.sum(numpy.abs(o.direction) ** 2)) for o in operands))
    for operand in operands:
        operand.direction /= norm


def _analytic_derivative(operands: list[_Operand]) -> float:
    """``<grads, d>``: the derivative along ``d`` that backward claims."""
    # dL/dt along d is <grad, d>: Re(sum(conj(grad) * d)) for complex inputs too.
    return sum(
        (inner(host64(o.gradient), o.direction) for o in operands if o.gradient is not None),
        start=0.0,
    )


class _Line:
    """``func`` along the line ``x + t d``: called, it evaluates ``func`` at the
    current ``t`` with the operands moved and the other floating inputs cast to the
    evaluation dtype; :meth:`move` sets ``t`` and :meth:`restore` puts the params'
    arrays back."""

    def __init__(
        self,
        func: Callable[..., Any],
        xs: tuple[Any, ...],
        params: tuple[Variable, ...],
        operands: list[_Operand],
        dtype: Any,
        op: str,
    ) -> None:
        self.func = func
        self.others = [
            raw_namespace(x).astype(x, _eval_dtype(x, dtype, op)) if is_float(x) else x for x in xs
        ]
        self.by_input = {o.index: o for o in operands if o.kind == "input"}
        self.param_operands = [o for o in operands if o.kind == "param"]
        self.params = [params[o.index] for o in self.param_operands]
        self.originals = [p.array for p in self.params]
        self.t = 0.0

    def __call__(self) -> Any:
        t = self.t
        args = [
            self.by_input[i].at(t) if i in self.by_input else x for i, x in enumerate(self.others)
        ]
        for p, o in zip(self.params, self.param_operands, strict=True):
            p.array = o.at(t)
        return self.func(*[Variable(a) for a in args])

    def move(self, t: float) -> float:
        self.t = t
        return t

    def restore(self) -> None:
        self.t = 0.0
        for p, data in zip(self.params, self.originals, strict=True):
            p.array = data


def _numerical_derivative(
    line: _Line,
    gys: list[Any],
    operands: list[_Operand],
    eps: float,
    detect_nondifferentiable: bool,
    op: str,
) -> tuple[float, float, float]:
    """``d/dt <y_grad, func(x + t d)>`` at ``t = 0`` by central differences; also the
    change of slope seen across the stencil and the rounding allowance of the
    comparison."""
    try:
        projection = Projection(line, tuple(gys), op)
        u_inputs = max(roundoff(o.xp, o.eval_dtype) for o in operands)
        numerical, bend = central_difference_and_bend(
            projection,
            line.move,
            line.restore,
            eps,
            detect_nondifferentiable,
            u_inputs,
            "the direction d",
        )
    finally:
        line.restore()
    u = max(projection.roundoff, u_inputs)
    _check_resolution(u, eps, op)
    allowance = ROUNDING_FACTOR * u / eps * (projection.spread + _input_spread(operands))
    return numerical, bend, allowance


def _check_resolution(u: float, eps: float, op: str) -> None:
    if u / eps > _RESOLUTION_LIMIT:
        raise ValueError(
            f"{op}: a step of eps={eps} is below the resolution of the dtypes func runs "
            f"in (unit roundoff {u:.3g}); pass dtype='float64' (or 'float32') to evaluate "
            "the numerical gradient in a wider dtype, or a larger eps"
        )


def _input_spread(operands: list[_Operand]) -> float:
    """Root-sum-square of ``|x * df/dx|`` over the elements of the operands.

    Rounding each input element to its dtype moves ``<y_grad, f>`` by about
    ``u * |x * df/dx|``, rounding each output by about ``u * |y_grad * y|``
    (:attr:`Projection.spread`); the errors of different elements are independent,
    so they add as a root-sum-square, and the central difference divides them by
    the step.
    """
    return math.sqrt(
        sum(
            (
                float(numpy.sum(numpy.abs(host64(o.gradient) * o.host) ** 2))
                for o in operands
                if o.gradient is not None
            ),
            start=0.0,
        )
    )


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
            f"the gradient of {label} has dtype {dtype_name(g.dtype)}, the {label} "
            f"{dtype_name(operand.data.dtype)}"
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
