"""``check_jvp``: forward mode's Jacobian-vector products against central differences.

The jvp of ``func`` at ``x`` along a direction ``d`` is the derivative of
``t -> func(x + t d)`` at ``t = 0``. As :func:`check_backward` does, one scalar is
compared, cheap whatever the sizes: ``<w, jvp>`` for a random weight ``w`` of the
outputs against central differences of ``t -> <w, func(x + t d)>`` (accumulated in
float64 on the host); when they disagree, the elementwise numerical tangent points at
the worst element. The second order is the same check of the jvp itself, as a function
of ``x`` (the jvp of the jvp, forward over forward), along a second direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import array_api_compat
import numpy

from agnograd.backends._backend import dtype_name, raw_namespace
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.testing._backends import default_float
from agnograd.testing._gradient_check import (
    _draw_direction,
    _eval_dtype,
    _judge,
    _Line,
    _numerical_derivative,
    _Operand,
    _outputs,
    checked_no_grads,
    raw_array,
)
from agnograd.testing._gradient_report import describe, number, preview
from agnograd.testing._numerical import (
    ROUNDING_FACTOR,
    as_tuple,
    from_host,
    host64,
    inner,
    is_complex,
    is_float,
    roundoff,
)
from agnograd.transforms import _forward, _tangent_rules


def check_jvp(
    func: Callable[..., Any] | FunctionNode,
    x_data: Any,
    x_tangent: Any = None,
    x_tangent2: Any = None,
    eps: float = 1e-3,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    no_grads: Sequence[bool] | None = None,
    dtype: Any = None,
    detect_nondifferentiable: bool = False,
    *,
    second_order: bool = True,
    seed: int | None = 0,
) -> None:
    """Check the forward-mode jvp of ``func`` against central differences, at first
    and second order.

    First order: the tangent that forward mode (``agnograd.func.jvp``) gives along a
    direction ``d``, weighted by a random ``w`` over the outputs, ``<w, J d>``, must
    equal the central difference of ``t -> <w, func(x + t d)>`` (in float64 on the
    host), within ``atol + rtol * |numerical|`` plus the rounding error of the dtypes
    ``func`` runs in, as in :func:`check_backward`. Second order: the same check of
    ``x -> J(x) d``, computed by a jvp of the jvp (forward over forward), along a
    second direction ``e``: the derivative of the jvp. Complex inputs move along
    complex directions; the tangent of a function of complex ``z`` is
    ``df/dz d + df/dconj(z) conj(d)``.

    Parameters
    ----------
    func : callable or FunctionNode
        ``func(*xs)`` takes one Variable per entry of ``x_data`` and returns a
        Variable or a tuple of Variables. A ``FunctionNode`` is applied to the
        inputs (a fresh copy each time), so that its ``jvp`` is the one checked.
    x_data : array or tuple of arrays
        Inputs, of any array API library and device.
    x_tangent : array or tuple of arrays, optional
        The direction ``d``: one per differentiable input (or one per input, with
        ``None`` at those in ``no_grads``). Default: a random unit direction.
    x_tangent2 : array or tuple of arrays, optional
        The second direction ``e``, as ``x_tangent``. Default: another random one.
    eps : float
        Step of the central differences along the direction.
    atol, rtol : float
        Tolerances on the directional derivative; ten times wider at second order
        (as :func:`check_double_backward`'s defaults are to :func:`check_backward`'s).
    no_grads : sequence of bool, optional
        One per input: ``True`` to leave the input out (it gets no tangent and is
        not moved). Default: ``True`` for inputs without a floating dtype.
    dtype : dtype or str, optional
        Evaluate the central differences with the floating inputs cast to this
        dtype (the jvp still runs in the original dtypes). Default: float64 where
        the inputs' device has it, else float32.
    detect_nondifferentiable : bool
        Raise :class:`NondifferentiableError` when ``func`` has a kink or jump
        within ``2 * eps`` along the direction instead of comparing.
    second_order : bool
        Also check the derivative of the jvp (every operation ``func`` uses must
        then have a jvp that forward mode can differentiate again).
    seed : int or None
        Seed of the random directions and weights (a fixed default keeps
        hypothesis replays exact); ``None`` draws fresh ones.

    Raises
    ------
    AssertionError
        When the derivatives disagree: the message names the function, the
        order, the direction along each input, both values and the output
        element where the tangent is furthest from central differences.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> from agnograd.testing import check_jvp
    >>> x = np.array([[0.5, -1.0], [2.0, 0.25]])
    >>> check_jvp(F.tanh, x)
    >>> check_jvp(F.matmul, (x, np.array([[1.0], [3.0]])))

    A wrong ``jvp`` of a user's node is caught, with the element it gets wrong:

    >>> class Square(agnograd.FunctionNode):
    ...     def forward(self, inputs):
    ...         self.retain_inputs((0,))
    ...         return (inputs[0] ** 2,)
    ...     def backward(self, indexes, grad_outputs):
    ...         (x,) = self.get_retained_inputs()
    ...         return (2 * x * grad_outputs[0],)
    ...     def jvp(self, inputs, tangents):
    ...         return (3 * inputs[0] * tangents[0],)  # should be 2 * x * t
    >>> check_jvp(Square(), x)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: check_jvp: the jvp of Square disagrees with central differences...
    ...
      worst element: output 0 at (1, 0): jvp ..., central differences ...
    """
    name = _name(func)
    call = _callable(func)
    xs = tuple(raw_array(x) for x in as_tuple(x_data))
    no_grads = checked_no_grads(no_grads, xs, "check_jvp")
    moved = [i for i in range(len(xs)) if not no_grads[i]]
    for i in moved:
        if not is_float(xs[i]):
            raise ValueError(
                f"check_jvp: input {i} of {name} has dtype {dtype_name(xs[i].dtype)}, which "
                "takes no tangent; list it in no_grads"
            )
    if not moved:
        return
    if dtype is None:  # central differences in float64 where the device has it
        dtype = default_float(raw_namespace(xs[moved[0]]), array_api_compat.device(xs[moved[0]]))
    d = _directions(x_tangent, xs, moved, seed, "x_tangent", name)
    _check_jvp(
        name, "d", call, xs, moved, d, eps, atol, rtol, dtype, detect_nondifferentiable, seed
    )
    if not second_order:
        return
    second_seed = None if seed is None else seed + 1
    e = _directions(x_tangent2, xs, moved, second_seed, "x_tangent2", name)

    def tangent(*variables: Variable) -> tuple[Variable, ...]:
        # Leaves that central differences evaluate hold no tangent: as constants, so
        # that no reverse graph watches the inner jvp.
        args = [
            Variable(v.array, requires_grad=False) if v.creator is None and v.requires_grad else v
            for v in variables
        ]
        return _jvp_of(call, args, moved, d)[1]

    _check_jvp(
        f"{name} along d (second order: the jvp of the jvp)",
        "e",
        tangent,
        xs,
        moved,
        e,
        eps,
        10 * atol,  # as check_double_backward's defaults are to check_backward's
        10 * rtol,
        dtype,
        detect_nondifferentiable,
        second_seed,
    )


def _name(func: Any) -> str:
    if isinstance(func, FunctionNode):
        return type(func).__qualname__
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or func)


def _callable(func: Any) -> Callable[..., Any]:
    if not isinstance(func, FunctionNode):
        return func

    def apply(*xs: Variable) -> tuple[Variable, ...]:
        return tuple(_tangent_rules._fresh(func).apply(xs))

    return apply


def _directions(
    given: Any, xs: tuple[Any, ...], moved: list[int], seed: int | None, arg: str, name: str
) -> list[Any]:
    """One direction per moved input, as arrays of its library, dtype and device."""
    if given is None:
        operands = [_Operand("input", i, xs[i], xs[i].dtype) for i in moved]
        _draw_direction(operands, seed)
        return [from_host(o.xp, o.direction, o.data.dtype, o.device) for o in operands]
    ts = [raw_array(t) for t in as_tuple(given)]
    if len(ts) == len(xs) and len(moved) != len(xs):
        ts = [ts[i] for i in moved]
    if len(ts) != len(moved):
        raise ValueError(
            f"check_jvp: {arg} has {len(ts)} entries; give one per input ({len(xs)}) or one "
            f"per differentiable input ({len(moved)}) of {name}"
        )
    for i, t in zip(moved, ts, strict=True):
        if t is None or tuple(t.shape) != tuple(xs[i].shape):
            got = "None" if t is None else str(tuple(t.shape))
            raise ValueError(
                f"check_jvp: {arg} for input {i} of {name} has shape {got}, the input "
                f"{tuple(xs[i].shape)}; a direction has its input's shape"
            )
    return ts


def _jvp_of(
    call: Callable[..., Any], args: Sequence[Any], moved: list[int], directions: list[Any]
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The outputs of ``call(*args)`` and their tangents along ``directions`` (given
    for the ``moved`` arguments; the others are held constant)."""

    def of_moved(*values: Any) -> tuple[Any, ...]:
        full = [a if isinstance(a, Variable) else Variable(a, requires_grad=False) for a in args]
        for i, v in zip(moved, values, strict=True):
            full[i] = v
        return _outputs(call(*full), "check_jvp")

    primals = tuple(args[i] for i in moved)
    return _forward.jvp(of_moved, primals, tuple(directions))


