"""What `outcome.json` takes from a session's stream-json transcript: the facts of its `init`
event (the session started: were the `mllm` server and its tools there) and of its `result`
event (the session ended by itself: how, after how many turns, at what usage).

Either is None when the transcript has no such event, which `outcome.classify` reads as "never
started" or "did not end by itself". A line that is not JSON (cut by a kill) is passed over.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from veriharness.runfolder.outcome import SessionUsage

__all__ = ["SessionInit", "SessionResult", "TranscriptSummary", "summarize_transcript"]


class SessionInit(BaseModel):
    """The `init` event: whether the `mllm` server connected, and the tools listed."""

    mllm_connected: bool
    session_tools: list[str] | None = None


class SessionResult(BaseModel):
    """The `result` event, as Claude Code reports it."""

    result_subtype: str | None = None
    is_error: bool | None = None
    num_turns: int | None = None
    total_cost_usd: float | None = None
    duration_ms: int | None = None
    duration_api_ms: int | None = None
    session_id: str | None = None
    api_error_status: int | None = None
    result_text: str | None = None  # for the classification only; not recorded
    usage: SessionUsage = SessionUsage()


class TranscriptSummary(BaseModel):
    init: SessionInit | None = None
    result: SessionResult | None = None


def _init(event: dict[str, Any]) -> SessionInit:
    servers = {s.get("name"): s.get("status") for s in event.get("mcp_servers", [])}
    tools = event.get("tools")
    return SessionInit(
        mllm_connected=servers.get("mllm") == "connected",
        session_tools=sorted(str(tool) for tool in tools) if isinstance(tools, list) else None,
    )


def _result(event: dict[str, Any]) -> SessionResult:
    usage = event.get("usage") or {}
    return SessionResult(
        result_subtype=event.get("subtype"),
        is_error=event.get("is_error"),
        num_turns=event.get("num_turns"),
        total_cost_usd=event.get("total_cost_usd"),
        duration_ms=event.get("duration_ms"),
        duration_api_ms=event.get("duration_api_ms"),
        session_id=event.get("session_id"),
        api_error_status=event.get("api_error_status"),
        result_text=event.get("result") if isinstance(event.get("result"), str) else None,
        usage=SessionUsage(**{k: v for k, v in usage.items() if k in SessionUsage.model_fields}),
    )


def summarize_transcript(path: Path) -> TranscriptSummary:
    """The init and result facts of a stream-json transcript (the last of each, if repeated)."""
    summary = TranscriptSummary()
    if not path.exists():
        return summary
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill; the transcript file keeps it as it came
        if event.get("type") == "system" and event.get("subtype") == "init":
            summary.init = _init(event)
        elif event.get("type") == "result":
            summary.result = _result(event)
    return summary
