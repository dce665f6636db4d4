"""CallMLLM through its real boundaries: the SDK's stdio client, the server process, and a local
HTTP provider stub that records every byte it receives."""

from __future__ import annotations

import base64
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from mllm.mllm_provider_stub import ProviderStub, Received
from mllm.mllm_test_data import ANTHROPIC_KEY_VALUE, request
from veriharness._util.programs import project_root
from veriharness.experiment.taxonomy import load_taxonomy


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content)


def one_new(stub: ProviderStub, before: int) -> Received:
    new = stub.received[before:]
    assert len(new) == 1, f"expected exactly one provider request, got {len(new)}"
    return new[0]


def openai_images(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    out = []
    for part in body["messages"][0]["content"]:
        if part["type"] == "image_url":
            head, data = part["image_url"]["url"].split(",", 1)
            out.append((head.removeprefix("data:").removesuffix(";base64"), base64.b64decode(data)))
    return out


def openai_texts(body: dict[str, Any]) -> list[str]:
    return [p["text"] for p in body["messages"][0]["content"] if p["type"] == "text"]


def test_the_server_offers_one_tool_named_call_with_the_whole_request_schema(mllm) -> None:
    tools = mllm.list_tools().tools
    assert [t.name for t in tools] == ["call"]
    schema = tools[0].input_schema
    assert set(schema["properties"]) == {
        "instruction",
        "inputs",
        "capability_tags",
        "output",
        "model_profile",
    }
    assert set(schema["required"]) == {"instruction", "inputs", "capability_tags", "output"}
    taxonomy = load_taxonomy(project_root() / "prompts/taxonomy/capabilities-v0.1.yaml")
    assert schema["properties"]["capability_tags"]["items"]["enum"] == list(taxonomy.codes)
    assert {"ImageInput", "TextInput", "Region", "TextOutput", "JsonOutput"} <= set(schema["$defs"])
    for name, prop in schema["properties"].items():
        assert prop.get("description"), name
    assert "CallMLLM" in tools[0].description
    # D-0002: the agent is told up front that a text-only request is refused.
    assert "at least one image input" in tools[0].description
    assert "text inputs only is refused" in tools[0].description
    assert "at least one must be an image" in schema["properties"]["inputs"]["description"]


def test_the_input_schema_holds_the_rules_json_schema_can_state(mllm) -> None:
    """What a client validating against the advertised schema refuses before sending, and the
    one rule (unique labels) the schema cannot state and its description names instead."""
    from jsonschema import Draft202012Validator

    schema = mllm.list_tools().tools[0].input_schema
    inputs = schema["properties"]["inputs"]
    assert "Each label must be unique (JSON Schema cannot state this rule" in inputs["description"]
    validator = Draft202012Validator(schema)
    text = {"kind": "text", "label": "t", "content": "x"}
    image = {"kind": "image", "label": "i", "path": "shots/screen.png"}
    region = {"x": 5.0, "y": 0, "width": 10, "height": 10.0}
    assert validator.is_valid(request(inputs=[text, image | {"region": region}]))
    failing = {
        "text only": (request(inputs=[text]), "contains"),
        "repeated tags": (request(capability_tags=["E1", "E1"]), "uniqueItems"),
        "fractional x": (request(inputs=[image | {"region": region | {"x": 0.5}}]), "type"),
    }
    for name, (instance, keyword) in failing.items():
        [error] = validator.iter_errors(instance)
        # an error inside one input comes as the items' oneOf, with each branch's reasons below
        found, below = set(), [error]
        while below:
            found |= {e.validator for e in below}
            below = [c for e in below for c in e.context or []]
        assert keyword in found, (name, error.message)
    # labels: the schema lets a repeat through, the server refuses it (test_refusals_...)
    assert validator.is_valid(request(inputs=[image, image | {"path": "alpha.png"}]))


def test_integer_valued_numbers_are_integers_for_a_region(
    mllm, stub, workspace, trace_path
) -> None:
    """JSON Schema counts 5.0 as an integer, and so does the server (P-39)."""
    region = {"x": 17.0, "y": 13, "width": 81.0, "height": 57.0}
    before = len(stub.received)
    inputs = [{"kind": "image", "label": "crop", "path": "shots/screen.png", "region": region}]
    result = mllm.call(request(inputs=inputs))
    assert not result.is_error, text_of(result)
    [(_, data)] = openai_images(one_new(stub, before).json())
    with Image.open(workspace / "shots/screen.png") as original:
        assert Image.open(io.BytesIO(data)).tobytes() == original.crop((17, 13, 98, 70)).tobytes()
    started = [json.loads(line) for line in trace_path.read_text().splitlines()][-2]
    traced = started["inputs"][0]["region"]
    assert traced == {"x": 17, "y": 13, "width": 81, "height": 57}
    assert all(type(v) is int for v in traced.values())


def test_full_image_reaches_the_provider_as_the_original_bytes(mllm, stub, workspace) -> None:
    for path, media in (("shots/screen.png", "image/png"), ("photo.jpg", "image/jpeg")):
        before = len(stub.received)
        result = mllm.call(request(inputs=[{"kind": "image", "label": "img", "path": path}]))
        assert not result.is_error, text_of(result)
        assert text_of(result) == "stub reply"
        body = one_new(stub, before).json()
        assert openai_images(body) == [(media, (workspace / path).read_bytes())]


def test_region_reaches_the_provider_as_exactly_those_pixels(mllm, stub, workspace) -> None:
    region = {"x": 17, "y": 13, "width": 81, "height": 57}
    for path in ("shots/screen.png", "alpha.png", "photo.jpg"):
        before = len(stub.received)
        inputs = [{"kind": "image", "label": "crop", "path": path, "region": region}]
        result = mllm.call(request(inputs=inputs))
        assert not result.is_error, text_of(result)
        [(media, data)] = openai_images(one_new(stub, before).json())
        assert media == "image/png"
        sent = Image.open(io.BytesIO(data))
        assert sent.format == "PNG" and sent.size == (81, 57)
        with Image.open(workspace / path) as original:
            expected = original.crop((17, 13, 98, 70))
            assert sent.mode == expected.mode
            assert sent.tobytes() == expected.tobytes()


def test_full_and_region_of_one_file_under_two_labels(mllm, stub, workspace) -> None:
    before = len(stub.received)
    inputs = [
        {"kind": "image", "label": "whole", "path": "shots/screen.png"},
        {
            "kind": "image",
            "label": "detail",
            "path": "shots/screen.png",
            "region": {"x": 0, "y": 0, "width": 320, "height": 200},
        },
        {"kind": "text", "label": "markup", "content": "<h1>Hi</h1>"},
    ]
    result = mllm.call(request(inputs=inputs))
    assert not result.is_error, text_of(result)
    body = one_new(stub, before).json()
    texts = openai_texts(body)
    assert texts[0] == "Describe the screenshot."
    assert 'Input "whole" (image):' in texts and 'Input "detail" (image):' in texts
    assert 'Input "markup" (text):\n<h1>Hi</h1>' in texts
    images = openai_images(body)
    assert images[0][1] == (workspace / "shots/screen.png").read_bytes()
    with Image.open(workspace / "shots/screen.png") as original:
        assert Image.open(io.BytesIO(images[1][1])).tobytes() == original.tobytes()


def test_payload_is_byte_identical_whatever_the_tags_and_their_order(mllm, stub) -> None:
    bodies = []
    for tags in (["A1", "B1", "C2"], ["C2", "A1", "B1"], ["Z1"], ["H3", "E1"]):
        before = len(stub.received)
        assert not mllm.call(request(capability_tags=tags)).is_error
        bodies.append(one_new(stub, before).body)
    assert all(body == bodies[0] for body in bodies)
    for tag in ("A1", "B1", "C2", "Z1", "H3"):
        assert f'"{tag}"'.encode() not in bodies[0]


def test_anthropic_backend_sends_key_version_and_base64_image(mllm, stub, workspace) -> None:
    before = len(stub.received)
    result = mllm.call(request(model_profile="claude"))
    assert not result.is_error, text_of(result)
    received = one_new(stub, before)
    assert received.path == "/ok/v1/messages"
    assert received.headers["x-api-key"] == ANTHROPIC_KEY_VALUE
    assert received.headers["anthropic-version"] == "2023-06-01"
    body = received.json()
    assert body["model"] == "stub-claude" and body["max_tokens"] == 256
    [image] = [b for b in body["messages"][0]["content"] if b["type"] == "image"]
    assert image["source"]["media_type"] == "image/png"
    original = (workspace / "shots/screen.png").read_bytes()
    assert base64.b64decode(image["source"]["data"]) == original


def test_json_output_ok_invalid_and_schema_invalid(mllm, stub) -> None:
    schema = {
        "type": "object",
        "required": ["items"],
        "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
    }
    stub.replies.extend(['{"items": [1, 2]}', '{"items": [1,', '{"items": [1, "two"]}'])
    ok = mllm.call(request(output={"kind": "json", "schema": schema}))
    assert not ok.is_error and json.loads(text_of(ok)) == {"items": [1, 2]}
    broken = mllm.call(request(output={"kind": "json"}))
    assert not broken.is_error
    assert "invalid_json" in text_of(broken) and "line 1 column 14" in text_of(broken)
    assert text_of(broken).endswith('Raw reply:\n{"items": [1,')
    wrong = mllm.call(request(output={"kind": "json", "schema": schema}))
    assert not wrong.is_error
    assert "schema_invalid" in text_of(wrong) and "$.items[1]" in text_of(wrong)
    assert text_of(wrong).endswith('{"items": [1, "two"]}')


def test_json_contract_is_stated_in_the_request_and_native_mode_only_when_enabled(
    mllm, stub
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    plain_before = len(stub.received)
    stub.replies.append('{"n": 1}')
    mllm.call(request(output={"kind": "json", "schema": schema}))
    plain = one_new(stub, plain_before).json()
    assert "response_format" not in plain
    assert any("JSON" in t and json.dumps(schema) in t for t in openai_texts(plain))
    for output, expected in (
        ({"kind": "json"}, {"type": "json_object"}),
        (
            {"kind": "json", "schema": schema},
            {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}},
        ),
    ):
        before = len(stub.received)
        stub.replies.append('{"n": 1}')
        mllm.call(request(output=output, model_profile="native"))
        assert one_new(stub, before).json()["response_format"] == expected
    before = len(stub.received)
    mllm.call(request(model_profile="native"))
    assert "response_format" not in one_new(stub, before).json()


REFUSALS = [
    ({"instruction": "  "}, ["instruction", '"  "', "blank"]),
    ({"inputs": []}, ["inputs", "[]", "at least 1"]),
    (
        {"inputs": [{"kind": "text", "label": "t", "content": "What colour is the sky?"}]},
        ["inputs", "What colour is the sky?", "at least one input must be an image", "['text']"],
    ),
    (
        {
            "inputs": [
                {"kind": "text", "label": "a", "content": "x"},
                {"kind": "text", "label": "b", "content": "y"},
            ]
        },
        ["inputs", "at least one input must be an image", "['text', 'text']"],
    ),
    (
        {
            "inputs": [
                {"kind": "image", "label": "a", "path": "alpha.png"},
                {"kind": "text", "label": "a", "content": "x"},
            ]
        },
        ["inputs", "'a'", "unique", "JSON Schema cannot state"],
    ),
    ({"inputs": [{"kind": "video", "label": "v", "path": "x"}]}, ["inputs[0]", "'video'"]),
    ({"capability_tags": ["A1", "Q9"]}, ["capability_tags", "Q9", "valid codes: A1, A2"]),
    ({"capability_tags": ["A1", "A1"]}, ["capability_tags", "repeated", "A1", "uniqueItems"]),
    ({"capability_tags": []}, ["capability_tags", "[]"]),
    ({"output": {"kind": "text", "schema": {"type": "object"}}}, ["output", "kind 'json'"]),
    (
        {"output": {"kind": "json", "schema": {"type": "bogus"}}},
        ["output.schema", "bogus", "not a valid JSON Schema"],
    ),
    (
        {"output": {"kind": "json", "schema": {"items": {"$ref": "#/$defs/point"}}}},
        ["output.schema", "$ref '#/$defs/point'", "must point inside the schema"],
    ),
    ({"model_profile": "gpt-imaginary"}, ["model_profile", "gpt-imaginary", "default, native"]),
    ({"model_profile": "nokey"}, ["VH_TEST_UNSET_KEY", "not set"]),
    ({"temperature": 0.2}, ["temperature", "0.2", "not permitted"]),
    (
        {"inputs": [{"kind": "image", "label": "up", "path": "../outside/secret.png"}]},
        ["'up'", "../outside/secret.png", ".."],
    ),
    (
        {"inputs": [{"kind": "image", "label": "abs", "path": "/etc/hostname"}]},
        ["'abs'", "/etc/hostname", "outside the workspace"],
    ),
    (
        {"inputs": [{"kind": "image", "label": "ln", "path": "link.png"}]},
        ["'ln'", "link.png", "symlink"],
    ),
    (
        {"inputs": [{"kind": "image", "label": "gone", "path": "missing.png"}]},
        ["'gone'", "missing.png", "no such file"],
    ),
    (
        {"inputs": [{"kind": "image", "label": "dir", "path": "folder.png"}]},
        ["'dir'", "folder.png", "not a regular file"],
    ),
    (
        {"inputs": [{"kind": "image", "label": "txt", "path": "notes.txt"}]},
        ["'txt'", "notes.txt", "not an image"],
    ),
    (
        {"inputs": [{"kind": "image", "label": "big", "path": "huge.png"}]},
        ["'big'", "huge.png", "9000x5000", "40,000,000"],
    ),
    (
        {"inputs": [{"kind": "image", "label": "bmp", "path": "old.bmp"}]},
        ["'bmp'", "old.bmp", "BMP"],
    ),
    (
        {
            "inputs": [
                {
                    "kind": "image",
                    "label": "r",
                    "path": "alpha.png",
                    "region": {"x": 100, "y": 0, "width": 21, "height": 10},
                }
            ]
        },
        ["'r'", "x=121", "120x90", "never clamped"],
    ),
    (
        {
            "inputs": [
                {
                    "kind": "image",
                    "label": "r",
                    "path": "alpha.png",
                    "region": {"x": 0, "y": 0, "width": 0, "height": 10},
                }
            ]
        },
        ["inputs[0].region.width", "= 0", "greater than 0"],
    ),
    (
        {
            "inputs": [
                {
                    "kind": "image",
                    "label": "r",
                    "path": "alpha.png",
                    "region": {"x": -1, "y": 0, "width": 5, "height": 10},
                }
            ]
        },
        ["inputs[0].region.x", "= -1"],
    ),
    (
        {
            "inputs": [
                {
                    "kind": "image",
                    "label": "r",
                    "path": "alpha.png",
                    "region": {"x": 0.5, "y": 0, "width": 5, "height": 10},
                }
            ]
        },
        ["inputs[0].region.x", "0.5", "integer"],
    ),
    (
        {
            "inputs": [
                {
                    "kind": "image",
                    "label": "r",
                    "path": "alpha.png",
                    "region": {"x": "5", "y": True, "width": 5, "height": 10},
                }
            ]
        },
        ["inputs[0].region.x", '"5"', "inputs[0].region.y", "true", "integer"],
    ),
]


@pytest.mark.parametrize(
    ("overrides", "expected"), REFUSALS, ids=[f"refusal{i}" for i in range(len(REFUSALS))]
)
def test_refusals_reach_the_agent_naming_field_and_value_without_a_model_request(
    mllm, stub, trace_path: Path, overrides: dict[str, Any], expected: list[str]
) -> None:
    before = len(stub.received)
    result = mllm.call(request(**overrides))
    assert result.is_error
    message = text_of(result)
    for fragment in expected:
        assert fragment in message, (fragment, message)
    assert len(stub.received) == before
    last = json.loads(trace_path.read_text().splitlines()[-1])
    assert last["event"] == "mllm_call_rejected" and last["error"] == message
    assert last["request"] == request(**overrides)


def test_symlink_inside_the_workspace_is_followed(mllm, stub, workspace) -> None:
    before = len(stub.received)
    inputs = [{"kind": "image", "label": "l", "path": "shots/ok-link.png"}]
    result = mllm.call(request(inputs=inputs))
    assert not result.is_error, text_of(result)
    [(_, sent)] = openai_images(one_new(stub, before).json())
    assert sent == (workspace / "inner.png").read_bytes()


FAULTS = [
    ("down", "connection", "cannot reach"),
    ("broken", "http_status", 'HTTP 500: {"error": "stub internal failure"}'),
    ("overloaded", "http_status", "HTTP 529"),
    ("limited", "http_status", "HTTP 429"),
    ("truncated", "connection", "without sending complete message body"),
    ("slow", "timeout", "timeout 0.5s"),
    ("garbled", "bad_response", "anthropic-messages shape"),
]


@pytest.mark.parametrize(("profile", "error_type", "fragment"), FAULTS, ids=[f[0] for f in FAULTS])
def test_provider_faults_are_tool_errors_and_the_server_keeps_serving(
    mllm, stub, trace_path: Path, profile: str, error_type: str, fragment: str
) -> None:
    before = len(stub.received)
    result = mllm.call(request(model_profile=profile))
    assert result.is_error
    assert f"({error_type})" in text_of(result) and fragment in text_of(result)
    assert len(stub.received) - before == (0 if profile == "down" else 1)
    events = [json.loads(line) for line in trace_path.read_text().splitlines()]
    assert events[-1]["event"] == "mllm_call_failed"
    assert events[-1]["error_type"] == error_type
    assert events[-2]["event"] == "mllm_call_started"
    assert events[-2]["call_id"] == events[-1]["call_id"]
    assert text_of(mllm.call(request())) == "stub reply"


def test_a_call_waiting_on_its_provider_does_not_hold_up_another(mllm, stub, trace_path) -> None:
    before = len(stub.received)
    waiting = mllm.start_call(request(model_profile="patient"))
    for _ in range(2000):  # until the stub holds the first request (bounded; no time limit)
        if any(r.path.startswith("/hang/") for r in stub.received[before:]):
            break
        threading.Event().wait(0.005)
    else:
        raise AssertionError("the patient call never reached the provider")
    quick = mllm.call(request(instruction="Meanwhile, describe this."))
    assert text_of(quick) == "stub reply" and not waiting.done()
    slow = waiting.result(30)
    assert slow.is_error and "(timeout)" in text_of(slow)
    events = [json.loads(line) for line in trace_path.read_text().splitlines()]
    started = {e["call_id"]: e for e in events if e["event"] == "mllm_call_started"}
    ends = [e for e in events[-4:] if e["event"] != "mllm_call_started"]
    assert [e["event"] for e in ends] == ["mllm_call_completed", "mllm_call_failed"]
    assert started[ends[1]["call_id"]]["resolved_model_profile"] == "patient"


def test_over_http_a_request_without_the_session_token_is_refused(
    mllm, stub, workspace: Path, catalog_file: Path, tmp_path: Path
) -> None:
    """The transport run-agent uses: same tool and schema as over stdio, token required."""
    import os

    import httpx

    from mllm.mllm_mcp_client import BlockingMcpClient, HttpEndpoint, http_server

    token = "mllm-session-token-0123456789"
    env = dict(os.environ) | {"VH_STUB_URL": stub.base}
    trace = tmp_path / "trace.jsonl"
    with http_server(workspace, catalog_file, trace, env, token, tmp_path / "server.log") as url:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
            refused = httpx.post(url, json=hello, headers=headers)
            assert refused.status_code == 401 and "session token" in refused.text
        with pytest.raises(RuntimeError, match="did not start"):
            with BlockingMcpClient(HttpEndpoint(url, None)):
                pass
        before = len(stub.received)
        with BlockingMcpClient(HttpEndpoint(url, token)) as client:
            tools = client.list_tools().tools
            result = client.call(request(), meta={"claudecode/toolUseId": "toolu_http_1"})
        assert not result.is_error, text_of(result)
    over_stdio = mllm.list_tools().tools
    assert [t.model_dump() for t in tools] == [t.model_dump() for t in over_stdio]
    one_new(stub, before)
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [e["event"] for e in events] == ["mllm_call_started", "mllm_call_completed"]
    assert events[0]["tool_use_id"] == "toolu_http_1"


@pytest.mark.parametrize(
    ("profile", "stop", "limit"), [("cut-openai", "length", 5), ("cut-anthropic", "max_tokens", 7)]
)
def test_a_reply_cut_at_the_token_limit_is_marked_for_agent_and_trace(
    mllm, stub, trace_path: Path, profile: str, stop: str, limit: int
) -> None:
    stub.replies.append("The heading reads Wel")
    result = mllm.call(request(model_profile=profile))
    assert not result.is_error
    assert text_of(result) == (
        "The heading reads Wel\n[CallMLLM: the model stopped at its output limit of "
        f"{limit} tokens; the reply above is cut off.]"
    )
    last = json.loads(trace_path.read_text().splitlines()[-1])
    assert last["event"] == "mllm_call_completed"
    assert (last["stop_reason"], last["truncated"]) == (stop, True)
    assert last["raw_response"] == "The heading reads Wel"  # the trace keeps the reply as sent


def test_a_complete_reply_says_why_the_provider_stopped(mllm, stub, trace_path: Path) -> None:
    stub.replies.append("Welcome")
    assert text_of(mllm.call(request())) == "Welcome"
    last = json.loads(trace_path.read_text().splitlines()[-1])
    assert (last["stop_reason"], last["truncated"]) == ("stop", False)
