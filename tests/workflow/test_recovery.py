"""A matrix interrupted, a job killed mid-session, Snakemake itself killed, a model request
refused: through Snakemake, the real claude CLI, the mllm server and the embedded offline model
in a copy of the project (support.pipeline), each run is done once, redone when it was lost, and
each attempt is kept and counted in the runs table. Sessions only: no external answer set (the
reference set's import, render and score are test_pipeline.py's). The tests that read only the
runs table ask Snakemake for that table (`collect_tables`), not `all`: the comparison and the
report would add nothing they check; the README's crash steps run `all` as the README says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from support.pipeline import (
    CONDITIONS,
    default_sigint,
    planned_agent_jobs,
    snakemake,
    snakemake_env,
)
from veriharness.offline.server import FAULTS_ENV

pytestmark = pytest.mark.slow

# The rule whose one output is tables/runs.csv: the target of the tests that read only that.
TABLES = "collect_tables"


def test_an_interrupted_matrix_resumes_with_only_its_unfinished_runs(project: Path) -> None:
    # One task in both conditions: one run finished and one not when the matrix is interrupted.
    extra = (
        "experiment: interrupted\nallow_uncommitted: true\ntasks: [landing-page]\n"
        "external_answers: []\n"
    )
    runs_in_matrix = len(CONDITIONS)
    (project / "config" / "extra.yaml").write_text(extra)
    command = [
        sys.executable,
        "-m",
        "snakemake",
        TABLES,
        "--cores",
        "2",
        "--resources",
        "agent_sessions=1",
        "--configfile",
        "config/test.yaml",
        "config/extra.yaml",
    ]
    # Each model answer takes a second, so the second session is still under way when the
    # first run's render has finished and the matrix is interrupted.
    env = snakemake_env() | {FAULTS_ENV: json.dumps({"latency_s": 1.0})}
    experiment = project / "results" / "interrupted"
    process = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True,
                               preexec_fn=default_sigint)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        # A render that has started means its run's session job is complete for Snakemake.
        while not list(experiment.glob("b3-*/*/r1/render/render.json")):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=120)
    assert not _sessions_alive(experiment), "an interrupted job left its claude session running"
    completed = {p.parent.parent for p in experiment.glob("b3-*/*/r1/render/render.json")}
    stamps = {run: (run / "outcome.json").stat().st_mtime_ns for run in completed}
    planned = planned_agent_jobs(snakemake(project, "-n", TABLES, extra_config=extra))
    assert 1 <= planned <= runs_in_matrix - len(completed)
    assert snakemake(project, "--cores", "2", TABLES, extra_config=extra).returncode == 0
    for run, stamp in stamps.items():
        assert (run / "outcome.json").stat().st_mtime_ns == stamp, f"{run} was run again"
    runs = pd.read_csv(experiment / "tables" / "runs.csv")
    assert len(runs.query("status == 'ok' and answer_source == 'session'")) == runs_in_matrix


def _sessions_alive(experiment: Path) -> list[str]:
    """Command lines of live processes that belong to this experiment's sessions (after a
    short grace period for them to end)."""
    for _ in range(50):
        alive = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(experiment) in text and "claude" in text and "snakemake" not in text:
                alive.append(text)
        if not alive:
            return []
        time.sleep(0.2)
    return alive


def _kill_the_job_of(run: Path) -> None:
    """What a scheduler's kill does to a job: its processes (the job's shell, run-agent, the
    claude session and its mllm server, all naming the run folder) end at once, no clean-up."""
    names = [f"{run}{end}".encode() for end in ("/", " ", "\0")]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if any(name in cmdline.read_bytes() + b"\0" for name in names):
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _start_two_runs(
    project: Path, name: str, target: str
) -> tuple[str, Path, list[Path], subprocess.Popen[bytes]]:
    """Start Snakemake for `target`, one job at a time, on a one-task, two-replicate experiment
    `name`; its extra config, results folder, run folders and process."""
    extra = (
        f"experiment: {name}\nallow_uncommitted: true\ntasks: [landing-page]\n"
        "external_answers: []\nconditions: [b3-absent]\nreplicates: 2\ncompare: null\n"
    )
    (project / "config" / "extra.yaml").write_text(extra)
    experiment = project / "results" / name
    runs = [experiment / "b3-absent" / "landing-page" / f"r{k}" for k in (1, 2)]
    command = [sys.executable, "-m", "snakemake", target, "--cores", "1", "--configfile",
               "config/test.yaml", "config/extra.yaml"]  # fmt: skip
    env = snakemake_env()
    process = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True,
                               preexec_fn=default_sigint)  # fmt: skip
    return extra, experiment, runs, process


def _one_done_one_busy(
    runs: list[Path], process: subprocess.Popen[bytes], busy: Callable[[Path], bool]
) -> tuple[Path, Path]:
    """Wait until one run has its outcome and the other is `busy`; (done, busy)."""
    deadline = time.monotonic() + 600
    while True:
        done = [r for r in runs if (r / "outcome.json").exists()]
        running = [r for r in runs if r not in done and busy(r)]
        if len(done) == 1 and running:
            return done[0], running[0]
        assert time.monotonic() < deadline and process.poll() is None, (done, running)
        time.sleep(0.1)


def test_a_session_lost_mid_job_is_redone_and_its_attempt_kept(project: Path) -> None:
    extra, experiment, runs, process = _start_two_runs(project, "lost", TABLES)

    def mid_session(run: Path) -> bool:
        transcript = run / "transcript.jsonl"
        return transcript.exists() and transcript.stat().st_size > 0

    try:
        kept, lost = _one_done_one_busy(runs, process, mid_session)
        _kill_the_job_of(lost.relative_to(project))
        # Snakemake sees the job fail, removes its declared outputs and finishes the other run.
        assert process.wait(timeout=600) != 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    lost_transcript = (lost / "transcript.jsonl").read_bytes()
    assert lost_transcript and not (lost / "outcome.json").exists()
    assert (kept / "metrics.json").exists()
    stamp = (kept / "outcome.json").stat().st_mtime_ns

    resumed = snakemake(project, "--cores", "2", TABLES, extra_config=extra)

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert planned_agent_jobs(resumed) == 1
    assert (kept / "outcome.json").stat().st_mtime_ns == stamp, "a finished run was redone"
    assert not (kept / "attempts").exists()
    assert json.loads((lost / "outcome.json").read_text())["status"] == "ok"
    attempt = lost / "attempts" / "1"
    assert sorted(p.name for p in lost.joinpath("attempts").iterdir()) == ["1"]
    record = json.loads((attempt / "attempt.json").read_text())
    assert (record["attempt"], record["finished"], record["status"]) == (1, False, None)
    assert "transcript.jsonl" in record["files"] and "outcome.json" not in record["files"]
    assert (attempt / "transcript.jsonl").read_bytes() == lost_transcript
    assert (lost / "transcript.jsonl").read_bytes() != lost_transcript
    runs_table = pd.read_csv(experiment / "tables" / "runs.csv")
    runs_table = runs_table[runs_table["answer_source"] == "session"]  # not the reference set
    assert len(runs_table) == 2 and set(runs_table["status"]) == {"ok"}
    rows = runs_table.set_index("replicate")
    lost_row, kept_row = rows.loc[int(lost.name[1:])], rows.loc[int(kept.name[1:])]
    assert (lost_row["attempts"], kept_row["attempts"]) == (2, 1)
    assert lost_row["attempt_causes"].startswith("attempts/1: lost: no outcome.json")
    assert pd.isna(kept_row["attempt_causes"])


def _run_agent_of(run: Path) -> list[int]:
    """The live `run-agent` processes of a run folder (what `pgrep -af 'veriharness run-agent'`
    shows a researcher)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"run-agent" in argv and str(run).encode() in argv:
            found.append(int(cmdline.parent.name))
    return found


