"""A run-folder file: its name, the model its writer uses, and a lenient reader.

Writers are strict: they validate against the model and write atomically. Readers are lenient,
because a run folder is evidence and a damaged file must not hide the rest of the run: a missing
file, text that is not JSON, a line that is not an object or a field of the wrong type never
raises. The problem is appended to the caller's error list, naming the file (and the field), and
what could be read is returned: a field that fails validation is dropped, so the model's default
(null) stands in for it; a list item whose required field is unusable is dropped from its list;
and only a file whose own required fields are unusable reads as None.
`collect` writes the list out as `read_errors`, so nothing read is dropped silently.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from veriharness._util import atomic
from veriharness._util.batch_files import describe_validation

__all__ = [
    "JsonFile",
    "JsonLinesFile",
    "may_hold_wide_integer",
    "read_object",
    "read_object_lines",
    "read_text",
    "salvage",
    "shown_integer",
]

M = TypeVar("M", bound=BaseModel)

# Salvage drops one failing field per error; a model cannot fail on more fields than this.
_MAX_SALVAGE_ROUNDS = 64


def _dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def read_text(path: Path, name: str, errors: list[str], *, lenient: bool = False) -> str | None:
    """The file's text, or None with "absent" or "unreadable" appended to `errors`; `lenient`
    replaces bytes that are not UTF-8 instead of failing."""
    data = _read_bytes(path, name, errors)
    return None if data is None else _decoded(data, name, errors, lenient)


def _read_bytes(path: Path, name: str, errors: list[str]) -> bytes | None:
    try:
        with open(path, "rb", buffering=0) as source:  # one read of the whole file
            return source.readall()
    except FileNotFoundError:
        errors.append(f"{name}: absent")
    except OSError as exc:
        errors.append(f"{name}: unreadable ({exc.strerror})")
    return None


def _decoded(data: bytes, name: str, errors: list[str], lenient: bool) -> str | None:
    """`data` as text, its line ends as text mode reads them (\\r\\n and \\r become \\n).
    Reading bytes and decoding them whole takes a third of a text-mode read's time and names
    the same byte in a decoding error."""
    try:
        text = data.decode("utf-8", errors="replace" if lenient else "strict")
    except UnicodeDecodeError as exc:
        errors.append(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})")
        return None
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


# --- JSON ----------------------------------------------------------------------------------------
# orjson parses run files about twice as fast as the standard reader, and on strict JSON gives the
# same values, with two exceptions handled here: an integer past 64 bits (orjson makes it a float,
# so a file with a run of 19 or more digits anywhere is read by the standard reader), and what
# orjson refuses (NaN, Infinity, a number past a double, an escaped lone surrogate), which the
# standard reader decides, wording the error of a line that is bad for both.
# An integer outside 64 bits is then a bad field: no reader of a run file can hold one (pandas'
# Int64 and parquet's int64 overflow, orjson refuses to write it, a float column would round it),
# so it is dropped where it stands and named, as a field of the wrong type is.
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGITS = b"0" * 19
_INT64 = range(-(2**63), 2**63)


def may_hold_wide_integer(data: bytes) -> bool:
    """Whether JSON text `data` has a run of 19 or more digits: an integer that may not fit 64
    bits (every integer of 18 digits does). A reader that parses such text another way (a
    model's own JSON validation) leaves it to this module's readers."""
    return _LONG_DIGITS in data.translate(_DIGIT_MAP)


def shown_integer(number: int) -> str:
    """An integer as written, or its first digits and its length when it is long."""
    text = str(number)
    return text if len(text) <= 40 else f"{text[:20]}... (an integer of {len(text)} digits)"


def _drop_wide_integers(value: Any, where: str, errors: list[str]) -> None:
    """Remove every integer outside 64 bits from `value`'s objects and arrays, each named in
    `errors` by its place, in the order of the text."""
    # Without recursion: the text may nest as deep as json reads.
    stack: list[tuple[tuple[int | str, ...], Iterator[tuple[Any, int | str, Any]]]]
    stack = [((), _members(value))]
    drops: list[tuple[Any, int | str]] = []
    while stack:
        loc, members = stack[-1]
        for node, key, item in members:
            if isinstance(item, int) and not isinstance(item, bool) and item not in _INT64:
                shown = f"{shown_integer(item)} is outside the 64-bit integer range; dropped"
                errors.append(f"{where}: {_dotted((*loc, key))}: {shown}")
                drops.append((node, key))
            elif isinstance(item, dict | list) and item:
                stack.append(((*loc, key), _members(item)))
                break
        else:
            stack.pop()
    for node, key in reversed(drops):  # a list's items from its end: no drop shifts another
        del node[key]


def _members(node: dict[str, Any] | list[Any]) -> Iterator[tuple[Any, int | str, Any]]:
    pairs = node.items() if isinstance(node, dict) else enumerate(node)
    return ((node, key, item) for key, item in pairs)


def _fast_loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _json_reader(data: bytes) -> Callable[[str], Any]:
    """The JSON reader for the text of `data` (see the notes above)."""
    return json.loads if may_hold_wide_integer(data) else _fast_loads


def read_object(path: Path, name: str, errors: list[str]) -> dict[str, Any] | None:
    """A JSON object from `path`, or None with the problem appended to `errors`."""
    data = _read_bytes(path, name, errors)
    text = None if data is None else _decoded(data, name, errors, lenient=False)
    if data is None or text is None:
        return None
    loads = _json_reader(data)
    try:
        value = loads(text)
    except (ValueError, RecursionError) as exc:  # json's own nesting limit is a RecursionError
        errors.append(f"{name}: invalid JSON ({exc})")
        return None
    if not isinstance(value, dict):
        errors.append(f"{name}: expected a JSON object, got {type(value).__name__}")
        return None
    if loads is json.loads:
        _drop_wide_integers(value, name, errors)
    return value


def read_object_lines(path: Path, name: str, errors: list[str]) -> list[dict[str, Any]] | None:
    """The object lines of a JSON-lines file; a bad line is reported and skipped, not fatal."""
    data = _read_bytes(path, name, errors)
    text = None if data is None else _decoded(data, name, errors, lenient=True)
    if data is None or text is None:
        return None
    loads = _json_reader(data)
    objects: list[dict[str, Any]] = []
    bad: list[int] = []
    for number, line in _numbered(text):
        try:
            value = loads(line)
        except (ValueError, RecursionError):
            bad.append(number)
            continue
        if isinstance(value, dict):
            if loads is json.loads:
                _drop_wide_integers(value, f"{name} line {number}", errors)
            objects.append(value)
        else:
            bad.append(number)
    if bad:
        shown = ", ".join(map(str, bad))
        errors.append(f"{name}: {len(bad)} line(s) not a JSON object (line {shown})")
    return objects


def _numbered(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if line and not line.isspace():  # as line.strip(), without copying the line
            yield number, line


def _drop(data: Any, loc: tuple[int | str, ...]) -> bool:
    """Remove the value at `loc` from nested dicts and lists; False when there is none."""
    *parents, last = loc
    for part in parents:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return False
    if isinstance(data, dict) and last in data:
        del data[last]
        return True
    if isinstance(data, list) and isinstance(last, int) and 0 <= last < len(data):
        del data[last]
        return True
    return False


def salvage(model: type[M], data: dict[str, Any], where: str, errors: list[str]) -> M | None:
    """`data` as `model`, with each field that fails validation dropped and named in `errors`;
    None when what is left still fails (a required field missing or unusable)."""
    try:  # validation reads `data` and never changes it: a valid object needs no copy
        return model.model_validate(data)
    except ValidationError:
        data = copy.deepcopy(data)
    for _ in range(_MAX_SALVAGE_ROUNDS):
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            error = exc
        dropped = False
        # Deepest first, list items from the end, so one drop does not shift the next one's place.
        for problem in sorted(error.errors(), key=_drop_order, reverse=True):
            loc = tuple(problem["loc"])
            if problem["type"] != "missing" and loc and _drop(data, loc):
                shown = f"{problem['msg']} (got {problem.get('input')!r:.60})"
                errors.append(f"{where}: {_dotted(loc)}: {shown}")
                dropped = True
            elif problem["type"] == "missing" and (item := _list_item(loc)) and _drop(data, item):
                missing = _dotted(loc[len(item) :])
                errors.append(f"{where}: {_dotted(item)}: dropped ({missing}: {problem['msg']})")
                dropped = True
        if not dropped:
            errors.append(f"{where}: unusable ({describe_validation(error)})")
            return None
    errors.append(f"{where}: unusable (over {_MAX_SALVAGE_ROUNDS} invalid fields)")
    return None


def _list_item(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The place of the innermost list item holding `loc` (JSON keys are strings, so an int is
    a list index); empty when none does. An item missing a required field goes, not its list."""
    for end in range(len(loc) - 1, -1, -1):
        if isinstance(loc[end], int):
            return loc[: end + 1]
    return ()


def _drop_order(problem: Any) -> tuple[int, list[str]]:
    loc = problem["loc"]
    return len(loc), [str(part).zfill(9) for part in loc]


@dataclass(frozen=True)
class _RunFile(Generic[M]):
    """A file of the run folder: its name there, and the model its writer uses."""

    name: str
    model: type[M]

    def path(self, run_dir: Path) -> Path:
        return Path(run_dir) / self.name

    def exists(self, run_dir: Path) -> bool:
        return self.path(run_dir).is_file()


@dataclass(frozen=True)
class JsonFile(_RunFile[M]):
    """One JSON object file of the run folder, written from `model`."""

    def read(self, run_dir: Path, errors: list[str]) -> M | None:
        """The file as its model, leniently (see the module's notes)."""
        return self._read(self.path(run_dir), self.name, errors)

    def read_at(self, path: Path, errors: list[str]) -> M | None:
        """A file of this model kept elsewhere (a task's `reference_dom.json` is a dom.json, a
        render folder may be given on its own), leniently, its problems named by `path`."""
        return self._read(Path(path), str(path), errors)

    def _read(self, path: Path, where: str, errors: list[str]) -> M | None:
        data = read_object(path, where, errors)
        return None if data is None else salvage(self.model, data, where, errors)

    def read_quietly(self, run_dir: Path) -> M | None:
        """The file as its model, or None for any problem (for callers that only ask whether a
        usable file is there)."""
        return self.read(run_dir, [])

    def write(self, run_dir: Path, value: M) -> Path:
        path = self.path(run_dir)
        atomic.write_json(path, value.model_dump(mode="json"))
        return path


@dataclass(frozen=True)
class JsonLinesFile(_RunFile[M]):
    """One JSON-lines file of the run folder, one `model` a line, appended as things happen."""

    def read(self, run_dir: Path, errors: list[str]) -> list[M] | None:
        """Every usable line as the model (a line that is not an object, or whose required fields
        are unusable, is named in `errors` and skipped); None when the file cannot be read."""
        objects = read_object_lines(self.path(run_dir), self.name, errors)
        if objects is None:
            return None
        items = []
        for number, data in enumerate(objects, start=1):
            item = salvage(self.model, data, f"{self.name} object {number}", errors)
            if item is not None:
                items.append(item)
        return items

    def append(self, run_dir: Path, item: M) -> None:
        with self.path(run_dir).open("a", encoding="utf-8") as sink:
            sink.write(item.model_dump_json() + "\n")
