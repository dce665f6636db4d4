"""comparison.md, comparison.json and the report's first screen against the analysis registered
before the first session (preregistration.json), and drift named in the verdict's caveats: built
by the verbs a user runs (collect, compare, report) on synthetic runs, with an experiment record
and a registration laid beside them as the start check writes them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from support.synthetic_runs import SyntheticExperiment, write_experiment
from veriharness import cli
from veriharness.experiment.analysis import AnalysisSettings
from veriharness.report.closing import closing_lines
from veriharness.runfolder.agent_requests import AGENT_REQUESTS, AgentRequest
from veriharness.runfolder.preregistration import (
    PREREGISTRATION,
    Preregistration,
    RegisteredAnalysis,
    RegisteredPair,
    content_digest,
    matrix_of,
    write_once,
)

CONDITIONS = ("base", "treat")
TASKS = [f"task-{i:03d}" for i in range(4)]
REGISTERED = {"primary": ["metric_ssim"], "secondary": None, "alpha": 0.05}


def _cells(exp: SyntheticExperiment) -> dict[str, dict[str, str]]:
    cells: dict[str, dict[str, str]] = {}
    for condition, task, replicate in exp.runs:
        record = json.loads(
            (exp.exp_dir / condition / task / f"r{replicate}" / "run.json").read_text()
        )
        cells.setdefault(condition, {})[task] = record["identity_hash"]
    return cells


def _record(exp: SyntheticExperiment, analysis: dict[str, Any], tasks: list[str]) -> None:
    """experiment.json as the start check writes it, in the parts compare reads."""
    matrix = {"conditions": list(CONDITIONS), "tasks": tasks, "replicates": 1, "external": []}
    record = {
        "kind": "experiment_record",
        "matrix": matrix,
        "cells": _cells(exp),
        "config": {"analysis": analysis},
    }
    (exp.exp_dir / "experiment.json").write_text(json.dumps(record))


def _register(exp: SyntheticExperiment, tasks: list[str], before_sessions: bool = True) -> str:
    """preregistration.json as the start check writes it; returns its digest."""
    matrix = {"conditions": list(CONDITIONS), "tasks": tasks, "replicates": 1, "external": []}
    analysis = RegisteredAnalysis.of(AnalysisSettings.model_validate(REGISTERED))
    fields: dict[str, Any] = {
        "experiment": "exp",
        "created_at": "2026-12-01T09:00:00+00:00",
        "before_sessions": before_sessions,
        "sessions_found": 0 if before_sessions else 3,
        "analysis": analysis if before_sessions else None,
        "pairs": [RegisteredPair(baseline="base", treatment="treat")] if before_sessions else None,
        "matrix": matrix_of(matrix, _cells(exp)) if before_sessions else None,
        "experiment_identity_hash": None,
        "order_seed": 7,
        "harness": None,
        "claude_version": "2.1.328",
        "digest": "",
    }
    draft = Preregistration.model_validate(fields)
    value = draft.model_copy(update={"digest": content_digest(draft.model_dump(mode="json"))})
    assert write_once(exp.exp_dir, value)
    return value.digest


def _compare(exp: SyntheticExperiment, collect: bool = True) -> str:
    """collect (when the run folders changed) and compare, in this process: the verbs' own
    code, without an interpreter's start per call."""
    folder = str(exp.exp_dir)
    if collect:
        assert cli.main(["collect", "--experiment-dir", folder, "--jobs", "1"]) == 0
    pair = ["--pair", "base", "treat", "--resamples", "200"]
    assert cli.main(["compare", "--experiment-dir", folder, *pair]) == 0
    return (exp.exp_dir / "comparison.md").read_text()


@pytest.fixture
def exp(tmp_path: Path) -> SyntheticExperiment:
    return write_experiment(tmp_path / "results", conditions=CONDITIONS, tasks=TASKS, seed=3)


