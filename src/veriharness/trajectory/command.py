"""Score each answer snapshot of a run as the render and score stages score one answer.

Each snapshot is laid out from its kept files (`runfolder.snapshots.materialize`, which checks
every file's digest), rendered at the reference's size, and scored with `static_only`: the
pixel, text and block metrics, not the interactions and extra viewports, which only the final
answer's render replays. A snapshot whose files equal an earlier one's is scored once and named
with it (`scored_as`). A snapshot that cannot be laid out (a kept file altered or missing) is
named `tampered`, with no metrics; a failure while rendering or scoring one is recorded on it
and the others go on.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from veriharness.runfolder.render import RENDER
from veriharness.runfolder.snapshots import (
    TRAJECTORY,
    SnapshotEntry,
    SnapshotScore,
    SnapshotTampered,
    TrajectoryRecord,
    materialize,
    read_snapshots,
)
from veriharness.score import SCORER_VERSION
from veriharness.score.command import ScoreJob, score_run
from veriharness.score.metrics.ocrwords import machine_words_cache

__all__ = ["TRAJECTORY_DIR", "RenderOne", "score_trajectory"]

TRAJECTORY_DIR = "trajectory"
# Renders one answer folder at the reference's size into an output folder; returns its status.
RenderOne = Callable[[Path, Path, Path], str]


def score_trajectory(
    run_dir: Path,
    task_dir: Path,
    render_one: RenderOne,
    block_detection: Literal["dom", "design2code"] = "dom",
) -> TrajectoryRecord:
    """Render and score every snapshot of `run_dir`; write trajectory.json and return it."""
    errors: list[str] = []
    entries = read_snapshots(run_dir, errors)
    for error in errors:
        print(f"veriharness score-trajectory: {error}", file=sys.stderr)
    out_root = run_dir / TRAJECTORY_DIR
    if out_root.exists():
        shutil.rmtree(out_root)
    scored: dict[str, int] = {}
    scores: list[SnapshotScore] = []
    for entry in entries:
        first = scored.get(entry.answer_digest or "")
        if first is not None:
            scores.append(_same_as(entry, scores[first - 1], first))
            continue
        score = _score_one(run_dir, task_dir, entry, out_root / str(entry.n), render_one,
                           block_detection)  # fmt: skip
        if score.status not in ("tampered", "score_failed") and entry.answer_digest:
            scored[entry.answer_digest] = entry.n or 0
        scores.append(score)
    record = TrajectoryRecord(scorer_version=SCORER_VERSION, snapshots=scores)
    TRAJECTORY.write(run_dir, record)
    return record


def _same_as(entry: SnapshotEntry, earlier: SnapshotScore, n: int) -> SnapshotScore:
    return earlier.model_copy(update={"n": entry.n, "scored_as": n})


def _score_one(
    run_dir: Path,
    task_dir: Path,
    entry: SnapshotEntry,
    out: Path,
    render_one: RenderOne,
    block_detection: Literal["dom", "design2code"],
) -> SnapshotScore:
    n = entry.n or 0
    if entry.answer_sha256 is None:
        return SnapshotScore(n=n, answer_digest=entry.answer_digest, status="no_answer")
    answer = out / "answer"
    try:
        materialize(run_dir, entry, answer)
    except SnapshotTampered as tampered:
        shutil.rmtree(out, ignore_errors=True)
        return SnapshotScore(
            n=n, answer_digest=entry.answer_digest, status="tampered", error=str(tampered)
        )
    render_dir = out / "render"
    try:
        render_one(answer, task_dir / "reference.png", render_dir)
        job = ScoreJob(
            render_dir=render_dir,
            answer_dir=answer,
            task_dir=task_dir,
            out_dir=out,
            block_detection=block_detection,
            static_only=True,
        )
        _, metrics = score_run(job, ocr_cache=machine_words_cache())
    except Exception as error:  # noqa: BLE001 - recorded on the snapshot; the others go on
        return SnapshotScore(
            n=n,
            answer_digest=entry.answer_digest,
            status="score_failed",
            error=f"{type(error).__name__}: {error}",
        )
    finally:
        shutil.rmtree(answer, ignore_errors=True)  # its bytes stay in snapshots/blobs/
    render = RENDER.read_quietly(out)  # out/render/render.json; metrics.json stays beside it
    return SnapshotScore(
        n=n,
        answer_digest=entry.answer_digest,
        status=metrics.status,
        render_status=None if render is None else render.status,
        metrics=dict(metrics.metrics),
    )
