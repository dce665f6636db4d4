"""The trace the server writes: complete, valid events, and nothing secret or bulky in them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from mllm_test_data import ANTHROPIC_KEY_VALUE, read_trace

from veriharness._util.hashing import sha256_bytes, sha256_file
from veriharness.experiment.catalog import load_catalog
from veriharness.runfolder.mllm_trace import CallCompleted, CallFailed, CallStarted


def test_trace_records_each_call_and_leaks_no_bytes_keys_or_urls(
    mllm, stub, workspace: Path, trace_path: Path, catalog_file: Path, server_log: Path
) -> None:
    region = {"x": 5, "y": 6, "width": 70, "height": 40}
    args = {
        "instruction": "Read the heading.",
        "inputs": [
            {"kind": "image", "label": "full", "path": "shots/screen.png"},
            {"kind": "image", "label": "part", "path": "shots/screen.png", "region": region},
            {"kind": "text", "label": "hint", "content": "a heading"},
        ],
        "capability_tags": ["B1", "A1"],
        "output": {"kind": "json"},
    }
    stub.replies.append('{"heading": "x"}')
    assert not mllm.call(args).is_error
    assert not mllm.call(args | {"model_profile": "claude"}).is_error
    assert mllm.call(args | {"model_profile": "broken"}).is_error

    events = read_trace(trace_path)
    started = [e for e in events if isinstance(e, CallStarted)]
    ends = {e.call_id: e for e in events if isinstance(e, CallCompleted | CallFailed)}
    assert started and all(s.call_id in ends for s in started)
    last_three = started[-3:]
    catalog = load_catalog(catalog_file)
    for event, profile in zip(last_three, ("default", "claude", "broken"), strict=True):
        assert event.resolved_model_profile == profile
        assert event.resolved_model_config_hash == catalog.profile_config_hash(
            catalog.resolve(profile)
        )
        assert event.declared_capability_tags == ["B1", "A1"]
        assert (event.taxonomy.id, event.taxonomy.version) == ("veriharness-capabilities", "0.1")
        assert event.output == {"kind": "json"}
        full, part, hint = event.inputs
        file_digest = sha256_file(workspace / "shots/screen.png")
        assert full.file_sha256 == full.attached_sha256 == file_digest
        assert part.file_sha256 == file_digest and part.region.model_dump() == region
        assert part.attached_sha256 != file_digest and (part.width, part.height) == (320, 200)
        assert hint.content == "a heading"
    completed = ends[last_three[0].call_id]
    assert isinstance(completed, CallCompleted)
    assert completed.parse_status == "ok" and completed.raw_response == '{"heading": "x"}'
    assert (completed.usage.input_tokens, completed.usage.output_tokens) == (13, 5)
    assert ends[last_three[2].call_id].error_type == "http_status"

    received = stub.received[-3].json()
    sent_crop = base64.b64decode(
        received["messages"][0]["content"][4]["image_url"]["url"].split(",", 1)[1]
    )
    assert sha256_bytes(sent_crop) == last_three[0].inputs[1].attached_sha256

    text = trace_path.read_text()
    image_b64 = base64.b64encode((workspace / "shots/screen.png").read_bytes()).decode()
    assert image_b64[100:160] not in text and "base64" not in text
    assert ANTHROPIC_KEY_VALUE not in text
    assert stub.base.split("//")[1] not in text and "VH_STUB_URL" not in text
    log = server_log.read_text()  # warnings and errors only: no provider address, no key
    assert stub.base.split("//")[1] not in log and ANTHROPIC_KEY_VALUE not in log
    for line in text.splitlines():
        assert json.loads(line)["event"].startswith("mllm_call_")


def test_trace_keeps_the_agents_tool_use_id_when_the_client_sends_it(
    mllm, stub, trace_path: Path
) -> None:
    args = {
        "instruction": "Read the heading.",
        "inputs": [{"kind": "image", "label": "full", "path": "shots/screen.png"}],
        "capability_tags": ["B1"],
        "output": {"kind": "text"},
    }
    stub.replies.append("Welcome")
    assert not mllm.call(args, meta={"claudecode/toolUseId": "toolu_abc123"}).is_error
    assert mllm.call(
        args | {"capability_tags": ["Q9"]}, meta={"claudecode/toolUseId": "toolu_refused"}
    ).is_error
    assert not mllm.call(args).is_error
    events = [json.loads(line) for line in trace_path.read_text().splitlines()]
    first_calls = [e for e in events if e["event"] in ("mllm_call_started", "mllm_call_rejected")]
    assert [e.get("tool_use_id") for e in first_calls[-3:]] == [
        "toolu_abc123",
        "toolu_refused",
        None,
    ]


def test_a_key_the_agent_puts_in_an_instruction_is_redacted_from_the_trace(
    mllm, stub, trace_path: Path
) -> None:
    args = {
        "instruction": f"Read the heading. (debug: key={ANTHROPIC_KEY_VALUE})",
        "inputs": [{"kind": "image", "label": "full", "path": "shots/screen.png"}],
        "capability_tags": ["B1"],
        "output": {"kind": "text"},
    }
    stub.replies.append("Welcome")
    assert not mllm.call(args, meta={"claudecode/toolUseId": "toolu_redact"}).is_error
    started = [
        json.loads(line) for line in trace_path.read_text().splitlines() if '"toolu_redact"' in line
    ]
    assert started[0]["instruction"] == (
        "Read the heading. (debug: key=[redacted:VH_TEST_ANTHROPIC_KEY])"
    )
    assert ANTHROPIC_KEY_VALUE not in trace_path.read_text()
