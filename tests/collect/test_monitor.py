"""The monitor's running answer: the answer of a sequence of task differences, the sequence's
order (the start order's prefix, else arrival), tasks left out, and a look through the real verb
on synthetic run folders: state.json after each task, stop.json once the answer is known, the
comparison's verdict after a stop; the registration holds the monitor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness.collect.monitor import (
    STOPPED_EARLY,
    LookValue,
    Study,
    TaskLook,
    look_at_task,
    monitor_state,
    monitor_verdicts,
    study_of,
    task_look,
    task_ranking,
    track_answers,
)
from veriharness.collect.monitor_state import read_state
from veriharness.experiment.analysis import AnalysisSettings, monitor_key
from veriharness.runfolder.preregistration import RegisteredAnalysis, analysis_changes
from veriharness.spend.early_stop import early_stop_for

PAIR = ("base", "treat")


def _study(tasks: int, ranking: list[str] | None = None, **monitor: object) -> Study:
    settings = AnalysisSettings.model_validate({"monitor": monitor})
    assert settings.monitor is not None
    names = [f"t{i}" for i in range(tasks)]
    return Study(settings, settings.monitor, [PAIR], None, names, ranking)


def _look(task: str, value: float | None, why: str | None = None) -> TaskLook:
    found = LookValue(baseline="base", treatment="treat", measure="metric_ssim", value=value,
                      why=why)  # fmt: skip
    return TaskLook(task=task, time="t", stopped=why == STOPPED_EARLY, values=[found])


def test_a_sequence_is_known_once_it_excludes_zero_and_on_which_side() -> None:
    diffs = np.array([np.full(30, 0.6), np.full(30, -0.6), np.zeros(30)])
    found = track_answers(diffs, "metric_ssim", 0.05, None, None)
    assert found.answer.tolist() == ["higher", "lower", "not_yet_known"]
    assert found.known_after[2] == 0
    # The first look at which the capital at 0 reached 1/alpha, and not one before.
    after = int(found.known_after[0])
    early = track_answers(diffs[:1, : after - 1], "metric_ssim", 0.05, None, None)
    assert 1 < after <= 30 and early.answer.tolist() == ["not_yet_known"]


def test_a_margin_makes_a_sequence_of_small_differences_known_as_within_it() -> None:
    diffs = np.zeros((1, 400))
    found = track_answers(diffs, "metric_mae", 0.05, 0.1, None)
    assert found.answer.tolist() == ["within_margin"] and found.known_after[0] > 0
    assert track_answers(diffs, "metric_mae", 0.05, None, None).answer.tolist() == ["not_yet_known"]


def test_tasks_enter_in_start_order_only_as_a_complete_prefix() -> None:
    study = _study(4, ranking=["t2", "t0", "t3", "t1"], method="betting_wor")
    looks = [_look("t0", 0.8), _look("t3", 0.8)]
    assert monitor_state(looks, study).sequence == []  # t2, first in the order, is not done
    looks.append(_look("t2", 0.8))
    state = monitor_state(looks, study)
    assert state.sequence == ["t2", "t0", "t3"] and state.order == "start_order"
    assert state.tracks[0].tasks == 3
    arrival = monitor_state(looks, _study(4, method="betting_wor"))
    assert arrival.sequence == ["t0", "t3", "t2"] and arrival.order == "arrival"


def test_task_ranking_places_a_task_at_its_last_block() -> None:
    blocks = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("c", 2), ("b", 2)]
    assert task_ranking(blocks) == ["a", "c", "b"]


def test_stopped_and_unpaired_tasks_are_left_out_and_named() -> None:
    looks = [_look("t0", 0.5), _look("t1", None, STOPPED_EARLY), _look("t2", None, "no pair: x")]
    iid = monitor_state(looks, _study(3)).tracks[0]
    assert iid.tasks == 1 and iid.problem is None
    assert iid.left_out == ["t1: stopped_early", "t2: no pair: x"]
    # Without replacement the population is every task: an unexplained gap is a problem, and
    # the answer is never called known.
    wor = monitor_state(looks, _study(3, method="betting_wor")).tracks[0]
    assert wor.problem is not None and "t2" in wor.problem and not wor.known


def test_a_difference_outside_the_measures_range_is_a_problem_not_clipped() -> None:
    state = monitor_state([_look("t0", 2.5)], _study(2))
    assert "outside [-2, 2]" in str(state.tracks[0].problem) and not state.known


def test_each_primary_outcome_gets_its_share_of_alpha() -> None:
    settings = AnalysisSettings.model_validate(
        {"primary": ["metric_ssim", "metric_mae"], "monitor": {"alpha": 0.1}}
    )
    assert settings.monitor is not None
    study = Study(settings, settings.monitor, [PAIR], None, ["t0"], None)
    assert [t.alpha for t in monitor_state([], study).tracks] == [0.05, 0.05]


def _runs(stopped_task: str | None = None) -> pd.DataFrame:
    rows = []
    for task, (b, t) in {"t0": (0.2, 0.9), "t1": (0.3, 0.8)}.items():
        for condition, value in (("base", b), ("treat", t)):
            stopped = task == stopped_task and condition == "treat"
            rows.append({"condition": condition, "task": task, "replicate": 1,
                         "status": "not_started" if stopped else "ok",
                         "stopped_by": STOPPED_EARLY if stopped else None,
                         "metric_ssim": None if stopped else value})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_look_takes_the_comparisons_itt_difference() -> None:
    study = _study(2)
    look = task_look(_runs(), "t0", study)
    assert [v.value for v in look.values] == [pytest.approx(0.7)] and not look.stopped
    # A run the stop kept back: the task's difference is not taken, and says why.
    look = task_look(_runs(stopped_task="t1"), "t1", study)
    assert look.stopped and look.values[0].value is None and look.values[0].why == STOPPED_EARLY


def _experiment(tmp_path: Path, monitor: dict[str, object], tasks: int) -> Path:
    """Synthetic run folders whose treatment scores far above the baseline on every task (SSIM
    0.95 against 0.05), with the experiment record the monitor reads."""
    exp = write_experiment(tmp_path / "results", tasks=tasks).exp_dir
    names = [f"task-{i:03d}" for i in range(tasks)]
    for path in exp.glob("*/*/r1/metrics.json"):
        metrics = json.loads(path.read_text())
        metrics["metrics"]["ssim"] = 0.95 if path.parts[-4] == "treat" else 0.05
        path.write_text(json.dumps(metrics))
    cells = {
        c: {t: json.loads((exp / c / t / "r1" / "run.json").read_text())["identity_hash"]
            for t in names}
        for c in PAIR
    }  # fmt: skip
    record = {
        "kind": "experiment_record",
        "matrix": {"conditions": list(PAIR), "tasks": names, "replicates": 1, "external": []},
        "cells": cells,
        "config": {"compare": {"baseline": "base", "treatment": "treat"},
                   "analysis": {"monitor": monitor}},
        "start_order": {"seed": 7, "seed_source": "config"},
    }  # fmt: skip
    (exp / "experiment.json").write_text(json.dumps(record))
    return exp


def test_the_verb_looks_task_by_task_and_writes_the_stop_once_known(tmp_path: Path) -> None:
    monitor = {"method": "betting_wor", "stop": True}
    exp = _experiment(tmp_path, monitor, tasks=6)
    settings = AnalysisSettings.model_validate({"monitor": monitor})
    key = monitor_key(settings, [PAIR])
    # In the start order, as the workflow completes them (experiment.json's seed).
    study_tasks = study_of(exp).ranking
    assert study_tasks is not None and sorted(study_tasks) != study_tasks
    known_at = None
    for number, task in enumerate(study_tasks, start=1):
        if number == 1:  # the first through the command, as the workflow runs it
            proc = veriharness("monitor-look", "--experiment-dir", exp, "--task", task)
            assert proc.returncode == 0, proc.stderr
            assert "1 of 6 tasks looked at" in proc.stdout
        else:
            look_at_task(exp, task)
        state = read_state(exp)
        assert state is not None and state.tasks_looked == number
        assert state.sequence == study_tasks[:number]
        stop = early_stop_for(exp, key)
        assert (stop is not None) == state.known
        if state.known and known_at is None:
            known_at = number
            assert stop is not None and "treatment higher" in stop.message
    assert known_at is not None and known_at < 6
    assert (exp / "monitor" / "looks" / f"{study_tasks[0]}.json").is_file()
    # A stop reached under other settings does not apply.
    assert early_stop_for(exp, key | {"alpha": 0.01}) is None
    proc = veriharness("monitor-look", "--experiment-dir", exp, "--task", "nope")
    assert proc.returncode == 2 and "--task 'nope' is not a task of the matrix" in proc.stderr


def test_after_a_stop_the_verdict_gives_the_sequence_first_with_the_sessions_saved(
    tmp_path: Path,
) -> None:
    exp = _experiment(tmp_path, {"method": "betting_wor", "stop": True}, tasks=6)
    for task in json.loads((exp / "experiment.json").read_text())["matrix"]["tasks"]:
        look_at_task(exp, task)
    runs = pd.DataFrame(
        [{"condition": c, "task": f"task-{i:03d}", "replicate": 1, "status": "ok",
          "metric_ssim": 0.3 + (0.5 if c == "treat" else 0), "cost_usd": 2.0, "stopped_by": None}
         for c in PAIR for i in range(6)]
    )  # fmt: skip
    last = (runs["task"] == "task-005") & (runs["condition"] == "treat")
    runs.loc[last, ["status", "stopped_by", "metric_ssim", "cost_usd"]] = [
        "not_started",
        STOPPED_EARLY,
        None,
        None,
    ]
    table = pd.DataFrame()
    table.attrs.update(baseline="base", treatment="treat", verdict=["fixed-sample line"])
    settings = AnalysisSettings.model_validate({"monitor": {"method": "betting_wor"}})
    monitor_verdicts([table], runs, exp, settings)
    first, rest = table.attrs["verdict"][0], table.attrs["verdict"][1:]
    assert first.startswith("Stopped early by the monitor (analysis.monitor: betting_wor")
    assert "not valid after a stop" in first and "known: treatment higher" in first
    assert "saved 1 of 12 sessions (8%), about $2.0000" in first
    assert rest == ["fixed-sample line"]
    assert table.attrs["monitor"]["tracks"][0]["tasks"] == 5  # the stopped task is left out


def test_the_registration_holds_the_monitor_and_names_a_change_of_it_but_not_of_stop() -> None:
    def registered(monitor: dict[str, object]) -> RegisteredAnalysis:
        return RegisteredAnalysis.of(AnalysisSettings.model_validate({"monitor": monitor}))

    before = registered({"method": "betting", "stop": True})
    assert before.monitor is not None and before.settings().monitor == before.monitor
    assert analysis_changes(before, registered({"method": "betting", "stop": False})) == []
    changed = analysis_changes(before, registered({"method": "betting_wor", "margin": 0.02}))
    assert changed == [
        ("monitor", "betting, alpha analysis.alpha, margin none",
         "betting_wor, alpha analysis.alpha, margin 0.02"),
    ]  # fmt: skip
