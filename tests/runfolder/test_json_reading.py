"""The lenient JSON readers of `runfolder._files` read what the standard library reads.

They read bytes, decode them whole and parse with orjson where orjson agrees with `json` (P-49);
the reference below is the text-mode, `json.loads` reader they replaced, and every value, type,
line number and error must come out the same. One rule was added since (P-69): an integer
outside 64 bits is dropped where it stands and named, and the reference does the same.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veriharness.runfolder._files import read_object, read_object_lines, shown_integer


def _without_wide(value: Any, where: str, errors: list[str], loc: str = "") -> Any:
    """`value` without the integers outside 64 bits, each named in `errors` (P-69)."""
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    kept = []
    for key, item in pairs:
        place = f"{loc}{key}"
        if isinstance(item, int) and not isinstance(item, bool) and not -(2**63) <= item < 2**63:
            errors.append(
                f"{where}: {place}: {shown_integer(item)} is outside the 64-bit integer range;"
                " dropped"
            )
        elif isinstance(item, dict | list):
            kept.append((key, _without_wide(item, where, errors, f"{place}.")))
        else:
            kept.append((key, item))
    return dict(kept) if isinstance(value, dict) else [item for _, item in kept]


def _reference_lines(path: Path, name: str, errors: list[str]) -> list[dict[str, Any]] | None:
    """The reader before P-49: text mode (universal newlines), `json.loads` per line."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        errors.append(f"{name}: absent")
        return None
    objects, bad = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            bad.append(number)
            continue
        if isinstance(value, dict):
            objects.append(_without_wide(value, f"{name} line {number}", errors))
        else:
            bad.append(number)
    if bad:
        shown = ", ".join(map(str, bad))
        errors.append(f"{name}: {len(bad)} line(s) not a JSON object (line {shown})")
    return objects


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types, NaN equal to NaN, dict keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


EDGE_LINES = [
    '{"n": 123456789012345678901}',  # past 64 bits: orjson would make it a float
    '{"n": -9223372036854775809}',
    '{"n": 18446744073709551615}',
    '{"x": NaN, "y": -Infinity}',
    '{"x": 1e400}',
    '{"s": "\\ud800 lone surrogate"}',
    '{"f": 0.1, "g": 1e16, "h": -0.0, "i": -0}',
    '{"a": 1, "a": 2, "b": 3}',
    '{"deep": ' + "[" * 50 + "]" * 50 + "}",
    '{"ctl": "\\u0000\\u001f", "uni": "\u2028é😀"}',
    "[1, 2]",
    '{"cut": ',
    "  ",
    '{"x": 1}\x85{"y": 2}',
]


@pytest.mark.parametrize("line", EDGE_LINES)
def test_an_edge_line_reads_as_the_standard_reader_reads_it(tmp_path: Path, line: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"first": 1}\n' + line + "\n", encoding="utf-8")
    errors: list[str] = []
    expected_errors: list[str] = []
    got = read_object_lines(path, "t.jsonl", errors)
    assert _same(got, _reference_lines(path, "t.jsonl", expected_errors))
    assert errors == expected_errors


_LINE = st.one_of(
    st.sampled_from(EDGE_LINES),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
        max_leaves=8,
    ).map(lambda v: json.dumps({"v": v})),
    st.text(max_size=12),
)


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(_LINE, max_size=8),
    ends=st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=8, max_size=8),
    junk=st.binary(max_size=3),
)
def test_any_file_reads_as_the_standard_text_mode_reader_reads_it(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], ends: list[str], junk: bytes
) -> None:
    text = "".join(line + end for line, end in zip(lines, ends, strict=False))
    path = tmp_path_factory.mktemp("f") / "t.jsonl"
    path.write_bytes(text.encode("utf-8", errors="surrogatepass") + junk)
    errors: list[str] = []
    expected_errors: list[str] = []
    got = read_object_lines(path, "t.jsonl", errors)
    assert _same(got, _reference_lines(path, "t.jsonl", expected_errors))
    assert errors == expected_errors


def test_a_bad_object_file_is_named_with_the_standard_readers_error(tmp_path: Path) -> None:
    path = tmp_path / "outcome.json"
    path.write_text('{\r\n  "status": "ok",\r\n  oops\r\n}')
    errors: list[str] = []
    assert read_object(path, "outcome.json", errors) is None
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        assert errors == [f"outcome.json: invalid JSON ({exc})"]
    assert "line 3 column 3" in errors[0]  # \r\n counted as one line end, as in text mode


def test_an_object_file_with_a_long_integer_keeps_it_exact(tmp_path: Path) -> None:
    path = tmp_path / "outcome.json"
    path.write_text('{"usage": {"input_tokens": 1234567890123456789}, "cost": 0.1}')
    data = read_object(path, "outcome.json", [])
    assert data == {"usage": {"input_tokens": 1234567890123456789}, "cost": 0.1}
    assert isinstance(data["usage"]["input_tokens"], int)


def test_an_integer_past_64_bits_is_dropped_and_named_by_its_place(tmp_path: Path) -> None:
    path = tmp_path / "outcome.json"
    wide = "1" + "0" * 60
    path.write_text(
        '{"usage": {"input_tokens": 1234567890123456789012, "output_tokens": 5},'
        f' "list": [1, {wide}, {{"x": -9223372036854775809}}, 3], "top": 9223372036854775807}}'
    )
    errors: list[str] = []
    data = read_object(path, "outcome.json", errors)
    assert data == {
        "usage": {"output_tokens": 5},
        "list": [1, {}, 3],
        "top": 9223372036854775807,
    }
    assert errors == [
        "outcome.json: usage.input_tokens: 1234567890123456789012 is outside the 64-bit integer"
        " range; dropped",
        "outcome.json: list.1: 10000000000000000000... (an integer of 61 digits) is outside the"
        " 64-bit integer range; dropped",
        "outcome.json: list.2.x: -9223372036854775809 is outside the 64-bit integer range; dropped",
    ]


def test_a_file_nested_past_the_standard_readers_depth_is_named(tmp_path: Path) -> None:
    # A run of 19 digits sends the text to the standard reader, whose depth limit is a
    # RecursionError, not a ValueError.
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "metrics.json"
    path.write_text('{"n": 1234567890123456789, "deep": ' + deep + "}")
    errors: list[str] = []
    assert read_object(path, "metrics.json", errors) is None
    assert errors and errors[0].startswith("metrics.json: invalid JSON (maximum recursion depth")
    lines = tmp_path / "trace.jsonl"
    lines.write_text('{"n": 1234567890123456789}\n{"deep": ' + deep + '}\n{"k": 2}\n')
    errors = []
    assert read_object_lines(lines, "trace.jsonl", errors) == [{"n": 1234567890123456789}, {"k": 2}]
    assert errors == ["trace.jsonl: 1 line(s) not a JSON object (line 2)"]


def test_bytes_that_are_not_utf8_are_named_by_their_place(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b'{"a": "' + b"x" * 10_000 + b'\xff"}')
    errors: list[str] = []
    assert read_object(path, "run.json", errors) is None
    assert errors == ["run.json: not UTF-8 text (invalid start byte at byte 10007)"]
