"""The monitor's stop at a session's start: with analysis.monitor.stop and a known answer recorded
under the same settings, run_session starts nothing and records the run not_started
(stopped_early), listed for the next start, which requeues it as it does a capped run; the plan
carries the settings only when analysis.monitor.stop is true."""

from __future__ import annotations

import json
from pathlib import Path

from support.sessions import ROOT, offline_plan
from veriharness.agent.plan import plan_session
from veriharness.agent.session import run_session
from veriharness.experiment.analysis import AnalysisSettings, monitor_key
from veriharness.experiment.config import ExperimentConfig
from veriharness.runfolder.outcome import read_status_reason
from veriharness.spend.early_stop import EarlyStop, write_early_stop
from veriharness.spend.ledger import requeue_stopped, stopped_runs

KEY = monitor_key(AnalysisSettings.model_validate({"monitor": {"stop": True}}), [("a", "b")])


def test_a_known_answer_keeps_the_session_from_starting(tmp_path: Path) -> None:
    plan = offline_plan(tmp_path, "unused: no session starts", early_stop=KEY)
    experiment = plan.ledger.experiment_dir
    message = "the running answer is known (metric_ssim: known: treatment higher)"
    write_early_stop(experiment, EarlyStop(time="now", key=KEY, tasks=4, message=message))
    outcome = run_session(plan)
    assert (outcome.status, outcome.reason, outcome.error) == ("not_started", "stopped_early",
                                                               message)  # fmt: skip
    assert outcome.attempts[0].status == "not_started"
    written = json.loads((plan.run_dir / "outcome.json").read_text())
    assert (written["status"], written["reason"]) == ("not_started", "stopped_early")
    # Every output the workflow expects, empty: the run has its row in the tables.
    assert (plan.run_dir / "answer").is_dir()
    assert (plan.run_dir / "transcript.jsonl").read_text() == ""
    assert not (plan.run_dir / "finished").exists()  # nothing to restore: it is run later
    assert [r.run for r in stopped_runs(experiment)] == ["cond/task/r1"]
    # The next start requeues it, as a run a cap stopped.
    assert requeue_stopped(experiment) == ["cond/task/r1"]
    assert read_status_reason(plan.run_dir) is None and stopped_runs(experiment) == []


def test_the_plan_carries_the_monitor_settings_only_when_stop_is_true(tmp_path: Path) -> None:
    run_dir = tmp_path / "results" / "exp" / "b3-present" / "landing-page" / "r1"
    task_dir = ROOT / "tasks" / "landing-page"
    analysis = {"monitor": {"method": "betting_wor", "margin": 0.02, "stop": True}}
    plan = plan_session(ExperimentConfig.model_validate({"analysis": analysis}), run_dir, task_dir)
    settings = AnalysisSettings.model_validate(analysis)
    assert plan.early_stop == monitor_key(settings, [("b3-absent", "b3-present")])
    analysis["monitor"]["stop"] = False
    plan = plan_session(ExperimentConfig.model_validate({"analysis": analysis}), run_dir, task_dir)
    assert plan.early_stop is None
