"""`agent_requests.jsonl`: one line per request of the agent to its model, as the model proxy
saw it (`agent/proxy.py` writes it, `agent/request_record.py` says what an admission check sees).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from veriharness.runfolder._files import JsonLinesFile

__all__ = ["AGENT_REQUESTS", "NAME", "AgentRequest", "read_agent_requests", "read_request_lines"]

NAME = "agent_requests.jsonl"


class AgentRequest(BaseModel):
    kind: str = "agent_request"
    # The proxy's arrival number of the request (1, 2, ...); records are written as requests
    # end, so their order in the file can differ. Answer snapshots name it (runfolder/snapshots).
    seq: int | None = None
    time: str  # when the request arrived (UTC, ISO 8601)
    method: str
    path: str
    model: str | None = None  # the model the request named
    # The model the provider answered with (its snapshot id: `message.model` of a stream's
    # message_start, or `model` of a JSON answer); None when the answer named none.
    response_model: str | None = None
    status: int | None = None  # None: no HTTP answer reached the agent (e.g. upstream refused)
    # The provider's id of its answer (its `request-id` header); None: no answer from upstream
    # (refused by the proxy, connection failed) or one without the header.
    request_id: str | None = None
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
    # An answered request whose reply reported no usage has no cost (P-36): the reason, and the
    # request's own max_tokens, which the caps count as its output in a conservative estimate.
    cost_unpriced_reason: str | None = None
    max_tokens: int | None = None
    # How long the proxy held the request before sending it, to keep to the provider's pace
    # (pace/); part of total_ms, and not the model's time.
    held_ms: float | None = None
    # What went wrong telling the answer snapshots of the request (the request went on).
    arrival_error: str | None = None
    # The server tools (their types) the request named that agent.allow_server_tools did not,
    # for which the proxy refused it (agent/server_tools.py); None: it named none.
    server_tools_refused: list[str] | None = None


AGENT_REQUESTS = JsonLinesFile(NAME, AgentRequest)


def read_agent_requests(run_dir: Path, errors: list[str]) -> list[AgentRequest] | None:
    """The run's request records, leniently (`_files`); None when the file cannot be read."""
    return AGENT_REQUESTS.read(run_dir, errors)


def read_request_lines(path: Path, errors: list[str]) -> list[AgentRequest] | None:
    """Request records from a file of this format at any path (a proxy may be pointed at one)."""
    return JsonLinesFile(Path(path).name, AgentRequest).read(Path(path).parent, errors)
