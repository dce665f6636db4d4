"""attempts/<n>/attempt.json and finished/finished.json through their run-folder module, as
run-agent's attempts keeping writes them."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.agent.attempts import keep_earlier_attempt, keep_finished
from veriharness.runfolder.attempts import (
    FINISHED_COPY,
    attempt_numbers,
    read_attempt,
)


def _session_files(run_dir: Path, status: str | None) -> None:
    (run_dir / "run.json").write_text("{}")
    (run_dir / "transcript.jsonl").write_text('{"type": "system"}\n')
    (run_dir / "answer").mkdir()
    if status is not None:
        (run_dir / "outcome.json").write_text(json.dumps({"status": status}))


def test_what_attempts_keeping_wrote_reads_back(tmp_path: Path) -> None:
    _session_files(tmp_path, None)
    keep_earlier_attempt(tmp_path)
    _session_files(tmp_path, "ok")
    keep_finished(tmp_path)
    finished = FINISHED_COPY.read(tmp_path, [])
    assert finished is not None and finished.run_json.startswith("sha256:")
    keep_earlier_attempt(tmp_path)
    errors: list[str] = []
    assert attempt_numbers(tmp_path) == [1, 2]
    lost, redone = read_attempt(tmp_path, 1, errors), read_attempt(tmp_path, 2, errors)
    assert lost is not None and (lost.finished, lost.status) == (False, None)
    assert redone is not None and (redone.finished, redone.status) == (True, "ok")
    assert "outcome.json" in redone.files and errors == []


def test_a_field_of_the_wrong_type_is_dropped_and_named(tmp_path: Path) -> None:
    _session_files(tmp_path, "failed")
    kept = keep_earlier_attempt(tmp_path)
    assert kept is not None
    record = json.loads((kept / "attempt.json").read_text())
    record["status"] = ["failed"]
    (kept / "attempt.json").write_text(json.dumps(record))
    errors: list[str] = []
    read = read_attempt(tmp_path, 1, errors)
    assert read is not None and read.status is None and read.finished
    assert len(errors) == 1 and errors[0].startswith("attempts/1/attempt.json: status: ")


def test_absent_and_broken_files_are_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_attempt(tmp_path, 1, errors) is None
    (tmp_path / "finished").mkdir()
    (tmp_path / "finished" / "finished.json").write_text("{}")
    assert FINISHED_COPY.read(tmp_path, errors) is None
    assert errors[0] == "attempts/1/attempt.json: absent"
    assert errors[1].startswith("finished/finished.json: unusable (run_json: Field required")
