"""agnograd's backend conformance suite (importable as ``agnograd.conformance``).

Runs every differentiable function of agnograd's namespace against one backend:
first- and second-order gradient checks on hypothesis inputs, device placement on
every device of the backend, DLPack export of results and gradients, and gradients
flowing back across devices (``agnograd.functions.copy``). The result is a table
function x check -> pass / fail / xfail / xpass / skip, written as Markdown and JSON.

Known failures of a backend live in its xfail list, ``conformance/xfails/<backend>.txt``
(one ``function::check  # reason`` per line), or in a file given with ``--xfails``.

Run it with ``python -m agnograd.conformance --backend NAME`` or with pytest:
``pytest conformance/test_suite.py --agnograd-backend NAME``.

Examples
--------
>>> from agnograd.conformance import run_conformance
>>> report = run_conformance("numpy", functions=["exp"], checks=["backward"], max_examples=2)
>>> report.results
[Result(function='exp', check='backward', status='pass', reason='', detail='')]
"""

from __future__ import annotations

import functools
import importlib.metadata
import platform
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from agnograd.conformance._checks import CHECKS, Target, default_dtype, run_check
from agnograd.conformance._report import STATUSES, Report, Result, summary_table

from agnograd.backends._backend import adapter_named, dtype_name
from agnograd.testing._backends import as_device, backend_device, backend_namespace

XFAIL_DIR = Path(__file__).parent / "xfails"

XfailList = Mapping[tuple[str, str], str]


