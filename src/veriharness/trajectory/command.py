"""Score each answer snapshot of a run as the render and score stages score one answer.

Each snapshot is laid out from its kept files (`runfolder.snapshots.materialize`, which checks
every file's digest), rendered at the reference's size, and scored with `static_only`: the
pixel, text and block metrics, not the interactions and extra viewports, which only the final
answer's render replays. A snapshot whose files equal an earlier one's is scored once and named
with it (`scored_as`). A snapshot that cannot be laid out (a kept file altered or missing) is
named `tampered`, with no metrics; a failure while rendering or scoring one is recorded on it
and the others go on.

A snapshot whose files are exactly the run's answer (the last one always is) takes the run's own
render and score instead of a render and score of its own (`reused_final`): the static metrics
are a function of render.png, dom.json, the reference and the scorer, and the run's metrics.json
names the digests of the first three and the versions of the last. Only when every one of them
matches, and the final score is not `score_failed`, is it reused; otherwise the snapshot is
rendered and scored as any other.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from veriharness._util.hashing import sha256_bytes, sha256_file
from veriharness.runfolder.metrics import METRICS, MetricsRecord
from veriharness.runfolder.render import RENDER, RenderRecord
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
from veriharness.score.versions import scorer_versions, static_metric_names

__all__ = ["TRAJECTORY_DIR", "RenderOne", "ScoreOne", "score_trajectory"]

TRAJECTORY_DIR = "trajectory"
# Renders one answer folder at the reference's size into an output folder; returns its status.
RenderOne = Callable[[Path, Path, Path], str]
# Scores one render (render_dir, answer_dir, task_dir, out_dir, block detection) on the static
# metrics, as the score stage scores it with `static_only`; writes metrics.json into out_dir.
ScoreOne = Callable[[Path, Path, Path, Path, str], MetricsRecord]


def score_trajectory(
    run_dir: Path,
    task_dir: Path,
    render_one: RenderOne,
    score_one: ScoreOne,
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
    final = _FinalScore(run_dir, task_dir, block_detection)
    scored: dict[str, int] = {}
    scores: list[SnapshotScore] = []
    for entry in entries:
        first = scored.get(entry.answer_digest or "")
        if first is not None:
            scores.append(_same_as(entry, scores[first - 1], first))
            continue
        score = _score_one(run_dir, task_dir, entry, out_root / str(entry.n), render_one,
                           score_one, block_detection, final)  # fmt: skip
        if score.status not in ("tampered", "score_failed") and entry.answer_digest:
            scored[entry.answer_digest] = entry.n or 0
        scores.append(score)
    record = TrajectoryRecord(scorer_version=SCORER_VERSION, snapshots=scores)
    TRAJECTORY.write(run_dir, record)
    return record


def _same_as(entry: SnapshotEntry, earlier: SnapshotScore, n: int) -> SnapshotScore:
    return earlier.model_copy(update={"n": entry.n, "scored_as": n})


class _FinalScore:
    """The run's own render and score of its answer, for the snapshots whose files are the
    answer's; looked at once, when the first snapshot is laid out."""

    def __init__(self, run_dir: Path, task_dir: Path, block_detection: str) -> None:
        self.run_dir, self.task_dir, self.block_detection = run_dir, task_dir, block_detection
        self._looked = False
        self._files: dict[str, str] | None = None
        self._score: SnapshotScore | None = None

    def for_snapshot(self, entry: SnapshotEntry) -> SnapshotScore | None:
        """The final render and score as this snapshot's, when its files are the answer's."""
        if not self._looked:
            self._looked = True
            self._files = _answer_files(self.run_dir / "answer")
            if self._files is not None:
                self._score = self._usable()
        if self._score is None or entry.files != self._files:
            return None
        return self._score.model_copy(update={"n": entry.n or 0,
                                              "answer_digest": entry.answer_digest})  # fmt: skip

    def _usable(self) -> SnapshotScore | None:
        """The final score as a snapshot's, when it is exactly what a render and static score
        of the answer give: metrics.json of this scorer, its versions and block detection,
        scored from the render/ and reference.png that are there now."""
        render = _strict(RENDER.path(self.run_dir), RenderRecord)
        metrics = _strict(METRICS.path(self.run_dir), MetricsRecord)
        if render is None or metrics is None or metrics.status == "score_failed":
            return None
        details = metrics.details
        reference = self.task_dir / "reference.png"
        render_dir = self.run_dir / "render"
        same = (
            metrics.scorer_version == SCORER_VERSION
            and metrics.versions == scorer_versions()
            and details.get("render_status") == render.status
            and reference.is_file()
            and details.get("reference_png") == sha256_file(reference)
            and render.answer_sha256 == (self._files or {}).get("answer.html")
        )
        if same and metrics.status == "ok":
            blocks = details.get("blocks")
            same = (
                details.get("render_png") == _digest(render_dir / "render.png")
                and details.get("dom_json") == _digest(render_dir / "dom.json")
                and isinstance(blocks, dict)
                and blocks.get("detection", self.block_detection) == self.block_detection
            )
        names = static_metric_names()
        if not same or any(name not in metrics.metrics for name in names):
            return None
        return SnapshotScore(
            n=0,
            answer_digest=None,
            status=metrics.status,
            render_status=render.status,
            metrics={name: metrics.metrics[name] for name in names},
            reused_final=True,
        )


