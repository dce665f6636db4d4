"""A session's processes end with it: `run-agent` killed with SIGKILL (a node rebooting, a
scheduler preempting, the whole Snakemake group killed) leaves no `mllm` server, bubblewrap or
`claude` process behind, although the server and the sandbox run in sessions of their own, and
no tmpfs of its workspace or private folder mounted anywhere (they live in its own mount
namespace, which goes with it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from veriharness.offline.server import FAULTS_ENV
from veriharness.render.guard import descendants

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

_SESSION = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from agent.test_faults import _plan
from veriharness.agent.session import run_session
run_session(_plan(Path({tmp!r}), wall_clock_seconds=300))
"""


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def test_run_agent_killed_with_sigkill_leaves_no_session_process(tmp_path: Path) -> None:
    # Each model answer takes 2 s, so the session is mid-way when its process is killed.
    env = {**os.environ, FAULTS_ENV: json.dumps({"latency_s": 2.0})}
    script = _SESSION.format(tests=str(ROOT / "tests"), tmp=str(tmp_path))
    runner = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    transcript = tmp_path / "results" / "exp" / "cond" / "task" / "r1" / "transcript.jsonl"
    deadline = time.monotonic() + 120
    while not (transcript.is_file() and transcript.stat().st_size > 0):
        assert runner.poll() is None, "the session ended before it could be killed"
        assert time.monotonic() < deadline, "the session never started"
        time.sleep(0.1)
    below = {pid: _cmdline(pid) for pid in descendants(runner.pid)}
    wanted = (b"mllm-server", b"bwrap", b"claude")
    kinds = {kind for line in below.values() if line for kind in wanted if kind in line}
    assert kinds == set(wanted), below
    workspaces = list((tmp_path / "workspaces").iterdir())
    assert len(workspaces) == 1 and _mounted(workspaces[0], runner.pid)

    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    deadline = time.monotonic() + 5
    alive = below
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {pid: c for pid, c in below.items() if c is not None and _cmdline(pid) == c}
    assert not alive, [c[:120] for c in alive.values() if c]
    deadline = time.monotonic() + 5
    while _mounted_anywhere(workspaces[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _mounted_anywhere(workspaces[0]), "the workspace's tmpfs outlived its session"


def _mounted(folder: Path, pid: int) -> bool:
    try:
        return f" {folder} " in Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        return False


def _mounted_anywhere(folder: Path) -> bool:
    """Mounted in the mount table of any thread of any process."""
    for table in Path("/proc").glob("[0-9]*/task/[0-9]*/mountinfo"):
        try:
            if f" {folder} " in table.read_text():
                return True
        except OSError:
            continue
    return False
