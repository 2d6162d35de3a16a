"""The code behind :mod:`agnograd.initializers` (its documentation is there)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy

from agnograd.backends import _backend
from agnograd.backends._device import get_device, transfer
from agnograd.core._config import config


class Initializer:
    """Base class of initializers: override :meth:`generate` (or, Chainer's way,
    ``__call__``).

    Parameters
    ----------
    dtype : data type, optional
        The dtype of the arrays this initializer makes (any library's spelling of
        it, or a NumPy name such as ``'float16'``); ``None`` leaves it to the caller.
    """

    def __init__(self, dtype: Any = None) -> None:
        self.dtype = dtype

    def __call__(self, array: Any) -> None:
        """Fill ``array`` in place."""
        if type(self).generate is Initializer.generate:
            raise NotImplementedError(f"{type(self).__name__} must define generate or __call__")
        xp = _backend.raw_namespace(array)
        if self.dtype is not None and _dtype_name(self.dtype) != _dtype_name(array.dtype):
            raise ValueError(
                f"{type(self).__name__}: the array is {_dtype_name(array.dtype)} but the "
                f"initializer makes {_dtype_name(self.dtype)}; give an array of that dtype "
                "or an initializer without dtype"
            )
        value = self.generate(tuple(array.shape), xp, array.dtype, array_api_compat.device(array))
        try:
            array[...] = value
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"{type(self).__name__}: cannot write into a {_backend.backend_name(xp)} "
                f"array ({error}); make a new one with generate_array(initializer, shape, xp)"
            ) from None

    def generate(self, shape: tuple[int, ...], xp: Any, dtype: Any, device: Any) -> Any:
        """A new array of ``shape`` and ``dtype`` on ``device`` (a device object of
        namespace ``xp``; ``None``: the library's default)."""
        array = xp.empty(shape, dtype=dtype, device=device)
        self(array)
        return array


class Constant(Initializer):
    """Fill with ``fill_value``: a scalar, or an array (of any library) that
    broadcasts to the shape.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd import initializers
    >>> initializers.generate_array(initializers.Constant(np.arange(2.0)), (2, 2), np)
    array([[0., 1.],
           [0., 1.]], dtype=float32)
    """

    def __init__(self, fill_value: Any, dtype: Any = None) -> None:
        super().__init__(dtype)
        self.fill_value = fill_value

    def generate(self, shape: tuple[int, ...], xp: Any, dtype: Any, device: Any) -> Any:
        value = self.fill_value
        if not _backend.is_array(value):
            return xp.full(shape, value, dtype=dtype, device=device)
        here = get_device(xp.empty((0,), dtype=dtype, device=device))
        value = xp.astype(transfer(_backend.as_array(value), here), dtype)
        return xp.asarray(xp.broadcast_to(value, shape), copy=True)


class Zero(Constant):
    """Fill with zeros."""

    def __init__(self, dtype: Any = None) -> None:
        super().__init__(0.0, dtype)


class One(Constant):
    """Fill with ones."""

    def __init__(self, dtype: Any = None) -> None:
        super().__init__(1.0, dtype)


class NaN(Constant):
    """Fill with NaN (what an uninitialised :class:`~agnograd.Parameter` shows)."""

    def __init__(self, dtype: Any = None) -> None:
        super().__init__(math.nan, dtype)


class Identity(Initializer):
    """``scale`` times the identity matrix (2-D square shapes only)."""

    def __init__(self, scale: float = 1.0, dtype: Any = None) -> None:
        super().__init__(dtype)
        self.scale = scale

    def generate(self, shape: tuple[int, ...], xp: Any, dtype: Any, device: Any) -> Any:
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"Identity: an identity matrix needs a 2-D square shape, got {shape}")
        return xp.eye(shape[0], dtype=dtype, device=device) * self.scale


class _Random(Initializer):
    """Samples of a normal or uniform distribution whose spread is ``scale`` times
    ``coefficient / sqrt(fan)`` (``fan`` as in :func:`get_fans`), or ``scale`` alone
    when the class names no fan."""

    _distribution = "normal"
    _coefficient = 1.0
    _fan: str | None = "fan_in"
    _default_scale = 1.0

    def __init__(self, scale: float | None = None, dtype: Any = None, rng: Any = None) -> None:
        super().__init__(dtype)
        self.scale = self._default_scale if scale is None else scale
        self.rng = rng

    def spread(self, shape: tuple[int, ...]) -> float:
        """The standard deviation (normal) or half-width (uniform) for ``shape``."""
        if self._fan is None:
            return float(self.scale)
        fan_in, fan_out = get_fans(shape)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}
        return float(self.scale * self._coefficient / math.sqrt(fan[self._fan]))

    def generate(self, shape: tuple[int, ...], xp: Any, dtype: Any, device: Any) -> Any:
        rng = numpy.random if self.rng is None else self.rng
        s = self.spread(shape)
        if self._distribution == "normal":
            host = numpy.asarray(rng.normal(loc=0.0, scale=s, size=shape))
        else:
            host = numpy.asarray(rng.uniform(low=-s, high=s, size=shape))
        name = _backend.dtype_name(dtype)
        if name in numpy.sctypeDict:  # cast on the host where NumPy knows the dtype
            host = host.astype(name)
        return xp.astype(xp.asarray(host, device=device), dtype)


class Normal(_Random):
    """Normal samples of mean 0 and standard deviation ``scale`` (default 0.05).

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd import initializers
    >>> w = initializers.generate_array(initializers.Normal(rng=np.random.default_rng(0)), (3,), np)
    >>> w.dtype, w.shape
    (dtype('float32'), (3,))
    """

    _fan = None
    _default_scale = 0.05


