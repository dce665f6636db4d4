"""`veriharness status` through the real command, on run folders and a ledger as the workflow
leaves them mid-experiment."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness.pace.provider_pace import ProviderPace, pace_dir
from veriharness.runfolder.spend import TokenCounts
from veriharness.spend.ledger import SpendGate, SpendSettings


def test_status_counts_runs_and_spend_per_condition(tmp_path: Path) -> None:
    faults = {
        ("base", "task-000", 1): "failed",
        ("base", "task-001", 1): "timeout",  # an outcome of the condition: done
        ("treat", "task-001", 1): "missing",  # to go
        ("treat", "task-002", 1): "not_started",  # prepared, its job not run yet: to go
    }
    exp = write_experiment(tmp_path / "results", tasks=4, faults=faults).exp_dir
    running = exp / "treat" / "task-003" / "r1"
    (running / "outcome.json").unlink()  # a session under way: transcript, no outcome yet
    stopped = exp / "treat" / "task-000" / "r1"
    outcome = json.loads((stopped / "outcome.json").read_text())
    outcome |= {"status": "not_started", "reason": "budget"}
    (stopped / "outcome.json").write_text(json.dumps(outcome))
    matrix = {"conditions": ["base", "treat"], "tasks": [f"task-{i:03d}" for i in range(4)]}
    record = {
        "kind": "experiment_record",
        "matrix": matrix | {"replicates": 1},
        "config": {"execution": {"max_usd": 2.0}},
    }
    (exp / "experiment.json").write_text(json.dumps(record))
    for condition, source, cost in (("base", "session", 0.5), ("base", "mllm", 0.25)):
        settings = SpendSettings(
            experiment_dir=exp,
            run_dir=exp / condition / "task-000" / "r1",
            condition=condition,
            task="task-000",
            replicate=1,
        )
        SpendGate(settings).charge(source, "m", "x", TokenCounts(), cost)  # type: ignore[arg-type]
    proc = veriharness("status", exp)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[2].split()
    rows = {line.split()[0]: dict(zip(header, line.split(), strict=True)) for line in lines[3:6]}
    counts = {
        name: [row[c] for c in ("runs", "done", "running", "failed", "stopped", "to_go")]
        for name, row in rows.items()
    }
    assert counts["base"] == ["4", "3", "0", "1", "0", "0"]
    assert counts["treat"] == ["4", "0", "1", "0", "1", "2"]
    assert counts["all"] == ["8", "3", "1", "1", "1", "2"]
    assert (rows["base"]["agent_usd"], rows["base"]["callmllm_usd"]) == ("0.5000", "0.2500")
    assert (rows["treat"]["agent_usd"], rows["treat"]["callmllm_usd"]) == ("0.0000", "0.0000")
    assert "$0.7500 of max_usd $2.0000 (38%)" in proc.stdout
    assert "to finish  4 runs" in proc.stdout


def test_status_names_a_folder_without_a_record(tmp_path: Path) -> None:
    proc = veriharness("status", tmp_path)
    assert proc.returncode == 2 and "cannot read the experiment record" in proc.stderr


def test_status_shows_each_providers_pace_and_the_sessions_waiting_for_it(
    tmp_path: Path,
) -> None:
    exp = write_experiment(tmp_path / "results", tasks=1).exp_dir
    record = {"kind": "experiment_record", "matrix": {"conditions": ["base", "treat"],
              "tasks": ["task-000"], "replicates": 1}, "config": {}}  # fmt: skip
    (exp / "experiment.json").write_text(json.dumps(record))
    pace = ProviderPace(pace_dir(exp), "agent")
    answered = pace.hold(4000)  # 1000 tokens each; the first goes alone until answered
    pace.observe(answered, 200, {"anthropic-ratelimit-tokens-limit": "40000"}, 1200)
    refused, overloaded = pace.hold(4000), pace.hold(4000)
    pace.observe(refused, 429, {"retry-after": "30"}, None)
    pace.observe(overloaded, 529, {}, None)
    (pace_dir(exp) / "waiting").mkdir()
    (pace_dir(exp) / "waiting" / "treat-task-000-r1").touch()
    proc = veriharness("status", exp)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("pace"))
    assert "agent: 3 requests, 3200 tokens in the last minute (limit 40000 tokens/min)" in line
    assert re.search(
        r"3 answered, 1 x 429, 1 x 529; held \d+ s more \(HTTP 429, retry-after 30", line
    )
    assert "waiting    1 session(s) wait to start for the provider" in proc.stdout
