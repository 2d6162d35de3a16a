"""The conformance report: function x check -> status, written as Markdown and JSON."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATUSES = ("pass", "fail", "xfail", "xpass", "skip")
_MARKS = {
    "pass": "pass",
    "fail": "**FAIL**",
    "xfail": "xfail",
    "xpass": "**XPASS**",
    "skip": "skip",
}


@dataclass(frozen=True)
class Result:
    """One cell of the table.

    ``status`` is ``pass``, ``fail``, ``xfail`` (failed and listed in the backend's
    xfail list), ``xpass`` (listed but passed: the entry is stale) or ``skip``;
    ``reason`` says why for all but plain passes, ``detail`` keeps the failure
    message of an xfail.
    """

    function: str
    check: str
    status: str
    reason: str = ""
    detail: str = ""


@dataclass
class Report:
    """Results of one conformance run against one backend and device.

    Examples
    --------
    >>> from agnograd.conformance import Report, Result
    >>> r = Report("numpy", "", "float64", 5, [Result("exp", "backward", "pass")])
    >>> r.counts()
    {'pass': 1, 'fail': 0, 'xfail': 0, 'xpass': 0, 'skip': 0}
    >>> r.ok
    True
    """

    backend: str
    device: str  # "" for the backend's default device
    dtype: str
    max_examples: int
    results: list[Result] = field(default_factory=list)
    stale_xfails: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """How many cells have each status."""
        found = Counter(r.status for r in self.results)
        return {status: found.get(status, 0) for status in STATUSES}

    @property
    def unexpected(self) -> list[Result]:
        """Failures not in the xfail list, and xfail entries that passed."""
        return [r for r in self.results if r.status in ("fail", "xpass")]

    @property
    def ok(self) -> bool:
        """Whether the run found nothing unexpected."""
        return not self.unexpected

    @property
    def label(self) -> str:
        """``backend``, or ``backend:device`` when a device was asked for."""
        return f"{self.backend}:{self.device}" if self.device else self.backend

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (what :meth:`to_json` writes)."""
        data = asdict(self)
        data["summary"] = self.counts()
        return data

    def to_json(self) -> str:
        """The report as JSON."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def to_markdown(self) -> str:
        """The report as a Markdown table with the reasons listed below it."""
        checks = list(dict.fromkeys(r.check for r in self.results))
        functions = list(dict.fromkeys(r.function for r in self.results))
        cells = {(r.function, r.check): r for r in self.results}
        notes: list[str] = []
        lines = [
            f"# Conformance of agnograd on {self.label}",
            "",
            f"dtype {self.dtype}, {self.max_examples} hypothesis examples per check. "
            + ", ".join(f"{n} {s}" for s, n in self.counts().items()),
            "",
            "| function | " + " | ".join(checks) + " |",
            "|---" * (len(checks) + 1) + "|",
        ]
        for function in functions:
            row = []
            for check in checks:
                r = cells.get((function, check))
                if r is None:
                    row.append("")
                    continue
                mark = _MARKS[r.status]
                if r.status != "pass" and r.reason:
                    if r.reason not in notes:
                        notes.append(r.reason)
                    mark += f" [{notes.index(r.reason) + 1}]"
                row.append(mark)
            lines.append(f"| {function} | " + " | ".join(row) + " |")
        if notes:
            lines += ["", "Reasons:", ""]
            for k, note in enumerate(notes, 1):
                first, _, rest = note.partition("\n")
                lines.append(f"{k}. {_escape(first)}")
                if rest:
                    lines += ["", "   ```", *("   " + s for s in rest.splitlines()), "   ```"]
        if self.stale_xfails:
            lines += ["", "xfail entries that match no function:", ""]
            lines += [f"- `{entry}`" for entry in self.stale_xfails]
        if self.environment:
            lines += [
                "",
                "Environment: " + ", ".join(f"{k} {v}" for k, v in self.environment.items()),
            ]
        return "\n".join(lines) + "\n"

    def write(self, directory: str | Path) -> tuple[Path, Path]:
        """Write ``conformance-<label>.md`` and ``.json`` into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        stem = "conformance-" + self.label.replace(":", "-")
        md, js = directory / f"{stem}.md", directory / f"{stem}.json"
        md.write_text(self.to_markdown(), encoding="utf-8")
        js.write_text(self.to_json() + "\n", encoding="utf-8")
        return md, js


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def summary_table(reports: list[Report]) -> str:
    """Markdown table of the counts of several reports, one row per backend.

    Examples
    --------
    >>> from agnograd.conformance import Report, Result, summary_table
    >>> report = Report("numpy", "", "float64", 5, [Result("exp", "dlpack", "skip", "n/a")])
    >>> print(summary_table([report]))
    | backend | dtype | pass | fail | xfail | xpass | skip |
    |---|---|---|---|---|---|---|
    | numpy | float64 | 0 | 0 | 0 | 0 | 1 |
    """
    lines = [
        "| backend | dtype | " + " | ".join(STATUSES) + " |",
        "|---" * (len(STATUSES) + 2) + "|",
    ]
    for report in reports:
        counts = report.counts()
        lines.append(
            f"| {report.label} | {report.dtype} | "
            + " | ".join(str(counts[s]) for s in STATUSES)
            + " |"
        )
    return "\n".join(lines)
