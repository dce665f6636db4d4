"""Which runs an analysis counts, and the value each counted run gives a measure.

Intention to treat: every run assigned to a condition is analysed in that condition, whatever
the agent did with it; a run leaves the analysis only for a reason that is not the agent's doing,
and every such run is listed with its reason. The side each status falls on (docs/metrics.md has
the table):

- counted: `ok`; `failed` (the session itself failed on what the agent sent: `classify` turns
  failures of the provider, the sandbox or the CLI into `infra_error`); `timeout`, `max_turns`
  and `resource_limit` (the agent's use of its limits: time, turns, memory, processes, disk);
  `missing_answer` (no answer.html); `render_failed` at a step the page itself broke (load,
  capture, dom, full_capture, memory).
- excluded: `infra_error` (after its retries), `budget_exhausted` and `not_started` (the spending
  cap, the monitor's stop, or never run), `render_failed` in the renderer itself (browser,
  internal), `score_failed` and `collect_failed` (a stage of ours crashed), `missing` (no run
  folder), and runs that are superseded, stale (an older definition) or outside the matrix.

A counted run's value for a fidelity measure is its score when its answer was scored, else the
measure's floor (`experiment.analysis.FIDELITY_MEASURES`): 0 for a similarity, 1 for MAE. A run
whose audit raised one of `analysis.floor_flags` also gets the floor: its score would measure a
pasted screenshot or an image of text, not a page. The per-protocol population is the counted runs
whose answer was scored, valued the same way; it is reported beside the ITT analysis as a
sensitivity analysis, never instead of it. Process measures keep their recorded values (a
description of what the agent did), missing where nothing was recorded.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
import pandas as pd

from veriharness.experiment.analysis import FIDELITY_MEASURES, AnalysisSettings

__all__ = [
    "COUNTED_STATUSES",
    "EXCLUDED_STATUSES",
    "PAGE_RENDER_STEPS",
    "Populations",
    "PopulationError",
    "populations",
]

Population = Literal["itt", "per_protocol"]

COUNTED_STATUSES = ("ok", "failed", "timeout", "max_turns", "resource_limit", "missing_answer")
EXCLUDED_STATUSES = {
    "infra_error": "the infrastructure failed the session (after its retries)",
    "budget_exhausted": "ended by the spending cap",
    "not_started": "never started (the spending cap, or not run yet)",
    "score_failed": "the score stage crashed",
    "collect_failed": "collect could not read the run",
    "missing": "no run folder",
}
# render.json failed_step values that the page caused; the others are the renderer's own.
PAGE_RENDER_STEPS = ("load", "capture", "dom", "full_capture", "memory")
_KEYS = ["condition", "task", "replicate"]


class PopulationError(ValueError):
    """A run whose status no rule places: the table must be extended, not guessed."""


class Populations(NamedTuple):
    itt: pd.DataFrame  # counted runs, fidelity measures valued by the ITT rule, plus `valued_as`
    per_protocol: pd.DataFrame  # the counted runs whose answer was scored
    excluded: pd.DataFrame  # condition, task, replicate, status, reason, cause


def _exclusion(
    runs: pd.DataFrame, cells: dict[str, dict[str, str]] | None
) -> tuple[pd.Series, pd.Series]:
    """Why each run leaves the analysis, and a short cause to count such runs by (both NA: it
    is counted). Checked from the least to the most basic reason; a later one replaces an
    earlier one."""
    status = (
        runs["status"].astype("object") if "status" in runs else pd.Series("", index=runs.index)
    )
    unknown = sorted(
        set(status.dropna()) - set(COUNTED_STATUSES) - set(EXCLUDED_STATUSES) - {"render_failed"}
    )
    if unknown:
        raise PopulationError(
            f"run status(es) {unknown} have no analysis rule; add them to "
            "collect/populations.py and docs/metrics.md"
        )
    detail = runs["reason"].fillna("").astype(str) if "reason" in runs else ""
    reason = pd.Series(pd.NA, index=runs.index, dtype="object")
    cause = pd.Series(pd.NA, index=runs.index, dtype="object")

    def mark(where: pd.Series, why: object, named: str) -> None:
        nonlocal reason, cause
        reason = reason.mask(where, why)
        cause = cause.mask(where, named)

    for name, why in EXCLUDED_STATUSES.items():
        mark(status == name, f"{name}: {why}; " + detail, name)
    stopped_by = runs["stopped_by"] if "stopped_by" in runs else pd.Series(pd.NA, index=runs.index)
    budget = stopped_by.eq("budget").fillna(False)
    capped = "not started: the spending cap was reached"
    mark((status == "not_started") & budget, capped, "not_started")
    known = "not started: the monitor's answer was known (stopped_early, analysis.monitor.stop)"
    mark((status == "not_started") & stopped_by.eq("stopped_early").fillna(False), known,
         "stopped_early")  # fmt: skip
    ended = "ended by the spending cap (budget_exhausted)"
    mark(status == "budget_exhausted", ended, "budget_exhausted")
    step = (
        runs["render_failed_step"]
        if "render_failed_step" in runs
        else pd.Series(pd.NA, index=runs.index)
    )
    ours = (status == "render_failed") & ~step.isin(PAGE_RENDER_STEPS)
    mark(ours, "render_failed in the renderer itself; " + detail, "render_failed (the renderer's)")
    if "superseded" in runs:
        superseded = runs["superseded"].fillna(False).astype(bool)
        mark(superseded, "superseded (moved aside when its run was redone)", "superseded")
    if cells is not None and "identity_hash" in runs:
        expected = pd.Series(
            [cells.get(c, {}).get(t) for c, t in zip(runs["condition"], runs["task"], strict=True)],
            index=runs.index,
            dtype="object",
        )
        stale = runs["identity_hash"].notna() & expected.notna()
        stale &= runs["identity_hash"] != expected
        mark(
            stale,
            "identity_hash differs from experiment.json (a run of an older definition)",
            "stale (an older definition)",
        )
    if "in_matrix" in runs:
        outside = runs["in_matrix"].fillna(True) == False  # noqa: E712 - a nullable column
        mark(outside, "not in the experiment's matrix", "outside the matrix")
    return reason.map(lambda r: r.rstrip("; ") if isinstance(r, str) else r), cause


def _flagged(runs: pd.DataFrame, flags: tuple[str, ...]) -> pd.Series:
    """The first floor flag each run's audit raised ("" for none)."""
    raised = pd.Series("", index=runs.index, dtype="object")
    for flag in reversed(flags):
        column = f"audit_{flag}"
        if column in runs:
            raised = raised.mask(runs[column].fillna(False).astype(bool), flag)
    return raised


