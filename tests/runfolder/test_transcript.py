"""transcript.jsonl through its run-folder module: Claude Code's events as the objects they are."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.runfolder.transcript import has_result, read_transcript

EVENTS = [
    {"type": "system", "subtype": "init", "session_id": "s", "tools": ["Read"]},
    {"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": "hi"}]}},
    {"type": "result", "subtype": "success", "num_turns": 1},
]


def test_the_events_read_back_in_order_and_the_result_is_found(tmp_path: Path) -> None:
    (tmp_path / "transcript.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    errors: list[str] = []
    assert read_transcript(tmp_path, errors) == EVENTS
    assert errors == [] and has_result(tmp_path)


def test_a_line_that_is_not_an_event_is_named_and_the_rest_kept(tmp_path: Path) -> None:
    lines = [json.dumps(EVENTS[0]), '{"type": "assistant", "mess', "3", json.dumps(EVENTS[1])]
    (tmp_path / "transcript.jsonl").write_text("\n".join(lines) + "\n")
    errors: list[str] = []
    assert read_transcript(tmp_path, errors) == EVENTS[:2]
    assert errors == ["transcript.jsonl: 2 line(s) not a JSON object (line 2, 3)"]
    assert not has_result(tmp_path)  # the session did not reach its result


def test_an_absent_file_is_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_transcript(tmp_path, errors) is None
    assert errors == ["transcript.jsonl: absent"] and not has_result(tmp_path)
