"""Earlier attempts of a session moved aside into attempts/<n>/ (agent/attempts.py), on real
files; the lost-job case end to end is in test_pipeline and the SLURM test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from veriharness._util.hashing import sha256_file
from veriharness.agent.attempts import (
    keep_earlier_attempt,
    keep_finished,
    redo_session,
    restore_finished,
)


def _attempt(run: Path, transcript: str, outcome: str | None = None) -> None:
    (run / "transcript.jsonl").write_text(transcript)
    (run / "mcp_config.json").write_text("{}\n")
    if outcome is not None:
        (run / "outcome.json").write_text(json.dumps({"status": outcome}))
        (run / "answer").mkdir()
        (run / "answer" / "answer.html").write_text("<p>x</p>")


def test_nothing_to_keep_in_a_fresh_run_folder(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    assert keep_earlier_attempt(tmp_path) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_attempts_are_numbered_and_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    _attempt(tmp_path, '{"type": "system"}\n')
    first = keep_earlier_attempt(tmp_path)
    _attempt(tmp_path, '{"type": "result"}\n', outcome="ok")
    second = keep_earlier_attempt(tmp_path)
    assert first is not None and second is not None

    assert (first, second) == (tmp_path / "attempts" / "1", tmp_path / "attempts" / "2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attempts", "run.json"]
    lost = json.loads((first / "attempt.json").read_text())
    assert (lost["finished"], lost["status"]) == (False, None)
    assert lost["files"] == ["transcript.jsonl", "mcp_config.json"]
    assert "no outcome.json" in lost["reason"]
    assert (first / "transcript.jsonl").read_text() == '{"type": "system"}\n'
    redone = json.loads((second / "attempt.json").read_text())
    assert (redone["finished"], redone["status"]) == (True, "ok")
    assert (second / "answer" / "answer.html").read_text() == "<p>x</p>"


def test_a_session_that_ended_but_lost_its_outcome_is_told_from_one_stopped_mid_way(
    tmp_path: Path,
) -> None:
    _attempt(tmp_path, '{"type": "system"}\n{"type": "result", "subtype": "success"}\n')
    kept = keep_earlier_attempt(tmp_path)
    assert kept is not None
    record = json.loads((kept / "attempt.json").read_text())
    assert (record["finished"], record["status"]) == (False, None)
    assert "ran to its end" in record["reason"] and "no outcome.json" in record["reason"]


def _finished_run(experiment: Path) -> Path:
    """A run folder as run-agent leaves it when its session ends, with the later stages done."""
    run = experiment / "b3-absent" / "landing-page" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text('{"identity_hash": "sha256:aa"}')
    _attempt(run, '{"type": "result"}\n', outcome="ok")
    (run / "answer" / "assets").mkdir()
    (run / "answer" / "assets" / "logo.svg").write_text("<svg/>")
    (run / "answer" / "assets" / "link").symlink_to("/etc/passwd")  # an agent can leave one
    keep_finished(run)
    for name in ("audit.json", "metrics.json", "inferred_tags.json"):
        (run / name).write_text("{}")
    (run / "render").mkdir()
    (experiment / "b3-absent" / "summary.csv").write_text("x\n")
    (experiment / "by-task").mkdir()
    (experiment / "by-task" / "landing-page.csv").write_text("x\n")
    return run


def _remove_declared_outputs(run: Path) -> None:
    """What Snakemake does to a run_agent job it marked incomplete before running it again."""
    (run / "outcome.json").unlink()
    shutil.rmtree(run / "answer")


def test_a_finished_session_whose_outputs_snakemake_removed_is_restored(tmp_path: Path) -> None:
    run = _finished_run(tmp_path)
    outcome = (run / "outcome.json").read_bytes()
    hour_ago = time.time() - 3600
    os.utime(run / "outcome.json", (hour_ago, hour_ago))  # the session ended an hour ago
    _remove_declared_outputs(run)
    # prepare_run rerun by hand rewrites run.json unchanged, after the session.
    (run / "run.json").write_bytes((run / "run.json").read_bytes())

    assert restore_finished(run)

    finished = json.loads((run / "finished" / "finished.json").read_text())
    assert finished == {"run_json": sha256_file(run / "run.json")}
    assert (run / "outcome.json").read_bytes() == outcome
    assert (run / "answer" / "answer.html").read_text() == "<p>x</p>"
    assert (run / "answer" / "assets" / "logo.svg").read_text() == "<svg/>"
    assert os.readlink(run / "answer" / "assets" / "link") == "/etc/passwd"  # not followed
    assert not (run / "attempts").exists()
    assert (run / "outcome.json").stat().st_mtime_ns >= (run / "run.json").stat().st_mtime_ns
    # Restoring twice changes nothing; a restored run is restorable again.
    assert restore_finished(run)
    assert (run / "outcome.json").read_bytes() == outcome


def test_a_finished_session_whose_run_inputs_changed_is_not_restored_but_kept(
    tmp_path: Path,
) -> None:
    run = _finished_run(tmp_path)
    _remove_declared_outputs(run)
    (run / "run.json").write_text('{"identity_hash": "sha256:bb"}')

    assert not restore_finished(run)
    kept = keep_earlier_attempt(run)

    assert kept is not None
    record = json.loads((kept / "attempt.json").read_text())
    assert (record["finished"], record["status"]) == (True, "ok")
    assert "run.json changed" in record["reason"]
    assert (kept / "outcome.json").exists() and (kept / "answer" / "answer.html").exists()
    later_stages = ["audit.json", "inferred_tags.json", "metrics.json", "render"]
    assert sorted(p.name for p in run.iterdir()) == ["attempts", *later_stages, "run.json"]


def test_redo_session_keeps_the_session_and_clears_what_was_made_of_it(tmp_path: Path) -> None:
    run = _finished_run(tmp_path)

    kept = redo_session(run)

    assert kept == run / "attempts" / "1"
    record = json.loads((kept / "attempt.json").read_text())
    assert record["finished"] and "researcher's request" in record["reason"]
    assert (kept / "finished" / "finished.json").exists()
    assert not restore_finished(run)  # nothing left to restore: the next start runs it
    assert sorted(p.name for p in run.iterdir()) == ["attempts", "run.json"]
    assert not (tmp_path / "b3-absent" / "summary.csv").exists()
    assert not (tmp_path / "by-task" / "landing-page.csv").exists()


def test_redo_session_refuses_a_folder_with_no_session(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a run folder"):
        redo_session(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(ValueError, match="no finished session"):
        redo_session(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_the_redo_session_verb_checks_every_folder_before_it_moves_any(tmp_path: Path) -> None:
    good = _finished_run(tmp_path)
    before = sorted(p.name for p in good.iterdir())
    empty = tmp_path / "b3-absent" / "landing-page" / "r2"
    empty.mkdir()
    (empty / "run.json").write_text("{}")

    done = subprocess.run(
        [sys.executable, "-m", "veriharness", "redo-session", str(good), str(empty)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert done.returncode != 0
    assert f"run folder {str(empty)!r}: no finished session" in done.stderr
    assert sorted(p.name for p in good.iterdir()) == before  # the good one was not moved either


def _redo(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veriharness", "redo-session", *map(str, args)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def _experiment(tmp_path: Path) -> tuple[Path, dict[tuple[str, str, str], Path]]:
    """An experiment folder with 2 conditions x 2 tasks x 2 replicates of finished sessions and
    an external answer set."""
    experiment = tmp_path / "example"
    experiment.mkdir()
    (experiment / "experiment.json").write_text('{"kind": "experiment_record"}\n')
    runs = {}
    for condition in ("b3-absent", "b3-present", "external:reference"):
        for task in ("landing-page", "pricing-table"):
            for replicate in ("r1", "r2"):
                run = experiment / condition / task / replicate
                run.mkdir(parents=True)
                (run / "run.json").write_text('{"identity_hash": "sha256:aa"}')
                _attempt(run, '{"type": "result"}\n', outcome="ok")
                runs[(condition, task, replicate)] = run
    return experiment, runs


def test_redo_session_names_one_condition_one_task_or_one_run(tmp_path: Path) -> None:
    experiment, runs = _experiment(tmp_path)

    dry = _redo("--experiment-dir", experiment, "--condition", "b3-present", "-n")
    assert dry.returncode == 0, dry.stderr
    assert "4 session(s) would be redone (dry run: nothing moved)" in dry.stdout
    assert not any((run / "attempts").exists() for run in runs.values())

    done = _redo("--experiment-dir", experiment, "--condition", "b3-present", "--task",
                 "pricing-table", "--replicate", "2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 session(s) set aside; `snakemake --cores 4 all` runs them again" in done.stdout
    moved = {key for key, run in runs.items() if (run / "attempts" / "1").is_dir()}
    assert moved == {("b3-present", "pricing-table", "r2")}

    by_task = _redo("--experiment-dir", experiment, "--task", "landing-page")
    assert by_task.returncode == 0, by_task.stderr
    moved = {key for key, run in runs.items() if (run / "attempts" / "1").is_dir()}
    assert moved == {("b3-present", "pricing-table", "r2")} | {
        (c, "landing-page", r) for c in ("b3-absent", "b3-present") for r in ("r1", "r2")
    }  # every session of the task, in each condition; the external answers had none

    whole = _redo("--experiment-dir", experiment, "--condition", "b3-present")
    assert whole.returncode == 0, whole.stderr
    assert "1 session(s) set aside" in whole.stdout  # the others were already aside
    again = _redo("--experiment-dir", experiment, "--condition", "b3-present")
    assert again.returncode == 0 and "no finished session among the runs named" in again.stdout
    assert not (runs[("b3-present", "landing-page", "r1")] / "attempts" / "2").exists()


def test_redo_session_refuses_a_name_that_matches_no_run(tmp_path: Path) -> None:
    experiment, runs = _experiment(tmp_path)
    before = {run: sorted(p.name for p in run.iterdir()) for run in runs.values()}

    typo = _redo("--experiment-dir", experiment, "--condition", "b3-presnt")
    assert typo.returncode != 0
    assert (
        f"condition 'b3-presnt': no run folder of that condition under {experiment} "
        "(there: b3-absent, b3-present)" in typo.stderr
    )
    replicate = _redo("--experiment-dir", experiment, "--task", "landing-page", "--replicate", "3")
    assert "replicate '3': no run folder of that replicate" in replicate.stderr
    assert "(there: 1, 2)" in replicate.stderr
    external = _redo("--experiment-dir", experiment, "--condition", "external:reference")
    assert "an external answer set has no session to redo" in external.stderr
    everything = _redo("--experiment-dir", experiment)
    assert everything.returncode != 0 and "name --condition, --task or --replicate" in (
        everything.stderr
    )
    both = _redo(runs[("b3-absent", "landing-page", "r1")], "--condition", "b3-absent")
    assert both.returncode != 0 and "not both" in both.stderr
    not_an_experiment = _redo("--experiment-dir", tmp_path, "--condition", "b3-absent")
    assert "no experiment.json, so it is not an experiment folder" in not_an_experiment.stderr
    assert {run: sorted(p.name for p in run.iterdir()) for run in runs.values()} == before
