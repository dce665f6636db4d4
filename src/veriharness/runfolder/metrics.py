"""`metrics.json`: the fidelity scores `score` wrote for the run's render.

`status` is `ok`, `no_render` (the render had nothing to score: every metric null, and
`details.render_status` says why) or `score_failed` (`details.reason` names the problem).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from veriharness.runfolder._files import JsonFile

__all__ = [
    "METRICS",
    "NAME",
    "InteractionScore",
    "MetricsRecord",
    "ViewportScore",
    "read_metrics",
]

NAME = "metrics.json"


class InteractionScore(BaseModel):
    """One interaction of an interactive task (P-41): whether the answer implements it (its
    trigger exists and acting on it changed the page) and its after-state against the
    reference's, in Interaction2Code's state and region metrics and the existing suite's."""

    id: str
    implemented: bool
    trigger_matches: int | None
    state_ssim: float | None = None
    state_text: float | None = None
    region_ssim: float | None = None
    region_text: float | None = None
    trigger_position: float | None = None
    region_position: float | None = None
    state_mae: float | None = None
    state_block_match: float | None = None
    state_text_similarity: float | None = None
    state_position: float | None = None
    state_color: float | None = None


class ViewportScore(BaseModel):
    """One extra viewport of a responsive task: the answer's render there against the
    reference's."""

    name: str
    width: int
    height: int
    ssim: float | None = None
    mae: float | None = None
    block_match: float | None = None
    text_similarity: float | None = None
    position: float | None = None
    color: float | None = None


class MetricsRecord(BaseModel):
    kind: Literal["metrics"] = "metrics"
    scorer_version: str
    status: Literal["ok", "no_render", "score_failed"]
    metrics: dict[str, float | None]
    details: dict[str, Any]
    versions: dict[str, str | None]
    # How many interactions and extra viewports the task states: the run-level interaction
    # and viewport metrics apply (and take their floor) only where these are above 0.
    interactions_stated: int = 0
    viewports_stated: int = 0
    interactions: list[InteractionScore] = []
    viewports: list[ViewportScore] = []


METRICS = JsonFile(NAME, MetricsRecord)


def read_metrics(run_dir: Path, errors: list[str]) -> MetricsRecord | None:
    """The run's scores, leniently (`_files`)."""
    return METRICS.read(run_dir, errors)
