"""Compare two `tables/` folders written by `veriharness collect`: every CSV byte for byte, and
every parquet file as the frame it reads back to (columns, dtypes, values, exactly) and byte for
byte. Used to show that a change to collect leaves its output as it was (P-49).

Run: python3 bench/tables_equal.py BEFORE_TABLES AFTER_TABLES
Prints one line per file and exits 1 when any file differs or is in only one folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd


def _parquet_difference(before: Path, after: Path) -> str | None:
    """None when the two files read back to the same frame, else what differs."""
    try:
        pd.testing.assert_frame_equal(
            pd.read_parquet(before), pd.read_parquet(after), check_exact=True
        )
    except AssertionError as exc:
        return str(exc).splitlines()[0] if str(exc) else "frames differ"
    return None


def compare(before: Path, after: Path) -> list[str]:
    """The differences between two tables folders, one line each (empty: the same)."""
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    problems = []
    for name in names:
        old, new = before / name, after / name
        if not old.is_file() or not new.is_file():
            problems.append(f"{name}: only in {before if old.is_file() else after}")
            continue
        same_bytes = old.read_bytes() == new.read_bytes()
        if name.endswith(".parquet"):
            frame = _parquet_difference(old, new)
            if frame is not None:
                problems.append(f"{name}: frames differ: {frame}")
            print(f"{name}: frame equal, bytes {'equal' if same_bytes else 'DIFFER'}")
            if not same_bytes and frame is None:
                problems.append(f"{name}: same frame, different bytes")
        else:
            if not same_bytes:
                problems.append(f"{name}: bytes differ")
            print(f"{name}: bytes {'equal' if same_bytes else 'DIFFER'}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    problems = compare(args.before, args.after)
    for line in problems:
        print(f"DIFFERENT {line}")
    print("identical" if not problems else f"{len(problems)} difference(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
