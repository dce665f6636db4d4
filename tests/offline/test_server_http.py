"""The Messages API side through real HTTP: SSE format, plain JSON, models, errors, request log."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx

from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL, OFFLINE_VISION_MODEL
from veriharness.offline.agent_policy import MLLM_TOOL

SYSTEM = "Rebuild reference.png as HTML.\n"
ENVIRONMENT = " - Primary working directory: /tmp/ws-test\n"


def _first_turn(stream: bool) -> dict:
    return {
        "model": OFFLINE_AGENT_MODEL,
        "max_tokens": 32000,
        "stream": stream,
        "system": [{"type": "text", "text": SYSTEM}],
        "tools": [{"name": MLLM_TOOL, "input_schema": {}}, {"name": "Write", "input_schema": {}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Do the task."}]},
            {"role": "system", "content": [{"type": "text", "text": ENVIRONMENT}]},
        ],
    }


def _sse(text: str) -> list[tuple[str, dict]]:
    events = []
    for chunk in text.strip().split("\n\n"):
        name_line, data_line = chunk.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert data["type"] == name_line.removeprefix("event: ")
        events.append((data["type"], data))
    return events


def test_streamed_tool_call_follows_the_protocol(base_url: str) -> None:
    response = httpx.post(f"{base_url}/v1/messages?beta=true", json=_first_turn(True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _sse(response.text)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names[1:-2] == ["content_block_start", "content_block_delta", "content_block_stop"] * 2
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["stop_reason"] is None
    tool_start = events[4][1]
    assert tool_start["index"] == 1 and tool_start["content_block"]["name"] == MLLM_TOOL
    delta = events[5][1]["delta"]
    assert delta["type"] == "input_json_delta"
    tool_input = json.loads(delta["partial_json"])
    assert tool_input["inputs"][0]["path"] == "reference.png"
    assert events[2][1]["delta"]["type"] == "text_delta"
    final = events[-2][1]
    assert final["delta"]["stop_reason"] == "tool_use" and final["usage"]["output_tokens"] > 0


def test_unstreamed_request_gets_the_same_message_as_json(base_url: str) -> None:
    plain = httpx.post(f"{base_url}/v1/messages", json=_first_turn(False)).json()
    streamed = _sse(httpx.post(f"{base_url}/v1/messages", json=_first_turn(True)).text)
    assert plain["type"] == "message" and plain["stop_reason"] == "tool_use"
    assert plain["id"] == streamed[0][1]["message"]["id"]
    # Both name the model that answered, as the real API does (the model proxy records it).
    assert plain["model"] == streamed[0][1]["message"]["model"] == OFFLINE_AGENT_MODEL
    tool = plain["content"][1]
    assert tool["type"] == "tool_use"
    assert tool["input"] == json.loads(streamed[5][1]["delta"]["partial_json"])


def test_models_in_both_list_shapes(base_url: str) -> None:
    listing = httpx.get(f"{base_url}/v1/models").json()
    assert listing["object"] == "list" and listing["has_more"] is False
    ids = [model["id"] for model in listing["data"]]
    assert ids == [OFFLINE_AGENT_MODEL, OFFLINE_VISION_MODEL]
    assert all(m["type"] == "model" and m["object"] == "model" for m in listing["data"])
    one = httpx.get(f"{base_url}/v1/models/{OFFLINE_VISION_MODEL}")
    assert one.status_code == 200 and one.json()["id"] == OFFLINE_VISION_MODEL
    other = httpx.post(f"{base_url}/v1/messages", json={**_first_turn(True), "model": "claude-x"})
    assert other.status_code == 404 and "'claude-x'" in other.json()["error"]["message"]
    missing = httpx.get(f"{base_url}/v1/models/claude-opus-4")
    assert missing.status_code == 404 and "'claude-opus-4'" in missing.json()["error"]["message"]


def test_auxiliary_and_unknown_requests(base_url: str, request_log: Path) -> None:
    counted = httpx.post(f"{base_url}/v1/messages/count_tokens", json=_first_turn(False))
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    unknown = httpx.post(f"{base_url}/v2/anything", json={})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
    bad = httpx.post(f"{base_url}/v1/messages", content=b"{not json")
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"]
    empty = httpx.post(f"{base_url}/v1/messages", json={"model": OFFLINE_AGENT_MODEL})
    assert empty.status_code == 400 and "messages" in empty.json()["error"]["message"]
    logged = [json.loads(line) for line in request_log.read_text().splitlines()]
    assert [(entry["method"], entry["path"]) for entry in logged] == [
        ("POST", "/v1/messages/count_tokens"),
        ("POST", "/v2/anything"),
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages"),
    ]
    assert logged[0]["body"]["system"][0]["text"] == SYSTEM
    assert logged[2]["body"] == "{not json"  # kept as text, not dropped


def test_serve_offline_verb_runs_until_terminated(tmp_path: Path) -> None:
    port_file, log = tmp_path / "port", tmp_path / "requests.jsonl"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "veriharness",
            "serve-offline",
            "--port-file",
            str(port_file),
            "--request-log",
            str(log),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "serve-offline never wrote its port file"
            time.sleep(0.05)
        port = int(port_file.read_text())
        response = httpx.get(f"http://127.0.0.1:{port}/v1/models")
        assert response.status_code == 200
    finally:
        process.terminate()
        code = process.wait(timeout=30)
    assert code == 0
    assert json.loads(log.read_text())["path"] == "/v1/models"


def test_serve_offline_refuses_a_bad_port(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "veriharness", "serve-offline", "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--port" in result.stderr and "70000" in result.stderr