def _check_jvp(
    name: str,
    along: str,
    call: Callable[..., Any],
    xs: tuple[Any, ...],
    moved: list[int],
    directions: list[Any],
    eps: float,
    atol: float,
    rtol: float,
    dtype: Any,
    detect_nondifferentiable: bool,
    seed: int | None,
) -> None:
    """One comparison: the jvp of ``call`` (called ``name``) at ``xs`` along the
    ``directions`` (called ``along``) against central differences."""
    op = "check_jvp"
    outputs, tangents = _jvp_of(call, xs, moved, directions)
    ys, ts = [raw_array(y) for y in outputs], [raw_array(t) for t in tangents]
    rng = numpy.random.default_rng(None if seed is None else seed + 1000)
    weights = []
    for y in ys:
        w = rng.standard_normal(tuple(y.shape))
        if is_complex(y):
            w = w + 1j * rng.standard_normal(tuple(y.shape))
        weights.append(w)
    analytic = sum((inner(w, host64(t)) for w, t in zip(weights, ts, strict=True)), start=0.0)

    operands = []
    for i, d in zip(moved, directions, strict=True):
        operand = _Operand("input", i, xs[i], _eval_dtype(xs[i], dtype, op))
        operand.direction = host64(d)
        operands.append(operand)
    line = _Line(call, xs, (), operands, dtype, op)
    numerical, bend, allowance = _numerical_derivative(
        line, weights, operands, eps, detect_nondifferentiable, op
    )
    allowance += _input_allowance(call, xs, moved, operands, weights, eps, seed)
    tolerance = _judge(
        (analytic, numerical, bend, allowance),
        (atol, rtol, eps),
        detect_nondifferentiable,
        op,
        (name, along, "the jvp", "central differences"),
    )
    if tolerance is None:
        return
    difference = abs(analytic - numerical)
    lines = [
        f"{op}: the jvp of {name} disagrees with central differences along {along}",
        f"  jvp                 <w, J {along}>           = {number(analytic)}",
        f"  central differences d/dt <w, f(x+t{along})> = {number(numerical)} (eps={eps:g})",
        f"  |difference| {difference:.6g} > tolerance {tolerance:.6g} (atol {atol:g} + rtol "
        f"{rtol:g} * |numerical| + rounding allowance {allowance:.3g})",
        f"  direction {along} (w: a random weight of the outputs):",
    ]
    lines += [f"    {o.label} {describe(o.data)}: {preview(o.direction)}" for o in operands]
    lines.append(_worst_element(line, ts, eps))
    raise AssertionError("\n".join(lines))


