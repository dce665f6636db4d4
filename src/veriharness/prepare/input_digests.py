"""One digest file for all the input files of a task or condition (``veriharness hash-files``).

The workflow hashes each task's and condition's files once into such a file, so each run depends
on two small digests instead of every file (a much smaller DAG to plan).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from veriharness._util import atomic
from veriharness._util.hashing import sha256_file

__all__ = ["write_digests"]


def write_digests(files: Iterable[Path], out: Path) -> None:
    """One `<digest>  <path>` line per file, sorted by path, written to `out`."""
    lines = [f"{sha256_file(path)}  {path.as_posix()}" for path in sorted(set(files))]
    atomic.write_text(out, "\n".join(lines) + "\n")
