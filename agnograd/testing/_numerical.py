"""Numerical gradients by central differences, on arrays of any array API library.

The function runs on the inputs' own library, device and dtype; the arithmetic of
the check itself (differences of outputs, weighting by the output gradients, sums)
runs on the host in float64 with NumPy. That keeps float64 accumulation available
where the device has no float64 (array-api-strict's ``no_float64`` device, JAX
without x64) and adds no device operations of its own, which matters for JAX,
where every new shape of every operation is compiled.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import array_api_compat
import numpy

from agnograd.backends._backend import dtype_name, raw_namespace
from agnograd.core._variable import Variable
from agnograd.testing._assertions import to_numpy

#: Relative size of a change of slope, next to the largest slope seen, that counts as a
#: kink. Smooth functions change their slope by O(eps**2 * f''') over the stencil.
_KINK_RTOL = 1e-2
#: Safety factor on the estimated rounding error of the function's values: the
#: errors of the elements are independent, so they add up like a random walk and
#: their root-sum-square (times this factor) bounds them with a wide margin.
ROUNDING_FACTOR = 8.0
#: Factor on the worst-case (summed) rounding error when looking for kinks.
_KINK_ROUNDING_FACTOR = 16.0


class NondifferentiableError(ValueError):
    """The function has a kink or a jump inside the finite-difference stencil.

    Raised by :func:`numerical_grad`, :func:`check_backward` and
    :func:`check_double_backward` when ``detect_nondifferentiable=True``: the
    numerical gradient would be meaningless there, so the caller should draw other
    inputs (``hypothesis.reject()``) rather than compare it.
    """


def as_tuple(values: Any) -> tuple[Any, ...]:
    if isinstance(values, tuple | list):
        return tuple(values)
    return (values,)


def raw(x: Any) -> Any:
    return x.array if isinstance(x, Variable) else x


_FLOATING = ("real floating", "complex floating")


def is_float(x: Any) -> bool:
    """Whether an array (or Variable) has a real or complex floating dtype."""
    data = raw(x)
    return bool(raw_namespace(data).isdtype(data.dtype, _FLOATING))


def is_complex(x: Any) -> bool:
    """Whether an array (or Variable) has a complex floating dtype."""
    data = raw(x)
    return bool(raw_namespace(data).isdtype(data.dtype, "complex floating"))


def roundoff(xp: Any, dtype: Any) -> float:
    """Unit roundoff of a floating dtype (half the machine epsilon); 0 for others."""
    if not xp.isdtype(dtype, _FLOATING):
        return 0.0
    return float(xp.finfo(dtype).eps) / 2


def host64(x: Any) -> numpy.ndarray:
    """The values of ``x`` on the host, in complex128 if complex, else float64."""
    values = to_numpy(raw(x))
    wide = numpy.complex128 if numpy.iscomplexobj(values) else numpy.float64
    return numpy.asarray(values, dtype=wide)


def inner(a: numpy.ndarray, b: numpy.ndarray) -> float:
    """``Re(sum(conj(a) * b))``: the real inner product, also of complex arrays.

    With it the loss ``<grad_outputs, f>`` stays real for complex outputs, and the
    gradient of a complex input is ``dL/dRe + i dL/dIm`` -- PyTorch's conjugate
    Wirtinger convention, which agnograd follows.
    """
    return float(numpy.sum(numpy.conj(a) * b).real)


def _numpy_dtype(dtype: Any) -> numpy.dtype[Any]:
    """NumPy's dtype of the same name as ``dtype`` of any library; ``TypeError`` for
    one NumPy lacks."""
    try:
        return numpy.dtype(dtype)  # NumPy's and JAX's dtypes and scalar types
    except TypeError:
        return numpy.dtype(dtype_name(dtype))  # torch.float32, array_api_strict.float32


def from_host(xp: Any, values: numpy.ndarray, dtype: Any, device: Any) -> Any:
    """An array of ``xp`` with ``values`` (rounded to ``dtype``) on ``device``."""
    try:
        host = values.astype(_numpy_dtype(dtype))
    except TypeError:
        # A dtype NumPy lacks (bfloat16): round through float32, finish on the device.
        host = values.astype(numpy.float32)
        return xp.astype(xp.asarray(host, device=device), dtype)
    # No dtype argument: NumPy's dtype carries over, and JAX would compile a
    # conversion for every new shape if it were given one.
    return xp.asarray(host, device=device)


class Projection:
    """``<grad_outputs, f()>`` (see :func:`inner`) measured as a difference from the
    unperturbed outputs, on the host in float64."""

    def __init__(self, f: Callable[[], Any], grad_outputs: tuple[Any, ...], op: str) -> None:
        self.f = f
        self.op = op
        base = self.outputs()
        if len(base) != len(grad_outputs):
            raise ValueError(
                f"{op}: f returned {len(base)} outputs but grad_outputs has "
                f"{len(grad_outputs)} entries; give one per output (None to leave one out)"
            )
        self.used = [i for i, gy in enumerate(grad_outputs) if gy is not None]
        self.base: list[numpy.ndarray] = []
        self.gys: list[numpy.ndarray] = []
        self.roundoff = 0.0
        self.scale = 0.0  # sum of |grad_outputs * outputs|: the worst case
        squares = 0.0
        for i in self.used:
            y, gy = base[i], raw(grad_outputs[i])
            if tuple(y.shape) != tuple(gy.shape):
                raise ValueError(
                    f"{op}: grad_outputs[{i}] has shape {tuple(gy.shape)} but output {i} of "
                    f"f has shape {tuple(y.shape)}"
                )
            y64, gy64 = host64(y), host64(gy)
            self.base.append(y64)
            self.gys.append(gy64)
            self.roundoff = max(self.roundoff, roundoff(raw_namespace(y), y.dtype))
            self.scale += float(numpy.sum(numpy.abs(gy64 * y64)))
            squares += float(numpy.sum(numpy.abs(gy64 * y64) ** 2))
        self.spread = math.sqrt(squares)  # root-sum-square: the typical case

    def outputs(self) -> tuple[Any, ...]:
        return tuple(raw(y) for y in as_tuple(self.f()))

    def __call__(self) -> float:
        outputs = self.outputs()
        total = 0.0
        for i, y0, gy in zip(self.used, self.base, self.gys, strict=True):
            total += inner(gy, host64(outputs[i]) - y0)
        return total


def central_difference(
    projection: Projection,
    move: Callable[[float], float],
    restore: Callable[[], None],
    eps: float,
    detect_nondifferentiable: bool,
    input_roundoff: float,
    what: str,
) -> float:
    """Central difference of ``projection`` along one coordinate.

    ``move(offset)`` shifts the coordinate by ``offset`` and returns the shift it
    really made after rounding; ``restore()`` puts it back.
    """
    return central_difference_and_bend(
        projection, move, restore, eps, detect_nondifferentiable, input_roundoff, what
    )[0]


def central_difference_and_bend(
    projection: Projection,
    move: Callable[[float], float],
    restore: Callable[[], None],
    eps: float,
    detect_nondifferentiable: bool,
    input_roundoff: float,
    what: str,
) -> tuple[float, float]:
    """:func:`central_difference`, and the largest change of slope seen across the
    stencil (0 without ``detect_nondifferentiable``): a kink too small to be
    flagged on its own still moves the central difference by up to half of it."""
    offsets = (-2, -1, 1, 2) if detect_nondifferentiable else (-1, 1)
    steps = {0: 0.0}
    values = {0: 0.0}
    try:
        for k in offsets:
            steps[k] = move(k * eps)
            values[k] = projection()
    finally:
        restore()
    if steps[1] <= steps[-1]:
        raise ValueError(
            f"{projection.op}: a step of eps={eps} does not change {what}; use a larger eps"
        )
    bend = 0.0
    if detect_nondifferentiable:
        bend = _check_smooth(steps, values, projection, eps, input_roundoff, what)
    return (values[1] - values[-1]) / (steps[1] - steps[-1]), bend


def _check_smooth(
    steps: dict[int, float],
    values: dict[int, float],
    projection: Projection,
    eps: float,
    input_roundoff: float,
    what: str,
) -> float:
    """Raise NondifferentiableError when the slopes between the five stencil points
    do not vary smoothly (a kink or a jump within ``2 * eps``); return the largest
    change of slope, less the rounding noise."""
    points = sorted(steps)
    slopes = [
        (values[b] - values[a]) / (steps[b] - steps[a]) for a, b in itertools.pairwise(points)
    ]
    bends = [slopes[i + 2] - 2 * slopes[i + 1] + slopes[i] for i in range(len(slopes) - 2)]
    u = max(projection.roundoff, input_roundoff)
    noise = _KINK_ROUNDING_FACTOR * u * projection.scale / eps
    tolerance = _KINK_RTOL * max(abs(s) for s in slopes) + noise + 1e-300
    worst = max(abs(b) for b in bends)
    if worst > tolerance or not math.isfinite(worst):
        table = ", ".join(f"{steps[k]:+.3g}: {values[k]:+.6g}" for k in points)
        raise NondifferentiableError(
            f"{projection.op}: f is not differentiable within +-{2 * eps:g} along {what}: "
            f"the slopes of <grad_outputs, f> between the stencil points are "
            f"{', '.join(f'{s:.6g}' for s in slopes)} (a change of {worst:.3g} where a "
            f"smooth function changes by at most {tolerance:.3g}); offset: value = {table}"
        )
    return max(worst - noise, 0.0)


class _Slot:
    """One input of :func:`numerical_grad` and how to perturb one of its elements.

    A raw array is written in place (Chainer's contract) and restored afterwards. A
    Variable gets a new array bound to ``.array`` instead, which works for immutable
    arrays (JAX) and never writes into the caller's buffer.
    """

    def __init__(self, x: Any, index: int) -> None:
        self.index = index
        self.variable = x if isinstance(x, Variable) else None
        self.original = raw(x)
        data = self.original
        self.xp = raw_namespace(data)
        self.shape = tuple(data.shape)
        self.size = math.prod(self.shape)
        self.dtype = data.dtype
        self.device = array_api_compat.device(data)
        self.differentiable = is_float(data)
        self.host: numpy.ndarray | None = None
        self.written = False

    def element(self, position: int) -> tuple[int, ...]:
        """Multi-index of the element at flat ``position`` (C order)."""
        return tuple(int(i) for i in numpy.unravel_index(position, self.shape))

    def value(self, position: int) -> complex:
        if self.host is None:
            self.host = host64(self.original)
        return complex(self.host[self.element(position)].item())

    def set(self, position: int, value: complex) -> complex:
        """Set element ``position`` to ``value`` rounded to the dtype; return the
        value it really holds."""
        where = self.element(position)
        if self.variable is None:
            try:
                self.original[where] = value if is_complex(self.original) else value.real
                self.written = True
            except (TypeError, ValueError, AttributeError, NotImplementedError) as error:
                raise TypeError(
                    f"numerical_grad: input {self.index} ({type(self.original).__module__} "
                    f"array) cannot be written in place ({error}); pass it wrapped in a "
                    "Variable, whose .array numerical_grad rebinds instead, and let f read "
                    "the Variable"
                ) from None
            return complex(self.original[where])
        assert self.host is not None
        moved = self.host.copy()
        moved[where] = value if numpy.iscomplexobj(moved) else value.real
        new = from_host(self.xp, moved, self.dtype, self.device)
        self.variable.array = new
        return complex(host64(new)[where].item())

    def restore(self, position: int, value: complex) -> None:
        if self.variable is None:
            if self.written:
                restored = value if is_complex(self.original) else value.real
                self.original[self.element(position)] = restored
                self.written = False
        else:
            self.variable.array = self.original

    def gradient(self, values: list[complex]) -> Any:
        wide = numpy.complex128 if is_complex(self.original) else numpy.float64
        host = numpy.asarray(values, dtype=wide).reshape(self.shape)
        return from_host(self.xp, host, self.dtype, self.device)


def numerical_grad(
    f: Callable[[], Any],
    inputs: Sequence[Any],
    grad_outputs: Sequence[Any],
    eps: float = 1e-3,
    detect_nondifferentiable: bool = False,
) -> tuple[Any, ...]:
    """Numerical gradient of ``<grad_outputs, f()>`` by central differences.

    Chainer's contract: ``f`` takes no argument and reads the inputs itself. Each
    element of each floating-point input is moved by ``-eps`` and ``+eps`` in turn and
    ``f`` is evaluated on the inputs' own library, device and dtype. The differences
    of its outputs, weighted by ``grad_outputs``, are accumulated in float64 on the
    host -- so also for devices without float64 (array-api-strict's ``no_float64``
    device, JAX without x64) -- and divided by the step the element really took
    after rounding to its dtype. The result is cast back to the input's dtype.

    Parameters
    ----------
    f : callable
        ``f()`` returns an array, a Variable, or a tuple of them.
    inputs : sequence of arrays or Variables
        What ``f`` reads. A raw array is perturbed in place and restored (it must be
        writable: NumPy, PyTorch, CuPy, array-api-strict). A Variable is perturbed by
        binding a new array to its ``.array`` and rebinding the original afterwards,
        which also works for immutable arrays (JAX) -- ``f`` must then read
        ``x.array`` (or use the Variable) at each call.
    grad_outputs : sequence of arrays
        One per output of ``f``; ``None`` leaves that output out.
    eps : float
        Step size.
    detect_nondifferentiable : bool
        Also evaluate ``f`` at ``+-2 eps`` and raise :class:`NondifferentiableError`
        when the slopes do not vary smoothly (a kink such as ``abs`` at 0 or a clip
        bound, or a jump such as ``floor``), instead of returning a meaningless number.

    Returns
    -------
    tuple
        One gradient per input, in the input's dtype, shape and device; ``None`` for
        inputs that are not floating point (integers and booleans are not
        perturbed). Complex inputs are moved along the real and the imaginary axis;
        their gradient is ``dL/dRe + i dL/dIm`` for the real loss
        ``L = Re(sum(conj(grad_outputs) * f()))`` (PyTorch's convention).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd.testing import numerical_grad
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> (gx,) = numerical_grad(lambda: x**2, (x,), (np.ones(3),))
    >>> np.round(gx, 6)
    array([2., 4., 6.])

    Immutable arrays go in through a Variable:

    >>> import jax.numpy as jnp, agnograd
    >>> v = agnograd.Variable(jnp.asarray([0.5, 2.0]))
    >>> (gv,) = numerical_grad(lambda: v.array**3, (v,), (jnp.ones(2),), eps=1e-2)
    >>> [round(float(g), 2) for g in gv]
    [0.75, 12.0]

    At a kink the number would be meaningless, so it is refused on request:

    >>> z = np.array([0.0])
    >>> f = lambda: np.abs(z)
    >>> numerical_grad(f, (z,), (np.ones(1),), detect_nondifferentiable=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agnograd.testing.NondifferentiableError: numerical_grad: f is not differentiable ...
    """
    if not eps > 0:
        raise ValueError(f"numerical_grad: eps must be positive, got {eps}")
    slots = [_Slot(x, i) for i, x in enumerate(as_tuple(inputs))]
    projection = Projection(f, as_tuple(grad_outputs), "numerical_grad")
    return tuple(
        _slot_gradient(slot, projection, eps, detect_nondifferentiable)
        if slot.differentiable
        else None
        for slot in slots
    )


def _slot_gradient(
    slot: _Slot, projection: Projection, eps: float, detect_nondifferentiable: bool
) -> Any:
    """The numerical gradient of one input, element by element, in its dtype."""
    u = roundoff(slot.xp, slot.dtype)
    # A complex element moves along the real and the imaginary axis in turn; its
    # gradient is dL/dRe + i dL/dIm.
    units = (1.0, 1j) if is_complex(slot.original) else (1.0,)
    values: list[complex] = []
    for position in range(slot.size):
        x0 = slot.value(position)
        value = 0j
        for unit in units:
            value += unit * _partial(
                slot, position, x0, unit, projection, eps, detect_nondifferentiable, u
            )
        values.append(value if len(units) == 2 else value.real)
    return slot.gradient(values)


def _partial(
    slot: _Slot,
    position: int,
    x0: complex,
    unit: complex,
    projection: Projection,
    eps: float,
    detect_nondifferentiable: bool,
    input_roundoff: float,
) -> float:
    """Central difference along ``unit`` (1 or 1j) of the element at ``position``,
    whose value is ``x0``."""

    def move(offset: float) -> float:
        return ((slot.set(position, x0 + unit * offset) - x0) / unit).real

    def restore() -> None:
        slot.restore(position, x0)

    part = "imaginary part of " if unit == 1j else ""
    return central_difference(
        projection,
        move,
        restore,
        eps,
        detect_nondifferentiable,
        input_roundoff,
        f"the {part}element {slot.element(position)} of input {slot.index}",
    )
