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
    "read_requests",
    "longest_unanswered_s",
]

REQUESTS_FILE = NAME
UNANSWERED = "open when the session ended"


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
