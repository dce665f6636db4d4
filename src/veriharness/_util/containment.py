"""Limits on what a process tree may use: memory and processes (a cgroup), disk (a tmpfs of fixed
size).

Design notes:

- A cgroup is made per session as a child of the caller's own cgroup, so limits nest under
  whatever the caller already runs in (a SLURM job, a container). cgroup v1 (a `memory` and a
  `pids` hierarchy, as on this machine kind) and v2 (one unified hierarchy whose parent
  delegates `memory` and `pids`) are both read from `/proc/self/mountinfo` and
  `/proc/self/cgroup`; where neither lets the caller make a group, the caller's own group is
  used as it is when it has a finite limit (a SLURM job's, shared by the job's sessions), and
  otherwise the limit is `unavailable`, with the reason.
- A process joins the group before it executes anything (`joined`: a shell writes its own pid
  into `cgroup.procs`, then `exec`s the command), so no child escapes by being forked first.
- A limit is passed when the kernel acted on it: an OOM kill in the group (`oom_kill` grows) or a
  refused fork (`pids.events` `max` grows); a disk is full when its tmpfs has less than
  `FULL_BELOW` bytes free (a write has been refused or is about to be).
- Swap is limited with memory where the kernel accounts it, so a session cannot page out past
  its limit.
- The disk is a tmpfs mounted by the caller (root only, `mount(2)`); its pages are also charged
  to the memory of whoever wrote them. The mount is made in a mount namespace of the calling
  thread's own (`private_mounts`), which the sandbox inherits: if the caller is killed outright
  (SIGKILL, no clean-up), the namespace and its tmpfs go when its last process ends, so nothing
  stays mounted, and no other process ever sees the mount.
- A caller killed outright also leaves its session's cgroup behind (empty: the processes in it
  die with their parent). Making a new group first removes the empty groups of earlier sessions
  older than `_STALE_GROUP_S`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

__all__ = [
    "FULL_BELOW",
    "Enforcement",
    "Limit",
    "SessionCgroup",
    "CgroupUnavailable",
    "cgroup_unavailable_reason",
    "disk_full",
    "find_hierarchy",
    "limits_refusal",
    "limits_unavailable",
    "network_namespace_unavailable_reason",
    "private_mounts",
    "job_cgroup_limits",
    "mount_tmpfs",
    "tmpfs_unavailable_reason",
    "unmount",
]

Limit = Literal["memory", "processes", "disk"]
Mechanism = Literal["cgroup-v1", "cgroup-v2", "slurm-job", "tmpfs", "unavailable"]
FULL_BELOW = 1 << 20
_MIB = 1 << 20
_GROUP_PREFIX = "veriharness-"
_KILL_WAIT_SECONDS = 5.0
_STALE_GROUP_S = 600.0


class Enforcement(BaseModel):
    """How one limit was enforced for a session: by what, at which value (MiB, or a count for
    processes), and why not or by whose group when it was not the session's own."""

    by: Mechanism
    value: int | None = None
    note: str | None = None


class CgroupUnavailable(RuntimeError):
    """No cgroup can be made here for a session; the message says why."""


# --- cgroups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hierarchy:
    version: Literal[1, 2]
    own: dict[str, Path]  # controller ("memory", "pids", or "" for v2) -> the caller's group


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, fs type, super options) of each cgroup mount in `mountinfo`."""
    found = []
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if len(fields) < 5 or len(after) < 3 or not after[0].startswith("cgroup"):
            continue
        found.append((fields[3], fields[4], after[0], set(after[2].split(","))))
    return found


def _memberships(proc_cgroup: str) -> dict[str, str]:
    """Controller -> the caller's group path, from `/proc/self/cgroup` ("" for v2)."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                paths[controller] = parts[2]
    return paths


def _inside(mount: str, root: str, path: str) -> Path:
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(mount) / relative.lstrip("/")


