"""The trajectory stage's verb, `score-trajectory`: its arguments, and the calls to `command`
with a browser (the workflow's shared ones, or one of its own)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from veriharness.runfolder.metrics import MetricsRecord
    from veriharness.trajectory.command import RenderOne

__all__ = ["add_score_trajectory_arguments", "run_score_trajectory"]


def add_score_trajectory_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.render.browser import add_browser_arguments
    from veriharness.render.pool import POOL_MODES

    parser.add_argument("--run-dir", type=Path, required=True, help="the run folder")
    parser.add_argument("--task-dir", type=Path, required=True, help="tasks/<task>")
    parser.add_argument(
        "--block-detection",
        choices=("dom", "design2code"),
        default="dom",
        help="as for score (design2code renders with a browser of its own)",
    )
    parser.add_argument(
        "--browser-pool",
        default="none",
        choices=POOL_MODES,
        help="as for render: share the workflow's browsers, or (none) launch one for all the "
        "run's snapshots",
    )
    add_browser_arguments(parser)


@contextmanager
def _renderer(args: argparse.Namespace) -> Iterator[RenderOne]:
    from veriharness.render.pool import pool_for, render_in_pool

    pool = None if args.block_detection == "design2code" else pool_for(args.browser_pool)
    if pool is not None:

        def pooled(answer: Path, reference: Path, out: Path) -> str:
            request = {"answer_dir": str(answer), "reference": str(reference), "out": str(out)}
            return render_in_pool(pool, request, args.load_timeout, args.chromium)

        yield pooled
        return
    from veriharness.render.browser import Renderer
    from veriharness.render.command import render_answer
    from veriharness.render.d2ccapture import render_recoloured

    with Renderer(args.load_timeout, args.chromium) as renderer:

        def own(answer: Path, reference: Path, out: Path) -> str:
            record = render_answer(renderer, answer, reference, out)
            if args.block_detection == "design2code" and record.status == "ok":
                render_recoloured(renderer, answer, reference, out)
            return record.status

        yield own


def _score_static(
    render_dir: Path, answer_dir: Path, task_dir: Path, out_dir: Path, block_detection: str
) -> MetricsRecord:
    """The score stage's static metrics of one render. The scorer (its image and OCR code) is
    loaded at the first snapshot scored: a run whose only snapshot is its answer takes the run's
    own score and needs none of it."""
    from veriharness.score.command import ScoreJob, score_run
    from veriharness.score.metrics.ocrwords import machine_words_cache

    job = ScoreJob.model_validate(
        {"render_dir": render_dir, "answer_dir": answer_dir, "task_dir": task_dir,
         "out_dir": out_dir, "block_detection": block_detection, "static_only": True}
    )  # fmt: skip
    return score_run(job, ocr_cache=machine_words_cache())[1]


def run_score_trajectory(args: argparse.Namespace) -> int:
    from veriharness.render.setup import RenderSetupError
    from veriharness.trajectory.command import score_trajectory

    try:
        with _renderer(args) as render_one:
            record = score_trajectory(args.run_dir, args.task_dir, render_one, _score_static,
                                      args.block_detection)  # fmt: skip
    except RenderSetupError as error:
        print(f"veriharness score-trajectory: {error}", file=sys.stderr)
        return 2
    for score in record.snapshots:
        same = f" (as {score.scored_as})" if score.scored_as else ""
        same += " (the run's own render and score: the same files)" if score.reused_final else ""
        print(f"snapshot {score.n}: {score.status}{same}")
    return 0
