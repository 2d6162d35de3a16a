"""Shared fixtures: the ``backend`` fixture runs a test once per array library of
agnograd's adapter registry whose arrays are memory buffers in host memory.

It is a thin helper over the public fixtures of agnograd's pytest plugin
(``agnograd.testing._plugin``): ``xp`` and ``agnograd_backend`` give the
parametrization (one run per installed backend, ids ``numpy``, ``torch``, ...), the
``--agnograd-backend`` selection, the skip of a backend unusable here and the
namespace, so an adapter installed through the ``agnograd.backends`` entry point runs
these tests too. Backends whose arrays NumPy cannot read in place (Dask's lazy
graphs, a library whose default device is off host memory, such as CuPy) are
deselected at collection (:func:`pytest_collection_modifyitems`).

Tests build their inputs with ``backend.asarray`` from Python lists or NumPy arrays
and compare results with ``backend.to_numpy``. Expected values are computed with
NumPy in float32 unless a test says otherwise, because JAX runs in float32 unless
its x64 mode is enabled (which this file deliberately leaves alone: other test
modules share the process).
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib.util
import inspect
import os
import shutil
import sys
import tempfile
import types
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from _session import GENERAL_PATH_FILES, path_of_run

from agnograd import Adapter, Variable
from agnograd.backends import _backend
from agnograd.backends._adapter import DLPACK_CPU
from agnograd.core import _fast

# Two CPU devices for JAX, so that its multi-device tests run on any machine; the flag
# is read once, when jax is first imported (nothing has imported it yet).
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

# One thread for each library's operations in each test process: the README runs a
# worker per core (pytest -n auto), so a thread pool per worker oversubscribes the
# cores, and OpenMP's idle threads spin, waiting for the next operation: torch's FFT
# of a 3x4 array costs 7 ms of CPU with two threads, 0.02 ms with one. Read when
# torch is first imported; subprocesses of the tests inherit them.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

# JAX compiles a program for each shape and dtype of each operation, and for each plan
# it lowers, and compiling is most of the time of the JAX tests; many of them compile
# the same programs (a new jit of the same graph, the same shapes in another test).
# JAX's persistent compilation cache, in a directory of this process alone, compiles
# each once: a hit is the executable that compiling the same program made. Read when
# jax is first imported; taken out of the environment after collection (see
# pytest_collection_finish), so that no subprocess shares the directory.
_JAX_CACHE: dict[str, str] = {}
if (
    "jax" not in sys.modules
    and "JAX_COMPILATION_CACHE_DIR" not in os.environ
    and importlib.util.find_spec("jax") is not None
):
    _JAX_CACHE = {
        "JAX_COMPILATION_CACHE_DIR": tempfile.mkdtemp(prefix="agnograd-tests-jax-"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }
    os.environ.update(_JAX_CACHE)
    atexit.register(shutil.rmtree, _JAX_CACHE["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


def _source_key(function: Any) -> tuple[Any, ...] | None:
    """What hypothesis reads of ``function`` for its digest and its check of a
    composite's first argument: the code (its source is found from the code's file and
    first line), the names and the signature; ``None`` where something else can enter
    (not a plain function, or one that names another through ``__wrapped__``)."""
    if not isinstance(function, types.FunctionType) or hasattr(function, "__wrapped__"):
        return None
    try:
        signature = repr(inspect.signature(function))
    except (TypeError, ValueError):
        return None
    return (function.__code__, function.__name__, function.__qualname__, signature)


def _digest_once() -> None:
    """Read each property test's source once for hypothesis's digests.

    hypothesis seeds a derandomized run (the ``ci`` profile) and keys its database
    with a digest of the test function's source and the test's id, reading and
    tokenizing the source again each time, twice a run: 5-10 ms for a test of 40-60
    lines, about 17 s of CPU over the session's 2,100 runs of property tests (most
    are one function parametrized over the declared functions and the libraries).
    The source cannot change during the session: its cleaning (a function of the
    text alone) is kept per text, and each digest per test id and what the digest
    reads of the function (:func:`_source_key`), so that a test defined inside
    another, a new function at each run of its parametrized parent, is read once
    too. So is the source that ``st.composite`` parses to check that a strategy
    uses its first argument (many are defined inside the functions that build
    strategies). The same bytes and answers, computed once. Left alone where
    hypothesis no longer has these private names.
    """
    try:
        import hypothesis.core as core
        import hypothesis.internal.reflection as reflection
        import hypothesis.strategies._internal.core as strategies_core
    except ImportError:
        return
    digest = getattr(core, "function_digest", None)
    clean = getattr(reflection, "_clean_source", None)
    if digest is None or clean is None:
        return
    reflection._clean_source = functools.lru_cache(maxsize=None)(clean)
    kept: weakref.WeakKeyDictionary[Any, dict[Any, bytes]] = weakref.WeakKeyDictionary()
    # By code object: the code of a function defined inside another lives as long
    # as the outer one, and ends the key, like a function in ``kept``.
    by_code: dict[tuple[Any, ...], bytes] = {}

    @functools.wraps(digest)
    def function_digest(function: Any) -> bytes:
        test_id = getattr(function, "_hypothesis_internal_add_digest", None)
        key = _source_key(function)
        if key is not None:
            key = (*key, test_id)
            if key not in by_code:
                by_code[key] = digest(function)
            return by_code[key]
        try:
            per_test = kept.setdefault(function, {})
        except TypeError:  # not weakly referenceable: computed each time, as before
            return bytes(digest(function))
        if test_id not in per_test:
            per_test[test_id] = digest(function)
        return per_test[test_id]

    core.function_digest = function_digest

    referenced = getattr(strategies_core, "is_first_param_referenced_in_function", None)
    if referenced is None:
        return
    answers: dict[tuple[Any, ...], bool] = {}

    @functools.wraps(referenced)
    def is_first_param_referenced_in_function(f: Any) -> bool:
        key = _source_key(f)
        if key is None:
            return bool(referenced(f))
        if key not in answers:
            answers[key] = referenced(f)
        return answers[key]

    strategies_core.is_first_param_referenced_in_function = is_first_param_referenced_in_function


_digest_once()


def pytest_collection_finish(session: pytest.Session) -> None:
    for name in _JAX_CACHE:
        os.environ.pop(name, None)
    # What exists now (the libraries' modules, the collected tests) lives to the end
    # of the session: the cyclic garbage collector need not walk it again at each full
    # collection (the tests' own gc.collect() among them), which takes half a second
    # with torch and jax imported. Objects made later are collected as before.
    gc.collect()
    gc.freeze()


# AGNOGRAD_FAST_PATHS=0 runs every node through FunctionNode.apply, the general path.
if os.environ.get("AGNOGRAD_FAST_PATHS") == "0":
    _fast.set_enabled(False)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.path.name in GENERAL_PATH_FILES:
        metafunc.parametrize("_agnograd_path", ["fast", "general"], indirect=True)


@pytest.fixture(autouse=True)
def _agnograd_path(request: pytest.FixtureRequest) -> Iterator[None]:
    """The run of GENERAL_PATH_FILES' tests it is parametrized with; autouse, so that
    the fast paths are off before the test's other fixtures make Variables."""
    with path_of_run(getattr(request, "param", "fast")):
        yield


