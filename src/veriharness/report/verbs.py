"""The report stage's verb, `report`: its arguments, and the calls to `command`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_report_arguments", "run_report"]


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.experiment.config import ExperimentConfig

    tasks_dir = ExperimentConfig.model_fields["tasks_dir"].default
    parser.add_argument("--experiment-dir", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--out", type=Path, required=True, help="report folder")
    parser.add_argument(
        "--tasks-dir",
        type=Path,
        default=Path(tasks_dir),
        help="holds <task>/reference.png (default: the config's default tasks_dir)",
    )
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores)")


def run_report(args: argparse.Namespace) -> int:
    from veriharness.report.command import missing_tables, write_report

    if args.jobs is not None and args.jobs < 1:
        print(f"report: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    missing = missing_tables(args.experiment_dir)
    if missing:
        print(f"report: {missing[0]} not found; run `veriharness collect` first", file=sys.stderr)
        return 2
    index = write_report(args.experiment_dir, args.out, args.tasks_dir, args.jobs)
    print(f"report: {index}")
    return 0
