"""Where finished runs go when they are redone: ``<experiment>/superseded/<identity_hash>/``.

A run folder that a rerun would overwrite (its inputs changed, or a spending cap ended it and the
cap was raised) is moved here first, whole, under the identity hash its run.json carries, and
keeps its ``<condition>/<task>/r<k>`` path below that. Nothing is deleted. A second move of the
same run under the same hash gets a numbered suffix (``r1.2``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

__all__ = [
    "SUPERSEDED",
    "forget_later_stages",
    "forget_summaries",
    "move_to_superseded",
    "run_identity_hash",
    "superseded_folder",
]

SUPERSEDED = "superseded"


def run_identity_hash(run_dir: Path) -> str | None:
    try:
        value = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = value.get("identity_hash") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def superseded_folder(experiment_dir: Path, identity_hash: str | None) -> Path:
    name = (identity_hash or "sha256:unknown").removeprefix("sha256:")
    return Path(experiment_dir) / SUPERSEDED / name


def move_to_superseded(experiment_dir: Path, run_dir: Path) -> Path:
    """Move a run folder under superseded/<its identity hash>/; returns where it went."""
    run_dir = Path(run_dir)
    relative = run_dir.resolve().relative_to(Path(experiment_dir).resolve())
    target = superseded_folder(experiment_dir, run_identity_hash(run_dir)) / relative
    candidate, number = target, 1
    while candidate.exists():
        number += 1
        candidate = target.with_name(f"{target.name}.{number}")
    candidate.parent.mkdir(parents=True, exist_ok=True)
    os.replace(run_dir, candidate)
    return candidate


# What the render, score and annotate stages make of a run's session.
_LATER_STAGE_OUTPUTS = ("render", "audit.json", "metrics.json", "inferred_tags.json")


def forget_later_stages(experiment_dir: Path, run_dir: Path) -> None:
    """Remove what the later stages made of a run whose session is to be run again, and the
    summaries over it: Snakemake regenerates a missing file only for a target that is out of date,
    so without this the run would not be redone."""
    for name in _LATER_STAGE_OUTPUTS:
        path = Path(run_dir) / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    forget_summaries(experiment_dir, run_dir)


def forget_summaries(experiment_dir: Path, run_dir: Path) -> None:
    """Remove the condition's and the task's summaries over a run (it need not exist any more)."""
    condition, task = Path(run_dir).resolve().relative_to(Path(experiment_dir).resolve()).parts[:2]
    for summary in (f"{condition}/summary.csv", f"by-task/{task}.csv"):
        (Path(experiment_dir) / summary).unlink(missing_ok=True)
