"""What one session may use of the machine, enforced: `agent.limits` turned into a cgroup and
two size-limited tmpfs mounts, watched while the session runs, and removed after it.

Memory and processes: the session's own cgroup (`_util.containment`), joined by the sandbox's
first process; under SLURM, where no group of its own can be made, the job's group and its
limits, recorded as such. Disk: the workspace and Claude Code's private folder are each a tmpfs
of `disk_mib`. Whatever cannot be enforced on this machine is `unavailable` in the outcome with
the reason; a session of a real model is then refused (an `infra_error` naming the limit)
unless `agent.limits.allow_unavailable` is true, since an unbounded session of a real model can
take the machine from every other run of the matrix.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from veriharness._util.containment import (
    CgroupUnavailable,
    Enforcement,
    Limit,
    SessionCgroup,
    disk_full,
    job_cgroup_limits,
    limits_refusal,
)
from veriharness.experiment.config import SessionLimits
from veriharness.runfolder.outcome import AppliedLimits

__all__ = ["LimitsUnavailable", "SessionLimitsInForce", "describe_hit", "unenforced_refusal"]


class LimitsUnavailable(RuntimeError):
    """A real model's session would run without a limit and the config does not allow it."""


class SessionLimitsInForce:
    """The session's cgroup (if any) and its limited disks, and how each limit is enforced."""

    def __init__(self, limits: SessionLimits, disks: Iterable[Path]) -> None:
        self.limits = limits
        self.disks = list(disks)
        self.cgroup: SessionCgroup | None = None
        try:
            self.cgroup = SessionCgroup.create(limits.memory_mib, limits.processes)
            memory, processes = self.cgroup.enforcement()
        except CgroupUnavailable as reason:
            job = job_cgroup_limits()
            unavailable = Enforcement(by="unavailable", note=str(reason))
            memory, processes = job if job else (unavailable, unavailable)
        disk = (
            Enforcement(by="tmpfs", value=limits.disk_mib)
            if self.disks
            else Enforcement(by="unavailable", note=_NO_DISK)
        )
        self.applied = AppliedLimits(memory=memory, processes=processes, disk=disk)

    def refuse_unless_allowed(self, offline: bool) -> None:
        refusal = unenforced_refusal(self.applied, offline, self.limits.allow_unavailable)
        if refusal:
            raise LimitsUnavailable(refusal)

    def joined(self, command: list[str]) -> list[str]:
        return self.cgroup.joined(command) if self.cgroup else command

    def hit(self) -> Limit | None:
        """The limit the session has passed, if any."""
        if self.cgroup is not None and (hit := self.cgroup.hit()):
            return hit
        return "disk" if disk_full(self.disks) else None

    def close(self) -> None:
        """Kill whatever of the session is left in its group, and remove the group."""
        if self.cgroup is not None:
            self.cgroup.close()


def unenforced_refusal(applied: AppliedLimits, offline: bool, allowed: bool) -> str | None:
    """Why a session must not start without some of its limits, or None: only a real model's
    session is refused, and only when the config does not allow it."""
    names: tuple[Limit, ...] = ("memory", "processes", "disk")
    enforced = {name: getattr(applied, name) for name in names}
    missing = {name: how.note for name, how in enforced.items() if how.by == "unavailable"}
    if not missing or offline or allowed:
        return None
    return limits_refusal(missing)


_NO_DISK = "cannot mount a size-limited tmpfs (mounting needs root)"


def describe_hit(limit: Limit, limits: SessionLimits) -> str:
    if limit == "memory":
        return (
            f"memory limit of {limits.memory_mib} MiB reached: the kernel ended a process "
            "of the session"
        )
    if limit == "processes":
        return f"limit of {limits.processes} processes reached: the session could not fork"
    return f"disk limit of {limits.disk_mib} MiB reached: the workspace or its home is full"
