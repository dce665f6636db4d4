"""Earlier attempts of a session moved aside into attempts/<n>/ (agent/attempts.py), on real
files; the lost-job case end to end is in test_pipeline and the SLURM test."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.agent.attempts import keep_earlier_attempt


def _attempt(run: Path, transcript: str, outcome: str | None = None) -> None:
    (run / "transcript.jsonl").write_text(transcript)
    (run / "mcp_config.json").write_text("{}\n")
    if outcome is not None:
        (run / "outcome.json").write_text(json.dumps({"status": outcome}))
        (run / "answer").mkdir()
        (run / "answer" / "answer.html").write_text("<p>x</p>")


def test_nothing_to_keep_in_a_fresh_run_folder(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    assert keep_earlier_attempt(tmp_path) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_attempts_are_numbered_and_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    _attempt(tmp_path, '{"type": "system"}\n')
    first = keep_earlier_attempt(tmp_path)
    _attempt(tmp_path, '{"type": "result"}\n', outcome="ok")
    second = keep_earlier_attempt(tmp_path)

    assert (first, second) == (tmp_path / "attempts" / "1", tmp_path / "attempts" / "2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attempts", "run.json"]
    lost = json.loads((first / "attempt.json").read_text())
    assert (lost["finished"], lost["status"]) == (False, None)
    assert lost["files"] == ["transcript.jsonl", "mcp_config.json"]
    assert "no outcome.json" in lost["reason"]
    assert (first / "transcript.jsonl").read_text() == '{"type": "system"}\n'
    redone = json.loads((second / "attempt.json").read_text())
    assert (redone["finished"], redone["status"]) == (True, "ok")
    assert (second / "answer" / "answer.html").read_text() == "<p>x</p>"


def test_a_session_that_ended_but_lost_its_outcome_is_told_from_one_stopped_mid_way(
    tmp_path: Path,
) -> None:
    _attempt(tmp_path, '{"type": "system"}\n{"type": "result", "subtype": "success"}\n')
    kept = keep_earlier_attempt(tmp_path)
    assert kept is not None
    record = json.loads((kept / "attempt.json").read_text())
    assert (record["finished"], record["status"]) == (False, None)
    assert "ran to its end" in record["reason"] and "no outcome.json" in record["reason"]
