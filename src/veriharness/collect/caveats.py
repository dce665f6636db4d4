"""The two facts about a set of runs a reader must not miss: some ran against the offline model
(a stand-in, not a model result), or with uncommitted inputs or harness code. Counted from the
runs table and worded once, for comparison.md and the report's first screen."""

from __future__ import annotations

import pandas as pd

__all__ = ["run_caveats", "caveat_lines"]


def _flags(runs: pd.DataFrame, column: str) -> pd.Series:
    if column not in runs:
        return pd.Series(False, index=runs.index)
    return runs[column].fillna(False).astype(bool)


def run_caveats(runs: pd.DataFrame) -> dict[str, int]:
    """How many runs are stand-ins (offline) or ran with uncommitted inputs or harness code."""
    uncommitted = _flags(runs, "uncommitted") | _flags(runs, "harness_dirty")
    return {
        "runs_total": int(len(runs)),
        "runs_offline": int(_flags(runs, "offline").sum()),
        "runs_uncommitted": int(uncommitted.sum()),
    }


def caveat_lines(counts: dict[str, int]) -> list[str]:
    """The warnings, one line each (empty when none applies)."""
    lines = []
    total = counts.get("runs_total", 0)
    if counts.get("runs_offline"):
        lines.append(
            f"OFFLINE: {counts['runs_offline']} of {total} runs ran against the embedded offline "
            "model, a scripted stand-in. Their numbers test the pipeline; they are not a result "
            "of any model."
        )
    if counts.get("runs_uncommitted"):
        lines.append(
            f"UNCOMMITTED: {counts['runs_uncommitted']} of {total} runs ran with uncommitted "
            "inputs or VeriHarness code (allow_uncommitted); their git commit does not hold "
            "what they ran (see git_dirty_files in their run.json)."
        )
    return lines