def test_a_changed_primary_is_named_first_and_the_registered_verdict_kept(
    exp: SyntheticExperiment,
) -> None:
    digest = _register(exp, TASKS)
    registration = PREREGISTRATION.path(exp.exp_dir).read_bytes()
    _record(exp, {"primary": ["metric_mae"]}, TASKS)
    text = _compare(exp)
    first = text.splitlines()[0]
    assert first == (
        "> **CHANGED AFTER REGISTRATION: the primary outcome was registered as `metric_ssim` "
        "before any session; it is now `metric_mae`, after 8 sessions (preregistration.json: "
        f"{digest}, 2026-12-01T09:00:00+00:00).**"
    ), text[:600]
    verdict = text[text.index("## Verdict") :]
    assert re.search(r"^- `treat` .* metric_mae relative to `base`", verdict, re.M), verdict
    beside = verdict.index("Under the analysis registered before the first session (primary "
                           "`metric_ssim`):")  # fmt: skip
    assert re.search(r"^- `treat` .* metric_ssim relative to `base`", verdict[beside:], re.M)
    summary = json.loads((exp.exp_dir / "comparison.json").read_text())
    assert summary["registration"][0].startswith("CHANGED AFTER REGISTRATION: the primary outcome")
    (pair,) = summary["pairs"]
    assert pair["registered_primary"] == ["metric_ssim"]
    assert "metric_ssim" in pair["registered_verdict"][0]
    assert PREREGISTRATION.path(exp.exp_dir).read_bytes() == registration
    # The main job's last lines: the change first, then the verdict.
    closing = closing_lines(exp.exp_dir, comparison=True, report=False)
    assert closing[0].startswith("CHANGED AFTER REGISTRATION: the primary outcome was registered")
    assert "`" not in closing[0] and closing[1].startswith("Verdict: treat ")

    out, folder = exp.exp_dir / "report", str(exp.exp_dir)
    report = ["report", "--experiment-dir", folder, "--out", str(out), "--jobs", "1"]
    assert cli.main([*report, "--tasks-dir", str(exp.tasks_dir)]) == 0
    page = (out / "index.html").read_text()
    body = page[page.index("</h1>") + len("</h1>") :]
    assert body.startswith(
        "<p class='caveat'><b>CHANGED AFTER REGISTRATION: the primary outcome was registered as "
        "<code>metric_ssim</code> before any session; it is now <code>metric_mae</code>"
    ), body[:400]
    assert (
        "Under the analysis registered before the first session (primary <code>metric_ssim" in page
    )


def test_as_registered_the_comparison_names_the_registration_and_warns_of_nothing(
    exp: SyntheticExperiment,
) -> None:
    digest = _register(exp, TASKS)
    _record(exp, REGISTERED, TASKS)
    text = _compare(exp)
    assert "CHANGED AFTER REGISTRATION" not in text and "NOT REGISTERED" not in text
    assert text.splitlines()[0] == (
        "The analysis, the compared pairs and the run matrix are those registered before the "
        f"first session (preregistration.json, {digest}, 2026-12-01T09:00:00+00:00)."
    )
    assert "Under the analysis registered" not in text
    summary = json.loads((exp.exp_dir / "comparison.json").read_text())
    assert summary["registration"] == [] and digest in summary["registration_note"]


def test_a_grown_matrix_is_named_with_its_added_runs(exp: SyntheticExperiment) -> None:
    _register(exp, TASKS[:3])
    _record(exp, REGISTERED, TASKS)
    text = _compare(exp)
    assert text.splitlines()[0].startswith(
        "> **CHANGED AFTER REGISTRATION: the run matrix grew: it was registered as 6 runs "
        "(2 condition(s) x 3 task(s) x 1 replicate(s)) before any session; it is now 8 runs "
        "(2 condition(s) x 4 task(s) x 1 replicate(s)): tasks added: `task-003`; 2 run(s) added "
        "(base/task-003/r1, treat/task-003/r1) (after 8 sessions"
    ), text[:600]
    assert "Under the analysis registered" not in text  # the analysis itself is the same


def test_a_shrunk_matrix_is_named_with_its_removed_runs(exp: SyntheticExperiment) -> None:
    _register(exp, TASKS)
    _record(exp, REGISTERED, TASKS[1:])
    text = _compare(exp)
    assert (
        "the run matrix shrank: it was registered as 8 runs (2 condition(s) x 4 task(s) x 1 "
        "replicate(s)) before any session; it is now 6 runs (2 condition(s) x 3 task(s) x 1 "
        "replicate(s)): tasks removed: `task-000`; 2 run(s) removed (base/task-000/r1, "
        "treat/task-000/r1)"
    ) in text.splitlines()[0]


