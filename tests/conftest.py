"""Shared fixtures: the ``backend`` fixture runs a test once per array library.

Tests build their inputs with ``backend.asarray`` from Python lists or NumPy arrays
and compare results with ``backend.to_numpy``. Expected values are computed with
NumPy in float32 unless a test says otherwise, because JAX runs in float32 unless
its x64 mode is enabled (which this file deliberately leaves alone: other test
modules share the process).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from agnograd import Variable

# Two CPU devices for JAX, so that its multi-device tests run on any machine; the flag
# is read once, when jax is first imported (nothing has imported it yet).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

# (fixture id, module that holds the library's array API namespace)
_BACKENDS = [
    ("numpy", "numpy"),
    ("array_api_strict", "array_api_strict"),
    ("torch", "torch"),
    ("jax", "jax.numpy"),
]


@dataclass(frozen=True)
class Backend:
    """One array library under test.

    Attributes
    ----------
    name : str
        The fixture id: ``"numpy"``, ``"array_api_strict"``, ``"torch"`` or ``"jax"``.
    xp : module
        The library's own namespace (``numpy``, ``array_api_strict``, ``torch``,
        ``jax.numpy``).
    """

    name: str
    xp: Any

    def asarray(self, values: Any, dtype: str | None = "float32") -> Any:
        """An array of this library from a Python list or NumPy array.

        ``dtype`` is a NumPy dtype name; ``None`` keeps NumPy's choice (int64
        for Python ints, which JAX narrows to int32 without x64).
        """
        return self.xp.asarray(np.asarray(values, dtype=dtype))

    def variable(self, values: Any, dtype: str | None = "float32", **kwargs: Any) -> Variable:
        """A Variable holding ``self.asarray(values, dtype)``."""
        return Variable(self.asarray(values, dtype), **kwargs)

    def to_numpy(self, x: Any) -> np.ndarray:
        """A NumPy view or copy of an array or of a Variable's array (CPU backends only)."""
        if isinstance(x, Variable):
            x = x.array
        return np.asarray(x)

    def assert_close(
        self, actual: Any, expected: Any, *, rtol: float = 1e-5, atol: float = 1e-6
    ) -> None:
        """Compare an array or Variable of this library with expected NumPy values."""
        np.testing.assert_allclose(self.to_numpy(actual), expected, rtol=rtol, atol=atol)

    def narrow_and_wide(self) -> tuple[str, str]:
        """Two floating dtype names, the second wider: float32 and float64, or float16
        and float32 on JAX, which has no float64 outside its x64 mode."""
        return ("float16", "float32") if self.name == "jax" else ("float32", "float64")

    def dtype(self, name: str) -> Any:
        """The library's dtype object called ``name`` (``"float32"``, ``"bool"``, ...)."""
        return getattr(self.xp, name)


@pytest.fixture(params=[name for name, _ in _BACKENDS], ids=[name for name, _ in _BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    """The array library under test; skipped when it is not installed."""
    module = dict(_BACKENDS)[request.param]
    pytest.importorskip(module.partition(".")[0])
    return Backend(request.param, importlib.import_module(module))
