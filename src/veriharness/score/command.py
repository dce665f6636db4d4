"""The `score` verb: audit and score rendered runs, writing audit.json and metrics.json.

Reads only files: the run's render/ (render.json, render.png, dom.json) and answer/, and the
task's reference.png, reference_dom.json and reference.html. No browser runs here; the reference
DOM facts were written by `render-reference`.

A run whose render status is not `ok` (missing, empty or crashing answer) is not scored: its
metrics are all null with status `no_render`, and `details.render_status` says why; its audit
still checks what does not need a render (remote requests, referenced files, oversized images).

Whatever goes wrong while one run is scored (a missing or malformed render.json, reference.png or
reference_dom.json, or a failure nobody foresaw) is recorded, not raised: metrics.json gets status
`score_failed` with `details.reason` naming the file or the error, audit.json gets every flag
null, and the verb goes on and exits 0, so the tables are still built. The problem is also printed
on stderr. Only bad arguments and a batch file that cannot be read make the verb exit 2.

OCR of a reference image is computed once per process per reference digest, so a batch over many
runs of one task reads each reference once.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from veriharness._util import atomic
from veriharness._util.batch_files import BatchFileError, read_batch_file
from veriharness._util.hashing import sha256_file
from veriharness._util.ocr import OcrWord
from veriharness.experiment.config import ConfigError, TaskSpec, read_task_spec
from veriharness.runfolder.audit import AUDIT, AuditRecord, AuditThresholds
from veriharness.runfolder.metrics import METRICS, InteractionScore, MetricsRecord, ViewportScore
from veriharness.runfolder.render import DESIGN2CODE_DIR, DomRecord
from veriharness.score import SCORER_VERSION
from veriharness.score.audit import FLAGS, audit_run, in_viewport
from veriharness.score.interactions import run_metrics, score_interactions, score_viewports
from veriharness.score.metrics.blocks import (
    CONTEXT_BONUS,
    CONTEXT_WINDOW,
    MERGE_MIN_GAIN,
    MIN_TEXT_RATIO,
    Block,
    block_scores,
    same_box_joined,
    scores_of_blocks,
)
from veriharness.score.metrics.d2cblocks import detect_blocks
from veriharness.score.metrics.inputs import InputError, read_dom, read_render
from veriharness.score.metrics.ocrwords import cached_ocr_words
from veriharness.score.metrics.pixels import fit_to_reference, load_rgb, mae, ssim
from veriharness.score.metrics.text import ocr_word_scores
from veriharness.score.versions import METRIC_NAMES, OCR_VERSION, metric_names, scorer_versions

__all__ = [
    "METRIC_NAMES",
    "ScoreJob",
    "batch_jobs",
    "score_jobs",
    "score_run",
]


def _metrics(
    status: Literal["ok", "no_render", "score_failed"],
    metrics: dict[str, float | None],
    details: dict[str, Any],
    task: TaskSpec | None = None,
    interactions: list[InteractionScore] | None = None,
    viewports: list[ViewportScore] | None = None,
) -> MetricsRecord:
    """The record of this scorer (its version and the versions of what it used)."""
    return MetricsRecord(
        scorer_version=SCORER_VERSION,
        status=status,
        metrics=metrics,
        details=details,
        versions=scorer_versions(),
        interactions_stated=0 if task is None else len(task.interactions),
        viewports_stated=0 if task is None else len(task.viewports),
        interactions=interactions or [],
        viewports=viewports or [],
    )


def _task(task_dir: Path) -> TaskSpec | None:
    """The task's spec; None for a folder without task.yaml (a bare reference, scored as a
    static task)."""
    if not (task_dir / "task.yaml").is_file():
        return None
    try:
        return read_task_spec(task_dir, task_dir.resolve().name)
    except ConfigError as error:
        raise InputError(str(error)) from error


class ScoreJob(BaseModel):
    """One run to score (also one line of a --batch file)."""

    model_config = ConfigDict(extra="forbid")
    render_dir: Path
    answer_dir: Path
    task_dir: Path
    out_dir: Path
    block_detection: Literal["dom", "design2code"] = "dom"
    # Score only the static metrics, as of a static task: an answer snapshot's (trajectory/),
    # whose interactions and extra viewports are not rendered.
    static_only: bool = False


_OCR_CACHE: dict[str, list[OcrWord]] = {}


def _reference_words(reference_png: Path, cache_dir: Path | None) -> list[OcrWord]:
    digest = sha256_file(reference_png)
    if digest not in _OCR_CACHE:
        _OCR_CACHE[digest] = cached_ocr_words(reference_png, cache_dir)
    return _OCR_CACHE[digest]


def _pixel_metrics(render_png: Path, reference_png: Path) -> tuple[dict[str, float], Any]:
    reference = load_rgb(reference_png)
    fitted = fit_to_reference(load_rgb(render_png), reference.size)
    mismatch = None
    if fitted.resized:
        mismatch = {
            "render": list(fitted.original_size),
            "reference": list(reference.size),
            "handling": "render placed top-left on a white canvas of the reference size",
        }
    values = {"ssim": ssim(fitted.image, reference), "mae": mae(fitted.image, reference)}
    return values, mismatch


def _f1_ceiling(task_dir: Path, reference_words: list[OcrWord]) -> float | None:
    """OCR word F1 of the reference page's own DOM text: what a perfect answer scores, given
    what tesseract misses on the reference. None when the task has no reference_dom.json."""
    path = task_dir / "reference_dom.json"
    if not path.is_file():
        return None
    reference = read_dom(path)
    vw, vh = reference.viewport.width, reference.viewport.height
    texts = [t.text for t in reference.texts if in_viewport(t, vw, vh)]
    return ocr_word_scores(texts, [w.text for w in reference_words])[0].f1


def _detected_blocks(folder: Path, side: str) -> list[Block]:
    """Design2Code's blocks of one side from the render stage's captures in `folder`."""
    error = folder / "error.txt"
    if error.is_file():
        raise InputError(f"{error}: the Design2Code captures failed: {error.read_text().strip()}")
    paths = [folder / f"{side}.{name}.png" for name in ("page", "first", "second")]
    texts_path = folder / f"{side}.texts.json"
    for path in (*paths, texts_path):
        if not path.is_file():
            raise InputError(
                f"{path}: file not found (block_detection design2code needs "
                "render --design2code-blocks)"
            )
    try:
        listed = json.loads(texts_path.read_text(encoding="utf-8"))
        texts = [(str(t), (int(c[0]), int(c[1]), int(c[2]))) for t, c in listed]
    except (TypeError, ValueError, IndexError) as exc:
        raise InputError(f"{texts_path}: not a list of [text, [r, g, b]]: {exc}") from exc
    page, first, second = (load_rgb(path) for path in paths)
    return same_box_joined(detect_blocks(page, first, second, texts))


def _block_metrics(
    task_dir: Path, dom: DomRecord, detection: str, render_dir: Path
) -> tuple[dict[str, float | None], Any]:
    if not (task_dir / "reference.html").is_file():
        empty = dict.fromkeys(("block_match", "text_similarity", "position", "color"))
        return empty, {"computed": False, "reason": "the task ships no reference.html"}
    if detection == "design2code":
        folder = render_dir / DESIGN2CODE_DIR
        scores = scores_of_blocks(
            _detected_blocks(folder, "reference"), _detected_blocks(folder, "answer")
        )
    else:
        scores = block_scores(read_dom(task_dir / "reference_dom.json"), dom)
    values = {
        "block_match": scores.block_match,
        "text_similarity": scores.text_similarity,
        "position": scores.position,
        "color": scores.color,
    }
    detail = {
        "computed": True,
        "detection": detection,
        "reference_blocks": scores.reference_blocks,
        "answer_blocks": scores.answer_blocks,
        "matched_pairs": len(scores.pairs),
        "merged_pairs": sum(len(p.reference) + len(p.answer) > 2 for p in scores.pairs),
        "min_text_ratio": MIN_TEXT_RATIO,
        "merge_min_gain": MERGE_MIN_GAIN,
        "context_bonus": CONTEXT_BONUS,
        "context_window": CONTEXT_WINDOW,
    }
    return values, detail


def score_run(job: ScoreJob, *, ocr_cache: Path | None = None) -> tuple[AuditRecord, MetricsRecord]:
    """Audit and score one run; write audit.json and metrics.json into job.out_dir."""
    # tesseract's OpenMP threads fight each other and parallel jobs on a busy machine: one
    # thread per OCR ran 5x faster in wall time here (0.6 s instead of 3.4 s for a 2560x1600
    # page under load). The user's own setting wins.
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    reference_png = job.task_dir / "reference.png"
    if not reference_png.is_file():
        raise InputError(f"{reference_png}: file not found (task_dir={job.task_dir})")
    render = read_render(job.render_dir / "render.json")
    task = None if job.static_only else _task(job.task_dir)
    details: dict[str, Any] = {
        "render_status": render.status,
        "reference_png": sha256_file(reference_png),
    }
    if render.status != "ok":
        audit = audit_run(
            answer_dir=job.answer_dir,
            render=render,
            dom=None,
            render_png=None,
            reference_png=reference_png,
            reference_words=[],
        )
        metrics = _metrics(
            status="no_render",
            metrics=dict.fromkeys(metric_names(task)),
            details=details,
            task=task,
        )
        _write(job.out_dir, audit, metrics)
        return audit, metrics

    render_png = job.render_dir / "render.png"
    if not render_png.is_file():
        raise InputError(f"{render_png}: file not found although render.json says status ok")
    dom = read_dom(job.render_dir / "dom.json")
    reference_words = _reference_words(reference_png, ocr_cache)
    values: dict[str, float | None] = {}
    pixels, details["size_mismatch"] = _pixel_metrics(render_png, reference_png)
    values.update(pixels)
    vw, vh = dom.viewport.width, dom.viewport.height
    visible = [t.text for t in dom.texts if in_viewport(t, vw, vh)]
    words, glued = ocr_word_scores(visible, [w.text for w in reference_words])
    values["ocr_word_precision"] = words.precision
    values["ocr_word_recall"] = words.recall
    values["ocr_word_f1"] = words.f1
    details["ocr_words"] = {
        "matched": words.matched,
        "answer_dom_words": words.answer_words,
        "reference_ocr_words": words.reference_words,
        "glued_words_split": [{"ocr": g.word, "answer": list(g.parts)} for g in glued],
        "ocr": OCR_VERSION,
        "f1_ceiling": _f1_ceiling(job.task_dir, reference_words),
    }
    blocks, details["blocks"] = _block_metrics(
        job.task_dir, dom, job.block_detection, job.render_dir
    )
    values.update(blocks)
    details["render_png"] = sha256_file(render_png)
    details["dom_json"] = sha256_file(job.render_dir / "dom.json")
    audit = audit_run(
        answer_dir=job.answer_dir,
        render=render,
        dom=dom,
        render_png=render_png,
        reference_png=reference_png,
        reference_words=reference_words,
    )
    interactions = [] if task is None else score_interactions(task, job.task_dir, job.render_dir)
    viewports = [] if task is None else score_viewports(task, job.task_dir, job.render_dir)
    values.update(run_metrics(interactions, viewports))
    metrics = _metrics(
        status="ok",
        metrics={name: values[name] for name in metric_names(task)},
        details=details,
        task=task,
        interactions=interactions,
        viewports=viewports,
    )
    _write(job.out_dir, audit, metrics)
    return audit, metrics


def _write(out_dir: Path, audit: AuditRecord, metrics: MetricsRecord) -> None:
    for path, record in ((AUDIT.path(out_dir), audit), (METRICS.path(out_dir), metrics)):
        text = json.dumps(record.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        atomic.write_text(path, text)


def batch_jobs(path: Path) -> list[ScoreJob]:
    try:
        return read_batch_file(path, ScoreJob)
    except BatchFileError as exc:
        raise InputError(str(exc)) from exc


def score_jobs(jobs: list[ScoreJob], ocr_cache: Path | None = None) -> int:
    """Score each job; a job that fails is recorded as `score_failed` and the others go on.
    2 when a failure could not even be recorded, else 0."""
    for job in jobs:
        try:
            audit, metrics = score_run(job, ocr_cache=ocr_cache)
        except Exception as exc:  # noqa: BLE001 - recorded as score_failed; the batch goes on
            reason = str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
            print(f"veriharness score: score_failed: {reason}", file=sys.stderr)
            try:
                audit, metrics = _record_failure(job, reason)
            except atomic.AtomicWriteError as unwritable:
                print(f"veriharness score: {unwritable}", file=sys.stderr)
                return 2
        raised = [name for name, on in audit.flags.items() if on]
        print(f"{job.out_dir}: {metrics.status}, flags: {', '.join(raised) or 'none'}")
    return 0


def _record_failure(job: ScoreJob, reason: str) -> tuple[AuditRecord, MetricsRecord]:
    audit = AuditRecord(
        flags=dict.fromkeys(FLAGS),
        evidence={name: {"checked": False, "reason": reason} for name in FLAGS},
        thresholds=AuditThresholds(),
    )
    metrics = _metrics(
        status="score_failed", metrics=dict.fromkeys(METRIC_NAMES), details={"reason": reason}
    )
    _write(job.out_dir, audit, metrics)
    return audit, metrics
