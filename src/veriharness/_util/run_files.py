"""Defensive readers for the JSON files of a run folder.

A missing file, a line that is not JSON or a value of the wrong type never raises: the reader
returns None (or skips the line) and appends the problem, naming the file, to the caller's error
list. `collect` writes that list out as `read_errors`, so nothing read is dropped silently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from pydantic import BaseModel, ValidationError

__all__ = [
    "BatchFileError",
    "describe_validation",
    "load_json",
    "read_batch_file",
    "read_jsonl",
    "typed_value",
]


def _read_text(path: Path, name: str, errors: list[str], *, lenient: bool) -> str | None:
    """The file's text, or None with "absent" or "unreadable" appended to `errors`; `lenient`
    replaces bytes that are not UTF-8 instead of failing."""
    try:
        return path.read_text(encoding="utf-8", errors="replace" if lenient else "strict")
    except FileNotFoundError:
        errors.append(f"{name}: absent")
    except OSError as exc:
        errors.append(f"{name}: unreadable ({exc.strerror})")
    except UnicodeDecodeError as exc:
        errors.append(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})")
    return None


def load_json(path: Path, name: str, errors: list[str]) -> dict[str, Any] | None:
    """A JSON object from `path`, or None with the problem appended to `errors`."""
    text = _read_text(path, name, errors, lenient=False)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        errors.append(f"{name}: invalid JSON ({exc})")
        return None
    if not isinstance(data, dict):
        errors.append(f"{name}: expected a JSON object, got {type(data).__name__}")
        return None
    return data


def read_jsonl(path: Path, name: str, errors: list[str]) -> list[dict[str, Any]] | None:
    """The object lines of a JSON-lines file; a bad line is reported and skipped, not fatal."""
    text = _read_text(path, name, errors, lenient=True)
    if text is None:
        return None
    events: list[dict[str, Any]] = []
    bad: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            bad.append(number)
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad.append(number)
    if bad:
        shown = ", ".join(map(str, bad))
        errors.append(f"{name}: {len(bad)} line(s) not a JSON object (line {shown})")
    return events


@overload
def typed_value(
    value: object, dtype: Literal["string"], where: str, errors: list[str]
) -> str | None: ...
@overload
def typed_value(
    value: object, dtype: Literal["Int64"], where: str, errors: list[str]
) -> int | None: ...
@overload
def typed_value(
    value: object, dtype: Literal["Float64"], where: str, errors: list[str]
) -> float | None: ...
@overload
def typed_value(
    value: object, dtype: Literal["boolean"], where: str, errors: list[str]
) -> bool | None: ...
@overload
def typed_value(value: object, dtype: str, where: str, errors: list[str]) -> object: ...
def typed_value(value: object, dtype: str, where: str, errors: list[str]) -> object:
    """`value` if it fits `dtype`, else None with the mismatch named in `errors`."""
    if value is None:
        return None
    ok = {
        "string": isinstance(value, str),
        "Int64": isinstance(value, int) and not isinstance(value, bool),
        "Float64": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }.get(dtype, True)
    if dtype == "Int64" and isinstance(value, float) and value.is_integer():
        return int(value)
    if not ok:
        errors.append(f"{where}: expected {dtype}, got {value!r:.60}")
        return None
    return value


_Item = TypeVar("_Item", bound=BaseModel)


class BatchFileError(ValueError):
    """A batch file that cannot be used; the message names the file, the line and the field."""


def describe_validation(error: ValidationError) -> str:
    """Each problem as `field: message (got value)`."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(line)'}: {e['msg']} (got {e.get('input')!r})"
        for e in error.errors()
    )


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