def parse_xfails(text: str, source: str = "<xfails>") -> dict[tuple[str, str], str]:
    """Parse an xfail list: ``function::check  # reason`` per line, ``*`` matches any
    function or check (see :func:`apply_xfail` for how entries apply).

    Examples
    --------
    >>> from agnograd.conformance import parse_xfails
    >>> parse_xfails("exp::dlpack  # read-only views cannot be exported\\n# comment\\n")
    {('exp', 'dlpack'): 'read-only views cannot be exported'}
    """
    entries: dict[tuple[str, str], str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        entry, _, reason = line.partition("#")
        entry, reason = entry.strip(), reason.strip()
        if not entry:
            continue
        function, sep, check = entry.partition("::")
        if not sep or not function or not check:
            raise ValueError(
                f"{source}:{number}: expected 'function::check  # reason', got {line.strip()!r}"
            )
        if check != "*" and check not in CHECKS:
            raise ValueError(
                f"{source}:{number}: unknown check {check!r}; checks are {', '.join(CHECKS)}"
            )
        if not reason:
            raise ValueError(f"{source}:{number}: the entry {entry!r} needs a reason after '#'")
        entries[(function, check)] = reason
    return entries


def load_xfails(backend: str, path: str | Path | None = None) -> dict[tuple[str, str], str]:
    """The xfail list of ``backend`` (``conformance/xfails/<backend>.txt``), or of ``path``.

    A backend without a file has no known failures.

    Examples
    --------
    >>> from agnograd.conformance import load_xfails
    >>> isinstance(load_xfails("numpy"), dict)
    True
    """
    file = Path(path) if path is not None else XFAIL_DIR / f"{backend}.txt"
    if not file.exists():
        if path is not None:
            raise FileNotFoundError(f"load_xfails: no xfail list at {file}")
        return {}
    return parse_xfails(file.read_text(encoding="utf-8"), str(file))


def _xfail_entry(xfails: XfailList, function: str, check: str) -> tuple[str, bool] | None:
    """The reason of the entry that covers ``function::check`` and whether it names
    the cell exactly (rather than through ``*``)."""
    for key in ((function, check), (function, "*"), ("*", check), ("*", "*")):
        if key in xfails:
            return xfails[key], key == (function, check)
    return None


def apply_xfail(result: Result, xfails: XfailList) -> Result:
    """Turn a raw result into xfail / xpass when the xfail list names it.

    An entry that names the cell exactly is strict: if the check passes, the result
    is ``xpass`` (the entry is stale). A ``*`` entry covers a class of failures
    (``*::dlpack``) of which some cells may pass: those stay ``pass``.
    """
    entry = _xfail_entry(xfails, result.function, result.check)
    if entry is None or result.status == "skip":
        return result
    reason, exact = entry
    if result.status == "fail":
        return Result(result.function, result.check, "xfail", reason, result.reason)
    if not exact:
        return result
    return Result(
        result.function,
        result.check,
        "xpass",
        f"listed as an expected failure ({reason}) but passed: remove the entry",
    )


def _functions(names: Iterable[str] | None) -> dict[str, Callable[..., Any]]:
    from agnograd import functions as F
    from agnograd.functions._table import DIFFERENTIABLE

    if names is None:
        return dict(sorted(DIFFERENTIABLE.items()))
    chosen = {}
    for name in names:
        if name in DIFFERENTIABLE:
            chosen[name] = DIFFERENTIABLE[name]
        elif hasattr(F, name):
            chosen[name] = getattr(F, name)
        else:
            raise ValueError(f"run_conformance: agnograd has no differentiable function {name!r}")
    return chosen


@functools.cache
def _distributions_of_modules() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _distributions(backend: str) -> list[str]:
    """The installed distributions that provide ``backend``'s library: those of its
    adapter's top-level modules (``cupy`` comes from ``cupy-cuda12x``, ``tinylib``
    from whatever package installed it), else the backend's own name.

    Examples
    --------
    >>> from agnograd.conformance import _distributions
    >>> _distributions("numpy")
    ['numpy']
    """
    try:
        modules = adapter_named(backend).modules
    except ValueError:
        modules = (backend,)
    found = _distributions_of_modules()
    names = [d for m in modules for d in found.get(m, [])]
    return list(dict.fromkeys(names)) or [backend]


def _environment(backend: str, device: Any, xp: Any) -> dict[str, str]:
    env = {"python": platform.python_version()}
    for dist in ("agnograd", *_distributions(backend), "hypothesis"):
        try:
            env[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    env["device"] = as_device(backend, device).name
    return env


def run_conformance(
    backend: str,
    *,
    device: str | None = None,
    max_examples: int = 10,
    functions: Iterable[str] | None = None,
    checks: Iterable[str] | None = None,
    xfails: XfailList | str | Path | None = None,
    shrink: bool = False,
    progress: Callable[[Result], None] | None = None,
) -> Report:
    """Run the conformance suite against ``backend`` and return its :class:`Report`.

    Parameters
    ----------
    backend : str
        ``numpy``, ``array_api_strict``, ``torch``, ``jax``, ... or the name of a
        registered adapter.
    device : str, optional
        A device of the backend by name, the part of its specifier after
        ``@backend:`` (``no_float64``, ``cpu:1``; see :func:`agnograd.get_device`);
        default: the backend's default device. Checks run in float64 where it has
        it, else float32.
    max_examples : int
        Hypothesis examples per gradient check (a third of it for device checks).
    functions, checks : iterables of str, optional
        Restrict the run (default: every function of agnograd's differentiable table
        and every check of :data:`CHECKS`).
    xfails : mapping, path or None
        Known failures; default: ``conformance/xfails/<backend>.txt``.
    shrink : bool
        Shrink failing examples to minimal ones (slower; off by default).
    progress : callable, optional
        Called with each result as it is produced.
    """
    xp = backend_namespace(backend)
    place = backend_device(backend, device)
    dtype = default_dtype(xp, place)
    target = Target(backend, xp, place, dtype, max_examples, shrink)
    if xfails is None or isinstance(xfails, str | Path):
        xfails = load_xfails(backend, xfails)
    checks = list(CHECKS if checks is None else checks)
    for check in checks:
        if check not in CHECKS:
            raise ValueError(f"run_conformance: unknown check {check!r}; checks are {CHECKS}")
    table = _functions(functions)
    results = []
    for name, function in table.items():
        for check in checks:
            status, reason = run_check(target, name, function, check)
            result = apply_xfail(Result(name, check, status, reason), xfails)
            results.append(result)
            if progress is not None:
                progress(result)
    stale = [f"{f}::{c}" for f, c in xfails if f != "*" and f not in table and (functions is None)]
    return Report(
        backend=backend,
        device="" if device is None else as_device(backend, place).local,
        # Named as the suite's arrays carry it (NumPy's namespace gives scalar types).
        dtype=dtype_name(xp.empty(0, dtype=dtype, device=place).dtype),
        max_examples=max_examples,
        results=results,
        stale_xfails=stale,
        environment=_environment(backend, place, xp),
    )


__all__ = [
    "CHECKS",
    "STATUSES",
    "Report",
    "Result",
    "apply_xfail",
    "load_xfails",
    "parse_xfails",
    "run_conformance",
    "summary_table",
]