class LeCunNormal(_Random):
    """Normal samples of standard deviation ``scale * sqrt(1 / fan_in)``."""


class GlorotNormal(_Random):
    """Normal samples of standard deviation ``scale * sqrt(2 / (fan_in + fan_out))``."""

    _fan = "fan_avg"


class HeNormal(_Random):
    """Normal samples of standard deviation ``scale * sqrt(2 / fan)``, ``fan`` by
    ``fan_option`` (``'fan_in'``, the default, or ``'fan_out'``)."""

    _coefficient = math.sqrt(2)

    def __init__(
        self,
        scale: float | None = None,
        dtype: Any = None,
        fan_option: str = "fan_in",
        rng: Any = None,
    ) -> None:
        super().__init__(scale, dtype, rng)
        if fan_option not in ("fan_in", "fan_out"):
            raise ValueError(
                f"HeNormal: fan_option must be 'fan_in' or 'fan_out', got {fan_option!r}"
            )
        self.fan_option = self._fan = fan_option


class Uniform(_Random):
    """Uniform samples in ``[-scale, scale)`` (default ``scale`` 0.05)."""

    _distribution = "uniform"
    _fan = None
    _default_scale = 0.05


class LeCunUniform(_Random):
    """Uniform samples in ``±scale * sqrt(3 / fan_in)``."""

    _distribution = "uniform"
    _coefficient = math.sqrt(3)


class GlorotUniform(_Random):
    """Uniform samples in ``±scale * sqrt(6 / (fan_in + fan_out))``."""

    _distribution = "uniform"
    _coefficient = math.sqrt(3)
    _fan = "fan_avg"


class HeUniform(_Random):
    """Uniform samples in ``±scale * sqrt(6 / fan_in)``."""

    _distribution = "uniform"
    _coefficient = math.sqrt(6)


def get_fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight of ``shape``: ``shape[1]`` and ``shape[0]``,
    each times the size of the remaining axes (a convolution's kernel).

    Examples
    --------
    >>> from agnograd.initializers import get_fans
    >>> get_fans((2, 3, 4))
    (12, 8)
    """
    if not isinstance(shape, tuple) or len(shape) < 2:
        raise ValueError(f"get_fans: a shape of at least two axes is needed, got {shape!r}")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def get_initializer(initializer: Any) -> Callable[[Any], Any]:
    """An initializer from what Chainer's links take: ``None`` gives
    :class:`LeCunNormal`, a scalar or an array :class:`Constant`, a callable itself.

    Examples
    --------
    >>> from agnograd.initializers import get_initializer
    >>> type(get_initializer(2.0)).__name__, type(get_initializer(None)).__name__
    ('Constant', 'LeCunNormal')
    """
    if initializer is None:
        return LeCunNormal()
    if type(initializer) in _backend.SCALARS or _backend.is_array(initializer):
        return Constant(initializer)
    if not callable(initializer):
        raise TypeError(
            f"get_initializer: expected None, a scalar, an array or a callable that fills an "
            f"array, got {type(initializer).__name__}"
        )
    return initializer


def generate_array(
    initializer: Callable[[Any], Any],
    shape: Any,
    xp: Any = None,
    dtype: Any = None,
    device: Any = None,
) -> Any:
    """A new array of ``shape`` filled by ``initializer``.

    Parameters
    ----------
    initializer : Initializer or callable
        An :class:`Initializer`, or a function that fills the array it is given.
    shape : int or tuple of int
    xp : namespace or module, optional
        The library: an array API namespace or the library's module (``numpy``,
        ``torch``). NumPy by default, or ``device``'s library.
    dtype : data type, optional
        Asked for when the initializer has none; an initializer's own dtype that
        differs is an error.
    device : optional
        Anything :func:`agnograd.get_device` accepts; the library's default device
        otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from agnograd import initializers
    >>> initializers.generate_array(initializers.One(), 2, np, dtype="float64")
    array([1., 1.])
    >>> initializers.generate_array(initializers.One(), (1,), device="@array_api_strict")
    Array([1.], dtype=array_api_strict.float32)
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    native = None
    if device is not None:
        target = get_device(device)
        xp, native = target.xp, target.native
    elif xp is None:
        xp = _backend.raw_namespace(numpy.empty(0))
    else:
        xp = _backend.raw_namespace(xp.empty(0))  # a library's module, or a namespace
    dtype = _resolve_dtype(getattr(initializer, "dtype", None), dtype, xp)
    if isinstance(initializer, Initializer):
        return initializer.generate(shape, xp, dtype, native)
    array = xp.empty(shape, dtype=dtype, device=native)
    initializer(array)
    return array


def _resolve_dtype(own: Any, asked: Any, xp: Any) -> Any:
    """The dtype of namespace ``xp`` for an initializer of dtype ``own`` asked for
    ``asked``: ``own``, else ``asked``, else ``config.dtype``, else float32."""
    if own is not None and asked is not None and _dtype_name(own) != _dtype_name(asked):
        raise ValueError(
            f"generate_array: dtype {_dtype_name(asked)} was asked for, but the initializer "
            f"makes {_dtype_name(own)}; leave dtype out or use an initializer without one"
        )
    chosen = own if own is not None else asked
    if chosen is None:
        chosen = getattr(config, "dtype", None) or "float32"
    name = _dtype_name(chosen)
    found = getattr(xp, name, None)
    if found is None:
        raise TypeError(f"generate_array: {_backend.backend_name(xp)} has no dtype {name}")
    return found


def _dtype_name(dtype: Any) -> str:
    """``'float16'`` for ``numpy.float16``, ``'f2'``, ``numpy.dtype('e')``, ``torch.float16``."""
    try:
        return numpy.dtype(dtype).name
    except TypeError:
        return _backend.dtype_name(dtype)
