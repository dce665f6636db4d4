"""The answer over the session: captured by run-agent, outside the sandbox, at the agent's
model requests (docs/decisions.md P-56).

The model proxy tells `AnswerSnapshots` of every model request it receives (`POST .../messages`)
before the request goes on. At that moment the agent is waiting for its model, so what the
workspace holds is what the agent had made by then. When `answer.html` or `assets/` changed
since the last capture, their files are kept (`runfolder/snapshots.py`: the index line, and the
bytes once each by digest). At the session's end the copied answer is captured once more, so
the last snapshot is always the run's answer.

The workspace is the agent's, so it is read as hostile: symbolic links are never followed
(named in the snapshot), only regular files are read, through descriptors opened without
following links, and the bounds are checked before anything is kept: at most
`max_count` snapshots taken at requests and `max_mib` per snapshot (the session-end capture is
always attempted, within the size bound). A capture not kept is an index line with its reason.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from veriharness._util import atomic
from veriharness._util.hashing import sha256_bytes
from veriharness.agent.workspace import ANSWER_ENTRYPOINT, ASSETS_DIR
from veriharness.runfolder.snapshots import (
    SNAPSHOT_INDEX,
    SnapshotEntry,
    answer_digest,
    blob_path,
)

__all__ = ["AnswerSnapshots", "ConversationFacts", "conversation_facts"]


class ConversationFacts:
    """What a model request's body says of the conversation so far."""

    def __init__(self, turn: int | None, tool_names: list[str] | None) -> None:
        self.turn = turn
        self.tool_names = tool_names


def conversation_facts(body: bytes) -> ConversationFacts:
    """The assistant turns and the tool uses (names, in order) of a Messages API body."""
    try:
        value = json.loads(body)
    except ValueError:
        return ConversationFacts(None, None)
    messages = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(messages, list):
        return ConversationFacts(None, None)
    turn, names = 0, []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        turn += 1
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                names.append(str(block.get("name")))
    return ConversationFacts(turn, names)


class _Read:
    """The answer's files as read from a folder: path -> bytes, and the links refused."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.refused: list[str] = []
        self.size = 0


class _TooLarge(Exception):
    pass


def _too_large(limit: int, name: str) -> str:
    return f"execution.snapshots.max_mib: the answer passes {limit} bytes at {name}"


def _read_file(path: Path, name: str, into: _Read, limit: int) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        if os.path.islink(path):
            into.refused.append(name)
            return
        raise OSError(f"{name}: {error.strerror or error}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            into.refused.append(name)
            return
        if into.size + info.st_size > limit:
            raise _TooLarge(_too_large(limit, name))
        data = handle.read(limit - into.size + 1)
    into.size += len(data)
    if into.size > limit:
        raise _TooLarge(_too_large(limit, name))
    into.files[name] = data


def _read_answer(folder: Path, limit: int) -> _Read:
    """answer.html and every regular file under assets/, links refused, within `limit` bytes."""
    read = _Read()
    entry = folder / ANSWER_ENTRYPOINT
    if entry.is_symlink():
        read.refused.append(ANSWER_ENTRYPOINT)
    elif entry.exists():
        _read_file(entry, ANSWER_ENTRYPOINT, read, limit)
    assets = folder / ASSETS_DIR
    if assets.is_symlink():
        read.refused.append(ASSETS_DIR)
        return read
    if not assets.is_dir():
        return read
    for root, dirs, names in os.walk(assets):  # os.walk never follows links into folders
        base = Path(root)
        for name in sorted(dirs):
            if (base / name).is_symlink():
                read.refused.append((base / name).relative_to(folder).as_posix())
        for name in sorted(names):
            _read_file(base / name, (base / name).relative_to(folder).as_posix(), read, limit)
    read.refused.sort()
    return read


class AnswerSnapshots:
    """Captures one session's answer into the run folder; safe to call from several threads."""

    def __init__(self, workspace: Path, run_dir: Path, max_count: int, max_mib: float) -> None:
        self.workspace = workspace
        self.run_dir = run_dir
        self.max_count = max_count
        self.max_bytes = int(max_mib * 1024 * 1024)
        self._began = time.monotonic()
        self._lock = threading.Lock()
        self._last: str | None = None  # answer_digest of the latest snapshot
        self._taken = 0  # snapshots at requests
        self._n = 0
        self._tool_uses = 0  # tool uses of the main conversation at the latest snapshot
        self._skipped_for_count = False
        SNAPSHOT_INDEX.path(run_dir).parent.mkdir(parents=True, exist_ok=True)

    def at_request(self, seq: int, body: bytes) -> None:
        """Capture the workspace's answer if it changed (called as a model request arrives)."""
        with self._lock:
            self._capture(self.workspace, "request", seq, body)

    def at_end(self, answer_dir: Path) -> None:
        """Capture the answer copied out of the workspace when the session ended, if it differs
        from the latest snapshot."""
        with self._lock:
            self._capture(answer_dir, "session_end", None, None)

    def _capture(self, folder: Path, at: str, seq: int | None, body: bytes | None) -> None:
        base: dict[str, Any] = {
            "at": at,
            "request_seq": seq,
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "seconds": round(time.monotonic() - self._began, 3),
        }
        try:
            read = _read_answer(folder, self.max_bytes)
        except (_TooLarge, OSError) as error:
            self._skip(base, str(error))
            return
        if ANSWER_ENTRYPOINT not in read.files and self._n == 0:
            return  # nothing made yet
        files = {name: sha256_bytes(data) for name, data in read.files.items()}
        digest = answer_digest(files)
        if digest == self._last:
            return
        if at == "request" and self._taken >= self.max_count:
            if not self._skipped_for_count:  # once: the reason holds for every later change
                self._skipped_for_count = True
                self._skip(base, f"execution.snapshots.max_count {self.max_count} reached")
            return
        facts = conversation_facts(body) if body is not None else ConversationFacts(None, None)
        since = None
        if facts.tool_names is not None and len(facts.tool_names) >= self._tool_uses:
            since = facts.tool_names[self._tool_uses :]
            self._tool_uses = len(facts.tool_names)
        try:
            for name, data in read.files.items():
                target = blob_path(self.run_dir, files[name])
                if not target.exists():
                    atomic.write_bytes(target, data)
        except OSError as error:
            self._skip(base, f"the snapshot's files could not be kept: {error}")
            return
        self._n += 1
        self._taken += at == "request"
        self._last = digest
        entry = SnapshotEntry(
            **base,
            n=self._n,
            turn=facts.turn,
            tool_uses=None if facts.tool_names is None else len(facts.tool_names),
            tool_uses_since=since,
            answer_sha256=files.get(ANSWER_ENTRYPOINT),
            answer_digest=digest,
            files=files,
            bytes=read.size,
            refused_links=read.refused,
        )
        SNAPSHOT_INDEX.append(self.run_dir, entry)

    def _skip(self, base: dict[str, Any], reason: str) -> None:
        SNAPSHOT_INDEX.append(
            self.run_dir, SnapshotEntry(**base, kind="answer_snapshot_skipped", skipped=reason)
        )