def _input_allowance(
    call: Callable[..., Any],
    xs: tuple[Any, ...],
    moved: list[int],
    operands: list[_Operand],
    weights: list[Any],
    eps: float,
    seed: int | None,
) -> float:
    """The central difference's error from rounding the moved inputs to the dtype
    they are evaluated in: rounding ``x`` by ``u |x|`` in random directions moves
    ``<w, f>`` by about ``u sqrt(sum(|x df/dx|^2))``, estimated by one jvp along
    ``x * r`` for random signs ``r`` (``check_backward`` reads it off the gradient,
    which a jvp does not give). Zero in float64, where it is negligible."""
    u = max(roundoff(o.xp, o.eval_dtype) for o in operands)
    if u <= 2.0**-53:
        return 0.0
    rng = numpy.random.default_rng(None if seed is None else seed + 2000)
    probes = [
        from_host(o.xp, o.host * rng.choice((-1.0, 1.0), o.shape), o.data.dtype, o.device)
        for o in operands
    ]
    tangents = _jvp_of(call, xs, moved, probes)[1]
    spread = abs(
        sum((inner(w, host64(raw_array(t))) for w, t in zip(weights, tangents, strict=True)), 0.0)
    )
    return ROUNDING_FACTOR * u / eps * spread


def _worst_element(line: _Line, tangents: list[Any], eps: float) -> str:
    """The output element whose tangent is furthest from its central difference."""
    try:
        line.move(eps)
        plus = [host64(raw_array(y)) for y in as_tuple(line())]
        line.move(-eps)
        minus = [host64(raw_array(y)) for y in as_tuple(line())]
    except Exception as error:  # the message is what matters; report why it lacks this
        return f"  (worst element not computed: {type(error).__name__}: {error})"
    finally:
        line.restore()
    worst: tuple[float, int, tuple[int, ...], complex, complex] | None = None
    for k, (t, p, m) in enumerate(zip(tangents, plus, minus, strict=True)):
        a, n = host64(t), (p - m) / (2 * eps)
        diff = numpy.abs(a - n)
        if diff.size == 0:
            continue
        at = tuple(int(i) for i in numpy.unravel_index(int(numpy.argmax(diff)), diff.shape))
        if worst is None or diff[at] > worst[0]:
            worst = (float(diff[at]), k, at, a[at].item(), n[at].item())
    if worst is None or not math.isfinite(worst[0]):
        return "  (no output element to compare)"
    _, k, at, a_k, n_k = worst
    return (
        f"  worst element: output {k} at {at}: jvp {number(a_k)}, central differences {number(n_k)}"
    )
