"""Command line of agnograd: ``python -m agnograd demo`` (or ``agnograd demo``).

``demo`` runs one gradient computation, written once against the array API, on
every installed array library and checks each gradient against a hand-derived
one computed by the library itself, without agnograd. The libraries are those of
agnograd's adapter registry, so a third party's adapter installed through the
``agnograd.backends`` entry point takes part too; each runs on its
:meth:`~agnograd.Adapter.representative_devices` (torch: ``cpu`` and ``cuda``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy

import agnograd
from agnograd.backends._adapter import Adapter
from agnograd.backends._backend import adapter_names, adapters

# -- the computation: written once, against whatever namespace the inputs report ----


def loss(x: Any, w: Any, b: Any) -> Any:
    """``sum(tanh(x @ w + b) ** 2) / n``: matmul, broadcasting, tanh and a reduction.

    Written once against the inputs' namespace: with raw arrays it computes a
    value, with :class:`agnograd.Variable` inputs it also records the graph.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> x = agnograd.Variable(np.ones((1, 2)))
    >>> y = loss(x, np.zeros((2, 1)), np.zeros(1))
    >>> y.backward(); y, x.grad
    (variable(0.), array([[0., 0.]]))
    """
    xp = x.__array_namespace__()
    h = xp.tanh(x @ w + b)
    return xp.sum(h * h) / math.prod(h.shape)


def reference_gradients(xp: Any, x: Any, w: Any, b: Any) -> tuple[Any, Any, Any]:
    """Gradients of :func:`loss` derived by hand and computed with ``xp`` alone."""
    h = xp.tanh(x @ w + b)
    gz = 2 * h * (1 - h * h) / math.prod(h.shape)
    return gz @ xp.matrix_transpose(w), xp.matrix_transpose(x) @ gz, xp.sum(gz, axis=0)


def _inputs() -> tuple[numpy.ndarray, ...]:
    rng = numpy.random.default_rng(0)
    return rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal(2)


# -- running it on one backend --------------------------------------------------------


@dataclass
class Row:
    """One line of the demo's table."""

    backend: str
    device: str = "-"
    dtype: str = "-"
    value: str = "-"
    check: str = ""
    failed: bool = False


def _short(text: str) -> str:
    # array_api_strict prints devices as "array_api_strict.Device('CPU_DEVICE')".
    match = re.fullmatch(r"[\w.]*Device\('(.*)'\)", text)
    text = match.group(1) if match else text
    return text.rsplit(".", 1)[-1] if text.count(".") == 1 else text


def _device(array: Any) -> Any:
    import array_api_compat

    return array_api_compat.device(array)


def _max_error(xp: Any, got: Any, expected: Any) -> float:
    scale = max(1.0, float(xp.max(xp.abs(expected))))
    return float(xp.max(xp.abs(got - expected))) / scale


def run_backend(adapter: Adapter, device: Any, expected_value: float) -> Row:
    """Compute :func:`loss` and its gradients with ``adapter``'s library on ``device``
    and check them."""
    xp = adapter.get_namespace()
    arrays = [xp.asarray(a, device=device) for a in _inputs()]
    x, w, b = (agnograd.Variable(a) for a in arrays)
    y = loss(x, w, b)
    y.backward()
    dtype = arrays[0].dtype
    row = Row(
        backend=adapter.name,
        device=_short(str(_device(arrays[0]))),
        dtype=_short(str(dtype)),
        value=f"{y.item():.12f}",
    )
    # Generous for accumulated rounding, tight enough to catch any wrong rule.
    tolerance = 100 * float(xp.finfo(dtype).eps)
    problems = []
    value_error = abs(y.item() - expected_value) / max(1.0, abs(expected_value))
    if value_error > tolerance:
        problems.append(f"value off by {value_error:.1e}")
    error = 0.0
    for name, var, ref in zip("xwb", (x, w, b), reference_gradients(xp, *arrays), strict=True):
        g = var.grad
        if g is None:
            problems.append(f"no gradient for {name}")
        elif type(g) is not type(var.array) or _device(g) != _device(var.array):
            problems.append(f"gradient of {name} is a {type(g).__name__} on {_device(g)}")
        else:
            error = max(error, _max_error(xp, g, ref))
    if error > tolerance:
        problems.append(f"max gradient error {error:.1e} > {tolerance:.0e}")
    if problems:
        row.check, row.failed = "FAIL (" + "; ".join(problems) + ")", True
    else:
        row.check = f"ok (max error {max(error, value_error):.1e})"
    return row


