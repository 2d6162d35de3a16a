"""Initializers: what fills a :class:`~agnograd.Parameter` when its shape is known.

Chainer's initializers, for arrays of any array API library. An initializer is
called in either of two ways:

- ``initializer(array)`` fills ``array`` in place (Chainer's protocol; the library
  must allow writes, which JAX's arrays do not);
- :func:`generate_array` ``(initializer, shape, xp, dtype=None, device=None)``
  makes a new array, of any library and device, JAX included.

A plain function ``f(array)`` that fills its argument is an initializer too. Random
initializers draw on the host, from ``rng`` (a ``numpy.random.Generator`` or
``RandomState``; NumPy's global generator by default, so ``numpy.random.seed``
makes them reproducible), and move the sample to the array's library and device.
The dtype is the initializer's ``dtype``, else the one asked for, else
``agnograd.config.dtype`` if set, else float32 (Chainer's default).

Examples
--------
>>> import numpy as np, agnograd
>>> from agnograd import initializers
>>> initializers.generate_array(initializers.Constant(0.5), (2,), np)
array([0.5, 0.5], dtype=float32)
>>> w = np.empty((2, 3))
>>> initializers.Uniform(scale=0.1, rng=np.random.default_rng(0))(w)
>>> bool(np.all(abs(w) <= 0.1))
True
"""

from agnograd.core._initializers import (
    Constant,
    GlorotNormal,
    GlorotUniform,
    HeNormal,
    HeUniform,
    Identity,
    Initializer,
    LeCunNormal,
    LeCunUniform,
    NaN,
    Normal,
    One,
    Uniform,
    Zero,
    generate_array,
    get_fans,
    get_initializer,
)

__all__ = [
    "Constant",
    "GlorotNormal",
    "GlorotUniform",
    "HeNormal",
    "HeUniform",
    "Identity",
    "Initializer",
    "LeCunNormal",
    "LeCunUniform",
    "NaN",
    "Normal",
    "One",
    "Uniform",
    "Zero",
    "generate_array",
    "get_fans",
    "get_initializer",
]