def test_an_edited_registration_and_a_missing_or_late_one_are_said_first(
    exp: SyntheticExperiment, tmp_path: Path
) -> None:
    _record(exp, REGISTERED, TASKS)
    text = _compare(exp)
    assert text.startswith(
        "> **NOT REGISTERED: no analysis was locked before the first session ("
    ), text[:300]
    assert "after 8 sessions" in text.splitlines()[0]

    digest = _register(exp, TASKS)
    path = PREREGISTRATION.path(exp.exp_dir)
    data = json.loads(path.read_text())
    data["analysis"]["primary"] = ["metric_mae"]  # edited by hand, its digest left as it was
    path.write_text(json.dumps(data, indent=2))
    text = _compare(exp, collect=False)
    lines = text.splitlines()
    assert lines[0].startswith(f"> **REGISTRATION EDITED: {path} states the digest {digest}")
    assert "primary outcome was registered as `metric_mae`" in text  # what it says, named

    path.unlink()
    _register(exp, TASKS, before_sessions=False)
    text = _compare(exp, collect=False)
    assert text.startswith(
        f"> **NOT REGISTERED: {path} was written after 3 session(s) had started"
    ), text[:300]


def _answered(run_dir: Path, models: list[str]) -> None:
    """agent_requests.jsonl of a run whose provider answered with `models`, one request each."""
    for seq, model in enumerate(models, start=1):
        AGENT_REQUESTS.append(
            run_dir,
            AgentRequest(
                seq=seq,
                time="2026-12-01T10:00:00+00:00",
                method="POST",
                path="/v1/messages",
                model="claude-x",
                response_model=model,
                status=200,
                total_ms=5.0,
            ),  # fmt: skip
        )


def test_drift_in_models_claude_and_harness_is_counted_per_condition(
    exp: SyntheticExperiment,
) -> None:
    for condition, task, replicate in exp.runs:
        run_dir = exp.exp_dir / condition / task / f"r{replicate}"
        other = (condition, task) == ("treat", "task-003")
        _answered(run_dir, ["snap-2"] if other else ["snap-1"])
        outcome = json.loads((run_dir / "outcome.json").read_text())
        outcome["claude_version"] = "2.1.400" if condition == "treat" else "2.1.328"
        (run_dir / "outcome.json").write_text(json.dumps(outcome))
        record = json.loads((run_dir / "run.json").read_text())
        record["provenance"] = {"harness": {"version": "0.2.0", "git_commit": "c0ffee"}}
        (run_dir / "run.json").write_text(json.dumps(record))
    text = _compare(exp)
    caveats = [line for line in text.splitlines() if line.startswith("> **DRIFT")]
    assert caveats == [
        "> **DRIFT: the runs did not all see the same agent model (as its provider answered): "
        "`snap-1` (base 4 run(s), treat 3 run(s)); `snap-2` (base 0 run(s), treat 1 run(s)); the "
        "conditions saw different mixes of them, so a difference between the conditions may "
        "come from it, not from the treatment.**",
        "> **DRIFT: the runs did not all see the same claude CLI version: `2.1.328` (base 4 "
        "run(s), treat 0 run(s)); `2.1.400` (base 0 run(s), treat 4 run(s)); the conditions saw "
        "different mixes of them, so a difference between the conditions may come from it, not "
        "from the treatment.**",
    ]
    # Ahead of the verdict, and in comparison.json for the report's first screen.
    assert text.index("> **DRIFT") < text.index("## Verdict")
    summary = json.loads((exp.exp_dir / "comparison.json").read_text())
    assert [c for c in summary["caveats"] if c.startswith("DRIFT")] == [
        c.removeprefix("> **").removesuffix("**") for c in caveats
    ]


def test_a_mix_the_conditions_share_is_named_as_the_same_mix(exp: SyntheticExperiment) -> None:
    for condition, task, replicate in exp.runs:
        run_dir = exp.exp_dir / condition / task / f"r{replicate}"
        _answered(run_dir, ["snap-2"] if task in TASKS[:2] else ["snap-1", "snap-2"])
    text = _compare(exp)
    (caveat,) = [line for line in text.splitlines() if line.startswith("> **DRIFT")]
    assert caveat == (
        "> **DRIFT: the runs did not all see the same agent model (as its provider answered): "
        "`snap-1 + snap-2` (base 2 run(s), treat 2 run(s)); `snap-2` (base 2 run(s), treat 2 "
        "run(s)); the conditions saw the same mix of them.**"
    )