def test_after_snakemake_is_killed_the_readme_steps_resume_it(project: Path) -> None:
    """README, "After a crash": Snakemake alone is SIGKILLed mid-session; its session goes on to
    its end; the restart meets the stale lock; `--unlock`, then the same command finishes. Neither
    session is paid for twice: the one Snakemake did not see finish is restored from finished/.
    Then `veriharness redo-session` makes the next run redo exactly one session, kept aside."""
    extra, experiment, runs, process = _start_two_runs(project, "crashed", "all")
    try:
        # One job at a time: a session running means the other's job finished before it.
        kept, orphaned = _one_done_one_busy(
            runs, process, lambda run: bool(_run_agent_of(run.relative_to(project)))
        )
        deadline = time.monotonic() + 600
        os.kill(process.pid, signal.SIGKILL)  # Snakemake alone; its running job goes on
        process.wait(timeout=60)
        while _run_agent_of(orphaned.relative_to(project)):  # the README: let them end
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    orphan_outcome = (orphaned / "outcome.json").read_bytes()
    assert json.loads(orphan_outcome)["status"] == "ok"
    orphan_transcript = (orphaned / "transcript.jsonl").read_bytes()
    stamp = (kept / "outcome.json").stat().st_mtime_ns

    locked = snakemake(project, "--cores", "1", "all", extra_config=extra)
    assert locked.returncode != 0 and "LockException" in locked.stdout + locked.stderr
    unlocked = snakemake(project, "--unlock", "--cores", "1", "all", extra_config=extra)
    assert unlocked.returncode == 0, unlocked.stderr[-3000:]
    resumed = snakemake(project, "--cores", "1", "all", extra_config=extra)

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (kept / "outcome.json").stat().st_mtime_ns == stamp, "a finished run was redone"
    # Snakemake reran the orphaned run's job (it was incomplete); run-agent restored its session.
    assert planned_agent_jobs(resumed) == 1
    log = experiment / "logs" / "run_agent"
    assert any("restored" in path.read_text() for path in log.rglob("*.log"))
    assert (orphaned / "outcome.json").read_bytes() == orphan_outcome
    assert (orphaned / "transcript.jsonl").read_bytes() == orphan_transcript
    assert not (kept / "attempts").exists() and not (orphaned / "attempts").exists()
    table = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    assert set(table["status"]) == {"ok"} and set(table["attempts"]) == {1}

    redo = subprocess.run(
        [sys.executable, "-m", "veriharness", "redo-session", str(orphaned)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert redo.returncode == 0, redo.stderr
    again = snakemake(project, "--cores", "1", "all", extra_config=extra)

    assert again.returncode == 0, again.stderr[-3000:]
    assert planned_agent_jobs(again) == 1
    assert (kept / "outcome.json").stat().st_mtime_ns == stamp
    record = json.loads((orphaned / "attempts" / "1" / "attempt.json").read_text())
    assert record["finished"] is True and "researcher's request" in record["reason"]
    assert (orphaned / "attempts" / "1" / "outcome.json").read_bytes() == orphan_outcome
    table = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    rows = table.set_index("replicate")
    assert set(rows["status"]) == {"ok"}
    assert rows.loc[int(orphaned.name[1:]), "attempts"] == 2
    assert "researcher's request" in rows.loc[int(orphaned.name[1:]), "attempt_causes"]
    assert rows.loc[int(kept.name[1:]), "attempts"] == 1


def test_a_retried_infra_error_shows_in_the_runs_table(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's first model request is answered 529 (overloaded); the retry goes through.
    faults = {"kind": "status", "status": 529, "first": 1}
    monkeypatch.setenv(FAULTS_ENV, json.dumps(faults))
    extra = (
        "experiment: retried\nallow_uncommitted: true\ntasks: [landing-page]\n"
        "external_answers: []\nconditions: [b3-absent]\ncompare: null\n"
        "execution: {debug: true, infra_retries: 1, api_retries: 0}\n"
    )
    result = snakemake(project, "--cores", "2", TABLES, extra_config=extra)
    assert result.returncode == 0, result.stderr[-3000:]
    experiment = project / "results" / "retried"
    runs = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    [row] = runs.to_dict("records")
    assert (row["status"], row["attempts"]) == ("ok", 2), row
    assert row["attempt_causes"].startswith("attempts/1: infra_error: ")
    assert "HTTP 529" in row["attempt_causes"]
    kept = experiment / "b3-absent" / "landing-page" / "r1" / "attempts" / "1"
    assert json.loads((kept / "outcome.json").read_text())["status"] == "infra_error"
