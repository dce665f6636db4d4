"""The cap on concurrent sessions, held by run-agent itself: `agent_sessions` slots in the
shared results folder, one of which every session holds while it runs (docs/decisions.md P-67).

Snakemake counts `agent_sessions` per invocation, among the jobs it started itself. A second
invocation of the same experiment, a restarted submitter whose cluster jobs are still running,
`--immediate-submit`, or an executor that ignores global resources all run more sessions than
the researcher set. The slots hold whatever the executor did: `results/<experiment>/
session_slots/slot-<k>` for k below the cap, each a file that a session holds a POSIX record
lock on (`fcntl.lockf`, as the spend ledger and the providers' pace are locked) from before its
spending gate until its outcome is written. The kernel releases the lock when the process ends
however it ends (SIGKILL, the scheduler's time limit, an OOM kill); through NFS (NLM for v3,
built into v4) it holds across the nodes that share the folder, and a lost node's locks are
released by the server (NFSv4: when the client's lease expires, about 90 s). The descriptor is
not inherited by the session's processes (Python opens files non-inheritable), so a lingering
child never holds a slot.

A session that finds every slot held says so in its log, naming the holders, and queues: the
waiters take a queue lock one at a time (a blocking lock, so waiting costs no CPU), and the one
holding it tries the slots every `POLL_SECONDS`; the others wait in the kernel. It waits as long
as it takes: there is no timeout of its own; a job killed while it waits (its time limit,
Snakemake stopping) says so in its log and started nothing. The wait is recorded in
`outcome.json` (`session_slot.waited_seconds`).

The cap is the one Snakemake's main process ran with (`config.effective.json`, `scheduler`,
P-9); run-agent outside Snakemake has no cap and takes no slot. Where the results folder's
filesystem keeps locks on each node (NFS mounted `nolock` or with `local_lock=posix|all`, a
Lustre `localflock` mount, SMB `nobrl`, sshfs), a run-agent inside a SLURM job refuses to start
(`NodeLocalLocks`): the slots, the ledger and the pace would not be shared there.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from veriharness.experiment.definition import config_wrapper
from veriharness.runfolder.outcome import SessionSlot

__all__ = [
    "POLL_SECONDS",
    "SLOTS_DIR",
    "NodeLocalLocks",
    "held_slot",
    "node_local_locks",
    "session_cap",
    "session_slot",
]

SLOTS_DIR = "session_slots"
QUEUE_NAME = "queue"
POLL_SECONDS = 1.0
MOUNTS = Path("/proc/self/mounts")


def _say(line: str) -> None:
    print(line, flush=True)  # the job's log is a file: a buffered line would show only at exit


class NodeLocalLocks(RuntimeError):
    """The results folder's filesystem keeps file locks on each node."""


def session_cap(config_file: Path) -> int | None:
    """`agent_sessions` as Snakemake's main process recorded it in the merged config; None for
    a plain config file (run-agent outside Snakemake) or a run without that cap."""
    scheduler = config_wrapper(config_file).get("scheduler")
    resources = scheduler.get("resources") if isinstance(scheduler, dict) else None
    cap = resources.get("agent_sessions") if isinstance(resources, dict) else None
    if cap is None:
        return None
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        raise ValueError(
            f"{config_file}: scheduler.resources.agent_sessions is {cap!r}, expected a whole "
            "number of at least 1 (set it with --resources agent_sessions=N)"
        )
    return cap


@contextmanager
def held_slot(
    experiment_dir: Path, cap: int | None, label: str, say: Callable[[str], None] = _say
) -> Iterator[SessionSlot | None]:
    """A slot of `cap` held for the block; None without a cap."""
    if cap is None:
        yield None
        return
    with session_slot(experiment_dir, cap, label, say) as slot:
        yield slot


