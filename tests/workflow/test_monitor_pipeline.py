"""The monitor through the whole workflow: Snakemake, the real claude CLI against the offline
model scripted per condition, render, score, the look per task, collect and compare.

Five tiny tasks (one 320 x 200 page each) x two conditions x one replicate, primary outcome MAE,
`analysis.monitor: {method: betting_wor, stop: true}`:
- a treatment that writes the reference page itself against a baseline that writes a black page:
  the answer is known before the last block starts, so its runs are not_started (stopped_early)
  in the tables, the verdict gives the confidence sequence with the sessions saved, `status`
  says so; `stop: false` and the same command again run exactly the stopped runs;
- two conditions that write the same black page: no difference, so the matrix runs to its end
  and the answer stays "not yet known".
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from support.cli import veriharness
from support.pipeline import planned_agent_jobs
from support.project_copy import copy_project, git
from veriharness._util.programs import find_claude
from veriharness.experiment.start_order import block_order, matrix_runs, start_order
from veriharness.offline.agent_policy import ONLY_FIRST, runs_first

pytestmark = pytest.mark.slow

TASKS = [f"tiny-{i}" for i in range(1, 6)]
PAGE = (
    "<!doctype html><html><head><style>body{margin:0;background:#fff;font:20px sans-serif}"
    "h1{margin:16px;color:#1d3557}div{margin:16px;height:70px;background:#2a9d8f}</style>"
    "</head><body><h1>Monitor</h1><div></div></body></html>\n"
)
BLACK = '<!doctype html><html><body style="margin:0;background:#000"></body></html>\n'


def _module(module_id: str, page: str) -> str:
    """A B3 module whose fenced block makes the offline agent write `page` and end its turn."""
    data = base64.b64encode(page.encode()).decode()
    script = runs_first(f"echo {data} | base64 -d > answer.html") + ONLY_FIRST
    return (
        f'---\nid: {module_id}\nslot: B3\nversion: "0.1"\nplaceholder: null\nlanguage: en\n---\n\n'
        f"# Test module\n\nScripts the offline agent (tests only).\n\n```text\n{script}\n```\n"
    )


def _condition(condition: str, module: str) -> str:
    return yaml.safe_dump(
        {"id": condition, "description": "test", "modules": ["b2-image-to-code-v0.1", module]}
    )


def _config(experiment: str, treatment: str, stop: bool) -> str:
    return yaml.safe_dump(
        {
            "experiment": experiment,
            "tasks": TASKS,
            "conditions": ["black", treatment],
            "compare": {"baseline": "black", "treatment": treatment},
            "external_answers": [],
            "scoring": {"trajectory": False},
            "analysis": {
                "primary": ["metric_mae"],
                "monitor": {"method": "betting_wor", "stop": stop},
            },
            "execution": {"order_seed": 11},
        }
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {
        "prompts/test-black-page-v0.1.md": _module("test-black-page-v0.1", BLACK),
        "prompts/test-exact-page-v0.1.md": _module("test-exact-page-v0.1", PAGE),
        "conditions/black.yaml": _condition("black", "test-black-page-v0.1"),
        "conditions/black-again.yaml": _condition("black-again", "test-black-page-v0.1"),
        "conditions/exact.yaml": _condition("exact", "test-exact-page-v0.1"),
        "config/stop.yaml": _config("stopped", "exact", stop=True),
        "config/null.yaml": _config("no-difference", "black-again", stop=True),
    }
    for task in TASKS:
        files[f"tasks/{task}/reference.html"] = PAGE
        files[f"tasks/{task}/task.yaml"] = yaml.safe_dump(
            {
                "id": task,
                "title": "A heading and a band",
                "kind": "test",
                "description": "tiny",
                "viewport": {"width": 320, "height": 200},
            }  # fmt: skip
        )
    dest = copy_project(tmp_path_factory.mktemp("monitor"), [], files, "monitored experiment")
    rendered = veriharness("render-reference", *[dest / "tasks" / t for t in TASKS], cwd=dest)
    assert rendered.returncode == 0, rendered.stderr
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "tiny tasks' references")
    return dest


def _snakemake(project: Path, configfile: str, cores: int = 2) -> subprocess.CompletedProcess[str]:
    # `analysis`: the tables and the comparison; the report reads the same comparison.json.
    # Two cores for two sessions: a finished session's render, score and look then rank above
    # the next session for a free core (with the stop), so the stop's lag is the scheduler's
    # order, not this machine's load.
    command = [sys.executable, "-m", "snakemake", "analysis", "--cores", str(cores),
               "--resources", "agent_sessions=2", "--configfile", configfile]  # fmt: skip
    env = {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}
    done = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return done


def _last_block(experiment: Path) -> list[tuple[str, str]]:
    """The runs of the last (task, replicate) block of the recorded start order."""
    record = json.loads((experiment / "experiment.json").read_text())
    seed = record["start_order"]["seed"]
    order = start_order(matrix_runs(record["matrix"]["conditions"], TASKS, [1]), seed)
    task, _ = block_order(order)[-1]
    return [(run.condition, run.task) for run in order if run.task == task]


def test_a_clearly_better_treatment_stops_the_matrix_and_stop_false_finishes_it(
    project: Path,
) -> None:
    experiment = project / "results" / "stopped"
    _snakemake(project, "config/stop.yaml")
    runs = pd.read_csv(experiment / "tables" / "runs.csv")
    assert len(runs) == 10  # every run has its row
    stopped = runs[runs["status"] == "not_started"]
    assert len(stopped) >= 2 and set(stopped["stopped_by"]) == {"stopped_early"}
    assert set(runs.loc[runs["status"] != "not_started", "status"]) == {"ok"}
    kept_back = set(zip(stopped["condition"], stopped["task"], strict=True))
    assert set(_last_block(experiment)) <= kept_back  # stopped before its last block
    state = json.loads((experiment / "monitor" / "state.json").read_text())
    assert state["known"] and state["tracks"][0]["answer"] == "lower"  # MAE: lower is better
    comparison = json.loads((experiment / "comparison.json").read_text())
    first = comparison["pairs"][0]["verdict"][0]
    assert first.startswith("Stopped early by the monitor (analysis.monitor: betting_wor")
    assert "confidence sequence [" in first and "not valid after a stop" in first
    assert f"saved {len(stopped)} of 10 sessions" in first
    listed = (experiment / "comparison.md").read_text()
    assert listed.count("not started: the monitor's answer was known") == len(stopped)
    status = veriharness("status", experiment)
    assert status.returncode == 0, status.stderr
    assert "known: treatment lower" in status.stdout
    assert f"{len(stopped)} run(s) not started by it" in status.stdout

    finished = {
        (c, t): (experiment / c / t / "r1" / "outcome.json").stat().st_mtime_ns
        for c, t in zip(runs["condition"], runs["task"], strict=True)
        if (c, t) not in kept_back
    }
    config = project / "config" / "stop.yaml"
    config.write_text(config.read_text().replace("stop: true", "stop: false"))
    git(project, "commit", "-qam", "let the stopped runs run")
    again = _snakemake(project, "config/stop.yaml")
    assert planned_agent_jobs(again) == len(stopped)
    for (c, t), stamp in finished.items():
        assert (experiment / c / t / "r1" / "outcome.json").stat().st_mtime_ns == stamp
    runs = pd.read_csv(experiment / "tables" / "runs.csv")
    assert len(runs) == 10 and set(runs["status"]) == {"ok"}
    verdict = json.loads((experiment / "comparison.json").read_text())["pairs"][0]["verdict"]
    assert not verdict[0].startswith("Stopped early")
    assert any(line.startswith("Running answer (analysis.monitor") for line in verdict)


def test_without_a_difference_the_matrix_runs_to_its_end_not_yet_known(project: Path) -> None:
    experiment = project / "results" / "no-difference"
    _snakemake(project, "config/null.yaml", cores=4)  # nothing to stop: no need to serialise
    runs = pd.read_csv(experiment / "tables" / "runs.csv")
    assert len(runs) == 10 and set(runs["status"]) == {"ok"}
    state = json.loads((experiment / "monitor" / "state.json").read_text())
    assert not state["known"] and state["tracks"][0]["tasks"] == 5
    assert not (experiment / "monitor" / "stop.json").exists()
    verdict = json.loads((experiment / "comparison.json").read_text())["pairs"][0]["verdict"]
    assert any("not yet known" in line for line in verdict)
    status = veriharness("status", experiment)
    assert "not yet known" in status.stdout and "stopped    " not in status.stdout
