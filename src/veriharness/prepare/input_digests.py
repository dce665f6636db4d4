"""``veriharness hash-files``: one digest file for all the input files of a task or condition."""

from __future__ import annotations

import argparse
from pathlib import Path

from veriharness._util import atomic
from veriharness._util.hashing import sha256_file

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="where to write the digests")
    parser.add_argument("files", type=Path, nargs="+", help="files to hash")


def run(args: argparse.Namespace) -> int:
    """`veriharness hash-files`: one `<digest>  <path>` line per file, sorted by path.

    The workflow hashes each task's and condition's files once into such a file, so each run
    depends on two small digests instead of every file (a much smaller DAG to plan)."""
    lines = [f"{sha256_file(path)}  {path.as_posix()}" for path in sorted(set(args.files))]
    atomic.write_text(args.out, "\n".join(lines) + "\n")
    return 0
