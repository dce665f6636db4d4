"""The cap on concurrent sessions held by run-agent itself (agent/session_slots.py, P-67): each
holder is its own process, as each run-agent is, holding a real lock on a real file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from veriharness.agent import session_slots
from veriharness.agent.session_slots import (
    NodeLocalLocks,
    node_local_locks,
    session_cap,
    session_slot,
)

# One session's stand-in: takes a slot as run-agent does (SIGTERM ends it as it ends a session),
# writes what it took (whole, then named), and holds it until its release file appears.
_HOLDER = """
import sys, time
from pathlib import Path
from veriharness.agent.session import end_session_on_sigterm
from veriharness.agent.session_slots import session_slot
end_session_on_sigterm()
experiment, cap, label, out = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
with session_slot(experiment, cap, label) as slot:
    # Written whole, then named: the test waits for the name and reads it at once.
    part = out.with_suffix(".part")
    part.write_text(slot.model_dump_json())
    part.replace(out)
    while not out.with_suffix(".release").exists():
        time.sleep(0.05)
"""


class _Holder:
    def __init__(self, tmp: Path, cap: int, label: str) -> None:
        self.taken = tmp / f"{label.replace('/', '-')}.json"
        self.log = self.taken.with_suffix(".log")
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _HOLDER, str(tmp / "exp"), str(cap), label, str(self.taken)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def slot(self) -> dict[str, object]:
        _until(self.taken.is_file, self)
        return dict(json.loads(self.taken.read_text()))

    def waiting(self) -> str:
        _until(lambda: "waiting for one to be released" in self.log.read_text(), self)
        return self.log.read_text()

    def release(self) -> None:
        self.taken.with_suffix(".release").touch()
        assert self.process.wait(timeout=60) == 0, self.log.read_text()


def _until(condition: Callable[[], bool], holder: _Holder, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert holder.process.poll() is None, holder.log.read_text()
        assert time.monotonic() < deadline, holder.log.read_text()
        time.sleep(0.05)


@pytest.fixture
def holders(tmp_path: Path) -> Iterator[Callable[[int, str], _Holder]]:
    started: list[_Holder] = []

    def start(cap: int, label: str) -> _Holder:
        started.append(_Holder(tmp_path, cap, label))
        return started[-1]

    yield start
    for holder in started:
        if holder.process.poll() is None:
            holder.process.kill()
            holder.process.wait()


def test_a_third_session_waits_for_a_slot_and_takes_the_one_released(
    holders: Callable[[int, str], _Holder],
) -> None:
    first, second = holders(2, "c/t/r1"), holders(2, "c/t/r2")
    slots = {first.slot()["slot"], second.slot()["slot"]}
    assert slots == {0, 1}
    third = holders(2, "c/t/r3")
    line = third.waiting()
    # The log line names the cap and every holder: its run, process and host.
    assert "all 2 session slots (agent_sessions=2) are held" in line, line
    assert "c/t/r1, pid" in line and "c/t/r2, pid" in line, line
    assert not third.taken.exists(), "a third session took a slot while two were held"
    first.release()
    taken = third.slot()
    assert taken["slot"] == first.slot()["slot"] and taken["of"] == 2
    assert float(str(taken["waited_seconds"])) > 0
    assert f"took session slot {taken['slot']} of 2 after" in third.log.read_text()
    second.release()
    third.release()


def test_a_slot_held_by_a_killed_session_is_released_by_the_kernel(
    holders: Callable[[int, str], _Holder],
) -> None:
    killed = holders(1, "c/t/r1")
    assert killed.slot()["slot"] == 0
    waiting = holders(1, "c/t/r2")
    waiting.waiting()
    killed.process.send_signal(signal.SIGKILL)
    killed.process.wait()
    assert waiting.slot()["slot"] == 0
    waiting.release()


def test_a_session_stopped_while_it_waits_says_so_and_holds_nothing(
    holders: Callable[[int, str], _Holder],
) -> None:
    holder = holders(1, "c/t/r1")
    holder.slot()
    stopped = holders(1, "c/t/r2")
    stopped.waiting()
    stopped.process.send_signal(signal.SIGTERM)  # as Snakemake or a time limit stops a job
    assert stopped.process.wait(timeout=60) != 0
    log = stopped.log.read_text()
    assert "s waiting for a session slot; no session was started" in log, log
    assert not stopped.taken.exists()
    holder.release()
    # The slot is free again: nothing of the stopped waiter holds it.
    after = holders(1, "c/t/r3")
    assert (after.slot()["slot"], after.slot()["of"]) == (0, 1)
    assert "waiting" not in after.log.read_text()
    after.release()


def test_the_cap_is_the_one_the_workflow_recorded(tmp_path: Path) -> None:
    merged = tmp_path / "config.effective.json"
    wrapper = {"kind": "effective_config", "sources": [], "config": {}}
    merged.write_text(json.dumps(wrapper | {"scheduler": {"resources": {"agent_sessions": 3}}}))
    assert session_cap(merged) == 3
    merged.write_text(json.dumps(wrapper | {"scheduler": {"resources": {"cores": 4}}}))
    assert session_cap(merged) is None
    plain = tmp_path / "config.yaml"
    plain.write_text("experiment: x\n")
    assert session_cap(plain) is None  # run-agent outside Snakemake: no cap, no slot
    merged.write_text(json.dumps(wrapper | {"scheduler": {"resources": {"agent_sessions": 0}}}))
    with pytest.raises(ValueError, match="agent_sessions is 0, expected a whole number"):
        session_cap(merged)


_MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
server:/export /shared nfs4 rw,vers=4.2,hard,proto=tcp,local_lock=none 0 0
server:/scratch /shared/scratch nfs rw,vers=3,nolock 0 0
server:/lab /lab\\040data nfs4 rw,vers=4.1,local_lock=posix 0 0
mds@tcp:/fs /lustre lustre rw,localflock 0 0
"""


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/home/me/results", None),
        ("/shared/results", None),
        ("/shared/scratch/results", "nfs mount (/shared/scratch) with nolock"),
        ("/lab data/results", "nfs4 mount (/lab data) with local_lock=posix"),
        ("/lustre/results", "lustre mount (/lustre) with localflock"),
    ],
)
def test_a_filesystem_whose_locks_stay_on_the_node_is_named(path: str, reason: str | None) -> None:
    found = node_local_locks(Path(path), _MOUNTS)
    assert (found is None) if reason is None else (found is not None and reason in found), found


def test_a_cluster_job_refuses_slots_that_other_nodes_cannot_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(f"server:/scratch {tmp_path} nfs rw,vers=3,nolock 0 0\n")
    monkeypatch.setattr(session_slots, "MOUNTS", mounts)
    monkeypatch.setenv("SLURM_JOB_ID", "123")
    with pytest.raises(NodeLocalLocks, match="with nolock, whose locks stay on this node"):
        with session_slot(tmp_path / "exp", 2, "c/t/r1"):
            pass
    # Outside a cluster job every session runs on this machine, where the lock holds.
    monkeypatch.delenv("SLURM_JOB_ID")
    with session_slot(tmp_path / "exp", 2, "c/t/r1") as slot:
        assert (slot.slot, slot.of) == (0, 2)
        holder = json.loads((tmp_path / "exp" / "session_slots" / "slot-0").read_text())
        assert holder["run"] == "c/t/r1" and holder["pid"] == os.getpid()
    assert (tmp_path / "exp" / "session_slots" / "slot-0").read_text() == ""
