"""The agent's tool uses (transcript.jsonl) and the mllm server's calls (mllm_trace.jsonl) of one
run, and which call answers which tool use.

Linking CallMLLM tool uses to trace calls. The mllm server writes the trace; the agent writes
the transcript. Claude Code sends its tool-use id with each MCP call and the server records it
as ``tool_use_id``; a recorded id is used when the transcript has a CallMLLM tool use with that
id, and is named in the run's errors (link ``tool_use_id_unknown``) when it has none. A trace
without ids (an older trace, or a client that does not send them) is linked by order: the k-th
``mcp__mllm__call`` tool use of the transcript belongs to the k-th call of the trace (calls in
trace order of their first event, which is ``mllm_call_started`` or, for a request refused
before the model call, ``mllm_call_rejected``). A session's calls reach the server one after
another, so the orders agree. The instruction texts are compared as a check: a pair whose texts
differ is still linked by order but marked ``order_instruction_differs``, and a count mismatch
is named in the run's errors, so a doubtful link is visible instead of being guessed away.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from veriharness.collect.columns import CallFields, ToolUseFields
from veriharness.collect.typed import typed_value
from veriharness.runfolder.call_images import kept_image
from veriharness.runfolder.mllm_trace import read_trace_objects

__all__ = [
    "MLLM_TOOL",
    "ToolUse",
    "TraceCall",
    "CallLink",
    "summarize_input",
    "message_blocks",
    "callmllm_uses",
    "transcript_tool_uses",
    "group_trace",
    "link_calls",
    "linked_call_rows",
]

MLLM_TOOL = "mcp__mllm__call"
_SUMMARY_VALUE_CHARS = 120
_SUMMARY_CHARS = 400


class ToolUse(NamedTuple):
    """A CallMLLM tool use of the transcript: its id and the instruction it sent."""

    tool_use_id: str | None
    instruction: str | None


@dataclass
class TraceCall:
    """The events of one call of mllm_trace.jsonl, in trace order of their first event."""

    call_id: str
    started: dict[str, Any] | None = None
    end: dict[str, Any] | None = None

    @property
    def request(self) -> dict[str, Any]:
        """What the agent asked: the started event, or the request a rejection echoes."""
        if self.started is not None:
            return self.started
        echoed = (self.end or {}).get("request")
        return echoed if isinstance(echoed, dict) else {}

    @property
    def recorded_tool_use_id(self) -> str | None:
        for event in (self.started, self.end):
            found = event.get("tool_use_id") if isinstance(event, dict) else None
            if isinstance(found, str):
                return found
        return None


class CallLink(NamedTuple):
    """Which tool use a trace call answers, and how that was decided."""

    tool_use_id: str | None
    how: str  # tool_use_id | tool_use_id_unknown | order | order_instruction_differs | unmatched


def _cut(value: Any, floats: list[bool]) -> Any:
    """`value` with every long string cut; appends to `floats` when it holds a float."""
    if isinstance(value, str):
        if len(value) > _SUMMARY_VALUE_CHARS:
            return value[:_SUMMARY_VALUE_CHARS] + f"…[{len(value)} chars]"
        return value
    if isinstance(value, dict):
        return {k: _cut(v, floats) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, floats) for v in value]
    if isinstance(value, float):
        floats.append(True)
    return value


def _compact_json(value: Any, floats: bool) -> str:
    """`value` as `json.dumps(value, ensure_ascii=False, separators=(",", ":"))` writes it.
    orjson writes the same text eight times faster, except for floats (1e16 where the standard
    writer has 1e+16, null for NaN), which go to the standard writer, as does what orjson
    refuses (an integer past 64 bits, a lone surrogate)."""
    if not floats:
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:
            pass
    return _COMPACT.encode(value)


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def summarize_input(value: Any) -> str:
    """A tool input as compact JSON, every long string and the whole text visibly shortened."""
    floats: list[bool] = []
    text = _compact_json(_cut(value, floats), bool(floats))
    if len(text) > _SUMMARY_CHARS:
        text = text[:_SUMMARY_CHARS] + f"…[{len(text)} chars]"
    return text


# --- transcript ----------------------------------------------------------------------------------


def message_blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of a stream-json assistant or user event (empty when it has none)."""
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def callmllm_uses(events: list[dict[str, Any]]) -> list[ToolUse]:
    """The transcript's CallMLLM tool uses in order (cheaper than `transcript_tool_uses`)."""
    uses: list[ToolUse] = []
    for event in events:
        if event.get("type") != "assistant":
            continue
        for block in message_blocks(event):
            if block.get("type") == "tool_use" and block.get("name") == MLLM_TOOL:
                tool_input = block.get("input")
                instruction = (
                    tool_input.get("instruction") if isinstance(tool_input, dict) else None
                )
                uses.append(ToolUse(block.get("id"), instruction))
    return uses


