"""outcome.json through its run-folder module: strict writers, a lenient reader."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.runfolder.outcome import (
    AGENT_OUTCOME,
    AgentOutcome,
    ExternalOutcome,
    read_outcome,
    read_status,
)


def _agent(**changes: object) -> AgentOutcome:
    fields: dict[str, object] = {
        "status": "ok",
        "offline": True,
        "model": "m",
        "started_at": "2026-12-02T00:00:00+00:00",
        "finished_at": "2026-12-02T00:01:00+00:00",
    }
    return AgentOutcome.model_validate(fields | changes)


def test_what_the_writer_wrote_reads_back_equal(tmp_path: Path) -> None:
    outcome = _agent(num_turns=3)
    AGENT_OUTCOME.write(tmp_path, outcome)
    errors: list[str] = []
    assert read_outcome(tmp_path, errors) == outcome
    assert errors == []


def test_a_field_of_the_wrong_type_is_dropped_and_named_not_the_whole_file(tmp_path: Path) -> None:
    data = _agent(num_turns=3).model_dump(mode="json")
    data["num_turns"] = "three"
    data["spend"]["total_usd"] = [1]
    (tmp_path / "outcome.json").write_text(json.dumps(data))
    errors: list[str] = []
    read = read_outcome(tmp_path, errors)
    assert isinstance(read, AgentOutcome)
    assert (read.status, read.num_turns, read.spend.total_usd) == ("ok", None, None)
    assert len(errors) == 2
    assert any(e.startswith("outcome.json: num_turns: ") and "'three'" in e for e in errors)
    assert any(e.startswith("outcome.json: spend.total_usd: ") for e in errors)


def test_an_unusable_required_field_makes_the_file_unreadable_with_its_name(
    tmp_path: Path,
) -> None:
    data = _agent().model_dump(mode="json")
    data["status"] = "great"
    (tmp_path / "outcome.json").write_text(json.dumps(data))
    errors: list[str] = []
    assert read_outcome(tmp_path, errors) is None
    assert errors[0].startswith("outcome.json: status: ")
    assert errors[-1].startswith("outcome.json: unusable (status: Field required")
    assert read_status(tmp_path) == "great"  # the status alone, whatever it says
    (tmp_path / "outcome.json").write_text(json.dumps({"status": 3}))
    assert read_status(tmp_path) is None


def test_the_kind_chooses_the_model_and_an_unknown_kind_is_named(tmp_path: Path) -> None:
    external = {
        "kind": "external_answer",
        "status": "missing_answer",
        "set": "s",
        "condition": "external:s",
        "task": "t",
        "source": "dir",
        "source_path": "answers/<task>/answer.html",
        "answer_present": False,
    }
    (tmp_path / "outcome.json").write_text(json.dumps(external))
    assert isinstance(read_outcome(tmp_path, []), ExternalOutcome)
    assert read_status(tmp_path) == "missing_answer"
    (tmp_path / "outcome.json").write_text(json.dumps({"kind": "verdict", "status": "ok"}))
    errors: list[str] = []
    assert read_outcome(tmp_path, errors) is None
    assert errors == ["outcome.json: kind: not an outcome kind (got 'verdict')"]


def test_absent_and_broken_files_are_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_outcome(tmp_path, errors) is None
    (tmp_path / "outcome.json").write_text("{not json")
    assert read_outcome(tmp_path, errors) is None
    (tmp_path / "outcome.json").write_text("[1]")
    assert read_outcome(tmp_path, errors) is None
    assert errors[0] == "outcome.json: absent"
    assert errors[1].startswith("outcome.json: invalid JSON")
    assert errors[2] == "outcome.json: expected a JSON object, got list"
