"""Earlier attempts of a run's session are moved aside into `attempts/<n>/`, never deleted.

A session writes its transcript, CallMLLM trace, stderr and MCP config into the run folder as it
runs; `outcome.json` is written last. When a cluster job is killed mid-session (time limit, node
failure, preemption), Snakemake removes the rule's declared outputs (`outcome.json`, `answer/`)
and the next invocation runs the session again. The transcript and trace are deliberately not
declared outputs, so they survive; `run-agent` then finds them before its own session starts and
moves them, with every other file of that attempt, into the next free `attempts/<n>/`, where
`attempt.json` says what is known about it. A run that finishes is, in the run folder itself,
the same as one that never lost an attempt.

A lost attempt never wrote an outcome, so it has no status of its own; `attempt.json` marks it
`finished: false`. Its reason tells a session that stopped mid-way from one whose transcript
holds its result, which ran to its end and lost only its outcome.

A session that ends keeps a second name for its outcome and answer in `finished/` (hard links,
with the digest of the run.json it ran under). Snakemake removes a job's declared outputs when it
reruns a job it had marked incomplete, as after it was itself killed while the session went on to
its end; `run-agent` then puts them back from `finished/` instead of paying for the session again.
Only `veriharness redo-session` (or changed run inputs) makes a finished session run again, and
its files are kept under `attempts/<n>/` like any other earlier attempt.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from veriharness._util import atomic
from veriharness._util.hashing import sha256_file
from veriharness.runfolder.attempts import (
    ATTEMPT_NAME,
    FINISHED,
    FINISHED_COPY,
    FINISHED_RECORD,
    FinishedCopy,
    KeptAttempt,
)
from veriharness.runfolder.call_images import CALL_IMAGES
from veriharness.runfolder.outcome import read_status
from veriharness.runfolder.snapshots import SNAPSHOTS
from veriharness.runfolder.superseded import forget_later_stages
from veriharness.runfolder.transcript import has_result

__all__ = [
    "FINISHED",
    "SESSION_FILES",
    "keep_earlier_attempt",
    "keep_finished",
    "not_redoable",
    "redo_session",
    "restore_finished",
]

_PARTIAL = f"{FINISHED}.partial"
# What Snakemake removes of a run_agent job it reruns: the rule's declared outputs.
_DECLARED = ("outcome.json", "answer")

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
    CALL_IMAGES,
    "answer",
    SNAPSHOTS,
    FINISHED,
    _PARTIAL,
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
INPUTS_CHANGED = (
    "a finished session whose run.json changed since it ran (the run's inputs changed), so the "
    "run was run again"
)
REQUESTED = "a finished session redone at the researcher's request (veriharness redo-session)"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _reason(run_dir: Path, finished: bool) -> str:
    if finished:
        return REDONE
    return ENDED_UNRECORDED if has_result(run_dir) else LOST


def _link_copy(source: Path, target: Path) -> None:
    """`target` as a second name of `source` (a file, or a folder of files and symlinks)."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, copy_function=os.link)
    else:
        os.link(source, target)


def _run_json(run_dir: Path) -> str | None:
    try:
        return sha256_file(run_dir / "run.json")
    except OSError:
        return None


def keep_finished(run_dir: Path) -> Path:
    """Give the outcome and answer of a session that just ended a second name in finished/."""
    partial = run_dir / _PARTIAL
    partial.mkdir()
    for name in _DECLARED:
        _link_copy(run_dir / name, partial / name)
    record = FinishedCopy(run_json=_run_json(run_dir) or "")
    atomic.write_json(partial / FINISHED_RECORD, record.model_dump())
    os.replace(partial, run_dir / FINISHED)
    return run_dir / FINISHED


def _finished_copy(run_dir: Path) -> FinishedCopy | None:
    return FINISHED_COPY.read_quietly(run_dir)


def _bring_back(run_dir: Path) -> None:
    """Put outcome.json and answer/ back from finished/ where Snakemake removed them."""
    if (run_dir / "outcome.json").exists():
        return
    if (run_dir / "answer").exists():  # a copy from the same session, left behind by a kill
        shutil.rmtree(run_dir / "answer")
    for name in _DECLARED:
        _link_copy(run_dir / FINISHED / name, run_dir / name)


def restore_finished(run_dir: Path) -> bool:
    """Restore the session in finished/ when it ran under the run.json the run has now; False
    when there is nothing to restore and the session is to be run."""
    copy = _finished_copy(run_dir)
    if copy is None or copy.run_json != _run_json(run_dir):
        return False
    _bring_back(run_dir)
    # Newer than run.json, which a rerun of prepare_run may have rewritten unchanged: otherwise
    # Snakemake would find the outcome out of date, and restore it again, on every invocation.
    os.utime(run_dir / "outcome.json")
    return True


def keep_earlier_attempt(run_dir: Path, reason: str | None = None) -> Path | None:
    """Move the files of an earlier attempt into attempts/<n>/; the folder, or None if none.
    `reason` says why, when the caller knows better than the files do."""
    copy = _finished_copy(run_dir)
    if copy is not None:
        _bring_back(run_dir)
        if copy.run_json != _run_json(run_dir):
            reason = reason or INPUTS_CHANGED
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
        status=read_status(run_dir) if finished else None,
        reason=reason or _reason(run_dir, finished),
        last_written_at=_iso(max((run_dir / name).stat().st_mtime for name in present)),
        kept_at=datetime.now(UTC).isoformat(timespec="seconds"),
        files=present,
    )
    for name in present:
        os.replace(run_dir / name, target / name)
    atomic.write_json(target / ATTEMPT_NAME, record.model_dump(mode="json"))
    return target


def not_redoable(run_dir: Path) -> str | None:
    """Why redo-session refuses a folder, or None."""
    if not (run_dir / "run.json").is_file():
        return f"run folder {str(run_dir)!r}: no run.json, so it is not a run folder"
    if not (run_dir / "outcome.json").exists() and _finished_copy(run_dir) is None:
        return f"run folder {str(run_dir)!r}: no finished session (no outcome.json)"
    return None


def redo_session(run_dir: Path) -> Path:
    """Move a run's session aside into attempts/<n>/ and remove what the later stages made of it,
    so that the next run of the workflow runs that session again; the attempt's folder."""
    run_dir = Path(run_dir)
    refusal = not_redoable(run_dir)
    if refusal is not None:
        raise ValueError(refusal)
    kept = keep_earlier_attempt(run_dir, REQUESTED)
    assert kept is not None  # outcome.json was there to move
    forget_later_stages(run_dir.parents[2], run_dir)
    return kept
