"""`snapshots/`: the answer over the session, as run-agent saw it from outside the sandbox.

`snapshots/index.jsonl` has one line per capture of the workspace's `answer.html` and `assets/`
(`agent/snapshots.py` says when one is taken): a numbered snapshot with the request it was taken
at, its time and the digest of every file, or a skipped capture with its reason. The files'
bytes are kept once each by digest under `snapshots/blobs/<sha256>`, so an asset that never
changes costs its size once per run. `materialize` lays one snapshot out as an answer folder,
checking every file against the digest the index recorded: a blob that was altered or removed
after the capture is named, never scored.

`trajectory.json` is what the score-trajectory verb made of them: each snapshot's render and
static metrics (the metrics of the final answer itself stay in metrics.json).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, TypeAdapter, ValidationError

from veriharness._util.hashing import sha256_bytes
from veriharness.runfolder._files import JsonFile, JsonLinesFile, may_hold_wide_integer

__all__ = [
    "SNAPSHOTS",
    "INDEX",
    "BLOBS",
    "SNAPSHOT_INDEX",
    "TRAJECTORY",
    "TRAJECTORY_NAME",
    "SnapshotEntry",
    "SnapshotScore",
    "TrajectoryRecord",
    "SnapshotTampered",
    "answer_digest",
    "blob_path",
    "materialize",
    "read_index",
    "read_trajectory",
    "read_snapshots",
]

SNAPSHOTS = "snapshots"
INDEX = f"{SNAPSHOTS}/index.jsonl"
BLOBS = f"{SNAPSHOTS}/blobs"
TRAJECTORY_NAME = "trajectory.json"


class SnapshotEntry(BaseModel):
    """One line of snapshots/index.jsonl: a snapshot taken (`n` set) or a capture skipped."""

    kind: Literal["answer_snapshot", "answer_snapshot_skipped"] = "answer_snapshot"
    n: int | None = None  # 1, 2, ... in order; None for a skipped capture
    at: Literal["request", "session_end"]
    request_seq: int | None = None  # the proxy's arrival number of the model request
    time: str  # UTC, ISO 8601
    seconds: float  # since the session's proxy started
    turn: int | None = None  # assistant messages in the request's conversation so far
    tool_uses: int | None = None  # tool uses in the request's conversation so far
    # Names of the tool uses since the previous snapshot, in order; None when the request's
    # conversation was not the session's main one (fewer tool uses than at the last snapshot).
    tool_uses_since: list[str] | None = None
    answer_sha256: str | None = None  # answer.html's digest; None: there was no answer.html
    answer_digest: str | None = None  # digest of every file's path and digest (answer_digest())
    files: dict[str, str] = {}  # path in the answer folder -> sha256 of its bytes
    bytes: int = 0
    refused_links: list[str] = []  # symbolic links in the answer, never followed
    skipped: str | None = None  # why a capture was not kept (a limit, an unreadable file)


class SnapshotScore(BaseModel):
    """One snapshot as scored: its render status and static metrics."""

    n: int
    answer_digest: str | None
    status: str  # the score's status (ok, no_render, ...), or "tampered" / "no_answer"
    render_status: str | None = None
    metrics: dict[str, float | None] = {}
    error: str | None = None
    scored_as: int | None = None  # an earlier snapshot with the same files, scored once
    # Its files are the run's answer: the score is the run's own render/ and metrics.json (the
    # static metrics of it), not a render of its own; trajectory/<n>/render/ holds only a link
    # to the run's render.png.
    reused_final: bool = False


class TrajectoryRecord(BaseModel):
    """trajectory.json."""

    kind: Literal["trajectory"] = "trajectory"
    scorer_version: str
    snapshots: list[SnapshotScore]


SNAPSHOT_INDEX = JsonLinesFile(INDEX, SnapshotEntry)
# A whole index checked in one call of the validator (a third less time than a call per line).
_INDEX_LINES = TypeAdapter(list[SnapshotEntry])
TRAJECTORY = JsonFile(TRAJECTORY_NAME, TrajectoryRecord)


class SnapshotTampered(ValueError):
    """A kept file no longer has the digest its snapshot recorded."""


def answer_digest(files: dict[str, str]) -> str:
    """One digest of a whole answer folder: of each file's path and digest, in path order."""
    text = "".join(f"{path}\0{digest}\n" for path, digest in sorted(files.items()))
    return sha256_bytes(text.encode())


def blob_path(run_dir: Path, digest: str) -> Path:
    return Path(run_dir) / BLOBS / digest.removeprefix("sha256:")


def read_snapshots(run_dir: Path, errors: list[str]) -> list[SnapshotEntry]:
    """The index's snapshots (skipped captures left out), in order of `n`; [] when absent."""
    return read_index(run_dir, errors)[0]


def read_index(run_dir: Path, errors: list[str]) -> tuple[list[SnapshotEntry], int]:
    """The index's snapshots in order of `n`, and how many captures it names as skipped; ([], 0)
    when absent.

    Only lines whose `n` continues the sequence count: a line the session could not have
    written (the run folder is outside its sandbox) but that was appended later out of order
    is named in `errors` and dropped."""
    path = SNAPSHOT_INDEX.path(run_dir)
    if not path.exists():
        return [], 0
    entries = _read_whole(path) or SNAPSHOT_INDEX.read(run_dir, errors) or []
    kept: list[SnapshotEntry] = []
    for entry in entries:
        if entry.n is None:
            continue
        if entry.n != len(kept) + 1:
            errors.append(f"{INDEX}: snapshot {entry.n} out of order after {len(kept)}; dropped")
            continue
        kept.append(entry)
    return kept, sum(1 for entry in entries if entry.skipped)


def _read_whole(path: Path) -> list[SnapshotEntry] | None:
    """Every line of an index that is whole and valid, parsed and checked in one pass; None at
    the first line that is not, or when it may hold an integer past 64 bits, which pydantic
    would take (the lenient reader then names what is wrong)."""
    try:
        data = path.read_bytes()
        if may_hold_wide_integer(data):
            return None
        lines = b",".join(line for line in data.splitlines() if line.strip())
        return _INDEX_LINES.validate_json(b"[" + lines + b"]")
    except (OSError, ValidationError):
        return None


def read_trajectory(run_dir: Path, errors: list[str]) -> TrajectoryRecord | None:
    """trajectory.json, leniently (`_files`) when it is not whole and valid; None when absent."""
    path = TRAJECTORY.path(run_dir)
    if not path.exists():
        return None
    try:
        data = path.read_bytes()
        if not may_hold_wide_integer(data):  # pydantic would take an integer past 64 bits
            return TrajectoryRecord.model_validate_json(data)
    except (OSError, ValidationError):
        pass
    return TRAJECTORY.read(run_dir, errors)


def materialize(run_dir: Path, entry: SnapshotEntry, out: Path) -> None:
    """Lay the snapshot's files out under `out` (made anew), each checked against its digest."""
    out.mkdir(parents=True)
    for name, digest in sorted(entry.files.items()):
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise SnapshotTampered(f"snapshot {entry.n}: file name {name!r} leaves the answer")
        source = blob_path(run_dir, digest)
        try:
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as error:
            raise SnapshotTampered(
                f"snapshot {entry.n}: {name} ({digest}) cannot be read: {error}"
            ) from None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        if sha256_bytes(data) != digest:
            raise SnapshotTampered(
                f"snapshot {entry.n}: {name}'s kept bytes no longer have the digest {digest}"
            )
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
