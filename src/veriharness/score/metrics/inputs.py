"""What scoring reads of the render stage: `render.json`, `dom.json` and a task's
`reference_dom.json`, as the writer's models (`veriharness.runfolder.render`).

The run folder's readers are lenient: a damaged field is dropped and named. Scoring is not: a
score computed from a half-read file would look like any other, so a file with any problem stops
scoring of its run with an InputError naming the file, the field and the value.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from veriharness.runfolder._files import JsonFile
from veriharness.runfolder.render import DOM, RENDER, DomRecord, RenderRecord

__all__ = ["InputError", "read_dom", "read_render"]

_M = TypeVar("_M", bound=BaseModel)


class InputError(ValueError):
    """A file scoring needs is missing or does not follow the render contract."""


def _read_whole(file: JsonFile[_M], path: Path) -> _M:
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    errors: list[str] = []
    record = file.read_at(path, errors)
    if record is None or errors:
        raise InputError("; ".join(errors[:5]))
    return record


def read_render(path: Path) -> RenderRecord:
    """A `render.json`, whole, or InputError."""
    return _read_whole(RENDER, path)


def read_dom(path: Path) -> DomRecord:
    """A `dom.json` or `reference_dom.json`, whole, or InputError."""
    return _read_whole(DOM, path)
