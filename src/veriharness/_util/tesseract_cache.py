"""Tesseract's TSV output kept on disk under a name made of everything that determines it, so
an image read once on this machine is not read again: by a later experiment, by another run of
the same task, or by the offline model describing the same reference in every session.

The name is the sha256 of the exact pixels handed to tesseract (mode, size, bytes), the
arguments, the program's full `--version` text and the sha256 of the language data it loads: a
new tesseract or new language data misses the cache instead of reusing another program's
reading. Entries are written whole (`_util.atomic`), so processes on one machine, or on cluster
nodes sharing the folder, fill it side by side.

The folder is `$VERIHARNESS_CACHE_DIR/tesseract`, else `$XDG_CACHE_HOME/veriharness/tesseract`,
else `~/.cache/veriharness/tesseract`. Nothing in it is a result; deleting it only costs time.
A folder that cannot be written stops the reading with an error naming it and the variable that
moves it.
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from pathlib import Path

from PIL import Image

from veriharness._util import atomic
from veriharness._util.hashing import sha256_bytes, sha256_file, sha256_json
from veriharness._util.programs import find_tesseract

__all__ = ["CACHE_ENV", "TesseractCacheError", "cache_root", "entry_for", "load", "store"]

CACHE_ENV = "VERIHARNESS_CACHE_DIR"
_LANGUAGE = "eng"


class TesseractCacheError(OSError):
    """The cache folder cannot be written."""


def cache_root() -> Path:
    """VeriHarness's cache folder on this machine (see the module notes)."""
    if named := os.environ.get(CACHE_ENV):
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "veriharness"


def _tesseract(*args: str) -> str:
    done = subprocess.run(
        [str(find_tesseract()), *args], capture_output=True, text=True, check=False, timeout=60
    )
    return done.stdout + done.stderr


@cache
def version_text() -> str:
    """What `tesseract --version` prints (its own version, then its libraries')."""
    return _tesseract("--version")


def version_line() -> str:
    """The first line of `tesseract --version`: the version a record names."""
    lines = [line.strip() for line in version_text().splitlines() if line.strip()]
    return lines[0] if lines else ""


@cache
def program_identity() -> str:
    """tesseract's `--version` text and the sha256 of the language data it reads."""
    listing = _tesseract("--list-langs")
    folder = re.search(r'"([^"]+)"', listing)
    data = Path(folder.group(1)) / f"{_LANGUAGE}.traineddata" if folder else None
    language = sha256_file(data) if data is not None and data.is_file() else f"absent: {listing}"
    return sha256_json({"version": version_text(), "language_data": language})


def entry_for(picture: Image.Image, arguments: list[str]) -> Path:
    """Where tesseract's output for `picture` read with `arguments` is kept."""
    key = sha256_json(
        {
            "pixels": sha256_bytes(picture.tobytes()),
            "mode": picture.mode,
            "size": list(picture.size),
            "arguments": arguments,
            "program": program_identity(),
        }
    )
    return cache_root() / "tesseract" / f"{key.removeprefix('sha256:')}.tsv"


def _unusable(entry: Path, doing: str, error: OSError) -> TesseractCacheError:
    return TesseractCacheError(
        f"cannot {doing} the tesseract cache folder {entry.parent}: {error}; set {CACHE_ENV} "
        "to a writable folder"
    )


def load(entry: Path) -> str | None:
    """The kept output, or None when there is none."""
    try:
        return entry.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _unusable(entry, "read", error) from error


def store(entry: Path, output: str) -> None:
    try:
        atomic.write_text(entry, output)
    except OSError as error:
        raise _unusable(entry, "write to", error) from error
