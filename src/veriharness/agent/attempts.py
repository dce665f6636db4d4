"""Earlier attempts of a run's session are moved aside into `attempts/<n>/`, never deleted.

A session writes its transcript, CallMLLM trace, stderr and MCP config into the run folder as it
runs; `outcome.json` is written last. When a cluster job is killed mid-session (time limit, node
failure, preemption), Snakemake removes the rule's declared outputs (`outcome.json`, `answer/`)
and the next invocation runs the session again. The transcript and trace are deliberately not
declared outputs, so they survive; `run-agent` then finds them before its own session starts and
moves them, with every other file of that attempt, into the next free `attempts/<n>/`, where
`attempt.json` says what is known about it. A run that finishes is, in the run folder itself,
the same as one that never lost an attempt.

Where this meets the session status `infra_error` (issue 14): a lost attempt never wrote an
outcome, so it has no status of its own; `attempt.json` marks it `finished: false`. Its reason
tells a session that stopped mid-way from one whose transcript holds its result, which ran to its
end and lost only its outcome (Snakemake removed it with the job's other declared outputs).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from veriharness._util import atomic

__all__ = ["SESSION_FILES", "KeptAttempt", "keep_earlier_attempt"]

# Everything one attempt of a session writes into the run folder.
SESSION_FILES = (
    "outcome.json",
    "transcript.jsonl",
    "mllm_trace.jsonl",
    "claude_stderr.log",
    "mcp_config.json",
    "model_requests.jsonl",
    "agent_requests.jsonl",
    "mllm_server.log",
    "answer",
)
LOST = (
    "no outcome.json: the session stopped before recording its outcome (its cluster job was "
    "killed by the scheduler, its node was lost, or the job was interrupted)"
)
ENDED_UNRECORDED = (
    "no outcome.json, but the transcript holds the session's result: the session ran to its end "
    "and its outcome was removed before the run was run again (Snakemake removes the declared "
    "outputs of a job it had marked incomplete, as when it was killed while the session went on)"
)
REDONE = "outcome.json present: a finished session whose run was run again"


class KeptAttempt(BaseModel):
    """attempts/<n>/attempt.json."""

    attempt: int
    finished: bool
    status: str | None
    reason: str
    last_written_at: str
    kept_at: str
    files: list[str]


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _status(outcome: Path) -> str | None:
    try:
        status = json.loads(outcome.read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return status if isinstance(status, str) else None


def _has_result(transcript: Path) -> bool:
    """Whether a stream-json transcript holds its session's closing result event."""
    try:
        lines = transcript.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "result":
            return True
    return False


def _reason(run_dir: Path, finished: bool) -> str:
    if finished:
        return REDONE
    return ENDED_UNRECORDED if _has_result(run_dir / "transcript.jsonl") else LOST


def keep_earlier_attempt(run_dir: Path) -> Path | None:
    """Move the files of an earlier attempt into attempts/<n>/; the folder, or None if none."""
    present = [name for name in SESSION_FILES if (run_dir / name).exists()]
    if not present:
        return None
    attempts = run_dir / "attempts"
    taken = [int(p.name) for p in attempts.glob("*") if p.name.isdigit()]
    number = max(taken, default=0) + 1
    target = attempts / str(number)
    target.mkdir(parents=True)
    finished = "outcome.json" in present
    record = KeptAttempt(
        attempt=number,
        finished=finished,
        status=_status(run_dir / "outcome.json") if finished else None,
        reason=_reason(run_dir, finished),
        last_written_at=_iso(max((run_dir / name).stat().st_mtime for name in present)),
        kept_at=datetime.now(UTC).isoformat(timespec="seconds"),
        files=present,
    )
    for name in present:
        os.replace(run_dir / name, target / name)
    atomic.write_json(target / "attempt.json", record.model_dump())
    return target
