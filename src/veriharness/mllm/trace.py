"""The CallMLLM trace: one JSON line per event, appended and flushed as it happens.

Events are told apart by ``event``. A call that reaches the model writes ``mllm_call_started``
and then either ``mllm_call_completed`` or ``mllm_call_failed``; a request refused before any
model call writes only ``mllm_call_rejected``. Inputs are recorded by digest, region and size,
never by their bytes (no base64); provider settings appear only as their hash, so neither a key
nor a base URL can reach the file.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from veriharness.experiment.tool_contract import ParseStatus, Region

__all__ = [
    "TracedText",
    "TracedImage",
    "TaxonomyRef",
    "Usage",
    "CallStarted",
    "CallCompleted",
    "CallFailed",
    "CallRejected",
    "TraceEvent",
    "TraceWriter",
    "now",
]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TracedText(_Model):
    kind: Literal["text"] = "text"
    label: str
    content: str


class TracedImage(_Model):
    kind: Literal["image"] = "image"
    label: str
    path: str
    file_sha256: str
    region: Region | None
    attached_sha256: str
    attached_bytes: int
    media_type: str
    width: int
    height: int


class TaxonomyRef(_Model):
    id: str
    version: str


class Usage(_Model):
    input_tokens: int | None
    output_tokens: int | None


class CallStarted(_Model):
    event: Literal["mllm_call_started"] = "mllm_call_started"
    call_id: str
    time: str
    instruction: str
    inputs: list[Annotated[TracedText | TracedImage, Field(discriminator="kind")]]
    declared_capability_tags: list[str]
    taxonomy: TaxonomyRef
    output: dict[str, Any]
    requested_model_profile: str | None
    resolved_model_profile: str
    resolved_model_config_hash: str
    tool_use_id: str | None = Field(
        default=None, description="The agent's id of the tool use, when the client sends it."
    )


class CallCompleted(_Model):
    event: Literal["mllm_call_completed"] = "mllm_call_completed"
    call_id: str
    time: str
    latency_ms: float
    raw_response: str
    parse_status: ParseStatus
    diagnostic: str | None
    usage: Usage
    provider_model: str | None
    stop_reason: str | None = None
    truncated: bool = False
    cost_usd: float | None = Field(
        default=None, description="The call's cost at the profile's price; null when unpriced."
    )


class CallFailed(_Model):
    event: Literal["mllm_call_failed"] = "mllm_call_failed"
    call_id: str
    time: str
    latency_ms: float
    error_type: str
    error: str


class CallRejected(_Model):
    event: Literal["mllm_call_rejected"] = "mllm_call_rejected"
    call_id: str
    time: str
    error: str
    budget: bool = Field(default=False, description="Refused because a spending cap is reached.")
    request: dict[str, Any] = Field(
        description="The arguments as received (paths, not image bytes), for as far as they parsed."
    )
    tool_use_id: str | None = None


TraceEvent = Annotated[
    CallStarted | CallCompleted | CallFailed | CallRejected, Field(discriminator="event")
]


class TraceWriter:
    """Appends events to one JSONL file; safe to share between concurrent calls."""

    def __init__(self, path: Path, redact: Callable[[str], str] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._redact = redact or (lambda text: text)
        self._lock = threading.Lock()
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the server

    def write(self, event: CallStarted | CallCompleted | CallFailed | CallRejected) -> None:
        line = self._redact(event.model_dump_json(by_alias=True)) + "\n"
        with self._lock:
            self._handle.write(line)
            self._handle.flush()

    def close(self) -> None:
        self._handle.close()
