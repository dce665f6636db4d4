"""`metrics.json`: the fidelity scores `score` wrote for the run's render.

`status` is `ok`, `no_render` (the render had nothing to score: every metric null, and
`details.render_status` says why) or `score_failed` (`details.reason` names the problem).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from veriharness.runfolder._files import JsonFile

__all__ = ["METRICS", "NAME", "MetricsRecord", "read_metrics"]

NAME = "metrics.json"


class MetricsRecord(BaseModel):
    kind: Literal["metrics"] = "metrics"
    scorer_version: str
    status: Literal["ok", "no_render", "score_failed"]
    metrics: dict[str, float | None]
    details: dict[str, Any]
    versions: dict[str, str | None]


METRICS = JsonFile(NAME, MetricsRecord)


def read_metrics(run_dir: Path, errors: list[str]) -> MetricsRecord | None:
    """The run's scores, leniently (`_files`)."""
    return METRICS.read(run_dir, errors)
