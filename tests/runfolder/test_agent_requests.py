"""agent_requests.jsonl through its run-folder module: the proxy's lines, read leniently."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.agent.request_record import read_requests
from veriharness.runfolder.agent_requests import (
    AGENT_REQUESTS,
    AgentRequest,
    read_agent_requests,
)


def _requests() -> list[AgentRequest]:
    return [
        AgentRequest(time="t0", method="POST", path="/v1/messages", status=200, total_ms=12.5,
                     input_tokens=10, output_tokens=3, stop_reason="end_turn"),
        AgentRequest(time="t1", method="POST", path="/v1/messages", total_ms=900.0,
                     open_at_end=True),
    ]  # fmt: skip


def test_what_the_proxy_wrote_reads_back_equal(tmp_path: Path) -> None:
    for request in _requests():
        AGENT_REQUESTS.append(tmp_path, request)
    errors: list[str] = []
    assert read_agent_requests(tmp_path, errors) == _requests()
    assert read_requests(tmp_path / "agent_requests.jsonl") == _requests()
    assert errors == []


def test_a_field_of_the_wrong_type_is_dropped_and_named(tmp_path: Path) -> None:
    lines = [r.model_dump(mode="json") for r in _requests()]
    lines[0]["input_tokens"] = "ten"
    lines[1]["total_ms"] = "slow"  # required: the line goes, named
    text = "".join(json.dumps(line) + "\n" for line in lines) + "[1]\n"
    (tmp_path / "agent_requests.jsonl").write_text(text)
    errors: list[str] = []
    read = read_agent_requests(tmp_path, errors)
    assert read is not None and [r.time for r in read] == ["t0"]
    assert read[0].input_tokens is None and read[0].output_tokens == 3
    assert errors[0] == "agent_requests.jsonl: 1 line(s) not a JSON object (line 3)"
    assert errors[1].startswith("agent_requests.jsonl object 1: input_tokens: ")
    assert errors[2].startswith("agent_requests.jsonl object 2: total_ms: ")
    assert errors[3].startswith("agent_requests.jsonl object 2: unusable (total_ms: Field required")


def test_an_absent_file_is_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_agent_requests(tmp_path, errors) is None
    assert errors == ["agent_requests.jsonl: absent"]
    assert read_requests(tmp_path / "agent_requests.jsonl") == []
