"""`audit.json`: one flag per artifact rule `score` checks, with its evidence and the thresholds
it was checked with (a flag is null when its check could not run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from veriharness.runfolder._files import JsonFile

__all__ = ["AUDIT", "NAME", "AuditRecord", "AuditThresholds", "read_audit"]

NAME = "audit.json"


class AuditThresholds(BaseModel):
    model_config = ConfigDict(frozen=True)
    phash_max_distance: int = 10
    large_image_share: float = 0.5
    text_in_images_min_words: int = 3
    text_image_min_width: int = 40
    text_image_min_height: int = 12
    text_word_min_confidence: float = 60.0
    pinned_share: float = 0.5
    text_volume_ratio: float = 0.5
    max_image_pixels: int = 50_000_000
    max_image_bytes: int = 64 * 1024 * 1024


class AuditRecord(BaseModel):
    kind: Literal["audit"] = "audit"
    flags: dict[str, bool | None]  # None: the check could not run (no usable render)
    evidence: dict[str, dict[str, Any]]
    thresholds: AuditThresholds


AUDIT = JsonFile(NAME, AuditRecord)


def read_audit(run_dir: Path, errors: list[str]) -> AuditRecord | None:
    """The run's audit, leniently (`_files`)."""
    return AUDIT.read(run_dir, errors)