def find_hierarchy(mountinfo: str, proc_cgroup: str) -> _Hierarchy | None:
    """The caller's memory and pids groups: v1 when both controllers have a v1 mount, else the
    v2 group when a cgroup2 mount exists; None when there is neither."""
    paths, mounts = _memberships(proc_cgroup), _mounts(mountinfo)
    v1: dict[str, Path] = {}
    for root, point, fstype, options in mounts:
        for controller in ("memory", "pids"):
            if fstype == "cgroup" and controller in options and controller in paths:
                v1[controller] = _inside(point, root, paths[controller])
    if len(v1) == 2:
        return _Hierarchy(1, v1)
    for root, point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in paths:
            return _Hierarchy(2, {"": _inside(point, root, paths[""])})
    return None


def _read_counter(path: Path, key: str) -> int:
    """The value of `key` in a flat keyed file (`oom_kill 3`, `max 1`); 0 when absent."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return 0
    return 0


class SessionCgroup:
    """One session's cgroup: made with its limits, joined by the session's first process,
    watched for a passed limit, and emptied and removed afterwards."""

    def __init__(self, version: Literal[1, 2], groups: dict[str, Path]) -> None:
        self.version, self.groups = version, groups
        self._baseline = self._counts()

    @classmethod
    def create(cls, memory_mib: int, processes: int) -> SessionCgroup:
        """A new group under the caller's own, with both limits set; `CgroupUnavailable` with
        the reason when none can be made."""
        hierarchy = _caller_hierarchy()
        for parent in set(hierarchy.own.values()):
            _remove_stale_groups(parent)
        name = f"{_GROUP_PREFIX}{secrets.token_hex(6)}"
        made: list[Path] = []
        try:
            if hierarchy.version == 1:
                memory = hierarchy.own["memory"] / name
                pids = hierarchy.own["pids"] / name
                for folder in (memory, pids):
                    folder.mkdir()
                    made.append(folder)
                _write(memory / "memory.limit_in_bytes", memory_mib * _MIB)
                if (memory / "memory.memsw.limit_in_bytes").exists():
                    _write(memory / "memory.memsw.limit_in_bytes", memory_mib * _MIB)
                _write(pids / "pids.max", processes)
                return cls(1, {"memory": memory, "pids": pids})
            parent = hierarchy.own[""]
            _delegate(parent)
            group = parent / name
            group.mkdir()
            made.append(group)
            _write(group / "memory.max", memory_mib * _MIB)
            if (group / "memory.swap.max").exists():
                _write(group / "memory.swap.max", 0)
            _write(group / "pids.max", processes)
            return cls(2, {"memory": group, "pids": group})
        except OSError as error:
            for folder in reversed(made):
                _remove_group(folder)
            raise CgroupUnavailable(
                f"cannot make a cgroup v{hierarchy.version} under "
                f"{next(iter(hierarchy.own.values()))}: {error.strerror or error}"
            ) from error

    def enforcement(self) -> tuple[Enforcement, Enforcement]:
        """(memory, processes) as enforced: the limits read back from the group."""
        by: Mechanism = "cgroup-v1" if self.version == 1 else "cgroup-v2"
        memory_file = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        memory = _read_limit(self.groups["memory"] / memory_file)
        processes = _read_limit(self.groups["pids"] / "pids.max")
        return (
            Enforcement(by=by, value=memory // _MIB if memory else None),
            Enforcement(by=by, value=processes),
        )

    def joined(self, command: list[str]) -> list[str]:
        """`command`, run by a shell that first moves itself into the group."""
        procs = sorted({str(folder / "cgroup.procs") for folder in self.groups.values()})
        join = "; ".join(f"echo $$ > {shlex.quote(p)}" for p in procs)
        return ["/bin/sh", "-c", f'{join} && exec "$@"', "sh", *command]

    def hit(self) -> Limit | None:
        """The limit the kernel acted on since the group was made, if any."""
        memory, processes = self._counts()
        if memory > self._baseline[0]:
            return "memory"
        if processes > self._baseline[1]:
            return "processes"
        return None

    def _counts(self) -> tuple[int, int]:
        memory_events = "memory.oom_control" if self.version == 1 else "memory.events"
        return (
            _read_counter(self.groups["memory"] / memory_events, "oom_kill"),
            _read_counter(self.groups["pids"] / "pids.events", "max"),
        )

    def processes(self) -> list[int]:
        pids: set[int] = set()
        for folder in self.groups.values():
            try:
                pids |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                continue
        return sorted(pids)

    def close(self) -> list[int]:
        """Kill every process still in the group and remove it; returns the pids it killed."""
        killed: list[int] = []
        deadline = time.monotonic() + _KILL_WAIT_SECONDS
        while (left := self.processes()) and time.monotonic() < deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    continue
            time.sleep(0.02)
        for folder in sorted(set(self.groups.values()), reverse=True):
            _remove_group(folder)
        return sorted(set(killed))


def _remove_stale_groups(parent: Path) -> None:
    """Remove the empty session groups that a killed caller left, once they are old enough
    that no caller can be about to join them."""
    now = time.time()
    for group in parent.glob(f"{_GROUP_PREFIX}*"):
        try:
            empty = not (group / "cgroup.procs").read_text().strip()
            if empty and now - group.stat().st_mtime > _STALE_GROUP_S:
                group.rmdir()
        except OSError:
            continue


def _caller_hierarchy() -> _Hierarchy:
    try:
        hierarchy = find_hierarchy(
            Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text()
        )
    except OSError as error:
        raise CgroupUnavailable(f"cannot read /proc/self: {error}") from error
    if hierarchy is None:
        raise CgroupUnavailable("no cgroup hierarchy with the memory and pids controllers")
    return hierarchy


def _delegate(parent: Path) -> None:
    """Enable memory and pids for the children of a v2 group (it must hold no process itself,
    the v2 rule, unless it is the root)."""
    wanted = {"memory", "pids"}
    enabled = set((parent / "cgroup.subtree_control").read_text().split())
    if not wanted <= enabled:
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))


def _write(path: Path, value: int) -> None:
    path.write_text(str(value))


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max" or not text.isdigit() or int(text) >= 1 << 62:
        return None
    return int(text)


def _remove_group(folder: Path) -> None:
    for _ in range(50):  # the kernel frees a group a moment after its last process
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
            time.sleep(0.02)
    folder.rmdir()


def cgroup_unavailable_reason() -> str | None:
    """None when a session cgroup can be made here (one is made and removed); else why not."""
    try:
        SessionCgroup.create(memory_mib=64, processes=16).close()
    except CgroupUnavailable as reason:
        return str(reason)
    return None


def job_cgroup_limits() -> tuple[Enforcement, Enforcement] | None:
    """Under SLURM, when no session group can be made: the job's own group's (memory,
    processes) limits, which all its sessions share; None outside a job or without limits."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        hierarchy = _caller_hierarchy()
    except CgroupUnavailable:
        return None
    memory_dir = hierarchy.own.get("memory") or hierarchy.own[""]
    pids_dir = hierarchy.own.get("pids") or hierarchy.own[""]
    memory_file = "memory.limit_in_bytes" if hierarchy.version == 1 else "memory.max"
    memory, processes = _read_limit(memory_dir / memory_file), _read_limit(pids_dir / "pids.max")
    if memory is None and processes is None:
        return None
    note = f"SLURM job {job}'s own cgroup, shared by its sessions"

    def enforced(value: int | None) -> Enforcement:
        if value is None:
            return Enforcement(by="unavailable", note=f"{note} sets none")
        return Enforcement(by="slurm-job", value=value, note=note)

    return enforced(memory // _MIB if memory else None), enforced(processes)


# --- disk ------------------------------------------------------------------------------------

_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 2, 4, 1 << 14, 1 << 18
_MNT_DETACH = 2
_CLONE_NEWNS = 0x00020000
_PRIVATE = threading.local()


def private_mounts() -> None:
    """Give the calling thread (and the processes it starts) a mount namespace of its own,
    once; OSError when refused (not root)."""
    if getattr(_PRIVATE, "done", False):
        return
    libc = _libc()
    if libc.unshare(_CLONE_NEWNS) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"unshare a mount namespace: {os.strerror(code)}")
    # Without this, a mount would still propagate to the namespace it came from.
    if libc.mount(b"none", b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"make / private in the new mount namespace: {os.strerror(code)}")
    _PRIVATE.done = True


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_tmpfs(folder: Path, size_mib: int) -> None:
    """Mount a tmpfs of `size_mib` MiB on `folder` (empty, existing), in the calling thread's
    private mount namespace; OSError when refused."""
    private_mounts()
    options = f"size={size_mib}m,mode=0700".encode()
    result = _libc().mount(
        b"tmpfs", os.fsencode(folder), b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV), options
    )
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount tmpfs on {folder}: {os.strerror(code)}")


