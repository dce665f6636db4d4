"""The containment helpers on their own: reading the cgroup hierarchies from /proc as several
kinds of machine show them, the limits a real cgroup enforces, a tmpfs's size, and which
sessions are refused without their limits. The sessions themselves are contained in
tests/agent/test_containment.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from veriharness._util.containment import (
    Enforcement,
    SessionCgroup,
    disk_full,
    find_hierarchy,
    mount_tmpfs,
    unmount,
)
from veriharness.agent.limits import unenforced_refusal
from veriharness.runfolder.outcome import AppliedLimits

V1_MOUNTINFO = """\
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime shared:10 - cgroup cgroup rw,pids
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime shared:11 - cgroup2 cgroup2 rw
"""
V1_CGROUP = "8:pids:/\n4:memory:/process_api/abc\n0::/\n"
V2_MOUNTINFO = "35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V2_CGROUP = "0::/user.slice/user-1000.slice/session-3.scope\n"
# A container whose cgroup namespace root is its own group.
NESTED_MOUNTINFO = "40 30 0:31 /docker/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
NESTED_CGROUP = "0::/docker/x/job\n"


def test_v1_memory_and_pids_are_found_in_their_own_hierarchies() -> None:
    found = find_hierarchy(V1_MOUNTINFO, V1_CGROUP)
    assert found is not None and found.version == 1
    assert found.own == {
        "memory": Path("/sys/fs/cgroup/memory/process_api/abc"),
        "pids": Path("/sys/fs/cgroup/pids"),
    }


def test_v2_is_the_unified_group_and_a_mount_root_is_taken_off_the_path() -> None:
    found = find_hierarchy(V2_MOUNTINFO, V2_CGROUP)
    assert found is not None and found.version == 2
    assert found.own == {"": Path("/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope")}
    nested = find_hierarchy(NESTED_MOUNTINFO, NESTED_CGROUP)
    assert nested is not None and nested.own == {"": Path("/sys/fs/cgroup/job")}


def test_no_cgroup_mount_means_no_hierarchy() -> None:
    assert find_hierarchy("22 1 0:5 / /proc rw - proc proc rw\n", V1_CGROUP) is None


def test_a_real_cgroup_holds_its_limits_and_names_the_one_passed() -> None:
    group = SessionCgroup.create(memory_mib=128, processes=24)
    try:
        memory, processes = group.enforcement()
        assert (memory.value, processes.value) == (128, 24)
        assert group.hit() is None
        forks = subprocess.run(
            group.joined(["sh", "-c", "for i in $(seq 40); do sleep 5 & done; wait"]),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert forks.returncode != 0 and group.hit() == "processes"
    finally:
        group.close()
    assert not any(folder.exists() for folder in group.groups.values())


def test_a_tmpfs_refuses_writes_past_its_size_and_then_reads_as_full(tmp_path: Path) -> None:
    folder = tmp_path / "disk"
    folder.mkdir()
    mount_tmpfs(folder, 4)
    try:
        assert not disk_full([folder])
        filled = subprocess.run(["dd", "if=/dev/zero", f"of={folder}/fill", "bs=1M", "count=64"],
                                capture_output=True, text=True)  # fmt: skip
        assert filled.returncode != 0 and "No space left" in filled.stderr
        assert (folder / "fill").stat().st_size <= 4 << 20
        assert disk_full([folder])
    finally:
        unmount(folder)
    assert list(folder.iterdir()) == []


def _applied(memory: str) -> AppliedLimits:
    unavailable = Enforcement(by="unavailable", note="no cgroup here")
    return AppliedLimits(
        memory=unavailable if memory == "unavailable" else Enforcement(by="cgroup-v1", value=9),
        processes=Enforcement(by="cgroup-v1", value=9),
        disk=Enforcement(by="tmpfs", value=9),
    )


@pytest.mark.parametrize(
    ("memory", "offline", "allowed", "refused"),
    [
        ("unavailable", False, False, True),
        ("unavailable", True, False, False),
        ("unavailable", False, True, False),
        ("cgroup-v1", False, False, False),
    ],
)
def test_only_a_real_model_without_its_limits_and_without_leave_is_refused(
    memory: str, offline: bool, allowed: bool, refused: bool
) -> None:
    refusal = unenforced_refusal(_applied(memory), offline, allowed)
    assert (refusal is not None) == refused
    if refusal:
        assert "memory: no cgroup here" in refusal and "allow_unavailable" in refusal