@contextmanager
def session_slot(
    experiment_dir: Path, cap: int, label: str, say: Callable[[str], None] = _say
) -> Iterator[SessionSlot]:
    """One of the experiment's `cap` session slots, held until the block ends; waits, queued,
    while all are held. One slot per process: POSIX locks belong to the process, so two holders
    in one process would not exclude each other (each run-agent is its own process)."""
    folder = Path(experiment_dir) / SLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    if os.environ.get("SLURM_JOB_ID") and (why := node_local_locks(folder)):
        raise NodeLocalLocks(
            f"{folder}: {why}, so the cap on sessions (agent_sessions) and the spending caps "
            "would not hold across nodes; mount it with shared locks (NFS: `lock` and "
            "`local_lock=none`) or set execution.results_dir to a filesystem whose locks every "
            "node sees"
        )
    began = time.monotonic()
    taken = _try_slots(folder, cap)
    queued = taken is None
    if taken is None:
        say(
            f"run-agent: all {cap} session slots (agent_sessions={cap}) are held "
            f"({_holders(folder, cap)}): waiting for one to be released"
        )
        try:
            taken = _queue_for_slot(folder, cap)
        except BaseException:
            say(
                f"run-agent: stopped after {time.monotonic() - began:.1f} s waiting for a session "
                "slot; no session was started"
            )
            raise
    index, fd = taken
    waited = round(time.monotonic() - began, 3)
    try:
        _write_holder(fd, label)
        if queued:
            say(f"run-agent: took session slot {index} of {cap} after {waited:.1f} s of waiting")
        yield SessionSlot(slot=index, of=cap, waited_seconds=waited)
    finally:
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # the lock still goes with the descriptor
        os.close(fd)


def _try_slots(folder: Path, cap: int) -> tuple[int, int] | None:
    """The first slot no other process holds, locked: (its number, the descriptor)."""
    for index in range(cap):
        fd = os.open(folder / f"slot-{index}", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EACCES, errno.EAGAIN):
                continue
            raise
        return index, fd
    return None


def _queue_for_slot(folder: Path, cap: int) -> tuple[int, int]:
    """Wait in the queue (a blocking lock: one waiter at a time looks for a free slot, the rest
    wait in the kernel), then look every POLL_SECONDS until a slot is free."""
    queue = os.open(folder / QUEUE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(queue, fcntl.LOCK_EX)
        while (taken := _try_slots(folder, cap)) is None:
            time.sleep(POLL_SECONDS)
        return taken
    finally:
        os.close(queue)


def _write_holder(fd: int, label: str) -> None:
    """Who holds the slot, for the log line of a session that waits for one."""
    holder = {
        "run": label,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm_job": os.environ.get("SLURM_JOB_ID"),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    data = json.dumps(holder).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _holders(folder: Path, cap: int) -> str:
    """Each slot's holder as its holder wrote it (read without a lock: only for the log). Read
    only while this process holds no slot: closing any descriptor of a file drops this
    process's POSIX lock on it."""
    parts = []
    for index in range(cap):
        try:
            holder = json.loads((folder / f"slot-{index}").read_text(encoding="utf-8"))
            where = f"pid {holder['pid']} on {holder['host']}"
            if holder.get("slurm_job"):
                where += f", SLURM job {holder['slurm_job']}"
            parts.append(f"slot {index}: {holder['run']}, {where}, since {holder['since']}")
        except (OSError, ValueError, KeyError, TypeError):
            parts.append(f"slot {index}: held")
    return "; ".join(parts)


# Filesystem types whose locks can stay on the node that took them, and the mount options that
# make them do so (nfs(5) `nolock`, `local_lock`; Lustre's `localflock`; mount.cifs(8) `nobrl`).
_LOCAL_LOCK_OPTIONS = {
    "nfs": ("nolock", "local_lock=posix", "local_lock=all"),
    "nfs4": ("nolock", "local_lock=posix", "local_lock=all"),
    "lustre": ("localflock", "noflock"),
    "cifs": ("nobrl",),
    "smb3": ("nobrl",),
}
_ALWAYS_LOCAL = ("fuse.sshfs",)


def node_local_locks(path: Path, mounts: str | None = None) -> str | None:
    """Why a POSIX lock taken under `path` would not be seen by other nodes, from the mount
    that holds it (`mounts`: /proc/self/mounts' text); None when nothing says so."""
    if mounts is None:
        try:
            mounts = MOUNTS.read_text(encoding="utf-8")
        except OSError:
            return None
    target = str(Path(path).resolve())
    best: tuple[str, str, list[str]] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[2], fields[3].split(","))
    if best is None:
        return None
    point, fstype, options = best
    if fstype in _ALWAYS_LOCAL:
        return f"it is on a {fstype} mount ({point}), whose locks stay on this node"
    local = [o for o in _LOCAL_LOCK_OPTIONS.get(fstype, ()) if o in options]
    if local:
        return f"it is on a {fstype} mount ({point}) with {local[0]}, whose locks stay on this node"
    return None
