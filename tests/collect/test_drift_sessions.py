"""Drift named through the real boundary: four real `claude` sessions (two conditions x two
tasks) name one model through a gateway stand-in in front of the offline model; one of the
treatment's two sessions goes through a second gateway that answers as another snapshot, as a
provider does when it moves an alias during a study. The model proxy records what answered each
request, collect puts it in the runs table, and the comparison's caveat names both snapshots
with their runs per condition. The sessions' own files (transcript, outcome, agent requests,
CallMLLM trace) replace those of a synthetic experiment's runs, whose scores stand in for the
render and score stages."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from support.gateway import GATEWAY_KEY_ENV, gateway_plan, renaming_gateway
from support.synthetic_runs import write_experiment
from veriharness import cli
from veriharness.agent.plan import SessionPlan
from veriharness.agent.session import run_session
from veriharness.experiment.offline_model import OFFLINE_VISION_MODEL
from veriharness.experiment.prices import TokenPrice
from veriharness.offline.server import running_offline_server
from veriharness.runfolder.outcome import AgentOutcome

pytestmark = pytest.mark.slow

NAMED = "claude-sonnet-4-5"
FIRST = "claude-sonnet-4-5-20250929"
SECOND = "claude-sonnet-4-5-20251201"
CELLS = [(c, t) for c in ("base", "treat") for t in ("task-000", "task-001")]
SESSION_FILES = ("transcript.jsonl", "outcome.json", "agent_requests.jsonl", "mllm_trace.jsonl")


def test_another_snapshot_for_half_of_one_conditions_runs_is_named_per_condition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GATEWAY_KEY_ENV, "gateway-key")
    exp = write_experiment(tmp_path / "results", tasks=["task-000", "task-001"], seed=5)
    price = TokenPrice(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)
    with (
        running_offline_server() as offline,
        renaming_gateway(offline, NAMED, FIRST) as first,
        renaming_gateway(offline, NAMED, SECOND) as second,
    ):

        def session(cell: tuple[str, str]) -> tuple[SessionPlan, AgentOutcome]:
            gateway = second if cell == ("treat", "task-001") else first
            plan = gateway_plan(tmp_path / "sessions" / "-".join(cell), gateway, NAMED, price)
            return plan, run_session(plan)

        with ThreadPoolExecutor(max_workers=2) as pool:
            sessions = list(pool.map(session, CELLS))
    for (condition, task), (plan, outcome) in zip(CELLS, sessions, strict=True):
        assert outcome.status == "ok", outcome.error
        for name in SESSION_FILES:
            shutil.copy(plan.run_dir / name, exp.exp_dir / condition / task / "r1" / name)

    folder = str(exp.exp_dir)
    assert cli.main(["collect", "--experiment-dir", folder, "--jobs", "1"]) == 0
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet").set_index(["condition", "task"])
    answered = {cell: list(runs.loc[cell, "agent_response_models"]) for cell in CELLS}
    assert answered == {
        cell: [SECOND if cell == ("treat", "task-001") else FIRST] for cell in CELLS
    }
    for cell in CELLS:  # each CallMLLM call the offline agent made was answered by one model
        models = runs.loc[cell, "mllm_response_models"]
        if runs.loc[cell, "mllm_calls"]:
            assert list(models) == [f"default: {OFFLINE_VISION_MODEL}"], cell

    pair = ["--pair", "base", "treat", "--resamples", "200"]
    assert cli.main(["compare", "--experiment-dir", folder, *pair]) == 0
    text = (exp.exp_dir / "comparison.md").read_text()
    caveat = (
        "DRIFT: the runs did not all see the same agent model (as its provider answered): "
        f"`{FIRST}` (base 2 run(s), treat 1 run(s)); `{SECOND}` (base 0 run(s), treat 1 run(s)); "
        "the conditions saw different mixes of them, so a difference between the conditions may "
        "come from it, not from the treatment."
    )
    assert f"> **{caveat}**" in text.split("## Verdict")[0], text[:2000]
    assert [c for c in text.splitlines() if c.startswith("> **DRIFT")] == [f"> **{caveat}**"]
    summary = json.loads((exp.exp_dir / "comparison.json").read_text())
    assert caveat in summary["pairs"][0]["caveats"] and caveat in summary["caveats"]
