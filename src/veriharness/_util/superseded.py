"""Where finished runs go when they are redone: ``<experiment>/superseded/<identity_hash>/``.

A run folder that a rerun would overwrite (its inputs changed, or a spending cap ended it and the
cap was raised) is moved here first, whole, under the identity hash its run.json carries, and
keeps its ``<condition>/<task>/r<k>`` path below that. Nothing is deleted. A second move of the
same run under the same hash gets a numbered suffix (``r1.2``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["SUPERSEDED", "superseded_folder", "move_to_superseded", "run_identity_hash"]

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
