"""The offline model's stream modes through real HTTP: each part of the real Messages API stream a
scripted task can ask for (pings, thinking blocks with their signatures, split usage, an
`overloaded_error` in the middle of a stream, HTTP 529), the `request-id` header of every answer,
and the refusal of a thinking block that is not the model's own."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL
from veriharness.offline.agent_policy import MLLM_TOOL
from veriharness.offline.server import running_offline_server
from veriharness.offline.stream_modes import stream_mode

ENVIRONMENT = " - Primary working directory: /tmp/ws-test\n"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """One server for the module (each request's label keeps its failure counts its own)."""
    with running_offline_server() as url:
        yield url


def _turn(*modes: str, stream: bool = True, messages: list[dict] | None = None) -> dict:
    # A label of its own keeps this request's failure counts apart from every other test's.
    system = "Rebuild reference.png as HTML.\n" + stream_mode(*modes, f"#{uuid.uuid4().hex}")
    return {
        "model": OFFLINE_AGENT_MODEL,
        "max_tokens": 32000,
        "stream": stream,
        "system": [{"type": "text", "text": system}],
        "tools": [{"name": MLLM_TOOL, "input_schema": {}}, {"name": "Write", "input_schema": {}}],
        "messages": messages
        or [
            {"role": "user", "content": [{"type": "text", "text": "Do the task."}]},
            {"role": "user", "content": [{"type": "text", "text": ENVIRONMENT}]},
        ],
    }


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    events = []
    for chunk in response.text.strip().split("\n\n"):
        name_line, data_line = chunk.split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert name_line == f"event: {data['type']}"  # the SSE name is the data's type
        events.append(data)
    return events


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def test_every_answer_carries_a_request_id(base_url: str) -> None:
    answers = [
        httpx.get(f"{base_url}/v1/models"),
        httpx.post(f"{base_url}/v1/messages", json=_turn()),
        httpx.post(f"{base_url}/v1/messages/count_tokens?beta=true", json=_turn(stream=False)),
        httpx.post(f"{base_url}/v1/messages", json={**_turn(), "model": "claude-x"}),
        httpx.post(f"{base_url}/v1/messages", json=_turn("http_529")),
    ]
    ids = [answer.headers.get("request-id") for answer in answers]
    assert all(i and i.startswith("req_offline_") for i in ids), ids
    assert len(set(ids)) == len(ids)
    # An error's body names its request too, as the real API's does.
    assert answers[3].status_code == 404 and answers[3].json()["request_id"] == ids[3]
    assert answers[2].json()["input_tokens"] > 0


def test_ping_events_come_after_the_start_and_after_each_block(base_url: str) -> None:
    plain = _types(_events(httpx.post(f"{base_url}/v1/messages", json=_turn())))
    pinged = _types(_events(httpx.post(f"{base_url}/v1/messages", json=_turn("ping"))))
    assert [t for t in pinged if t != "ping"] == plain
    block = ["content_block_start", "content_block_delta", "content_block_stop", "ping"]
    assert pinged == ["message_start", "ping", *block, *block, "message_delta", "message_stop"]


def test_a_thinking_block_streams_its_text_then_its_signature(base_url: str) -> None:
    events = _events(httpx.post(f"{base_url}/v1/messages", json=_turn("thinking")))
    start, thought, signed, stop = events[1:5]
    assert start["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert thought["delta"]["type"] == "thinking_delta" and thought["delta"]["thinking"]
    assert signed["delta"]["type"] == "signature_delta" and signed["delta"]["signature"]
    assert stop == {"type": "content_block_stop", "index": 0}
    # The text and the tool call follow at indices 1 and 2.
    opened = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert opened == ["thinking", "text", "tool_use"]
    plain = httpx.post(f"{base_url}/v1/messages", json=_turn(stream=False)).json()
    thinking = httpx.post(f"{base_url}/v1/messages", json=_turn("thinking", stream=False)).json()
    assert thinking["content"][0] == {
        "type": "thinking",
        "thinking": thought["delta"]["thinking"],
        "signature": signed["delta"]["signature"],
    }
    # Thinking is output the provider bills: the output count includes it.
    assert thinking["usage"]["output_tokens"] > plain["usage"]["output_tokens"]


def test_a_redacted_thinking_block_arrives_whole_in_its_start(base_url: str) -> None:
    events = _events(httpx.post(f"{base_url}/v1/messages", json=_turn("redacted_thinking")))
    start, stop = events[1:3]
    assert start["content_block"]["type"] == "redacted_thinking"
    assert start["content_block"]["data"] and stop["type"] == "content_block_stop"


def test_split_usage_reports_the_input_side_first_and_the_output_last(base_url: str) -> None:
    whole = httpx.post(f"{base_url}/v1/messages", json=_turn(stream=False)).json()["usage"]
    events = _events(httpx.post(f"{base_url}/v1/messages", json=_turn("split_usage")))
    first, last = events[0]["message"]["usage"], events[-2]["usage"]
    assert first["output_tokens"] == 1  # provisional, as the real API's
    assert first["cache_read_input_tokens"] > 0 and first["cache_creation_input_tokens"] > 0
    assert last == {"output_tokens": whole["output_tokens"]}
    input_side = (
        first["input_tokens"] + first["cache_read_input_tokens"]
        + first["cache_creation_input_tokens"]
    )  # fmt: skip
    assert input_side == pytest.approx(whole["input_tokens"], abs=2)  # the label's few tokens


def test_overloaded_error_ends_the_stream_after_its_first_delta_n_times(base_url: str) -> None:
    body = _turn("overloaded_error:2")
    for _ in range(2):
        events = _events(httpx.post(f"{base_url}/v1/messages", json=body))
        assert _types(events) == ["message_start", "content_block_start", "content_block_delta",
                                  "error"]  # fmt: skip
        assert events[-1]["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    whole = _types(_events(httpx.post(f"{base_url}/v1/messages", json=body)))
    assert whole[-2:] == ["message_delta", "message_stop"]
    # A later turn of the conversation is another request: it fails anew.
    later = {**body, "messages": [*body["messages"], {"role": "user", "content": "go on"}]}
    assert _types(_events(httpx.post(f"{base_url}/v1/messages", json=later)))[-1] == "error"
    # The same request unstreamed is answered: the mode is the stream's.
    assert httpx.post(f"{base_url}/v1/messages", json={**later, "stream": False}).status_code == 200


def test_http_529_answers_overloaded_then_the_message(base_url: str) -> None:
    body = _turn("http_529")
    refused = httpx.post(f"{base_url}/v1/messages", json=body)
    assert refused.status_code == 529
    error = refused.json()
    assert error["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert error["request_id"] == refused.headers["request-id"]
    assert httpx.post(f"{base_url}/v1/messages", json=body).status_code == 200


def test_an_unknown_mode_is_refused_by_name(base_url: str) -> None:
    answer = httpx.post(f"{base_url}/v1/messages", json=_turn("thinkin"))
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert "'thinkin'" in message and "redacted_thinking" in message


@pytest.mark.parametrize("kind", ["thinking", "redacted_thinking"])
def test_a_thinking_block_not_signed_by_the_model_is_refused(base_url: str, kind: str) -> None:
    first = httpx.post(f"{base_url}/v1/messages", json=_turn(kind, stream=False)).json()
    history = _turn()["messages"]
    turn = [*history, {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id":
             first["content"][-1]["id"], "content": "{}"}]}]  # fmt: skip
    # Passed back as it came, the block is accepted (the policy goes on with the task).
    assert httpx.post(f"{base_url}/v1/messages", json=_turn(messages=turn)).status_code == 200
    block = dict(first["content"][0])
    if kind == "thinking":
        block["thinking"] += " (edited)"
    else:
        block["data"] = block["data"][:-8] + "AAAAAAA="
    turn[2] = {"role": "assistant", "content": [block, *first["content"][1:]]}
    refused = httpx.post(f"{base_url}/v1/messages", json=_turn(messages=turn))
    assert refused.status_code == 400
    field = "signature" if kind == "thinking" else "data"
    assert refused.json()["error"]["message"] == (
        f"messages.2.content.0: Invalid `{field}` in `{kind}` block"
    )
