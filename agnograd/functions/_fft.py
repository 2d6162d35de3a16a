"""The ``fft`` extension of the array API standard and its rules (keys ``"fft.<name>"``).

Every transform is linear, so its gradient is its adjoint under the real inner
product ``Re(sum(conj(a) * b))`` -- PyTorch's conjugate Wirtinger convention:

- the adjoint of a complex transform is the opposite transform with the dual
  normalization (``"backward"`` and ``"forward"`` swap, ``"ortho"`` stays);
- real-to-complex and complex-to-real transforms (``rfft``, ``irfft``, ``hfft``,
  ``ihfft`` and their n-dimensional forms) also weight the bins that stand for two
  (conjugate) frequencies of the full spectrum: by 1/2 or 2 on the last transformed
  axis, all bins but the zero and (for even lengths) the Nyquist frequency;
- zero-padding (``n``/``s`` larger than the input) becomes trimming and back.

The rules call the transforms of ``namespace_of(gy)``, so they are differentiable
again. ``fftfreq`` and ``rfftfreq`` take no array: the namespace binds them to its
backend, and their results carry no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agnograd.core._fast import apply1
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.functions._core import constant, input_dtype, input_shape, raw_xp_device, shape_of
from agnograd.functions._namespace import namespace_of
from agnograd.functions._rows import Rows

ROWS = Rows(__name__)

_Spec = tuple[tuple[int, ...], Any]

_NORMS = ("backward", "ortho", "forward")
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_ONE_D = {"fft", "ifft", "rfft", "irfft", "hfft", "ihfft"}
#: Complex-to-complex transforms and their adjoints.
_C2C = {"fft": "ifft", "ifft": "fft", "fftn": "ifftn", "ifftn": "fftn"}
#: Transforms whose last axis has n // 2 + 1 complex bins on input (c2r) or output (r2c).
_C2R = {"irfft", "irfftn", "hfft"}
_R2C = {"rfft", "rfftn", "ihfft"}


def _transform(
    ns: Any, name: str, x: Any, sizes: tuple[int, ...], axes: tuple[int, ...], norm: str
) -> Any:
    fn = getattr(ns.fft, name)
    if name in _ONE_D:
        return fn(x, n=sizes[0], axis=axes[0], norm=norm)
    return fn(x, s=sizes, axes=axes, norm=norm)


# (namespace, transform, input dtype) -> the error the library raised on such an
# input (array-api-strict refuses real input to the complex transforms), or None.
_refusals: dict[tuple[Any, str, Any], Exception | None] = {}


def _refuse_as_the_library_does(xp: Any, name: str, dtype: Any) -> None:
    """Raise, when a define-then-run graph is built, what the library raises when it
    runs: code that catches the refusal and retries (SciPy's ``fft``, which passes
    complex input then) must see it at once. The library is asked once per
    transform and dtype, on a small array."""
    key = (xp, name, dtype)
    if key not in _refusals:
        try:
            getattr(xp.fft, name)(xp.zeros((4,), dtype=dtype))
            _refusals[key] = None
        except Exception as raised:  # whatever the library raises
            _refusals[key] = raised
    refusal = _refusals[key]
    if refusal is not None:
        try:  # a fresh error of the library's type, for each graph that meets it
            fresh = type(refusal)(*refusal.args)
        except Exception:  # a type that takes other arguments
            fresh = TypeError(f"fft.{name} of {dtype}: {refusal}")
        raise fresh


def _complex_dtype(xp: Any, dtype: Any) -> Any:
    if xp.isdtype(dtype, "complex floating"):
        return dtype
    return xp.complex64 if dtype == xp.float32 else xp.complex128


def _real_dtype(xp: Any, dtype: Any) -> Any:
    if xp.isdtype(dtype, "complex floating"):
        return xp.float32 if dtype == xp.complex64 else xp.float64
    return dtype


def _weights(like: Any, axis: int, n: int, factor: float) -> Any:
    """Per-bin weights of a one-sided spectrum of a length-``n`` signal along ``axis``.

    The zero frequency (and the Nyquist frequency of an even ``n``) appear once in
    the full spectrum; every other bin stands for itself and its conjugate twin.
    """
    rxp, device = raw_xp_device(like)
    bins = n // 2 + 1
    values = [1.0 if k == 0 or 2 * k == n else factor for k in range(bins)]
    shape = [1] * len(like.shape)
    shape[axis] = bins
    w = rxp.asarray(values, dtype=_real_dtype(rxp, like.dtype), device=device)
    return rxp.reshape(w, tuple(shape))


def _resize(xp: Any, g: Any, axis: int, length: int) -> Any:
    """Trim or zero-pad ``g`` along ``axis`` to ``length`` (the adjoint of the reverse)."""
    current = g.shape[axis]
    if current == length:
        return g
    if current > length:
        return g[(*(slice(None),) * axis, slice(0, length), ...)]
    rxp, device = raw_xp_device(g)
    shape = list(g.shape)
    shape[axis] = length - current
    zeros = rxp.zeros(tuple(shape), dtype=g.dtype, device=device)
    return xp.concat([g, zeros], axis=axis)


# -- argument resolution -----------------------------------------------------------------


def _check_norm(op: str, norm: str) -> None:
    if norm not in _NORMS:
        raise ValueError(f"fft.{op}: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")


def _default_length(m: int, c2r: bool) -> int:
    # A complex-to-real transform of m bins gives a real signal of 2 (m - 1) points.
    return 2 * (m - 1) if c2r else m


def _one_d_plan(
    op: str, shape: tuple[int, ...], n: int | None, axis: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The transform length and the non-negative axis of a 1-D transform of an input
    of ``shape``, from the user's ``n`` and ``axis``."""
    ndim = len(shape)
    if not -ndim <= axis < ndim:
        raise ValueError(f"fft.{op}: axis {axis} is out of range for x of shape {shape}")
    axis %= ndim
    if n is None or n == -1:
        n = _default_length(shape[axis], op in _C2R)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"fft.{op}: n must be a positive int, got {n!r} (x of shape {shape})")
    return (n,), (axis,)


