"""A workflow's browser pool ends with its owner: a real Snakemake names the pool as the project's
`common.smk` does, a real render job starts the pool's server and Chromium, and Snakemake is then
killed with SIGKILL, which runs no `onerror` to stop them. The server and every process under it
(Playwright's driver, Chromium) must be gone within seconds, not after the 90 s idle limit."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from PIL import Image

from veriharness.render.pool import IDLE_SECONDS

SNAKEFILE = """\
import os
from veriharness.render.pool import WORKFLOW_POOL_ENV, new_workflow_pool, stop_workflow_pool

if workflow.is_main_process and not workflow.dryrun:  # as workflow/rules/common.smk does
    os.environ[WORKFLOW_POOL_ENV] = new_workflow_pool()

rule all:
    input: "slept"

rule render:
    output: directory("out")
    shell: "{python} -m veriharness render --answer-dir answer --reference reference.png"
           " --out {{output}} --browser-pool workflow --load-timeout 20"

rule wait:
    input: "out"
    output: "slept"
    shell: "touch waiting; sleep 600; touch {{output}}"

onsuccess:
    stop_workflow_pool()

onerror:
    stop_workflow_pool()
"""
ENDED_WITHIN_S = 15.0  # the server looks for its owner every second


def _descendants(pid: int) -> set[int]:
    """Every process under `pid` (by parent links in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _pool_servers(session: int) -> dict[int, Path]:
    """The pool servers in Snakemake's session (the render jobs started them), with the folder
    each serves."""
    servers = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, IndexError):
            continue
        if int(stat[3]) == session and "veriharness.render.pool_server" in argv:
            servers[int(entry.name)] = Path(argv[argv.index("--dir") + 1])
    return servers


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_pools_server_and_browser_end_soon_after_its_snakemake_is_killed(
    tmp_path: Path,
) -> None:
    Image.new("RGB", (240, 160), (200, 200, 200)).save(tmp_path / "reference.png")
    (tmp_path / "answer").mkdir()
    (tmp_path / "answer" / "answer.html").write_text("<p>a page</p>")
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(python=sys.executable))
    env = {**os.environ, "SLURM_JOB_ID": ""}
    owner = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--quiet", "all"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its jobs are ended with it at the test's end
    )
    folders: list[Path] = []
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "waiting").exists():
            assert owner.poll() is None, owner.stderr.read().decode() if owner.stderr else ""
            assert time.monotonic() < deadline, "the render job did not finish"
            time.sleep(0.2)
        [(server, folder)] = _pool_servers(owner.pid).items()
        folders.append(folder.parent)
        under = _descendants(server)
        assert _running(server) and under, "the server runs with its browser under it"

        os.kill(owner.pid, signal.SIGKILL)  # no onerror: nothing tells the pool to stop
        killed = time.monotonic()
        owner.wait(10)
        while any(_running(pid) for pid in {server, *under}):
            assert time.monotonic() - killed < ENDED_WITHIN_S, (
                f"the pool's server or its browser still runs {ENDED_WITHIN_S:.0f} s after its "
                f"owner was killed (idle limit {IDLE_SECONDS:.0f} s)"
            )
            time.sleep(0.2)
        assert not (folder / "socket").exists(), "the socket went with the server"
    finally:
        try:
            os.killpg(owner.pid, signal.SIGKILL)  # the orphaned `sleep` job
        except ProcessLookupError:
            pass
        owner.wait(10)
        for pool in folders:
            shutil.rmtree(pool, ignore_errors=True)
