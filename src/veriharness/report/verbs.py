"""The report package's verbs, `report`, `status` and `export`: their arguments, and the calls
to `command`, `status` and `inspect_log`. Each verb imports its module when it runs, so `status`
(read on a login node while jobs run) loads neither pandas nor the plots, and only `export`
needs the optional `inspect_ai`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = [
    "add_export_arguments",
    "add_report_arguments",
    "add_status_arguments",
    "run_export",
    "run_report",
    "run_status",
]


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


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.experiment.config import ExperimentConfig

    tasks_dir = ExperimentConfig.model_fields["tasks_dir"].default
    parser.add_argument("format", choices=["inspect"], help="inspect: Inspect AI eval logs")
    parser.add_argument("experiment_dir", type=Path, help="results/<experiment>, collected")
    parser.add_argument(
        "--out", type=Path, help="folder of the logs (default: <experiment_dir>/inspect)"
    )
    parser.add_argument(
        "--tasks-dir",
        type=Path,
        default=Path(tasks_dir),
        help="holds <task>/reference.png (default: the config's default tasks_dir)",
    )


def run_export(args: argparse.Namespace) -> int:
    table = args.experiment_dir / "tables" / "runs.parquet"
    if not table.is_file():  # said before inspect_ai's import, which takes seconds
        print(f"export: {table} not found; run `veriharness collect` first", file=sys.stderr)
        return 2
    try:
        from veriharness.report.inspect_log import ExportError, export_inspect
    except ModuleNotFoundError as error:
        if error.name is None or not error.name.startswith("inspect_ai"):
            raise
        print(
            "export: inspect_ai is not installed; install the extra: "
            "pip install 'veriharness[inspect]'",
            file=sys.stderr,
        )
        return 2
    out = args.out or args.experiment_dir / "inspect"
    try:
        logs = export_inspect(args.experiment_dir, out, args.tasks_dir)
    except ExportError as error:
        print(f"export: {error}", file=sys.stderr)
        return 2
    for log in logs:
        print(f"export: {log}")
    return 0
