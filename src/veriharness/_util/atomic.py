"""The one way VeriHarness writes a file: whole or not at all.

Every file is written to a temporary name in the same folder, flushed to disk, then renamed over
the destination, so a reader (another stage, a cluster node, `veriharness status`) never sees half
a file, and a failed write (a full disk, a killed job) leaves the previous content in place and no
temporary file behind. A failed write raises `AtomicWriteError` naming the destination.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["AtomicWriteError", "replacing", "write_bytes", "write_json", "write_text"]


class AtomicWriteError(OSError):
    """A file could not be written; the destination keeps what it had."""


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path to write `path`'s new content to (for writers that take a path, such as
    pandas or matplotlib); on leaving the block it replaces `path`, or is removed on error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        _sync(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, AtomicWriteError):
            raise
        raise AtomicWriteError(
            exc.errno, f"could not write {path}: {exc.strerror or exc}; it keeps its old content"
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes) -> None:
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: Path, text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, value: Any, *, indent: int | None = 2) -> None:
    """`value` as JSON with a final newline."""
    write_text(path, json.dumps(value, indent=indent) + "\n")
