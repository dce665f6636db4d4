"""One line of `agent_requests.jsonl`: what the model proxy saw of one request of the agent.

The proxy writes one `AgentRequest` per request it received, answered or not; the collect stage
reads them into the `agent_requests` table and sums them into the runs table. `RequestFacts` is
what an admission check (a callable given to the proxy) sees before a request goes upstream, and
`Refusal` what it answers to stop it there.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "REQUESTS_FILE",
    "UNANSWERED",
    "RequestFacts",
    "Refusal",
    "AgentRequest",
    "read_requests",
    "longest_unanswered_s",
]

REQUESTS_FILE = "agent_requests.jsonl"
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


class AgentRequest(BaseModel):
    kind: str = "agent_request"
    time: str  # when the request arrived (UTC, ISO 8601)
    method: str
    path: str
    model: str | None = None
    status: int | None = None  # None: no HTTP answer reached the agent (e.g. upstream refused)
    time_to_first_byte_ms: float | None = None
    total_ms: float
    streamed: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    stop_reason: str | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    error: str | None = None
    open_at_end: bool = False  # still open when the session ended; recorded by the proxy then


def read_requests(path: Path) -> list[AgentRequest]:
    """The records of a run's `agent_requests.jsonl` (none when the file is absent)."""
    if not path.is_file():
        return []
    return [
        AgentRequest.model_validate_json(line)
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def longest_unanswered_s(requests: list[AgentRequest]) -> float:
    """How long the longest request still open at the session's end had waited without any
    answer from the model provider (0 when there was none)."""
    waits = [r.total_ms / 1000 for r in requests if r.open_at_end and r.status is None]
    return max(waits, default=0.0)