def unmount(folder: Path) -> None:
    """Detach the mount on `folder` at once. A process of the session that is still dying (it
    may take seconds on a loaded machine) can hold a file on it: plain unmount would fail with
    EBUSY, a detached tmpfs is freed when that process has gone."""
    if _libc().umount2(os.fsencode(folder), _MNT_DETACH) != 0:
        code = ctypes.get_errno()
        if code != errno.EINVAL:  # EINVAL: nothing is mounted there
            raise OSError(code, f"unmount {folder}: {os.strerror(code)}")


def tmpfs_unavailable_reason(scratch: Path) -> str | None:
    """None when a tmpfs can be mounted here (one is mounted on a folder under `scratch` and
    unmounted); else why not."""
    probe = scratch / f"{_GROUP_PREFIX}probe-{secrets.token_hex(4)}"
    probe.mkdir(parents=True)
    try:
        mount_tmpfs(probe, 1)
        unmount(probe)
    except OSError as error:
        return f"cannot mount a size-limited tmpfs: {error.strerror} (mounting needs root)"
    finally:
        probe.rmdir()
    return None


def network_namespace_unavailable_reason(bwrap: Path) -> str | None:
    """None when bwrap can give a process a network namespace of its own; else why not."""
    try:
        probe = subprocess.run(
            [str(bwrap), "--ro-bind", "/", "/", "--unshare-net", "--", "true"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap --unshare-net could not run: {error}"
    if probe.returncode != 0:
        return f"bwrap --unshare-net failed: {probe.stderr.strip()[:300]}"
    return None


def limits_unavailable(scratch: Path) -> dict[Limit, str]:
    """Each limit this machine cannot enforce per session, with the reason."""
    missing: dict[Limit, str] = {}
    if reason := cgroup_unavailable_reason():
        job = job_cgroup_limits()
        names: tuple[Limit, Limit] = ("memory", "processes")
        for limit, how in zip(names, job or (None, None), strict=True):
            if how is None or how.by == "unavailable":
                missing[limit] = reason
    if reason := tmpfs_unavailable_reason(scratch):
        missing["disk"] = reason
    return missing


def limits_refusal(missing: Mapping[Limit, str | None]) -> str:
    """Why a real model's sessions are not started: each limit that cannot be enforced, with
    its reason, and the ways out. One text for the start check and for run-agent."""
    reasons = "; ".join(f"{limit}: {reason}" for limit, reason in missing.items())
    return (
        f"agent.limits cannot be enforced on this machine ({reasons}); a real model's "
        "sessions are not started without them. Run as root or in a SLURM job with a cgroup, "
        "or set agent.limits.allow_unavailable: true to run without them"
    )


def disk_full(folders: Iterable[Path]) -> bool:
    for folder in folders:
        try:
            stats = os.statvfs(folder)
        except OSError:
            continue
        if stats.f_bavail * stats.f_frsize < FULL_BELOW:
            return True
    return False