def _scored(runs: pd.DataFrame) -> pd.Series:
    """Whether the run's answer was scored (it has at least one fidelity value)."""
    present = [m for m in FIDELITY_MEASURES if m in runs]
    if not present:
        return pd.Series(False, index=runs.index)
    values = runs[present].apply(pd.to_numeric, errors="coerce")
    return values.notna().any(axis=1)


def populations(
    runs: pd.DataFrame,
    settings: AnalysisSettings,
    cells: dict[str, dict[str, str]] | None = None,
) -> Populations:
    """The ITT and per-protocol populations of `runs` and the list of excluded runs (see the
    module notes). `cells` maps condition -> task -> identity hash as experiment.json records it."""
    reason, cause = _exclusion(runs, cells)
    counted = runs.loc[reason.isna()].copy()
    excluded = runs.loc[reason.notna(), _KEYS].assign(
        status=runs.loc[reason.notna(), "status"] if "status" in runs else pd.NA,
        reason=reason.dropna(),
        cause=cause.dropna(),
    )
    scored = _scored(counted)
    flag = _flagged(counted, settings.floor_flags)
    counted["valued_as"] = np.where(
        flag != "",
        "floor: audit flag " + flag,
        np.where(scored, "scored", "floor: no scored answer"),
    )
    for measure, spec in FIDELITY_MEASURES.items():
        if measure not in counted:
            continue
        values = pd.to_numeric(counted[measure], errors="coerce").astype(float)
        values = values.where(scored & (flag == ""), spec.floor)
        if spec.applies_when is not None:
            # A task that states no interaction has no Implement Rate, not the floor's.
            stated = (
                pd.to_numeric(counted[spec.applies_when], errors="coerce").fillna(0)
                if spec.applies_when in counted
                else pd.Series(0, index=counted.index)
            )
            values = values.where(stated > 0)
        counted[measure] = values
    per_protocol = counted.loc[scored]
    return Populations(counted, per_protocol, excluded.reset_index(drop=True))