def _n_d_plan(
    op: str, shape: tuple[int, ...], s: Sequence[int] | None, axes: Sequence[int] | None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The transform lengths and the non-negative axes of an n-D transform of an
    input of ``shape``, from the user's ``s`` and ``axes``."""
    ndim = len(shape)
    if axes is None:
        # All axes, or the last len(s) when only s is given (NumPy's reading).
        axes = range(ndim) if s is None else range(ndim - len(s), ndim)
    axes = tuple(axes)
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"fft.{op}: axis {a} is out of range for x of shape {shape}")
    axes = tuple(a % ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"fft.{op}: axes {axes} repeat an axis")
    if not axes:
        raise ValueError(f"fft.{op}: no axis to transform (x of shape {shape})")
    if s is None:
        s = [-1] * len(axes)
    if len(s) != len(axes):
        raise ValueError(f"fft.{op}: s {tuple(s)} and axes {axes} have different lengths")
    c2r = op in _C2R
    sizes = []
    for i, (a, size) in enumerate(zip(axes, s, strict=True)):
        if size == -1:
            size = _default_length(shape[a], c2r and i == len(axes) - 1)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"fft.{op}: s must hold positive ints (or -1), got {tuple(s)}")
        sizes.append(size)
    return tuple(sizes), axes


# -- the node of the transforms, and the two ways to apply it ----------------------------


