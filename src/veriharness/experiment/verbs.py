"""The experiment definition's verb, `record`: its arguments, and the calls to `record`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_record_arguments", "run_record"]

# record diff's exit statuses, as diff(1)'s.
_SAME, _DIFFERENT, _TROUBLE = 0, 1, 2


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    diff = sub.add_parser(
        "diff",
        help="print the fields that differ between two records",
        description="Print the fields that differ between two records, hashed fields first. An "
        "experiment's earlier records are kept in results/<experiment>/records/.",
        epilog=f"exit status: {_SAME} no field differs, {_DIFFERENT} some field differs, "
        f"{_TROUBLE} a file is not a readable record or the two are of different kinds "
        "(as diff(1))",
    )
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
        print(f"record diff: {error}", file=sys.stderr)
        raise SystemExit(_TROUBLE) from None


def run_record(args: argparse.Namespace) -> int:
    """`record diff`: print differing fields (hashed first); exit 0 when none differ, 1 when
    some do, 2 when the two cannot be compared."""
    from veriharness.experiment.record import diff_records

    a, b = _read(args.a), _read(args.b)
    if a["kind"] != b["kind"]:
        print(
            f"record diff: {args.a} is a {a['kind']} and {args.b} is a {b['kind']}",
            file=sys.stderr,
        )
        return _TROUBLE
    rows = diff_records(a, b)
    if not rows:
        print("no differences")
        return _SAME
    for section, field, left, right in rows:
        print(f"{section:9}{field}: {json.dumps(left)} -> {json.dumps(right)}")
    hashed = sum(1 for row in rows if row[0] == "hashed")
    print(f"{len(rows)} field(s) differ, {hashed} of them hashed")
    return _DIFFERENT