def _strict(path: Path, model: type[RenderRecord] | type[MetricsRecord]) -> Any:
    try:
        return model.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


def _digest(path: Path) -> str | None:
    return sha256_file(path) if path.is_file() else None


# Snakemake's mark of a folder output's time: an empty file it adds to answer/ after the session's
# job. Not the agent's, so no snapshot holds it.
_SNAKEMAKE_MARK = ".snakemake_timestamp"


def _answer_files(answer: Path) -> dict[str, str] | None:
    """Every file of the run's answer folder by its path there, with its digest, as a snapshot
    names them; None when the folder holds anything but regular files and folders (a snapshot
    never holds a link, so it could not be the same answer). Snakemake's empty mark is left out,
    unless a file of the answer names it (a page that loads it renders differently without)."""
    if not answer.is_dir() or answer.is_symlink():
        return None
    files: dict[str, str] = {}
    marked = named = False
    for root, dirs, names in os.walk(answer):
        base = Path(root)
        for name in [*dirs, *names]:
            mode = os.lstat(base / name).st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                return None
        for name in names:
            path = base / name
            relative, data = path.relative_to(answer).as_posix(), path.read_bytes()
            if relative == _SNAKEMAKE_MARK and not data:
                marked = True
                continue
            named = named or _SNAKEMAKE_MARK.encode() in data
            files[relative] = sha256_bytes(data)
    return None if marked and named else files


def _link_final_render(run_dir: Path, render_dir: Path) -> None:
    """The run's render.png as the reused snapshot's picture (the report's strip shows it), a
    link: a later render of the run writes a new file and leaves this one as it was."""
    source = run_dir / "render" / "render.png"
    if not source.is_file():
        return
    render_dir.mkdir(parents=True)
    try:
        os.link(source, render_dir / "render.png")
    except OSError:  # a filesystem without hard links: the same bytes
        shutil.copyfile(source, render_dir / "render.png")


def _score_one(
    run_dir: Path,
    task_dir: Path,
    entry: SnapshotEntry,
    out: Path,
    render_one: RenderOne,
    score_one: ScoreOne,
    block_detection: Literal["dom", "design2code"],
    final: _FinalScore,
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
    reused = final.for_snapshot(entry)
    if reused is not None:  # its files checked against their digests above
        shutil.rmtree(out)
        _link_final_render(run_dir, out / "render")
        return reused
    render_dir = out / "render"
    try:
        render_one(answer, task_dir / "reference.png", render_dir)
        metrics = score_one(render_dir, answer, task_dir, out, block_detection)
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