def pytest_report_header(config: pytest.Config) -> str | None:
    if _fast.enabled:
        return None
    return "agnograd: fast paths off, every node runs FunctionNode.apply (the general path)"


# The plugin's parameter of the xp/device/agnograd_backend fixtures (a BackendSpec).
_SPEC = "_agnograd_backend_spec"


@functools.cache
def _host_buffers(name: str) -> bool:
    """Whether backend ``name`` keeps its arrays, by default, in memory buffers in host
    memory, which the ``backend`` fixture's tests write into and read back through
    NumPy. Dask's graphs are not buffers (its adapter's ``views``), decided without
    importing it; otherwise the adapter is asked where its default device is, which
    imports the library. A backend unusable here counts as one (the ``xp`` fixture
    skips it with its reason)."""
    adapter = _backend.adapter_named(name)
    if not adapter.views:
        return False
    if adapter.why_unusable() is not None:
        return True
    return bool(adapter.get_dlpack_device(adapter.get_default_device())[0] == DLPACK_CPU)


@pytest.hookimpl(trylast=True)  # after -k and -m: only the backends still selected are asked
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``backend`` fixture's tests on backends whose arrays are not host
    buffers: they are not these tests' to run, so they are left out rather than
    skipped by the hundred. Keyed on the plugin's parameter in the item's callspec;
    a test that parametrizes ``backend`` itself is not the fixture's."""
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        uses_fixture = (
            callspec is not None
            and _SPEC in callspec.params
            and "backend" in getattr(item, "fixturenames", ())
            and "backend" not in callspec.params
        )
        if uses_fixture and not _host_buffers(callspec.params[_SPEC].name):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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


@pytest.fixture(scope="session")
def backend(xp: Any, agnograd_backend: Any) -> Backend:
    """The array library under test: the plugin's ``xp`` under its adapter's name."""
    return Backend(agnograd_backend.name, xp)


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
