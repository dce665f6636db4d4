"""mllm_trace.jsonl through its run-folder module: what the server's writer wrote, read as the
model each event names, leniently."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.mllm.trace import TraceWriter
from veriharness.runfolder.mllm_trace import (
    CallCompleted,
    CallRejected,
    CallStarted,
    CallUsage,
    Region,
    TaxonomyRef,
    TracedImage,
    TracedText,
    read_trace,
    read_trace_objects,
)


def _events() -> list[CallStarted | CallCompleted | CallRejected]:
    image = TracedImage(
        label="ref", path="reference.png", file_sha256="sha256:a", attached_sha256="sha256:b",
        attached_bytes=10, media_type="image/png", width=4, height=3,
        region=Region(x=0, y=0, width=4, height=3),
    )  # fmt: skip
    started = CallStarted(
        call_id="c1", time="t0", instruction="Read it.",
        inputs=[image, TracedText(label="hint", content="a heading")],
        declared_capability_tags=["A1"], taxonomy=TaxonomyRef(id="tx", version="0.1"),
        output={"kind": "text"}, requested_model_profile=None, resolved_model_profile="default",
        resolved_model_config_hash="sha256:c", tool_use_id="toolu_1",
    )  # fmt: skip
    completed = CallCompleted(
        call_id="c1", time="t1", latency_ms=5.0, raw_response="hi", parse_status="ok",
        diagnostic=None, usage=CallUsage(input_tokens=3, output_tokens=1), provider_model="m",
        cost_usd=0.01,
    )  # fmt: skip
    rejected = CallRejected(call_id="c2", time="t2", error="no image", request={"inputs": []})
    return [started, completed, rejected]


def _write(run_dir: Path) -> None:
    writer = TraceWriter(run_dir / "mllm_trace.jsonl")
    for event in _events():
        writer.write(event)
    writer.close()


def test_what_the_writer_wrote_reads_back_equal(tmp_path: Path) -> None:
    _write(tmp_path)
    errors: list[str] = []
    assert read_trace(tmp_path, errors) == _events()
    assert [e["event"] for e in read_trace_objects(tmp_path, errors) or []] == [
        "mllm_call_started",
        "mllm_call_completed",
        "mllm_call_rejected",
    ]
    assert errors == []


def test_a_field_of_the_wrong_type_is_dropped_and_named(tmp_path: Path) -> None:
    _write(tmp_path)
    lines = (tmp_path / "mllm_trace.jsonl").read_text().splitlines()
    completed = json.loads(lines[1])
    completed["cost_usd"] = "cheap"
    lines[1] = json.dumps(completed)
    lines.append(json.dumps({"event": "mllm_call_paused", "call_id": "c3"}))
    (tmp_path / "mllm_trace.jsonl").write_text("\n".join(lines) + "\n")
    errors: list[str] = []
    events = read_trace(tmp_path, errors)
    assert events is not None and len(events) == 3
    assert isinstance(events[1], CallCompleted) and events[1].cost_usd is None
    assert errors[0].startswith("mllm_trace.jsonl object 2: cost_usd: ")
    assert (
        errors[1] == "mllm_trace.jsonl object 4: event: not a trace event (got 'mllm_call_paused')"
    )
    assert len(errors) == 2


def test_absent_and_broken_files_are_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_trace(tmp_path, errors) is None
    (tmp_path / "mllm_trace.jsonl").write_text('{"event": "mllm_call_started", "call_id": \n')
    assert read_trace(tmp_path, errors) == []
    assert errors[0] == "mllm_trace.jsonl: absent"
    assert errors[1] == "mllm_trace.jsonl: 1 line(s) not a JSON object (line 1)"
