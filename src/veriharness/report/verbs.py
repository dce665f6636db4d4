"""The verbs of the report package (see `veriharness.cli`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from veriharness.report.status import format_status, newest_experiment, read_status

__all__ = ["add_status_arguments", "run_status"]


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
