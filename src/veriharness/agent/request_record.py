"""What the model proxy records and checks of one request of the agent.

The proxy writes one `AgentRequest` (its model is in `runfolder/agent_requests.py`) per request
it received, answered or not, to `agent_requests.jsonl`; the collect stage reads them into the
`agent_requests` table and sums them into the runs table. `RequestFacts` is what an admission
check (a callable given to the proxy) sees before a request goes upstream, and `Refusal` what it
answers to stop it there.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from veriharness.runfolder.agent_requests import NAME, AgentRequest, read_request_lines

__all__ = [
    "REQUESTS_FILE",
    "UNANSWERED",
    "RequestFacts",
    "Refusal",
    "AgentRequest",  # re-exported for agent/session.py until its split imports it from runfolder
    "is_model_request",
    "read_requests",
    "longest_unanswered_s",
    "server_tools_refused",
]

REQUESTS_FILE = NAME
UNANSWERED = "open when the session ended"


def is_model_request(method: str, path: str) -> bool:
    """A request for a model's answer (`POST .../messages`): the one kind that is paced, priced
    and snapshotted; not `count_tokens` nor Claude Code's other calls."""
    return method == "POST" and path.split("?")[0].rstrip("/").endswith("/messages")


class RequestFacts(BaseModel):
    """A request as received, before it is sent upstream."""

    model_config = ConfigDict(frozen=True)
    method: str
    path: str
    model: str | None
    request_bytes: int
    body: bytes = Field(repr=False)


class Refusal(BaseModel):
    """An answer given instead of going upstream, in the provider's error shape."""

    model_config = ConfigDict(frozen=True)
    status: int = Field(ge=400, le=599)
    error_type: str
    message: str


def read_requests(path: Path) -> list[AgentRequest]:
    """The usable records of a file of `AgentRequest` lines (none when it is absent); a bad line
    is skipped (`runfolder`'s lenient reader), as only sums and waits are asked of them here."""
    return read_request_lines(path, []) or []


def longest_unanswered_s(requests: list[AgentRequest]) -> float:
    """How long the longest request still open at the session's end had waited without any
    answer from the model provider (0 when there was none)."""
    waits = [r.total_ms / 1000 for r in requests if r.open_at_end and r.status is None]
    return max(waits, default=0.0)


def server_tools_refused(requests: list[AgentRequest]) -> list[str]:
    """The server tool types the proxy refused in the session's requests, each once, sorted."""
    return sorted({kind for r in requests for kind in r.server_tools_refused or []})
