"""Helper processes that end with the process that started them, or with their owner.

A helper VeriHarness starts in a session of its own (the `mllm` server of an agent session) is not
in Snakemake's process group, so killing that group with SIGKILL (a node's reboot, a scheduler's
preemption, a researcher's `kill -9`) would leave it running, holding its port and its trace.
The kernel's parent-death signal ends it instead. A helper that outlives its parent by design
(a browser pool's server, started by one render job and serving the next) watches its owner
instead: `process_identity` names a process so that a later one given the same pid is not
taken for it, and `is_running` says whether it still runs.
"""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

__all__ = ["cpu_seconds", "end_with_parent", "is_running", "process_identity"]

_PR_SET_PDEATHSIG = 1


def end_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when `parent` (its parent, by pid) ends. If the
    parent has already ended, end now: the death signal would never come."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(error)}")
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process `pid` has used so far; OSError once it is gone."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields from the third (the state) on; OSError once it is gone."""
    # The command name in field 2 may hold spaces or parentheses: split after its last ')'.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_identity(pid: int) -> str:
    """`pid:start`, the process's id and its start time (clock ticks since boot): one process,
    never a later one the kernel gives the same id; OSError when `pid` is gone."""
    return f"{pid}:{_stat_fields(pid)[19]}"


def is_running(identity: str) -> bool:
    """Whether the process `process_identity` named still runs (a zombie has ended)."""
    pid, _, _ = identity.partition(":")
    try:
        fields = _stat_fields(int(pid))
    except (OSError, ValueError):
        return False
    return f"{pid}:{fields[19]}" == identity and fields[0] not in ("Z", "X")
