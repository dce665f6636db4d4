"""What a score is of, apart from the metric code: the versions metrics.json records and the
metrics a run has. Cheap to import (no image or OCR code), so the trajectory stage can check
whether a run's own score stands for a snapshot before it loads the scorer (`trajectory`)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from veriharness._util import tesseract_cache
from veriharness._util.harness import package_version, source_digest
from veriharness._util.programs import MissingTool
from veriharness.experiment.analysis import FIDELITY_MEASURES

if TYPE_CHECKING:
    from veriharness.experiment.config import TaskSpec

__all__ = ["METRIC_NAMES", "OCR_VERSION", "metric_names", "scorer_versions", "static_metric_names"]

# The reference's OCR pipeline (score.metrics.ocrwords): part of every cached word list's name.
OCR_VERSION = "ocr-2x-grey-contrast-panel-merged-v4"

# Named once, where the analysis declares each metric's direction and floor.
METRIC_NAMES = tuple(column.removeprefix("metric_") for column in FIDELITY_MEASURES)


@cache
def scorer_versions() -> dict[str, str | None]:
    """What scored: the VeriHarness version and source digest, the OCR pipeline's version and
    the tesseract that read the words (recorded, never hashed)."""
    try:
        tesseract: str | None = tesseract_cache.version_line()
    except (OSError, MissingTool) as error:
        tesseract = f"unavailable: {error}"
    return {
        "veriharness": package_version(),
        "veriharness_source_sha256": source_digest(),
        "ocr": OCR_VERSION,
        "tesseract": tesseract,
    }


def metric_names(task: TaskSpec | None) -> tuple[str, ...]:
    """The metrics a run of `task` has: an interaction or viewport summary only where the task
    states one, so a static experiment's metrics (and its comparison's families) stay as they
    were (P-42)."""
    applies = {"interactions_stated": bool(task and task.interactions),
               "viewports_stated": bool(task and task.viewports)}  # fmt: skip
    return tuple(
        name
        for name in METRIC_NAMES
        if (when := FIDELITY_MEASURES[f"metric_{name}"].applies_when) is None or applies[when]
    )


def static_metric_names() -> tuple[str, ...]:
    """The metrics of a `static_only` score (an answer snapshot's): a static task's."""
    return metric_names(None)
