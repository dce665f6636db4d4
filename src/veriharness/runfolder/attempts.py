"""`attempts/<n>/attempt.json` and `finished/finished.json`: what `run-agent` keeps of a
session's earlier attempts, and the digest of the run.json a finished session ran under.

`agent/attempts.py` says when each is written.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from veriharness.runfolder._files import JsonFile, read_object, salvage

__all__ = [
    "ATTEMPTS",
    "ATTEMPT_NAME",
    "FINISHED",
    "FINISHED_COPY",
    "FINISHED_RECORD",
    "FinishedCopy",
    "KeptAttempt",
    "attempt_numbers",
    "read_attempt",
]

ATTEMPTS = "attempts"
ATTEMPT_NAME = "attempt.json"
FINISHED = "finished"
FINISHED_RECORD = "finished.json"


class FinishedCopy(BaseModel):
    """finished/finished.json: the sha256 of the run.json the session in finished/ ran under
    (its status and times are in finished/outcome.json)."""

    run_json: str


class KeptAttempt(BaseModel):
    """attempts/<n>/attempt.json."""

    attempt: int
    finished: bool
    status: str | None = None  # None: a lost attempt wrote no outcome
    reason: str
    last_written_at: str
    kept_at: str
    files: list[str]


FINISHED_COPY = JsonFile(f"{FINISHED}/{FINISHED_RECORD}", FinishedCopy)


def attempt_numbers(run_dir: Path) -> list[int]:
    """The numbers of the run's kept attempts, in order."""
    return sorted(int(p.name) for p in (Path(run_dir) / ATTEMPTS).glob("*") if p.name.isdigit())


def read_attempt(run_dir: Path, number: int, errors: list[str]) -> KeptAttempt | None:
    """attempts/<number>/attempt.json, leniently (`_files`), named with its folder."""
    name = f"{ATTEMPTS}/{number}/{ATTEMPT_NAME}"
    data = read_object(Path(run_dir) / name, name, errors)
    return None if data is None else salvage(KeptAttempt, data, name, errors)
