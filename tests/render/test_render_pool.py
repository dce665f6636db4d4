"""Renders of one SLURM job sharing one Chromium (`veriharness render --browser-pool slurm-job`):
real `veriharness render` processes, Debian's Chromium behind a wrapper that counts launches, and
the pool's real server process over its Unix socket. SLURM_JOB_ID is set the way a SLURM job
sets it; the cluster test (tests/cluster) runs the same through real group jobs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from support.cli import veriharness
from veriharness.render.pool import pool_dir

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
