"""A run folder whose one CallMLLM call attached the agent's own render `draft.png` whole and as a
region, and `gone.png`; the mllm server kept the first two under call_images/, and a file of
gone.png's name holds other bytes (planted). For the report's and collect's tests."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from PIL import Image

from veriharness._util.hashing import sha256_bytes
from veriharness.runfolder.call_images import image_name
from veriharness.runfolder.mllm_trace import (
    CallCompleted,
    CallStarted,
    CallUsage,
    Region,
    TaxonomyRef,
    TracedImage,
)

__all__ = ["CROP", "DRAFT", "GONE", "REGION", "kept_call_run"]


def _png(width: int, height: int, color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


DRAFT = _png(60, 40, (10, 120, 200))
CROP = _png(20, 10, (10, 120, 200))  # what the server sent for the region: its own PNG
GONE = _png(8, 8, (0, 0, 0))
REGION = Region(x=5, y=6, width=20, height=10)


def _image(label: str, path: str, data: bytes, sent: bytes, region: Region | None) -> TracedImage:
    return TracedImage(
        label=label,
        path=path,
        file_sha256=sha256_bytes(data),
        region=region,
        attached_sha256=sha256_bytes(sent),
        attached_bytes=len(sent),
        media_type="image/png",
        width=60,
        height=40,
    )


def kept_call_run(run_dir: Path) -> Path:
    """`run_dir` (made or overwritten) holding a transcript and trace whose one call attached
    draft.png whole, a region of it, and gone.png; the server kept the first two, and a file of
    gone.png's name holds other bytes."""
    run_dir.mkdir(parents=True, exist_ok=True)
    started = CallStarted(
        call_id="c1",
        time="2026-01-01T00:00:00+00:00",
        instruction="Compare my draft with the reference.",
        inputs=[
            _image("draft", "draft.png", DRAFT, DRAFT, None),
            _image("detail", "draft.png", DRAFT, CROP, REGION),
            _image("gone", "gone.png", GONE, GONE, None),
        ],
        declared_capability_tags=["E1"],
        taxonomy=TaxonomyRef(id="veriharness-capabilities", version="0.1"),
        output={"kind": "text"},
        requested_model_profile=None,
        resolved_model_profile="default",
        resolved_model_config_hash="sha256:" + "cd" * 32,
        tool_use_id="toolu_1",
    )
    completed = CallCompleted(
        call_id="c1",
        time="2026-01-01T00:00:01+00:00",
        latency_ms=10.0,
        raw_response="They match.",
        parse_status="not_applicable",
        diagnostic=None,
        usage=CallUsage(input_tokens=10, output_tokens=3),
        provider_model="m",
    )
    (run_dir / "mllm_trace.jsonl").write_text(
        "".join(e.model_dump_json() + "\n" for e in (started, completed))
    )
    use = {"type": "tool_use", "id": "toolu_1", "name": "mcp__mllm__call", "input": {}}
    events: list[dict[str, Any]] = [{"type": "assistant", "message": {"content": [use]}}]
    (run_dir / "transcript.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    for data in (DRAFT, CROP):
        path = run_dir / image_name(sha256_bytes(data), "image/png")
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
    (run_dir / image_name(sha256_bytes(GONE), "image/png")).write_bytes(b"planted")
    return run_dir
