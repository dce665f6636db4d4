"""The report package's verbs, `report` and `status`: their arguments, and the calls to
`command` and `status`. Each verb imports its module when it runs, so `status` (read on a login
node while jobs run) loads neither pandas nor the plots."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["add_report_arguments", "add_status_arguments", "run_report", "run_status"]


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


def add_status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "experiment_dir",
        nargs="?",
        type=Path,
        help="results/<experiment> (default: the newest experiment under results/)",
    )
    parser.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=5.0,
        metavar="SECONDS",
        help="print again every SECONDS (default 5) until interrupted",
    )


def run_status(args: argparse.Namespace) -> int:
    from veriharness.report.status import format_status, newest_experiment, read_status

    folder = args.experiment_dir or newest_experiment()
    if folder is None:
        print("status: no results/<experiment>/experiment.json here; name one", file=sys.stderr)
        return 2
    if args.watch is not None and args.watch <= 0:
        print(f"status: --watch needs a positive interval, got {args.watch}", file=sys.stderr)
        return 2
    while True:
        try:
            text = format_status(read_status(folder))
        except ValueError as error:
            print(f"status: {error}", file=sys.stderr)
            return 2
        if args.watch is None:
            print(text, end="")
            return 0
        print("\033[H\033[2J" + text, end="", flush=True)
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return 0
