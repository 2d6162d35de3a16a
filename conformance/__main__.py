"""``python -m agnograd.conformance --backend NAME``: run the suite, write the report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from agnograd.conformance import CHECKS, Report, Result, run_conformance, summary_table

DEFAULT_OUT = Path(__file__).parent / "reports"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agnograd.conformance",
        description=(
            "Check every differentiable function of agnograd against a backend and write "
            "a Markdown and a JSON report (function x check -> pass/fail/xfail/skip)."
        ),
    )
    parser.add_argument(
        "--backend",
        action="append",
        required=True,
        metavar="NAME[:DEVICE]",
        help="backend to check (numpy, array_api_strict, torch, jax, ...); repeatable, "
        "comma-separated, or 'all' for every installed backend usable here",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"directory of the reports (default: {DEFAULT_OUT})",
    )
    parser.add_argument(
        "--max-examples", type=int, default=10, help="hypothesis examples per check"
    )
    parser.add_argument("--function", action="append", help="check only this function (repeatable)")
    parser.add_argument(
        "--check", action="append", choices=CHECKS, help="run only this check (repeatable)"
    )
    parser.add_argument(
        "--xfails",
        type=Path,
        help="xfail list to use instead of conformance/xfails/<backend>.txt "
        "(lines 'function::check  # reason')",
    )
    parser.add_argument("--shrink", action="store_true", help="shrink failing examples (slower)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    return parser


def _targets(values: Sequence[str]) -> list[tuple[str, str | None]]:
    from agnograd.backends._backend import adapters

    targets: list[tuple[str, str | None]] = []
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if item == "all":  # every adapter of the registry that can run here
                for adapter in [a for a in adapters() if a.is_installed()]:
                    reason = adapter.why_unusable()
                    if reason is None:
                        targets.append((adapter.name, None))
                    else:
                        print(f"skipping {adapter.name}: {reason}", flush=True)
            elif item:
                name, _, device = item.partition(":")
                targets.append((name, device or None))
    return targets


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite for each ``--backend``; exit status 1 on an unexpected result."""
    args = _parser().parse_args(argv)
    reports: list[Report] = []

    def show(result: Result) -> None:
        if not args.quiet and result.status in ("fail", "xpass"):
            first = result.reason.splitlines()[0] if result.reason else ""
            print(f"  {result.status.upper():5} {result.function}::{result.check}  {first}")

    for name, device in _targets(args.backend):
        label = name if device is None else f"{name}:{device}"
        print(f"conformance of agnograd on {label} ...", flush=True)
        report = run_conformance(
            name,
            device=device,
            max_examples=args.max_examples,
            functions=args.function,
            checks=args.check,
            xfails=args.xfails,
            shrink=args.shrink,
            progress=show,
        )
        md, js = report.write(args.out)
        print(f"  {', '.join(f'{n} {s}' for s, n in report.counts().items())}")
        print(f"  wrote {md} and {js}")
        reports.append(report)
    if len(reports) > 1:
        summary = args.out / "conformance.md"
        summary.write_text(
            "# Conformance of agnograd\n\n" + summary_table(reports) + "\n", encoding="utf-8"
        )
        print(f"wrote {summary}")
    print(summary_table(reports))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
