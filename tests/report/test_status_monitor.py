"""`veriharness status` shows the running answer (analysis.monitor): nothing before the first
look, then the tasks complete, each interval and what it says, and the runs the stop kept back."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness._util import atomic
from veriharness.collect.monitor import LookValue, Study, TaskLook, monitor_state
from veriharness.collect.monitor_state import STATE_NAME
from veriharness.experiment.analysis import AnalysisSettings

MONITOR = {"method": "betting_wor", "margin": 0.05, "stop": True}


def _experiment(tmp_path: Path) -> Path:
    exp = write_experiment(tmp_path / "results", tasks=4).exp_dir
    stopped = exp / "treat" / "task-003" / "r1"
    outcome = json.loads((stopped / "outcome.json").read_text())
    (stopped / "outcome.json").write_text(
        json.dumps(outcome | {"status": "not_started", "reason": "stopped_early"})
    )
    record = {
        "kind": "experiment_record",
        "matrix": {"conditions": ["base", "treat"], "tasks": [f"task-{i:03d}" for i in range(4)],
                   "replicates": 1},
        "config": {"analysis": {"monitor": MONITOR}},
    }  # fmt: skip
    (exp / "experiment.json").write_text(json.dumps(record))
    return exp


def test_status_shows_the_running_answer_and_the_stop(tmp_path: Path) -> None:
    exp = _experiment(tmp_path)
    before = veriharness("status", exp)
    assert before.returncode == 0, before.stderr
    assert (
        "monitor    betting_wor, alpha of analysis.alpha, margin 0.05, stop true: no task "
        "complete yet: not yet known"
    ) in before.stdout
    settings = AnalysisSettings.model_validate({"monitor": MONITOR})
    assert settings.monitor is not None
    tasks = [f"task-{i:03d}" for i in range(4)]
    study = Study(settings, settings.monitor, [("base", "treat")], None, tasks, None)
    looks = [
        TaskLook(task=t, time="t", stopped=False,
                 values=[LookValue(baseline="base", treatment="treat", measure="metric_ssim",
                                   value=0.9)])
        for t in tasks[:3]
    ]  # fmt: skip
    state = monitor_state(looks, study)
    assert state.known
    atomic.write_text(exp / STATE_NAME, state.model_dump_json())
    after = veriharness("status", exp).stdout
    assert "3 of 4 tasks complete, 3 in the sequence (the order tasks completed in" in after
    assert "metric_ssim, treat vs base: mean difference 0.9 over 3 tasks" in after
    assert "known: treatment higher at alpha 0.05" in after
    assert "stopped    the running answer is known: no new session starts" in after
    assert "1 run(s) not started by it" in after
    rows = {line.split()[0]: line.split() for line in after.splitlines()[3:6]}
    assert rows["treat"][5] == "1"  # the stopped column counts it


def test_an_unreadable_state_is_named(tmp_path: Path) -> None:
    exp = _experiment(tmp_path)
    (exp / STATE_NAME).parent.mkdir(parents=True, exist_ok=True)
    (exp / STATE_NAME).write_text("{not json")
    proc = veriharness("status", exp)
    assert proc.returncode == 0 and "monitor/state.json: unreadable" in proc.stdout
