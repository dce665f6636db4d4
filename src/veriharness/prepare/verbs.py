"""The verbs of the prepare stage (see `veriharness.cli`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from veriharness._util import atomic
from veriharness.experiment.definition import add_common_arguments, load_from_args
from veriharness.prepare.experiment_check import START_ERRORS, check_experiment

__all__ = ["add_check_experiment_arguments", "run_check_experiment"]


def add_check_experiment_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--skip-model-check",
        action="store_true",
        help="do not look model names up with their provider (dry runs)",
    )
    parser.add_argument("--out", type=Path, required=True, help="where to write experiment.json")


def run_check_experiment(args: argparse.Namespace) -> int:
    try:
        config, root = load_from_args(args)
        defn, record = check_experiment(config, root, args.config, args.out.parent)
    except START_ERRORS as error:
        print(f"check-experiment: {error}", file=sys.stderr)
        return 2
    atomic.write_json(args.out, record.model_dump(mode="json"))
    cells = sum(len(v) for v in record.cells.values())
    print(
        f"experiment {record.experiment}: {len(record.conditions)} condition(s) x "
        f"{len(record.task_ids)} task(s), {cells} cell(s), identity {record.identity_hash}"
        f"{' (uncommitted inputs)' if defn.uncommitted else ''} -> {args.out}"
    )
    return 0
