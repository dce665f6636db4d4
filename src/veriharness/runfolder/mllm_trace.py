"""`mllm_trace.jsonl`: the CallMLLM server's events, one JSON object a line, told apart by `event`.

A call that reaches the model writes `mllm_call_started` and then `mllm_call_completed` or
`mllm_call_failed`; a request refused before any model call writes only `mllm_call_rejected`
(`mllm/trace.py` writes them). `Region` and `ParseStatus` are the tool contract's
(`experiment/tool_contract.py`); the trace records them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from veriharness.experiment.tool_contract import ParseStatus, Region
from veriharness.runfolder._files import read_object_lines, salvage

__all__ = [
    "NAME",
    "CallCompleted",
    "CallFailed",
    "CallRejected",
    "CallStarted",
    "CallUsage",
    "ParseStatus",
    "Region",
    "TaxonomyRef",
    "TraceEvent",
    "TracedImage",
    "TracedText",
    "read_trace",
    "read_trace_objects",
]

NAME = "mllm_trace.jsonl"


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


class CallUsage(_Model):
    """The tokens a CallMLLM call's provider reported."""

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
    usage: CallUsage
    provider_model: str | None
    stop_reason: str | None = None
    truncated: bool = False
    cost_usd: float | None = Field(
        default=None,
        description="The call's cost at the profile's price; null when unpriced (no price for "
        "the profile, or the provider reported no usage: see cost_unpriced_reason).",
    )
    cost_unpriced_reason: str | None = Field(
        default=None,
        description="Why a priced profile's call has no cost, e.g. the provider reported no usage.",
    )
    estimated_usd: float | None = Field(
        default=None,
        description="What the spending caps counted for the call when its usage was not "
        "reported (a conservative estimate, P-36); null otherwise.",
    )
    held_ms: float | None = Field(
        default=None,
        description="How long the call was held before it was sent, to keep to its provider's "
        "pace (part of latency_ms); null when it was not paced.",
    )


class CallFailed(_Model):
    event: Literal["mllm_call_failed"] = "mllm_call_failed"
    call_id: str
    time: str
    latency_ms: float
    # A provider fault (connection, timeout, http_status, bad_response), or cancelled: the
    # client cancelled the call while it was held by the provider's pace, and it was not sent.
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


Event = CallStarted | CallCompleted | CallFailed | CallRejected
_BY_EVENT: dict[Any, type[Event]] = {
    "mllm_call_started": CallStarted,
    "mllm_call_completed": CallCompleted,
    "mllm_call_failed": CallFailed,
    "mllm_call_rejected": CallRejected,
}


def read_trace_objects(run_dir: Path, errors: list[str]) -> list[dict[str, Any]] | None:
    """The trace's lines as the JSON objects they hold, for readers that group and link calls by
    their raw fields (`collect`, `report`); None when the file cannot be read."""
    return read_object_lines(Path(run_dir) / NAME, NAME, errors)


def read_trace(run_dir: Path, errors: list[str], name: str = NAME) -> list[Event] | None:
    """Every usable event of the run's trace, each as the model its `event` names, leniently
    (`_files`): an unknown event or one whose required fields are unusable is named and skipped;
    None when the file cannot be read."""
    objects = read_object_lines(Path(run_dir) / name, name, errors)
    if objects is None:
        return None
    events: list[Event] = []
    for number, data in enumerate(objects, start=1):
        where = f"{name} object {number}"
        model = _BY_EVENT.get(data.get("event"))
        if model is None:
            errors.append(f"{where}: event: not a trace event (got {data.get('event')!r:.60})")
            continue
        event = salvage(model, data, where, errors)
        if event is not None:
            events.append(event)
    return events
