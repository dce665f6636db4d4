"""A spending cap through the whole workflow: Snakemake, the real claude CLI, the mllm server and
the embedded offline model, priced by a test price table. A cap smaller than the matrix's cost
stops it with every table row written; the status shows it; raising the cap and running again
finishes exactly the runs the cap stopped and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from support.cli import veriharness
from support.project_copy import copy_project, git
from veriharness._util.programs import find_claude

TASKS = ["landing-page", "pricing-table"]
PRICE = {"input": 1000.0, "output": 1000.0, "cache_read": 1000.0, "cache_write": 1000.0}

pytestmark = pytest.mark.slow


def _config(max_usd: float) -> str:
    prices = {"models": {"veriharness-offline-agent-1": PRICE}}
    # Only sessions spend: no external answer set, so the matrix is the sessions alone.
    config = {"experiment": "capped", "tasks": TASKS, "prices": prices, "external_answers": []}
    return yaml.safe_dump(config | {"execution": {"max_usd": max_usd}})


def _snakemake(project: Path) -> subprocess.CompletedProcess[str]:
    # `analysis`: everything `all` makes but the report, which reads nothing of the spend.
    command = [sys.executable, "-m", "snakemake", "analysis", "--cores", "2",
               "--resources", "agent_sessions=1", "--configfile", "config/capped.yaml"]  # fmt: skip
    env = {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}
    return subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=1200
    )


def run_capped(tmp_path: Path, max_usd: float) -> tuple[Path, Path, pd.DataFrame]:
    """The project, its experiment folder and the runs table after one workflow run capped at
    `max_usd`."""
    files = {"config/capped.yaml": _config(max_usd)}
    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project", TASKS, files, "capped experiment")
    experiment = project / "results" / "capped"
    first = _snakemake(project)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-6000:]
    return project, experiment, pd.read_csv(experiment / "tables" / "runs.csv")


def test_a_cap_stops_the_matrix_and_a_raised_cap_finishes_only_the_stopped_runs(
    tmp_path: Path,
) -> None:
    # At this price an offline session costs $35-150, so a $150 cap lets the first session
    # finish and stops the matrix before its end, whatever order Snakemake picks.
    project, experiment, runs = run_capped(tmp_path, 150.0)
    assert len(runs) == 4  # one row per cell, stopped or not
    assert not (experiment / "report").exists()  # `analysis` leaves the report out
    counts = runs["status"].value_counts().to_dict()
    assert set(counts) <= {"ok", "budget_exhausted", "not_started"}
    assert counts.get("ok", 0) >= 1 and counts.get("not_started", 0) >= 1
    stopped = runs[runs["status"] != "ok"]
    assert set(stopped["stopped_by"]) == {"budget"}
    ledger_text = (experiment / "spend" / "ledger.jsonl").read_text()
    ledger = [json.loads(x) for x in ledger_text.splitlines()]
    assert ledger[-1]["total_usd"] >= 150.0
    # The overshoot: the request in flight when the cap was crossed (one session at a time).
    largest = max(x["cost_usd"] for x in ledger)
    assert ledger[-1]["total_usd"] - 150.0 <= largest
    charged = {x["run"] for x in ledger if x["source"] == "agent"}
    for row in runs.itertuples():
        run = f"{row.condition}/{row.task}/r1"
        assert (run in charged) == (row.status != "not_started"), run
        if row.status != "not_started":
            assert row.agent_cost_usd > 0 and row.cost_usd == pytest.approx(row.agent_cost_usd)
    comparison = (experiment / "comparison.md").read_text()
    assert comparison.count("not started: the spending cap was reached") == counts["not_started"]
    assert comparison.count("ended by the spending cap") == counts.get("budget_exhausted", 0)

    status = veriharness("status", experiment)
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()[3:6]}
    assert rows["all"][1:7] == ["4", str(counts["ok"]), "0", "0", str(len(stopped)), "0"]
    assert "the spending cap is reached" in status.stdout

    finished = {
        experiment / c / t / "r1": (experiment / c / t / "r1" / "outcome.json").stat().st_mtime_ns
        for c, t in zip(runs["condition"], runs["task"], strict=True)
        if runs.set_index(["condition", "task"]).loc[(c, t), "status"] == "ok"
    }
    ended = [
        json.loads((experiment / c / t / "r1" / "run.json").read_text())["identity_hash"]
        for c, t, s in zip(runs["condition"], runs["task"], runs["status"], strict=True)
        if s == "budget_exhausted"
    ]
    (project / "config" / "capped.yaml").write_text(_config(1e9))
    git(project, "commit", "-qam", "raise the cap")
    second = _snakemake(project)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-6000:]
    for run, stamp in finished.items():
        assert (run / "outcome.json").stat().st_mtime_ns == stamp, f"{run} was redone"
    runs = pd.read_csv(experiment / "tables" / "runs.csv")
    assert len(runs) == 4 and set(runs["status"]) == {"ok"}
    # A session the cap ended was paid for: it was moved aside, not deleted.
    kept = sorted(p.name for p in (experiment / "superseded").glob("*")) if ended else []
    assert kept == sorted(h.removeprefix("sha256:") for h in ended)
    status = veriharness("status", experiment)
    assert status.stdout.splitlines()[5].split()[1:7] == ["4", "4", "0", "0", "0", "0"]
