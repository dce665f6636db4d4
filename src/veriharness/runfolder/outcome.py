"""`outcome.json`: how a run's answer came to be.

Two writers, told apart by `kind`: `run-agent` writes an `AgentOutcome` when a session ends (or
could not start), `import-answer` an `ExternalOutcome` for an answer no session wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from veriharness._util.containment import Enforcement, Limit
from veriharness.runfolder._files import JsonFile, read_object, salvage

__all__ = [
    "AGENT_OUTCOME",
    "AppliedLimits",
    "EXTERNAL_OUTCOME",
    "NAME",
    "AgentOutcome",
    "Attempt",
    "ExternalOutcome",
    "Outcome",
    "SessionSlot",
    "SessionUsage",
    "Spend",
    "Status",
    "read_outcome",
    "read_status",
    "read_status_reason",
]

NAME = "outcome.json"

Status = Literal[
    "ok",
    "failed",
    "timeout",
    "max_turns",
    "resource_limit",
    "budget_exhausted",
    "not_started",
    "infra_error",
]


class AppliedLimits(BaseModel):
    """How the session's limits (config `agent.limits`) were enforced, each by what and at
    which value; `unavailable` says the machine offered no mechanism, and why."""

    memory: Enforcement
    processes: Enforcement
    disk: Enforcement


class SessionUsage(BaseModel):
    """The agent's tokens as Claude Code's result event reports them."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class SessionSlot(BaseModel):
    """The session slot a session held (agent/session_slots.py, P-67): which of how many, and how
    long it waited for it before its attempts began."""

    slot: int
    of: int
    waited_seconds: float


class Attempt(BaseModel):
    """One try of the session, as `outcome.json` lists it."""

    attempt: int
    status: Status
    cause: str | None = None
    started_at: str
    finished_at: str
    files: str | None = None  # where this attempt's files were kept, relative to the run folder


class Spend(BaseModel):
    """What the run cost at the experiment's prices (None: a price is missing). `agent_source`
    says how the agent's part was measured: `session` prices the usage of Claude Code's result
    event; `proxy` sums the agent proxy's per-request records."""

    agent_usd: float | None = None
    mllm_usd: float | None = None
    total_usd: float | None = None
    cost_estimated: bool = Field(
        default=False,
        description="part of the figures above is the caps' conservative estimate of requests "
        "whose reply reported no usage, not their cost (P-36)",
    )
    estimated_usd: float | None = Field(
        default=None, description="how much of total_usd is such an estimate"
    )
    agent_source: Literal["session", "proxy"] | None = None


class AgentOutcome(BaseModel):
    kind: Literal["agent_outcome"] = "agent_outcome"
    status: Status
    api_error_status: int | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    # Why a session was not started or was ended early: a spending cap (budget), or the
    # monitor's answer known under analysis.monitor.stop (stopped_early, never started).
    reason: Literal["budget", "stopped_early"] | None = None
    spend: Spend = Field(default_factory=Spend)
    exit_code: int | None = None
    result_subtype: str | None = None
    is_error: bool | None = None
    num_turns: int | None = None
    total_cost_usd: float | None = None
    usage: SessionUsage = Field(default_factory=SessionUsage)
    duration_ms: int | None = None
    duration_api_ms: int | None = None
    wall_seconds: float = 0.0
    session_seconds: float | None = None  # the claude process alone, from start to exit
    # Waits for the provider's pace (pace/), not the agent's time: before the session started,
    # and the proxy's holds of its requests (which extend its wall clock).
    admission_wait_seconds: float | None = None
    paced_seconds: float | None = None
    # The slot of `agent_sessions` it held (the wait for it came before started_at); None: run
    # without the cap (outside Snakemake), or recorded before the slots.
    session_slot: SessionSlot | None = None
    session_id: str | None = None
    mllm_connected: bool | None = None
    session_tools: list[str] | None = None  # the tools the session's init event listed
    answer_present: bool = False
    # Symbolic links the agent left as its answer or its assets, never followed nor copied.
    answer_links_refused: list[str] = Field(default_factory=list)
    # The server tools (their types) the model proxy refused the session's requests for
    # (agent.allow_server_tools did not name them; P-66), sorted.
    server_tools_refused: list[str] = Field(default_factory=list)
    claude_version: str | None = None
    sandboxed: bool | None = None  # None: recorded before the session boundary moved outside
    session_network: Literal["none", "open"] | None = None  # None: recorded before the setting
    enforced_limits: AppliedLimits | None = None  # None: not started, or recorded before limits
    limit: Limit | None = None  # the limit a resource_limit session passed
    offline: bool
    model: str
    user_message: str | None = None  # None only where the session was never started
    command: list[str] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)
    workspace: str | None = None
    workspace_kept: bool = False
    started_at: str
    finished_at: str
    error: str | None = None


class ExternalOutcome(BaseModel):
    """An answer imported from an external answer set (`import-answer`), with every file's
    sha256 so a changed answer cannot reach a scored run unnoticed."""

    kind: Literal["external_answer"] = "external_answer"
    status: Literal["ok", "missing_answer"]
    set: str
    condition: str
    task: str
    source: str
    source_path: str
    answer_present: bool
    files: dict[str, str] = Field(default_factory=dict)
    answer_sha256: str | None = None
    error: str | None = None


Outcome = AgentOutcome | ExternalOutcome

AGENT_OUTCOME = JsonFile(NAME, AgentOutcome)
EXTERNAL_OUTCOME = JsonFile(NAME, ExternalOutcome)
_BY_KIND: dict[Any, type[AgentOutcome] | type[ExternalOutcome]] = {
    "agent_outcome": AgentOutcome,
    "external_answer": ExternalOutcome,
}


def read_outcome(run_dir: Path, errors: list[str], name: str = NAME) -> Outcome | None:
    """The run's outcome as the model its `kind` names, leniently (`_files`)."""
    data = read_object(Path(run_dir) / name, name, errors)
    if data is None:
        return None
    model = _BY_KIND.get(data.get("kind"))
    if model is None:
        errors.append(f"{name}: kind: not an outcome kind (got {data.get('kind')!r:.60})")
        return None
    return salvage(model, data, name, errors)


class _StatusOnly(BaseModel):
    status: str
    reason: str | None = None


def read_status(run_dir: Path) -> str | None:
    """The status an outcome file states, or None when it states none; the rest of the file is
    not checked (a kept attempt's outcome may be of any age)."""
    stated = read_status_reason(run_dir)
    return stated[0] if stated is not None else None


def read_status_reason(run_dir: Path) -> tuple[str, str | None] | None:
    """The status an outcome file states and its `reason` (`budget` when a cap stopped it,
    `stopped_early` when the monitor's stop did), or
    None when it states no status; the rest of the file is not checked."""
    data = read_object(Path(run_dir) / NAME, NAME, [])
    found = None if data is None else salvage(_StatusOnly, data, NAME, [])
    return None if found is None else (found.status, found.reason)
