"""What the test session's files share besides fixtures: imported by conftest.py and
by the tests as ``_session`` (a module of its own: pytester runs in this process load
other ``conftest`` modules, so ``from conftest import ...`` may find another one)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import TypeVar, cast

import pytest

from agnograd.core import _fast

try:
    import fcntl
except ImportError:  # not POSIX: each process computes what computed_once keeps
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")

#: The core's test files, whose every test runs twice: as it is (``[fast]``) and with
#: the fast paths off (``[general]``), every node going through ``FunctionNode.apply``
#: (tests/test_fast_paths.py compares the two paths function by function). In this
#: process rather than a second pytest: the switch is read at each call, and a
#: subprocess would import and collect everything again.
GENERAL_PATH_FILES = frozenset(
    {
        "test_core.py",
        "test_engine.py",
        "test_function_node.py",
        "test_operators.py",
        "test_versions.py",
        "test_inplace.py",
        "test_variable.py",
        "test_chainer_core.py",
    }
)


@contextlib.contextmanager
def fast_paths(enabled: bool) -> Iterator[None]:
    """agnograd's own nodes through their fast paths or (False) through ``apply``,
    the general path; as before after."""
    was = _fast.enabled
    _fast.set_enabled(enabled)
    try:
        yield
    finally:
        _fast.set_enabled(was)


@contextlib.contextmanager
def path_of_run(name: str) -> Iterator[None]:
    """Nothing for a ``fast`` run; the fast paths off for a ``general`` one."""
    if name == "fast":
        yield
        return
    with fast_paths(False):
        yield


def computed_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[], T]
) -> T:
    """``compute()``, for a module-scoped fixture whose value costs seconds (a
    subprocess that runs SciPy, the benchmarks): computed by one process of the test
    session, which the others wait for and read. pytest-xdist's workers would each
    compute it where a module's tests are shared between them. The value must be
    JSON; it is kept in the temporary directory that the workers share."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None or fcntl is None:
        return compute()
    path = tmp_path_factory.getbasetemp().parent / f"computed-once-{name}.json"
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.is_file():
            return cast(T, json.loads(path.read_text()))
        value = compute()
        path.write_text(json.dumps(value))
        return value