class Transform(FunctionNode):
    """One discrete Fourier transform of the standard, by name.

    The node keeps the user's arguments (``n`` and ``axis``, or ``s`` and ``axes``),
    not what they resolve to: a default length is the input's, and a define-then-run
    graph re-run on a new shape takes it from the new input. Forward and backward
    each resolve them into the transform lengths and non-negative axes from the
    input's shape (backward from its node's: it may build a gradient graph before
    any forward ran, see ``agnograd.grad``).
    """

    linear = True  # forward mode: applied to the tangents

    def __init__(self, name: str, arguments: tuple[Any, Any], norm: str) -> None:
        self.name = name
        self.arguments = arguments  # (n, axis) of a 1-D transform, (s, axes) of the others
        self.norm = norm

    @property
    def label(self) -> str:
        return f"fft.{self.name}"

    def plan(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The transform lengths and the axes for an input of ``shape``."""
        resolve = _one_d_plan if self.name in _ONE_D else _n_d_plan
        return resolve(self.name, shape, *self.arguments)

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (x,) = inputs
        sizes, axes = self.plan(tuple(x.shape))
        return (_transform(self.xp, self.name, x, sizes, axes, self.norm),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        x = inputs[0]
        _refuse_as_the_library_does(x.xp, self.name, x.dtype)
        shape = list(x.shape)
        sizes, axes = self.plan(tuple(shape))
        for axis, size in zip(axes, sizes, strict=True):
            shape[axis] = size
        if self.name in _R2C:
            shape[axes[-1]] = sizes[-1] // 2 + 1
        convert = _real_dtype if self.name in _C2R else _complex_dtype
        return ((tuple(shape), convert(x.xp, x.dtype)),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        xp = namespace_of(gy)
        in_shape = input_shape(self)
        sizes, axes = self.plan(in_shape)
        name, norm = self.name, self.norm
        dual = _DUAL[norm]
        last = axes[-1]
        if name in _C2C:
            g = _transform(xp, _C2C[name], gy, sizes, axes, dual)
        elif name in ("rfft", "rfftn"):
            g = _transform(
                xp,
                "irfft" if name == "rfft" else "irfftn",
                gy * _weights(gy, last, sizes[-1], 0.5),
                sizes,
                axes,
                dual,
            )
        elif name in ("irfft", "irfftn"):
            g = _transform(xp, "rfft" if name == "irfft" else "rfftn", gy, sizes, axes, dual)
            g = g * _weights(g, last, sizes[-1], 2.0)
        elif name == "hfft":  # hfft(x) = irfft(conj(x)) with the dual normalization
            g = xp.conj(
                _transform(xp, "rfft", gy, sizes, axes, norm) * _weights(gy, last, sizes[-1], 2.0)
            )
        else:  # ihfft(x) = conj(rfft(x)) with the dual normalization
            g = _transform(
                xp, "irfft", xp.conj(gy) * _weights(gy, last, sizes[-1], 0.5), sizes, axes, norm
            )
        for axis in axes:
            g = _resize(xp, g, axis, in_shape[axis])
        real_input = self.xp.isdtype(input_dtype(self), "real floating")
        if real_input and xp.isdtype(g.dtype, "complex floating"):
            # A real input of a complex transform moves along the real axis only.
            g = xp.real(g)
        return (g,)


def _one_d(op: str, x: Any, n: int | None, axis: int, norm: str) -> Variable:
    _check_norm(op, norm)
    _one_d_plan(op, shape_of(x), n, axis)  # refuses wrong arguments now
    return apply1(Transform(op, (n, axis), norm), x)


def _n_d(
    op: str, x: Any, s: Sequence[int] | None, axes: Sequence[int] | None, norm: str
) -> Variable:
    _check_norm(op, norm)
    s = None if s is None else tuple(s)
    axes = None if axes is None else tuple(axes)
    _n_d_plan(op, shape_of(x), s, axes)  # refuses wrong arguments now
    return apply1(Transform(op, (s, axes), norm), x)


# -- the transforms ----------------------------------------------------------------------


@ROWS.declare("fft.fft")
def fft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Variable:
    """One-dimensional discrete Fourier transform along ``axis``.

    ``n`` trims or zero-pads the input; the gradient is ``ifft`` with the dual
    normalization.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0 + 0j, 2.0, 3.0]))
    >>> y = xp.fft.fft(x)
    >>> y.array.round(3)
    array([ 6. +0.j   , -1.5+0.866j, -1.5-0.866j])
    >>> y.grad = np.array([1.0 + 0j, 0.0, 0.0]); y.backward(); x.grad
    array([1.+0.j, 1.+0.j, 1.+0.j])
    """
    return _one_d("fft", x, n, axis, norm)


@ROWS.declare("fft.ifft")
def ifft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Variable:
    """One-dimensional inverse discrete Fourier transform along ``axis``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.ifft(np.array([3.0 + 0j, 0.0, 0.0]))
    variable([1.+0.j, 1.+0.j, 1.+0.j])
    """
    return _one_d("ifft", x, n, axis, norm)


@ROWS.declare("fft.fftn")
def fftn(
    x: Any,
    /,
    *,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str = "backward",
) -> Variable:
    """n-dimensional discrete Fourier transform over ``axes`` (all by default).

    ``s`` gives the transform lengths (``-1``: the input's); with ``axes`` omitted
    it applies to the last ``len(s)`` axes.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.fftn(np.ones((2, 2), dtype=complex))
    variable([[4.+0.j, 0.+0.j],
              [0.+0.j, 0.+0.j]])
    """
    return _n_d("fftn", x, s, axes, norm)


@ROWS.declare("fft.ifftn")
def ifftn(
    x: Any,
    /,
    *,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str = "backward",
) -> Variable:
    """n-dimensional inverse discrete Fourier transform over ``axes``.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.ifftn(np.array([[4.0 + 0j, 0.0], [0.0, 0.0]]))
    variable([[1.+0.j, 1.+0.j],
              [1.+0.j, 1.+0.j]])
    """
    return _n_d("ifftn", x, s, axes, norm)


@ROWS.declare("fft.rfft")
def rfft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Variable:
    """Discrete Fourier transform of a real signal: the ``n // 2 + 1`` non-negative
    frequencies.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> x = agnograd.Variable(np.array([1.0, 2.0, 3.0, 4.0]))
    >>> y = xp.fft.rfft(x)
    >>> y
    variable([10.+0.j, -2.+2.j, -2.+0.j])
    >>> y.grad = np.array([0.0, 1.0, 0.0], dtype=complex); y.backward(); x.grad
    array([ 1.,  0., -1.,  0.])
    """
    return _one_d("rfft", x, n, axis, norm)


@ROWS.declare("fft.irfft")
def irfft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Variable:
    """Inverse of :func:`rfft`: a real signal of length ``n`` (``2 (m - 1)`` by default)
    from ``m`` non-negative frequencies.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.irfft(np.array([4.0 + 0j, 0.0, 0.0]))
    variable([1., 1., 1., 1.])
    """
    return _one_d("irfft", x, n, axis, norm)


@ROWS.declare("fft.rfftn")
def rfftn(
    x: Any,
    /,
    *,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str = "backward",
) -> Variable:
    """n-dimensional :func:`rfft`; the last of ``axes`` keeps the non-negative frequencies.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.rfftn(np.ones((2, 2)))
    variable([[4.+0.j, 0.+0.j],
              [0.+0.j, 0.+0.j]])
    """
    return _n_d("rfftn", x, s, axes, norm)


@ROWS.declare("fft.irfftn")
def irfftn(
    x: Any,
    /,
    *,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str = "backward",
) -> Variable:
    """n-dimensional :func:`irfft`; the last of ``axes`` holds the non-negative frequencies.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.irfftn(np.array([[4.0 + 0j, 0.0], [0.0, 0.0]]))
    variable([[1., 1.],
              [1., 1.]])
    """
    return _n_d("irfftn", x, s, axes, norm)


@ROWS.declare("fft.hfft")
def hfft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Variable:
    """Real spectrum of a signal with Hermitian symmetry, given by its first half.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.hfft(np.array([1.0 + 0j, 0.0, 0.0]))
    variable([1., 1., 1., 1.])
    """
    return _one_d("hfft", x, n, axis, norm)


@ROWS.declare("fft.ihfft")
def ihfft(x: Any, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Variable:
    """Inverse of :func:`hfft`: the first half of a Hermitian signal from a real spectrum.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.ihfft(np.array([4.0, 0.0, 0.0, 0.0]))
    variable([1.-0.j, 1.-0.j, 1.-0.j])
    """
    return _one_d("ihfft", x, n, axis, norm)


def _shift_axes(op: str, x: Any, axes: int | Sequence[int] | None) -> Any:
    """The user's ``axes`` (checked against ``x``'s shape): kept as given, negative
    ones too, so that a graph re-run on a new shape counts them in the new input."""
    if axes is None:
        return None
    shape = shape_of(x)
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    for a in axes:
        if not -len(shape) <= a < len(shape):
            raise ValueError(f"fft.{op}: axis {a} is out of range for x of shape {shape}")
    return axes


class Shift(FunctionNode):
    """``fftshift``/``ifftshift``: a roll, whose adjoint is the opposite roll."""

    linear = True  # forward mode: applied to the tangents

    def __init__(self, name: str, axes: Any) -> None:
        self.name = name
        self.axes = axes

    @property
    def label(self) -> str:
        return f"fft.{self.name}"

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (getattr(self.xp.fft, self.name)(inputs[0], axes=self.axes),)

    def infer(self, inputs: tuple[Any, ...]) -> tuple[_Spec, ...]:
        return ((inputs[0].shape, inputs[0].dtype),)

    def backward(self, indexes: tuple[int, ...], grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        (gy,) = grad_outputs
        other = "ifftshift" if self.name == "fftshift" else "fftshift"
        return (getattr(namespace_of(gy).fft, other)(gy, axes=self.axes),)


@ROWS.declare("fft.fftshift")
def fftshift(x: Any, /, *, axes: int | Sequence[int] | None = None) -> Variable:
    """Move the zero frequency to the center of ``axes`` (all by default).

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.fftshift(np.array([0.0, 1.0, 2.0, 3.0, 4.0]))
    variable([3., 4., 0., 1., 2.])
    """
    return apply1(Shift("fftshift", _shift_axes("fftshift", x, axes)), x)


@ROWS.declare("fft.ifftshift")
def ifftshift(x: Any, /, *, axes: int | Sequence[int] | None = None) -> Variable:
    """Inverse of :func:`fftshift`.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> xp = agnograd.namespace(np)
    >>> xp.fft.ifftshift(np.array([3.0, 4.0, 0.0, 1.0, 2.0]))
    variable([0., 1., 2., 3., 4.])
    """
    return apply1(Shift("ifftshift", _shift_axes("ifftshift", x, axes)), x)


def _frequencies(name: str) -> Any:
    """The factory of ``fft.<name>`` for a raw namespace (see :meth:`Rows.bound`)."""

    def bind(raw_xp: Any) -> Any:
        # The namespace binds extension entries to the extension's own module.
        module = raw_xp if hasattr(raw_xp, name) else raw_xp.fft
        compute = getattr(module, name)

        def apply(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Variable:
            kwargs = {"d": d, "device": device}
            if dtype is not None:
                kwargs["dtype"] = dtype
            return constant(compute(n, **kwargs))

        apply.__name__ = apply.__qualname__ = name
        apply.__doc__ = f"``fft.{name}`` of the backend: sample frequencies, with no gradient."
        return apply

    return bind


fftfreq = ROWS.bound("fft.fftfreq", _frequencies("fftfreq"))
rfftfreq = ROWS.bound("fft.rfftfreq", _frequencies("rfftfreq"))


# Derived from the rows (none is exported: the extension's are the namespace's only).
if not TYPE_CHECKING:
    __all__ = ROWS.exports(globals())
