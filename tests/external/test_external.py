"""External answers: sets of answers no session wrote, imported by the real `import-answer` verb,
rendered in Chromium and scored by the real verbs, then collected and compared like any run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from support.cli import ROOT, veriharness
from veriharness._util.hashing import sha256_file

# Two static tasks and an interactive one (its imported answer is replayed and scored like a
# session's). Every example reference's self-score is test_score.py's; this module is about the
# import path, which is the same for every task.
TASKS = ["article", "landing-page", "pricing-toggle"]
BLOCK_METRICS = ("block_match", "text_similarity", "position", "color")
PARTIAL = TASKS[:2]  # the folder set answers these two tasks only
PARTIAL_MISSING = TASKS[2]


def _config(root: Path) -> Path:
    path = root / "config.yaml"
    sets = [
        {"name": "reference", "source": "task_references"},
        {"name": "partial", "dir": "answers"},
    ]
    data = {"tasks_dir": str(ROOT / "tasks"), "external_answers": sets, "compare": None}
    path.write_text(yaml.safe_dump(data))
    return path


def _folder_set(root: Path) -> None:
    """answers/<task>/answer.html + assets/ for PARTIAL: the references, the first one blanked."""
    for task in PARTIAL:
        folder = root / "answers" / task
        shutil.copytree(ROOT / "tasks" / task / "assets", folder / "assets")
        html = (ROOT / "tasks" / task / "reference.html").read_text(encoding="utf-8")
        if task == PARTIAL[0]:
            html = "<!doctype html><html><body></body></html>"
        (folder / "answer.html").write_text(html, encoding="utf-8")


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("external")
    config = _config(root)
    _folder_set(root)
    exp = root / "results" / "ext"
    runs = [("reference", t) for t in TASKS] + [("partial", t) for t in TASKS]
    for name, task in runs:
        done = veriharness(
            "import-answer",
            "--config", config,
            "--set", name,
            "--task", task,
            "--run-dir", exp / f"external:{name}" / task / "r1",
            "--project-root", root,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    (exp / "experiment.json").write_text(
        json.dumps(
            {
                "kind": "experiment_record",
                "cells": {},
                "matrix": {
                    "conditions": [],
                    "tasks": TASKS,
                    "replicates": 1,
                    "external": ["external:reference", "external:partial"],
                },
            }
        )
    )
    jobs = [
        {
            "answer_dir": str(exp / f"external:{name}" / task / "r1" / "answer"),
            "render_dir": str(exp / f"external:{name}" / task / "r1" / "render"),
            "task_dir": str(ROOT / "tasks" / task),
            "out_dir": str(exp / f"external:{name}" / task / "r1"),
        }
        for name, task in runs
    ]
    render_batch = root / "render.jsonl"
    render_batch.write_text(
        "".join(
            json.dumps(
                {
                    "answer_dir": j["answer_dir"],
                    "reference": str(Path(j["task_dir"]) / "reference.png"),
                    "task_dir": j["task_dir"],
                    "out": j["render_dir"],
                }
            )
            + "\n"
            for j in jobs
        )
    )
    rendered = veriharness("render", "--batch", render_batch)
    assert rendered.returncode == 0, rendered.stderr
    score_batch = root / "score.jsonl"
    score_batch.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    done = veriharness("score", "--batch", score_batch, "--ocr-cache", root / "ocr")
    assert done.returncode == 0, done.stderr
    collected = veriharness("collect", "--experiment-dir", exp)
    assert collected.returncode == 0, collected.stderr
    return exp


def _runs(exp: Path) -> pd.DataFrame:
    return pd.read_parquet(exp / "tables" / "runs.parquet").set_index(["condition", "task"])


@pytest.mark.parametrize("task", TASKS)
def test_the_reference_set_reaches_the_self_score_ceiling(scored: Path, task: str) -> None:
    run = _runs(scored).loc[("external:reference", task)]
    assert (run.status, run.reason, run.read_errors) == ("ok", "", "")
    assert run.answer_source == "external" and run.in_matrix
    # An imported answer has no session: no cost, turns, transcript or CallMLLM calls.
    for column in ("cost_usd", "turns", "agent_tool_calls", "mllm_calls", "identity_hash"):
        assert pd.isna(run[column]), column
    assert run.metric_ssim >= 0.99 and 1 - run.metric_mae >= 0.99
    assert run.metric_ocr_word_f1 >= 0.99
    for name in BLOCK_METRICS:
        assert run[f"metric_{name}"] >= 0.99, name
    audit = json.loads((scored / "external:reference" / task / "r1" / "audit.json").read_text())
    assert not any(audit["flags"].values()), audit["evidence"]


def test_the_reference_set_replays_the_tasks_own_triggers_so_it_is_the_ceiling(
    scored: Path,
) -> None:
    """The reference carries no `data-interaction` marks: its triggers are the task's selectors,
    as the metric is defined, so it implements every interaction and matches its own states."""
    run = _runs(scored).loc[("external:reference", "pricing-toggle")]
    assert run.metric_implement_rate == 1
    for name in ("state_ssim", "state_text", "region_ssim", "region_text", "region_position"):
        assert run[f"metric_{name}"] >= 0.99, name
    render = scored / "external:reference" / "pricing-toggle" / "r1" / "render"
    states = json.loads((render / "states.json").read_text())
    spec = yaml.safe_load((ROOT / "tasks" / "pricing-toggle" / "task.yaml").read_text())
    assert [i["trigger"] for i in states["interactions"]] == [
        i["trigger"] for i in spec["interactions"]
    ]
    # Any other set's answer is held to the output contract: the marked element.
    other = scored / "external:partial" / "pricing-toggle" / "r1" / "render" / "states.json"
    assert all(
        i["trigger"].startswith("[data-interaction=")
        for i in json.loads(other.read_text())["interactions"]
    )


def test_an_imported_answer_records_the_hash_of_every_file(scored: Path) -> None:
    task = TASKS[0]
    outcome = json.loads((scored / "external:reference" / task / "r1" / "outcome.json").read_text())
    assert outcome["kind"] == "external_answer" and outcome["source"] == "task_references"
    assert outcome["files"]["answer.html"] == sha256_file(ROOT / "tasks" / task / "reference.html")
    for asset in (ROOT / "tasks" / task / "assets").rglob("*"):
        if asset.is_file():
            relative = "assets/" + asset.relative_to(ROOT / "tasks" / task / "assets").as_posix()
            assert outcome["files"][relative] == sha256_file(asset)
    run = _runs(scored).loc[("external:reference", task)]
    assert run.external_answer_sha256 == outcome["answer_sha256"]


def test_a_set_missing_a_task_is_scored_on_the_rest_and_lists_the_missing_one(
    scored: Path,
) -> None:
    runs = _runs(scored)
    partial = runs.loc["external:partial"]
    assert sorted(partial.index[partial.status == "missing_answer"]) == TASKS[2:]
    missing = runs.loc[("external:partial", PARTIAL_MISSING)]
    assert f"answers/{PARTIAL_MISSING}/answer.html" in missing.reason
    assert missing.metrics_status == "no_render" and pd.isna(missing.metric_ssim)
    blank = runs.loc[("external:partial", PARTIAL[0])]
    copied = runs.loc[("external:partial", PARTIAL[1])]
    assert blank.status == copied.status == "ok"
    assert blank.metric_ssim < copied.metric_ssim and copied.metric_ssim >= 0.99
    assert blank.metric_ocr_word_f1 == 0.0


def test_an_external_set_is_compared_with_another_like_any_condition(scored: Path) -> None:
    done = veriharness(
        "compare", "--experiment-dir", scored, "--resamples", "200",
        "--pair", "external:reference", "external:partial",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(scored / "comparison.csv")
    ssim = table[table.measure == "metric_ssim"].set_index("population")
    # A task the set has no answer for counts at the floor (intention to treat, P-34) ...
    itt = ssim.loc["itt"]
    assert (itt.n_pairs, itt.n_excluded, itt.n_floor_t) == (len(TASKS), 0, len(TASKS) - 2)
    # ... and only the answered tasks are compared per protocol.
    assert ssim.loc["per_protocol"].n_pairs == 2
    assert itt.mean_diff < 0 and ssim.loc["per_protocol"].mean_diff < 0  # the blanked answer


def test_an_unknown_set_or_a_missing_folder_is_named(tmp_path: Path) -> None:
    config = _config(tmp_path)
    args: list[str | Path] = [
        "--task", TASKS[0], "--run-dir", tmp_path / "run", "--project-root", tmp_path
    ]  # fmt: skip
    unknown = veriharness("import-answer", "--config", config, "--set", "nope", *args)
    assert unknown.returncode == 2 and "--set 'nope' is not one of" in unknown.stderr
    absent = veriharness("import-answer", "--config", config, "--set", "partial", *args)
    assert absent.returncode == 2 and "dir 'answers'" in absent.stderr
    assert not (tmp_path / "run").exists()


def test_the_report_shows_the_ceilings_and_a_page_per_imported_answer(scored: Path) -> None:
    out = scored / "report"
    done = veriharness(
        "report", "--experiment-dir", scored, "--out", out, "--tasks-dir", ROOT / "tasks"
    )
    assert done.returncode == 0, done.stderr
    index = (out / "index.html").read_text()
    assert "<h2>External answers</h2>" in index
    for task in TASKS:
        assert f"<tr><td>external:reference</td><td>{task}</td><td>ok</td>" in index
    page = (out / "runs" / "external:partial" / PARTIAL_MISSING / "r1" / "index.html").read_text()
    assert "external answer set <b>partial</b>" in page and "missing_answer" in page
    assert "problems reading this run" not in page