def transcript_tool_uses(
    events: list[dict[str, Any]],
) -> tuple[list[ToolUseFields], list[ToolUse]]:
    """Rows for every tool use of a transcript, and its CallMLLM tool uses in order."""
    rows: list[ToolUseFields] = []
    by_id: dict[str, ToolUseFields] = {}
    turn, last_message = -1, object()
    for event in events:
        kind = event.get("type")
        if kind == "assistant":
            message_id = (event.get("message") or {}).get("id")
            if message_id is None or message_id != last_message:
                turn += 1
            last_message = message_id
            for block in message_blocks(event):
                if block.get("type") != "tool_use":
                    continue
                row: ToolUseFields = {
                    "seq": len(rows),
                    "turn": turn,
                    "tool_use_id": block.get("id"),
                    "tool": str(block.get("name")),
                    "input_summary": summarize_input(block.get("input")),
                    "is_error": None,
                    "has_result": False,
                    "timestamp": event.get("timestamp"),
                }
                rows.append(row)
                by_id[str(block.get("id"))] = row
        elif kind == "user":
            for block in message_blocks(event):
                result_of = by_id.get(str(block.get("tool_use_id")))
                if block.get("type") == "tool_result" and result_of is not None:
                    result_of["is_error"] = bool(block.get("is_error", False))
                    result_of["has_result"] = True
    return rows, callmllm_uses(events)


# --- CallMLLM trace ------------------------------------------------------------------------------

_CALL_END = {
    "mllm_call_completed": "completed",
    "mllm_call_failed": "failed",
    "mllm_call_rejected": "rejected",
}


def group_trace(events: list[dict[str, Any]], errors: list[str]) -> list[TraceCall]:
    """Trace events grouped by call_id; an event without call_id or of unknown kind is named."""
    calls: dict[str, TraceCall] = {}
    for event in events:
        name, call_id = event.get("event"), event.get("call_id")
        if call_id is None:
            errors.append(f"mllm_trace.jsonl: {name!r} event without call_id")
            continue
        call = calls.setdefault(str(call_id), TraceCall(str(call_id)))
        if name == "mllm_call_started":
            call.started = event
        elif name in _CALL_END:
            call.end = event
        else:
            errors.append(f"mllm_trace.jsonl: unknown event {name!r} for call {call_id}")
    return list(calls.values())


def _request_fields(request: dict[str, Any]) -> CallFields:
    tags = request.get("declared_capability_tags") or request.get("capability_tags") or []
    tags = [str(t) for t in tags] if isinstance(tags, list) else [str(tags)]
    inputs = [i for i in request.get("inputs") or [] if isinstance(i, dict)]
    images = [i for i in inputs if i.get("kind") == "image"]
    output = _mapping(request.get("output"))
    taxonomy = _mapping(request.get("taxonomy"))
    unique = sorted(set(tags))
    return {
        "tags": tags,
        "combination": "+".join(unique) if unique else None,
        "n_tags": len(unique),
        "taxonomy_version": taxonomy.get("version"),
        "instruction_chars": len(request.get("instruction") or ""),
        "image_count": len(images),
        "region_count": sum(1 for i in images if i.get("region")),
        "text_count": sum(1 for i in inputs if i.get("kind") == "text"),
        "output_kind": output.get("kind"),
        "schema_present": output.get("schema") is not None if output else None,
        "requested_profile": request.get("requested_model_profile") or request.get("model_profile"),
        "resolved_profile": request.get("resolved_model_profile"),
    }