def demo(names: Sequence[str] | None = None, file: Any = None) -> int:
    """Run the demo on the backends ``names`` (every registered adapter by default);
    print a table.

    Returns the number of failed checks.
    """
    out = sys.stdout if file is None else file
    x, w, b = _inputs()
    expected_value = float(numpy.sum(numpy.tanh(x @ w + b) ** 2) / 6)
    rows: list[Row] = []
    start = time.perf_counter()
    for adapter in adapters():
        if names and adapter.name not in names:
            continue
        if not adapter.is_installed():
            rows.append(Row(adapter.name, check="not installed"))
            continue
        try:
            reason = adapter.why_unusable()
            devices = [] if reason else adapter.representative_devices()
        except Exception as error:  # a broken install is reported, not fatal
            reason, devices = f"cannot list its devices ({type(error).__name__}: {error})", []
        if reason:
            rows.append(Row(adapter.name, check=f"skipped: {reason}"))
        for device in devices:
            try:
                rows.append(run_backend(adapter, device, expected_value))
            except Exception as error:  # reported as a failed check
                message = f"FAIL ({type(error).__name__}: {error})"
                rows.append(Row(adapter.name, check=message, failed=True))
    elapsed = time.perf_counter() - start

    header = Row("backend", "device", "dtype", "value", "gradient check")
    fields = ("backend", "device", "dtype", "value")
    widths = {f: max(len(getattr(r, f)) for r in [header, *rows]) for f in fields}
    print(f"agnograd {agnograd.__version__}: gradients of {_FORMULA}", file=out)
    print(file=out)
    for r in [header, *rows]:
        cells = [getattr(r, f).ljust(widths[f]) for f in fields]
        print("  ".join([*cells, r.check]).rstrip(), file=out)
    failures = sum(r.failed for r in rows)
    checked = sum(r.check.startswith(("ok", "FAIL")) for r in rows)
    print(file=out)
    if failures:
        print(f"{failures} of {checked} checks FAILED ({elapsed:.1f} s)", file=out)
    else:
        noun = "check" if checked == 1 else "checks"
        print(f"all {checked} {noun} passed ({elapsed:.1f} s)", file=out)
    return failures


_FORMULA = "sum(tanh(x @ w + b) ** 2) / n with respect to x, w and b"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agnograd",
        description="Reverse-mode autodiff for any array library that implements the "
        "Python array API standard.",
    )
    parser.add_argument("--version", action="version", version=f"agnograd {agnograd.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo_parser = commands.add_parser(
        "demo",
        help="differentiate one function on every installed array library",
        description=f"Compute the gradients of {_FORMULA} on every installed array library "
        f"({', '.join(adapter_names())}) and compare them with gradients derived by hand. "
        "Exits with status 1 if any check fails.",
    )
    demo_parser.add_argument(
        "--backend",
        action="append",
        choices=adapter_names(),
        help="only this library (repeat the option for several)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m agnograd`` and of the ``agnograd`` script.

    Examples
    --------
    >>> main(["demo", "--backend", "numpy"])  # doctest: +ELLIPSIS
    agnograd ...: gradients of sum(tanh(x @ w + b) ** 2) / n with respect to x, w and b
    <BLANKLINE>
    backend  device  dtype    value           gradient check
    numpy    cpu     float64  0.667328563869  ok (max error ...)
    <BLANKLINE>
    all 1 check passed (... s)
    0
    """
    args = _parser().parse_args(argv)
    if args.command == "demo":
        return 1 if demo(args.backend) else 0
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects others


if __name__ == "__main__":
    sys.exit(main())
