"""The score stage's verb, `score`: its arguments, and the calls to `command`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_score_arguments", "run_score"]


def add_score_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--render-dir", type=Path, help="the run's render/ folder")
    parser.add_argument("--answer-dir", type=Path, help="the run's answer/ folder")
    parser.add_argument("--task-dir", type=Path, help="tasks/<task> (reference.png, ...)")
    parser.add_argument("--out-dir", type=Path, help="where audit.json and metrics.json go")
    parser.add_argument(
        "--ocr-cache",
        type=Path,
        help="folder caching the OCR words of reference images (by digest), shared across runs "
        "(default: reference-words/ in the machine's cache folder, $VERIHARNESS_CACHE_DIR)",
    )
    parser.add_argument(
        "--block-detection",
        choices=("dom", "design2code"),
        default=None,
        help="where the block metrics' text blocks come from: dom (default) or design2code "
        "(needs render --design2code-blocks); for --batch it applies to every line",
    )
    parser.add_argument(
        "--batch",
        type=Path,
        help="JSONL file, one object per line with render_dir, answer_dir, task_dir, out_dir",
    )


def run_score(args: argparse.Namespace) -> int:
    from veriharness.score.command import ScoreJob, batch_jobs, score_jobs
    from veriharness.score.metrics.inputs import InputError
    from veriharness.score.metrics.ocrwords import machine_words_cache

    single = [args.render_dir, args.answer_dir, args.task_dir, args.out_dir]
    try:
        if args.batch is not None:
            if any(value is not None for value in single):
                raise InputError("--batch cannot be combined with --render-dir/--answer-dir/...")
            jobs = batch_jobs(args.batch)
        else:
            flags = ("--render-dir", "--answer-dir", "--task-dir", "--out-dir")
            missing = [flag for flag, value in zip(flags, single, strict=True) if value is None]
            if missing:
                raise InputError(f"missing {', '.join(missing)} (or give --batch FILE.jsonl)")
            jobs = [
                ScoreJob(
                    render_dir=single[0],
                    answer_dir=single[1],
                    task_dir=single[2],
                    out_dir=single[3],
                )
            ]
    except InputError as bad:
        print(f"veriharness score: {bad}", file=sys.stderr)
        return 2
    if args.block_detection is not None:
        jobs = [job.model_copy(update={"block_detection": args.block_detection}) for job in jobs]
    return score_jobs(jobs, args.ocr_cache or machine_words_cache())
