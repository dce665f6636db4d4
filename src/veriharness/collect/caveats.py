"""The facts about a set of runs a reader must not miss: some ran against the offline model (a
stand-in, not a model result), or with uncommitted inputs or harness code, and how the scored runs
were scored (a mix of scorers makes their scores incomparable). Counted from the runs table and
worded once, for comparison.md and the report's first screen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["run_caveats", "caveat_lines", "scoring_line"]


def _flags(runs: pd.DataFrame, column: str) -> pd.Series:
    if column not in runs:
        return pd.Series(False, index=runs.index)
    return runs[column].fillna(False).astype(bool)


def _scorings(runs: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Scored runs per scorer version, and per block detection among those whose block metrics
    were computed (a task without reference.html has none), e.g. {"scorer": {"2": 12},
    "block detection": {"dom": 10}}."""
    if "metrics_status" not in runs:
        return {}
    scored = runs[runs["metrics_status"] == "ok"]

    def counts(column: str, missing: str | None) -> dict[str, int]:
        values = scored[column] if column in scored else pd.Series(None, index=scored.index)
        values = values.astype("string")
        values = values.dropna() if missing is None else values.fillna(missing)
        return {str(k): int(n) for k, n in sorted(values.value_counts().items())}

    return {
        "scorer": counts("scorer_version", "unrecorded"),
        "block detection": counts("block_detection", None),
    }


def run_caveats(runs: pd.DataFrame) -> dict[str, Any]:
    """How many runs are stand-ins (offline) or ran with uncommitted inputs or harness code, out
    of the runs that had a session (an imported answer, `answer_source` external, had none, so it
    is counted apart), and how many scored runs each scorer version and block detection scored."""
    uncommitted = _flags(runs, "uncommitted") | _flags(runs, "harness_dirty")
    imported = (
        runs["answer_source"].eq("external").fillna(False).astype(bool)
        if "answer_source" in runs
        else pd.Series(False, index=runs.index)
    )
    return {
        "runs_total": int((~imported).sum()),
        "runs_imported": int(imported.sum()),
        "runs_offline": int(_flags(runs, "offline").sum()),
        "runs_uncommitted": int(uncommitted.sum()),
        "scorings": _scorings(runs),
    }


def scoring_line(counts: Mapping[str, Any]) -> str:
    """How the scored runs were scored, as one sentence."""
    scorings: dict[str, dict[str, int]] = counts.get("scorings") or {}
    if not any(scorings.values()):
        return "No run was scored."
    parts = [
        f"{what} " + ", ".join(f"{value} ({n} runs)" for value, n in per.items())
        for what, per in scorings.items()
        if per
    ]
    return "Scored by " + "; ".join(parts) + "."


def _mixed(counts: Mapping[str, Any]) -> bool:
    return any(len(per) > 1 for per in (counts.get("scorings") or {}).values())


def caveat_lines(counts: Mapping[str, Any]) -> list[str]:
    """The warnings, one line each (empty when none applies)."""
    lines = []
    total = counts.get("runs_total", 0)
    imported = counts.get("runs_imported", 0)
    apart = (
        f" (The {imported} imported answers, external:<name>, ran no session and are not counted.)"
        if imported
        else ""
    )
    if counts.get("runs_offline"):
        lines.append(
            f"OFFLINE: {counts['runs_offline']} of {total} session runs ran against the embedded "
            "offline model, a scripted stand-in. Their numbers test the pipeline; they are not a "
            "result of any model." + apart
        )
    if counts.get("runs_uncommitted"):
        lines.append(
            f"UNCOMMITTED: {counts['runs_uncommitted']} of {total} session runs ran with "
            "uncommitted inputs or VeriHarness code (allow_uncommitted); their git commit does "
            "not hold what they ran (see git_dirty_files in their run.json)." + apart
        )
    if _mixed(counts):
        lines.append(
            "MIXED SCORING: the scored runs were not all scored alike, so their scores are not "
            "comparable with one another. " + scoring_line(counts)
        )
    return lines
