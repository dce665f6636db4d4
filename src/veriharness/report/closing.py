"""What the main Snakemake job prints last (the workflow's `onsuccess`): what differs from the
analysis registered before the first session (comparison.json's `registration`), the first line
of each compared pair's verdict and where comparison.md and the report are.

The verdict is read from comparison.json (`pairs[].verdict`, the lines comparison.md's verdict is
made of), so comparison.md's wording may change freely; a comparison.json that cannot be read is
named, never raised. An invocation whose targets did not bring the comparison or the report up to
date (one run, one condition's summary) says which command does instead of showing an older one.
"""

from __future__ import annotations

import atexit
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["REFRESH_ALL", "closing_lines", "end_with", "refreshed"]

REFRESH_ALL = "snakemake --cores 4 all"
_COMPARISON = ("comparison.csv", "comparison.md", "comparison.json")


def refreshed(targets: Iterable[str], exp_dir: Path) -> tuple[bool, bool]:
    """Whether an invocation with these targets (none: the default, `all`) brought the
    comparison and the report up to date."""
    named = [str(t) for t in targets] or ["all"]
    comparison = report = False
    pages = Path(exp_dir) / "report"
    compared = [Path(exp_dir) / name for name in _COMPARISON]
    for target in named:
        path = Path(target)
        if target == "all" or path == pages or pages in path.parents:
            comparison = report = True
        elif target == "analysis" or path in compared:
            comparison = True
    return comparison, report


def _first_line(value: Any) -> str | None:
    lines = value if isinstance(value, list) else [value]
    for line in lines:
        if isinstance(line, str) and line.strip():
            return line.strip().splitlines()[0].replace("`", "")
    return None


def _registration(summary: Path) -> list[str]:
    """What differs from the analysis registered before the first session (comparison.json's
    `registration`), first."""
    try:
        found = json.loads(summary.read_text(encoding="utf-8")).get("registration")
    except (OSError, ValueError, AttributeError):
        return []
    return [line for line in found if isinstance(line, str)] if isinstance(found, list) else []


def _verdicts(summary: Path) -> list[str]:
    """One line per compared pair: its verdict's first sentence, or why there is none."""
    try:
        pairs = json.loads(summary.read_text(encoding="utf-8"))["pairs"]
        if not isinstance(pairs, list):
            raise TypeError(f"field 'pairs' is a {type(pairs).__name__}, expected a list")
    except (OSError, ValueError, KeyError, TypeError) as error:
        return [f"Verdict: {summary} cannot be read ({error}); read comparison.md"]
    lines = [line.replace("`", "") for line in _registration(summary)]
    for pair in pairs:
        pair = pair if isinstance(pair, dict) else {}
        line = _first_line(pair.get("verdict")) or "none stated; read comparison.md"
        named = f", {pair['treatment']} vs {pair['baseline']}" if len(pairs) > 1 else ""
        lines.append(f"Verdict{named}: {line}")
    return lines


def closing_lines(
    exp_dir: Path, *, comparison: bool, report: bool, compares: bool = True
) -> list[str]:
    """The lines to end on: the verdicts and the paths of comparison.md and the report, those that
    this invocation brought up to date (`comparison`, `report`), and otherwise the command that
    does. `compares`: the experiment compares conditions (its `compare` is not null)."""
    experiment = Path(exp_dir)
    summary = experiment / "comparison.json"
    lines: list[str] = []
    if comparison and compares:
        if summary.is_file():
            lines += _verdicts(summary)
        lines.append(f"Comparison: {experiment / 'comparison.md'}")
    elif comparison:
        lines.append(f"Tables: {experiment / 'tables'} (no comparison: `compare` is null)")
    if report and (experiment / "report" / "index.html").is_file():
        lines.append(f"Report: {experiment / 'report' / 'index.html'}")
    if not report:
        what = "report" if comparison else "comparison and the report"
        verb = "is" if comparison else "are"
        lines.append(f"The {what} {verb} refreshed by `{REFRESH_ALL}` (not by these targets)")
    return lines


def _print(lines: list[str]) -> None:
    print("\n".join(lines), file=sys.stderr, flush=True)


def end_with(lines: list[str]) -> None:
    """Print `lines` when the process ends: after Snakemake's own last line ("Complete log(s)"),
    which follows the `onsuccess` hook, and on the stream Snakemake logs to."""
    if lines:
        atexit.register(_print, lines)
