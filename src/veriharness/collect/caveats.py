"""The facts about a set of runs a reader must not miss: some ran against the offline model (a
stand-in, not a model result), or with uncommitted inputs or harness code, how the scored runs
were scored (a mix of scorers makes their scores incomparable), and drift: the runs did not all
see the same model (as the agent's provider or a CallMLLM profile answered), claude CLI or
VeriHarness version and commit, each value counted per condition. Counted from the runs table
and worded once, for comparison.md and the report's first screen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["DRIFT_SOURCES", "drift", "drift_line", "run_caveats", "caveat_lines", "scoring_line"]


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


# What a run saw that may change between its sessions: (what, the runs column). A list column
# (the models that answered one run) is one value per run, its items joined.
DRIFT_SOURCES = (
    ("the agent model (as its provider answered)", "agent_response_models"),
    ("the claude CLI version", "claude_version"),
    ("the VeriHarness version", "harness_version"),
    ("the VeriHarness commit", "harness_commit"),
)
_MLLM_MODELS = "mllm_response_models"


def _value(item: object) -> str | None:
    """One run's value of a drift column: a string, a list's items joined, or None."""
    if item is None or item is pd.NA or (isinstance(item, float) and pd.isna(item)):
        return None
    if isinstance(item, str):
        return item or None
    joined = " + ".join(sorted(str(v) for v in item))  # type: ignore[attr-defined]
    return joined or None


def _profile_values(runs: pd.DataFrame) -> dict[str, list[str | None]]:
    """Per CallMLLM profile: each run's answered model(s) for it (None: no answered call)."""
    per_run: list[dict[str, list[str]]] = []
    for item in runs[_MLLM_MODELS] if _MLLM_MODELS in runs else []:
        models: dict[str, list[str]] = {}
        if _value(item) is not None:
            for entry in item:
                profile, _, model = str(entry).partition(": ")
                models.setdefault(profile, []).append(model)
        per_run.append(models)
    profiles = sorted({p for models in per_run for p in models})
    return {
        p: [" + ".join(sorted(models[p])) if p in models else None for models in per_run]
        for p in profiles
    }


def drift(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Each drift source whose runs (sessions only) saw more than one value: what it is, and
    value -> condition -> runs (every condition of `runs` named, 0 included). Runs that
    recorded no value are not counted."""
    sessions = runs
    if "answer_source" in runs:
        sessions = runs[runs["answer_source"].ne("external").fillna(True).astype(bool)]
    conditions = sorted(str(c) for c in sessions["condition"].dropna().unique())
    sources: list[tuple[str, list[str | None]]] = [
        (what, [_value(v) for v in sessions[column]])
        for what, column in DRIFT_SOURCES
        if column in sessions
    ]
    sources[1:1] = [
        (f"the model of CallMLLM profile `{p}` (as its provider answered)", values)
        for p, values in _profile_values(sessions).items()
    ]
    found = []
    for what, values in sources:
        frame = pd.DataFrame({"condition": sessions["condition"].to_numpy(), "value": values})
        frame = frame.dropna(subset=["value"])
        if frame["value"].nunique() < 2:
            continue
        counts = {
            str(value): {c: int((group["condition"] == c).sum()) for c in conditions}
            for value, group in frame.groupby("value", sort=True)
        }
        totals = {c: sum(per[c] for per in counts.values()) for c in conditions}
        shares = {
            tuple(round(per[c] / totals[c], 9) for c in conditions if totals[c])
            for per in counts.values()
        }
        balanced = all(len(set(share)) <= 1 for share in shares)
        found.append({"what": what, "counts": counts, "same_mix": balanced})
    return found


def drift_line(item: Mapping[str, Any]) -> str:
    """One drift source worded: each value with its runs per condition."""
    values = "; ".join(
        f"`{value}` (" + ", ".join(f"{condition} {n} run(s)" for condition, n in per.items()) + ")"
        for value, per in item["counts"].items()
    )
    mix = (
        "the conditions saw the same mix of them"
        if item.get("same_mix")
        else "the conditions saw different mixes of them, so a difference between the "
        "conditions may come from it, not from the treatment"
    )
    what = str(item["what"]).removeprefix("the ")
    return f"DRIFT: the runs did not all see the same {what}: {values}; {mix}."


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
        "drift": drift(runs),
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
    lines += [drift_line(item) for item in counts.get("drift") or []]
    if _mixed(counts):
        lines.append(
            "MIXED SCORING: the scored runs were not all scored alike, so their scores are not "
            "comparable with one another. " + scoring_line(counts)
        )
    return lines