def _mapping(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (a malformed field reads as absent)."""
    return value if isinstance(value, dict) else {}


class _KeptImages:
    """The kept file of each attached digest of one run, each digest checked once."""

    def __init__(self, run_dir: Path, errors: list[str]) -> None:
        self.run_dir, self.errors = run_dir, errors
        self._found: dict[str, str | None] = {}

    def of(self, started: dict[str, Any]) -> list[str]:
        names: list[str] = []
        for item in started.get("inputs") or []:
            if not isinstance(item, dict) or item.get("kind") != "image":
                continue
            digest = item.get("attached_sha256")
            if not isinstance(digest, str):
                continue
            if digest not in self._found:
                self._found[digest] = kept_image(self.run_dir, digest, self.errors)
            name = self._found[digest]
            if name is not None and name not in names:
                names.append(name)
        return names


def _call_row(seq: int, call: TraceCall, kept: _KeptImages, errors: list[str]) -> CallFields:
    row: CallFields = {"call_id": call.call_id, "seq": seq, "outcome": "unfinished"}
    row["tags"] = None
    if call.started is not None:
        row["started_at"] = call.started.get("time")
        row.update(_request_fields(call.started))
        row["call_images"] = kept.of(call.started)
    end = call.end
    if end is not None:
        name = end.get("event")
        row["outcome"] = _CALL_END[str(name)]
        usage = _mapping(end.get("usage"))
        where = f"mllm_trace.jsonl {call.call_id}"
        row["latency_ms"] = typed_value(end.get("latency_ms"), "Float64", where, errors)
        row["input_tokens"] = typed_value(usage.get("input_tokens"), "Int64", where, errors)
        row["output_tokens"] = typed_value(usage.get("output_tokens"), "Int64", where, errors)
        if name == "mllm_call_completed":
            row["truncated"] = typed_value(end.get("truncated", False), "boolean", where, errors)
            row["cost_usd"] = typed_value(end.get("cost_usd"), "Float64", where, errors)
            row["estimated_usd"] = typed_value(end.get("estimated_usd"), "Float64", where, errors)
            row["cost_unpriced_reason"] = end.get("cost_unpriced_reason")
            row["held_ms"] = typed_value(end.get("held_ms"), "Float64", where, errors)
        if name == "mllm_call_rejected":
            row["budget"] = typed_value(end.get("budget", False), "boolean", where, errors)
        for field in ("parse_status", "provider_model", "stop_reason", "error_type", "error"):
            row[field] = end.get(field)
        request = end.get("request")
        if name == "mllm_call_rejected" and isinstance(request, dict) and row["tags"] is None:
            row.update(_request_fields(request))
    return row


def link_calls(uses: list[ToolUse], calls: list[TraceCall], errors: list[str]) -> list[CallLink]:
    """For each trace call, the CallMLLM tool use it answers (see the module notes)."""
    links: list[CallLink] = []
    known = {use.tool_use_id for use in uses}
    for k, call in enumerate(calls):
        recorded = call.recorded_tool_use_id
        if recorded is not None and recorded in known:
            links.append(CallLink(recorded, "tool_use_id"))
        elif recorded is not None:
            links.append(CallLink(recorded, "tool_use_id_unknown"))
            errors.append(
                f"mllm_trace.jsonl: call {call.call_id} records tool_use_id {recorded!r}, which "
                f"no {MLLM_TOOL} tool use of transcript.jsonl has"
            )
        elif k >= len(uses):
            links.append(CallLink(None, "unmatched"))
        elif uses[k].instruction == call.request.get("instruction"):
            links.append(CallLink(uses[k].tool_use_id, "order"))
        else:
            links.append(CallLink(uses[k].tool_use_id, "order_instruction_differs"))
    if len(uses) != len(calls):
        errors.append(
            f"transcript.jsonl has {len(uses)} {MLLM_TOOL} tool use(s) but mllm_trace.jsonl "
            f"has {len(calls)} call(s); calls without a recorded tool_use_id are linked to tool "
            "uses by order"
        )
    differs = [calls[k].call_id for k, link in enumerate(links) if link.how.endswith("differs")]
    if differs:
        errors.append(
            "mllm_trace.jsonl: instruction differs from the tool use linked by order for call(s) "
            + ", ".join(differs)
        )
    return links


def linked_call_rows(
    run_dir: Path, uses: list[ToolUse] | None, errors: list[str]
) -> list[CallFields] | None:
    """One row per call of the run's mllm_trace.jsonl, start and end events merged, each linked
    to its tool use when the transcript's CallMLLM `uses` are known (None: unreadable)."""
    events = read_trace_objects(run_dir, errors)
    if events is None:
        return None
    grouped = group_trace(events, errors)
    kept = _KeptImages(Path(run_dir), errors)
    rows = [_call_row(i, c, kept, errors) for i, c in enumerate(grouped)]
    if uses is not None:
        for row, link in zip(rows, link_calls(uses, grouped, errors), strict=True):
            row["tool_use_id"], row["tool_use_link"] = link
    return rows
