"""Renders sharing Chromium (`veriharness render --browser-pool slurm-job|workflow`): real
`veriharness render` processes, Debian's Chromium behind a wrapper that counts launches, and the
pool's real server processes over their Unix sockets. SLURM_JOB_ID is set the way a SLURM job
sets it, VERIHARNESS_BROWSER_POOL the way the workflow sets it; the cluster test (tests/cluster)
and the workflow tests (tests/workflow) run the same through real jobs."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from support.cli import veriharness
from veriharness.render.pool import WORKFLOW_POOL_ENV, new_workflow_pool, pool_dir, stop_pools

PAGES = {
    "ok": "<p style='margin:0;font-size:30px'>fine page</p><img src='pic.png'>",
    "empty": " \n",
    "broken": "<p>still here</p><script>throw new Error('broken on purpose')</script>",
}


def _chromium_counting_launches(tmp_path: Path) -> tuple[Path, Path]:
    from veriharness._util.programs import find_chromium

    log = tmp_path / "launches.log"
    wrapper = tmp_path / "chromium-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho launch >> "{log}"\nexec "{find_chromium()}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def _launches(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def job_id() -> Iterator[str]:
    """A job number no real job on this machine has; the pool's server is stopped and its
    folder removed afterwards."""
    number = str(2_000_000_000 + os.getpid() % 100_000_000)
    yield number
    pid_file = pool_dir(number) / "server.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
    shutil.rmtree(pool_dir(number), ignore_errors=True)


def _render(answer: Path, reference: Path, out: Path, pool: str, chromium: Path, job: str):
    return veriharness("render", "--answer-dir", answer, "--reference", reference, "--out", out,
                       "--browser-pool", pool, "--chromium", chromium, "--load-timeout", "5",
                       env={"SLURM_JOB_ID": job}, timeout=120)  # fmt: skip


def _runs(tmp_path: Path) -> dict[str, Path]:
    Image.new("RGB", (240, 160), (200, 200, 200)).save(tmp_path / "reference.png")
    answers = {}
    for name, html in PAGES.items():
        answers[name] = tmp_path / name / "answer"
        answers[name].mkdir(parents=True)
        (answers[name] / "answer.html").write_text(html)
        Image.new("RGB", (7, 5), (0, 90, 200)).save(answers[name] / "pic.png")
    return answers


def _server_pid(job: str) -> int:
    return int((pool_dir(job) / "server.pid").read_text())


def test_renders_of_one_job_share_one_browser_and_write_what_their_own_would(
    tmp_path: Path, job_id: str
) -> None:
    answers = _runs(tmp_path)
    reference = tmp_path / "reference.png"
    wrapper, log = _chromium_counting_launches(tmp_path)

    for name, answer in answers.items():
        result = _render(
            answer, reference, tmp_path / name / "pooled", "slurm-job", wrapper, job_id
        )
        assert result.returncode == 0, result.stderr
    assert _launches(log) == 1
    for name, answer in answers.items():
        result = _render(answer, reference, tmp_path / name / "own", "none", wrapper, job_id)
        assert result.returncode == 0, result.stderr
    assert _launches(log) == 1 + len(answers)

    launch_times = []
    for name in answers:
        pooled, own = tmp_path / name / "pooled", tmp_path / name / "own"
        assert (pooled / "render.png").read_bytes() == (own / "render.png").read_bytes(), name
        assert (pooled / "dom.json").read_text() == (own / "dom.json").read_text(), name
        pooled_record = json.loads((pooled / "render.json").read_text())
        own_record = json.loads((own / "render.json").read_text())
        for record in (pooled_record, own_record):
            del record["timings"]
        assert pooled_record == own_record, name
        launch_times.append("launch_ms" in (pooled / "render.json").read_text())
    assert launch_times == [True, False, False], "only the browser's first page reports its launch"
    assert json.loads((tmp_path / "broken" / "pooled" / "render.json").read_text())["page_errors"]


def test_a_killed_server_is_replaced_by_the_next_render(tmp_path: Path, job_id: str) -> None:
    answers = _runs(tmp_path)
    wrapper, log = _chromium_counting_launches(tmp_path)
    first = _render(answers["ok"], tmp_path / "reference.png", tmp_path / "a", "slurm-job",
                    wrapper, job_id)  # fmt: skip
    assert first.returncode == 0, first.stderr
    os.kill(_server_pid(job_id), signal.SIGKILL)
    time.sleep(0.5)
    assert (pool_dir(job_id) / "socket").exists(), "a killed server leaves its socket behind"

    second = _render(answers["ok"], tmp_path / "reference.png", tmp_path / "b", "slurm-job",
                     wrapper, job_id)  # fmt: skip

    assert second.returncode == 0, second.stderr
    assert _launches(log) == 2
    assert (tmp_path / "a" / "render.png").read_bytes() == (
        tmp_path / "b" / "render.png"
    ).read_bytes()


def test_outside_a_slurm_job_the_render_launches_its_own_browser(tmp_path: Path) -> None:
    answers = _runs(tmp_path)
    wrapper, log = _chromium_counting_launches(tmp_path)
    for out in ("a", "b"):
        result = _render(answers["ok"], tmp_path / "reference.png", tmp_path / out, "slurm-job",
                         wrapper, "")  # fmt: skip
        assert result.returncode == 0, result.stderr
    assert _launches(log) == 2


def test_a_job_id_that_is_not_a_number_is_refused_by_name(tmp_path: Path) -> None:
    answers = _runs(tmp_path)
    wrapper, log = _chromium_counting_launches(tmp_path)
    result = _render(answers["ok"], tmp_path / "reference.png", tmp_path / "a", "slurm-job",
                     wrapper, "12;rm")  # fmt: skip
    assert result.returncode == 2
    assert "SLURM_JOB_ID" in result.stderr and "'12;rm'" in result.stderr
    assert not (tmp_path / "a").exists()
    assert _launches(log) == 0


def _held(lock: Path) -> bool:
    """Whether a render holds this slot (its lock cannot be taken)."""
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"


def test_renders_of_one_workflow_share_its_browsers_one_per_render_at_once(
    tmp_path: Path,
) -> None:
    answers = _runs(tmp_path)
    reference = tmp_path / "reference.png"
    wrapper, log = _chromium_counting_launches(tmp_path)
    pool = Path(new_workflow_pool())
    env = {WORKFLOW_POOL_ENV: str(pool), "SLURM_JOB_ID": ""}
    args: list[str | Path] = ["--reference", reference, "--browser-pool", "workflow",
                              "--chromium", wrapper, "--load-timeout", "10"]  # fmt: skip
    try:
        for name, answer in answers.items():
            out = tmp_path / name / "pooled"
            result = veriharness("render", "--answer-dir", answer, "--out", out, *args, env=env,
                                 timeout=120)  # fmt: skip
            assert result.returncode == 0, result.stderr
        assert _launches(log) == 1, "one after another, the renders share one browser"
        for name in answers:
            own = tmp_path / name / "own"
            result = _render(answers[name], reference, own, "none", wrapper, "")
            assert result.returncode == 0, result.stderr
            pooled = tmp_path / name / "pooled"
            assert (pooled / "render.png").read_bytes() == (own / "render.png").read_bytes(), name
            assert (pooled / "dom.json").read_text() == (own / "dom.json").read_text(), name
        launches = _launches(log)

        # A page that keeps its browser busy for seconds: a render started meanwhile takes a
        # second slot and browser instead of waiting, and the next one reuses a free browser.
        slow = tmp_path / "slow" / "answer"
        slow.mkdir(parents=True)
        (slow / "answer.html").write_text(
            "<p>slow</p><script>const end = Date.now() + 4000; while (Date.now() < end) {}</script>"
        )
        command = [sys.executable, "-m", "veriharness", "render", "--answer-dir", str(slow),
                   "--out", str(tmp_path / "slow" / "out"), *map(str, args)]  # fmt: skip
        busy = subprocess.Popen(command, env={**os.environ, **env}, stderr=subprocess.PIPE)
        servers = list(pool.glob("slot-*/server.pid"))
        deadline = time.monotonic() + 60
        while not _held(pool / "slot-0" / "lock"):  # the slow page is in its browser
            assert time.monotonic() < deadline and busy.poll() is None
            time.sleep(0.05)
        beside = veriharness("render", "--answer-dir", answers["ok"], "--out",
                             tmp_path / "beside", *args, env=env, timeout=120)  # fmt: skip
        assert beside.returncode == 0, beside.stderr
        assert busy.wait(timeout=120) == 0, busy.stderr
        assert _launches(log) == launches + 1
        assert len(servers) == 1 and len(list(pool.glob("slot-*/server.pid"))) == 2
        after = veriharness("render", "--answer-dir", answers["ok"], "--out",
                            tmp_path / "after", *args, env=env, timeout=120)  # fmt: skip
        assert after.returncode == 0, after.stderr
        assert _launches(log) == launches + 1
        pids = [int(p.read_text()) for p in pool.glob("slot-*/server.pid")]
        assert all(_alive(pid) for pid in pids)
    finally:
        stop_pools(pool)
    # The end of the run stops every server, each closing its browser, and removes the folder.
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)
    assert not pool.exists()


def test_a_workflow_pool_that_is_not_an_absolute_path_is_refused_by_name(tmp_path: Path) -> None:
    answers = _runs(tmp_path)
    env = {WORKFLOW_POOL_ENV: "pool", "SLURM_JOB_ID": ""}
    result = veriharness("render", "--answer-dir", answers["ok"], "--reference",
                         tmp_path / "reference.png", "--out", tmp_path / "out", "--browser-pool",
                         "workflow", env=env)  # fmt: skip
    assert result.returncode == 2
    assert f"{WORKFLOW_POOL_ENV} must be an absolute path, got 'pool'" in result.stderr
    assert not (tmp_path / "out").exists()
