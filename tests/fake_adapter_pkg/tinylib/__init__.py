"""tinylib: a toy array library -- NumPy's buffers under another type.

Its arrays belong to the module ``tinylib``, so no adapter shipped with agnograd
owns them; only the plug-in ``agnograd_tinylib`` does.
"""

from __future__ import annotations

from typing import Any

import numpy


class Array(numpy.ndarray):
    """An array of tinylib (a NumPy array subclass)."""


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None) -> Array:
    """An Array from anything NumPy accepts."""
    return numpy.asarray(obj, dtype=dtype, copy=copy).view(Array)


def from_dlpack(obj: Any, /, *, device: Any = None, copy: Any = None) -> Array:
    """An Array from any object that exports DLPack (host memory only)."""
    return numpy.from_dlpack(obj, device="cpu", copy=copy).view(Array)
