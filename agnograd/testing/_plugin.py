"""pytest plugin of agnograd (entry point ``pytest11``): backend fixtures and profiles.

- ``xp``: the array API namespace of each installed backend in turn: every adapter
  of agnograd's registry whose library is installed (numpy, array_api_strict,
  torch, jax, cupy, dask and any registered through the ``agnograd.backends``
  entry-point group), in the adapters' order, with the namespace ``Variable.xp``
  reports (array-api-compat's for NumPy and PyTorch). A test that asks for it runs
  once per backend, with the backend's name as its id; a backend whose library is
  installed but unusable here (CuPy without a GPU) is skipped with the reason.
- ``device``: the device the test should put its arrays on: the backend's default,
  or the one named with ``--agnograd-backend NAME:DEVICE``, where ``DEVICE`` is the
  part of the device's specifier after ``@NAME:`` (``torch:cuda:1``, ``jax:cpu:1``,
  ``array_api_strict:device1``), found by the backend's adapter.
- ``agnograd_backend``: the backend's name and requested device, for code that
  takes names (the conformance suite).
- ``--agnograd-backend NAME[:DEVICE]``: run on these backends only (repeat the
  option or separate with commas), e.g. ``--agnograd-backend torch`` or
  ``--agnograd-backend array_api_strict:no_float64``.
- hypothesis profiles ``ci`` (derandomized, 10 examples, no deadline) and ``local``
  (25 examples, no deadline), registered for any project to load by name. The
  plugin loads one only when asked, so that installing agnograd never changes the
  settings of another project's tests: by the ini option
  ``agnograd_hypothesis_profile`` (``auto``: ``ci`` when the environment variable
  ``CI`` is true, ``local`` otherwise; or a profile's name), or, when
  ``--agnograd-backend`` is given and no profile was loaded yet, ``auto``.
  ``--hypothesis-profile`` always has the last word.
- budgets per backend, under the profiles it loads: each example on Dask builds
  and computes lazy graphs, so property tests there draw half the examples and do
  not shrink a failure (it is reported as found, with its values and hypothesis's
  blob to replay it), where shrinking could take minutes.

Which backends are installed is decided without importing them; a backend's library
is imported when the first test that uses it runs.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

import pytest

_SPEC = "_agnograd_backend_spec"
_TRUE = ("1", "true", "yes", "on")


def _register_profiles() -> bool:
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return False
    settings.register_profile(
        "ci",
        max_examples=10,
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile("local", max_examples=25, deadline=None, print_blob=True)
    return True


# At import, so that a conftest can load or extend the profiles by name.
_HAVE_HYPOTHESIS = _register_profiles()


@dataclass(frozen=True)
class BackendSpec:
    """A backend chosen on the command line: its name and optionally a device name."""

    name: str
    device: str | None = None

    @property
    def id(self) -> str:
        return self.name if self.device is None else f"{self.name}:{self.device}"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agnograd", "agnograd backends")
    group.addoption(
        "--agnograd-backend",
        action="append",
        default=[],
        metavar="NAME[:DEVICE]",
        help=(
            "run the tests that use the xp/device fixtures on these backends only "
            "(repeatable, comma-separated; default: every installed backend)"
        ),
    )
    parser.addini(
        "agnograd_hypothesis_profile",
        help=(
            "hypothesis profile for the plugin to load: 'auto' (agnograd's 'ci' profile "
            "when the environment variable CI is true, 'local' otherwise) or a profile's "
            "name; empty (the default): leave hypothesis's settings alone"
        ),
        default="",
    )


def _parse(values: list[str]) -> list[BackendSpec]:
    from agnograd.backends._backend import adapter_names
    from agnograd.testing._backends import installed_backends

    specs = []
    installed = installed_backends()
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            name, _, device = item.partition(":")
            if name not in installed:
                known = name in adapter_names()
                raise pytest.UsageError(
                    f"--agnograd-backend {item}: backend {name!r} is "
                    f"{'not installed' if known else 'unknown'}; installed backends: "
                    f"{', '.join(installed)}"
                )
            specs.append(BackendSpec(name, device or None))
    return specs


def pytest_configure(config: pytest.Config) -> None:
    chosen = config.getoption("agnograd_backend", default=[]) or []
    if chosen:
        config.stash[_specs_key] = _parse(chosen)
    profile = _profile_to_load(config, bool(chosen))
    if profile is not None:
        from hypothesis import settings
        from hypothesis.errors import InvalidArgument

        try:
            settings.load_profile(profile)
        except InvalidArgument as error:
            raise pytest.UsageError(
                f"agnograd_hypothesis_profile = {profile}: {error} (register it in a "
                "conftest.py, or use 'auto', 'ci' or 'local')"
            ) from None


# Backend -> (share of the profile's examples, whether a failure is shrunk), for the
# property tests of backends where each example is slow (see the module's docstring).
_BUDGETS = {"dask": (0.5, False)}
_PROFILES = ("ci", "local")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    test = getattr(item, "obj", None)
    callspec = getattr(item, "callspec", None)
    spec = callspec.params.get(_SPEC) if callspec is not None else None
    budget = _BUDGETS.get(spec.name) if isinstance(spec, BackendSpec) else None
    # hypothesis reads a test's settings from this attribute each time it runs
    # (its own @settings decorator sets it); the test function is shared by the
    # backends' parametrizations, so the budget is set for this call only.
    attribute = "_hypothesis_internal_use_settings"
    if budget is None or not hasattr(test, attribute):
        return (yield)
    from hypothesis import Phase, settings

    if settings.get_current_profile_name() not in _PROFILES:
        return (yield)  # a project's own profile: its settings are its own

    before = getattr(test, attribute)
    share, shrink = budget
    setattr(
        test,
        attribute,
        settings(
            before,
            max_examples=max(1, int(before.max_examples * share)),
            phases=[p for p in before.phases if shrink or p is not Phase.shrink],
        ),
    )
    try:
        return (yield)
    finally:
        setattr(test, attribute, before)


def _profile_to_load(config: pytest.Config, backends_chosen: bool) -> str | None:
    """The hypothesis profile the plugin should load, ``None`` to leave it alone.

    Only on request: a project that loads its own profile in its conftest.py keeps
    it, whatever else is installed.
    """
    if not _HAVE_HYPOTHESIS or config.getoption("hypothesis_profile", default=None):
        return None  # hypothesis's own option chooses
    asked = str(config.getini("agnograd_hypothesis_profile")).strip()
    if not asked:
        from hypothesis import settings

        # Running agnograd's backend fixtures (the conformance suite) asks for its
        # profiles, unless the project already loaded one of its own.
        if not backends_chosen or settings.get_current_profile_name() != "default":
            return None
        asked = "auto"
    if asked == "auto":
        return "ci" if os.environ.get("CI", "").strip().lower() in _TRUE else "local"
    return asked


_specs_key = pytest.StashKey[list[BackendSpec]]()


def _specs(config: pytest.Config) -> list[BackendSpec]:
    specs = config.stash.get(_specs_key, None)
    if specs is None:
        from agnograd.testing._backends import installed_backends

        specs = [BackendSpec(name) for name in installed_backends()]
        config.stash[_specs_key] = specs
    return specs


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # When a hypothesis test fails, hypothesis's own plugin imports libcst to
    # suggest a patch, and libcst warns on import (mypy_extensions.TypedDict is
    # deprecated); under ``filterwarnings = error`` that turns the test's failure
    # into an INTERNALERROR that hides it. Only that warning is silenced.
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="mypy_extensions.TypedDict is deprecated", category=DeprecationWarning
        )
        return (yield)


def pytest_report_header(config: pytest.Config) -> str:
    specs = _specs(config)
    line = f"agnograd backends: {', '.join(s.id for s in specs)}"
    if _HAVE_HYPOTHESIS:
        from hypothesis import settings

        line += f"; hypothesis profile: {settings.get_current_profile_name()}"
    return line


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only tests that reach our fixtures through ``xp`` or ``device`` are
    # parametrized: a project that defines its own ``xp`` fixture is left alone.
    if _SPEC in metafunc.fixturenames:
        specs = _specs(metafunc.config)
        metafunc.parametrize(
            _SPEC, specs, ids=[s.id for s in specs], indirect=True, scope="session"
        )


# Session scope: the fixtures hold no state, and hypothesis refuses function-scoped
# fixtures in @given tests.
@pytest.fixture(scope="session")
def _agnograd_backend_spec(request: pytest.FixtureRequest) -> BackendSpec:
    return request.param


@pytest.fixture(scope="session")
def agnograd_backend(_agnograd_backend_spec: BackendSpec) -> BackendSpec:
    """The backend under test by name: ``.name`` and ``.device`` (``None`` for the
    default), as chosen with ``--agnograd-backend``."""
    return _agnograd_backend_spec


@pytest.fixture(scope="session")
def xp(_agnograd_backend_spec: BackendSpec) -> Any:
    """The array API namespace of the backend under test (one run per backend)."""
    from agnograd.backends._backend import adapter_named
    from agnograd.testing._backends import backend_namespace

    name = _agnograd_backend_spec.name
    reason = adapter_named(name).why_unusable()
    if reason is not None:
        pytest.skip(f"backend {name} is installed but unusable: {reason}")
    try:
        namespace = backend_namespace(name)
        namespace.asarray(0.0)
    except Exception as error:
        pytest.skip(f"backend {name} is installed but unusable: {type(error).__name__}: {error}")
    return namespace


@pytest.fixture(scope="session")
def device(xp: Any, _agnograd_backend_spec: BackendSpec) -> Any:
    """The device to put arrays on: the backend's default or the one asked for, found
    by the backend's adapter as in a device specifier (``torch:cuda:1`` is
    ``'@torch:cuda:1'``)."""
    from agnograd.testing._backends import backend_device

    spec = _agnograd_backend_spec
    try:
        return backend_device(spec.name, spec.device)
    except ValueError as error:
        raise pytest.UsageError(f"--agnograd-backend {spec.id}: {error}") from None
