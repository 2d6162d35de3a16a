"""Shared fixtures: the ``backend`` fixture runs a test once per array library of
agnograd's adapter registry (those whose arrays are memory buffers in host memory).

Tests build their inputs with ``backend.asarray`` from Python lists or NumPy arrays
and compare results with ``backend.to_numpy``. Expected values are computed with
NumPy in float32 unless a test says otherwise, because JAX runs in float32 unless
its x64 mode is enabled (which this file deliberately leaves alone: other test
modules share the process).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from agnograd import Adapter, Variable, _backend
from agnograd._adapter import DLPACK_CPU

# Two CPU devices for JAX, so that its multi-device tests run on any machine; the flag
# is read once, when jax is first imported (nothing has imported it yet).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")


def _buffer_backends() -> list[str]:
    """The registry's installed backends whose arrays are memory buffers (not Dask's
    lazy graphs), in the adapters' order: the ``backend`` fixture's tests write into
    arrays and read them back through NumPy. Nothing is imported to decide."""
    return [a.name for a in _backend.adapters() if a.is_installed() and a.views]


@dataclass(frozen=True)
class Backend:
    """One array library under test.

    Attributes
    ----------
    name : str
        The fixture id, the adapter's name: ``"numpy"``, ``"array_api_strict"``,
        ``"torch"``, ``"jax"``, ...
    xp : module
        The namespace its adapter reports, the one ``Variable.xp`` gives
        (``array_api_compat.numpy``, ``array_api_strict``, ``array_api_compat.torch``,
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


@pytest.fixture(params=_buffer_backends())
def backend(request: pytest.FixtureRequest) -> Backend:
    """The array library under test; skipped where it cannot run (CuPy without a GPU)
    or keeps its arrays off host memory, where NumPy cannot read them."""
    adapter = _backend.adapter_named(request.param)
    reason = adapter.why_unusable()
    if reason is not None:
        pytest.skip(f"{adapter.name} is unusable here: {reason}")
    if adapter.get_dlpack_device(adapter.get_default_device())[0] != DLPACK_CPU:
        pytest.skip(f"{adapter.name} keeps its arrays off host memory by default")
    return Backend(adapter.name, adapter.get_namespace())


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Adapter], None]]:
    """``register_adapter`` for one test: the adapters it registers are forgotten after."""
    monkeypatch.setattr(_backend, "_registered", list(_backend._registered))
    _backend._adapters.cache_clear()
    _backend._adapter_cache.clear()
    yield _backend.register_adapter
    monkeypatch.undo()
    _backend._adapters.cache_clear()
    _backend._adapter_cache.clear()
