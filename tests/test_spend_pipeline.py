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
    config = {"experiment": "capped", "tasks": TASKS, "prices": prices}
    return yaml.safe_dump(config | {"execution": {"max_usd": max_usd}})


def _snakemake(project: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "snakemake", "all", "--cores", "2",
               "--resources", "agent_sessions=1", "--configfile", "config/capped.yaml"]  # fmt: skip
    env = {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}
    return subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=1200
    )


def test_a_cap_stops_the_matrix_and_a_raised_cap_finishes_only_the_stopped_runs(
    tmp_path: Path,
) -> None:
    files = {"config/capped.yaml": _config(1e-9)}
    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project", TASKS, files, "capped experiment")
    experiment = project / "results" / "capped"
    first = _snakemake(project)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-6000:]

    runs = pd.read_csv(experiment / "tables" / "runs.csv")
    assert len(runs) == 4  # one row per cell, stopped or not
    finished = runs[runs["status"] == "ok"]
    stopped = runs[runs["status"] == "not_started"]
    assert (len(finished), len(stopped)) == (1, 3)  # the first session crossed the cap
    assert set(stopped["stopped_by"]) == {"budget"}
    assert finished["agent_cost_usd"].iloc[0] > 1e-9
    assert finished["cost_usd"].iloc[0] == pytest.approx(finished["agent_cost_usd"].iloc[0])
    comparison = (experiment / "comparison.md").read_text()
    assert comparison.count("not started: the spending cap was reached") == 3

    status = veriharness("status", experiment)
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()[3:6]}
    assert rows["all"][1:7] == ["4", "1", "0", "0", "3", "0"]
    assert "the spending cap is reached" in status.stdout

    done = experiment / finished["condition"].iloc[0] / finished["task"].iloc[0] / "r1"
    stamp = (done / "outcome.json").stat().st_mtime_ns
    (project / "config" / "capped.yaml").write_text(_config(1e9))
    git(project, "commit", "-qam", "raise the cap")
    second = _snakemake(project)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-6000:]
    assert (done / "outcome.json").stat().st_mtime_ns == stamp, "a finished run was redone"
    runs = pd.read_csv(experiment / "tables" / "runs.csv")
    assert len(runs) == 4 and set(runs["status"]) == {"ok"}
    ledger = [json.loads(x) for x in (experiment / "spend" / "ledger.jsonl").read_text().split()]
    sessions = [x for x in ledger if x["source"] == "session"]
    assert sorted(x["run"] for x in sessions) == sorted(
        f"{c}/{t}/r1" for c, t in zip(runs["condition"], runs["task"], strict=True)
    )  # every session charged once; the runs never started cost nothing
    status = veriharness("status", experiment)
    assert status.stdout.splitlines()[5].split()[1:7] == ["4", "4", "0", "0", "0", "0"]
