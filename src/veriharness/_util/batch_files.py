"""Batch files: one JSON object a line, each a job of a batch verb (`render`, `score`).

Not run files: a batch file is the workflow's instruction, so it is read strictly. Every line is
checked before any is used, and a bad one stops the verb with its file, line and field.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["BatchFileError", "describe_validation", "read_batch_file"]


def describe_validation(error: ValidationError) -> str:
    """Each problem as `field: message (got value)`."""
    return "; ".join(
        f"{_dotted(e['loc']) or '(line)'}: {e['msg']} (got {e.get('input')!r:.60})"
        for e in error.errors()
    )


def _dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


_Item = TypeVar("_Item", bound=BaseModel)


class BatchFileError(ValueError):
    """A batch file that cannot be used; the message names the file, the line and the field."""


def read_batch_file(path: Path, model: type[_Item]) -> list[_Item]:
    """Every line of a batch file (one JSON object per run), each checked against `model`
    before any of them is used; blank lines are skipped, an empty file is an error."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchFileError(f"batch file {path} cannot be read: {exc}") from exc
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate_json(line))
        except ValidationError as exc:
            raise BatchFileError(f"{path} line {number}: {describe_validation(exc)}") from exc
    if not items:
        raise BatchFileError(f"batch file {path} holds no runs")
    return items
