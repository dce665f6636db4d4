"""The experiment definition's verb, `record`: its arguments, and the calls to `record`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["add_record_arguments", "run_record"]


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    diff = sub.add_parser("diff", help="print the fields that differ between two records")
    diff.add_argument("a", type=Path, help="a run.json or experiment.json")
    diff.add_argument("b", type=Path, help="another record of the same kind")


def _read(path: Path) -> dict[str, Any]:
    from veriharness.experiment.record import (
        EXPERIMENT_RECORD,
        RUN_RECORD,
        RecordError,
        read_record,
    )

    try:
        return read_record(path, RUN_RECORD, EXPERIMENT_RECORD)
    except RecordError as error:
        raise SystemExit(f"record diff: {error}") from None


def run_record(args: argparse.Namespace) -> int:
    """`record diff`: print differing fields (hashed first); exit 0 when none differ, 1
    otherwise."""
    from veriharness.experiment.record import diff_records

    a, b = _read(args.a), _read(args.b)
    if a["kind"] != b["kind"]:
        print(f"record diff: {args.a} is a {a['kind']} and {args.b} is a {b['kind']}")
        return 2
    rows = diff_records(a, b)
    if not rows:
        print("no differences")
        return 0
    for section, field, left, right in rows:
        print(f"{section:9}{field}: {json.dumps(left)} -> {json.dumps(right)}")
    hashed = sum(1 for row in rows if row[0] == "hashed")
    print(f"{len(rows)} field(s) differ, {hashed} of them hashed")
    return 1
