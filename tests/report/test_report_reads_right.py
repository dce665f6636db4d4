"""The report and comparison.md read without misleading (issue 39): counts that agree, the verdict
without Markdown's backticks, a per-task table beside each task's ceiling, identical ITT and
per-protocol rows shown once, every abbreviation defined, no empty table, no plot of a constant,
and nothing wider than the screen. Built by the verbs a user runs (collect, compare, report) on
synthetic runs with a reference set beside them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import sync_playwright

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness._util.programs import find_chromium

REFERENCE = "external:reference"
# Every metric an interactive and responsive task's runs have: the external answers' table of
# the report has a column for each.
METRICS = (
    "ssim", "mae", "ocr_word_precision", "ocr_word_recall", "ocr_word_f1", "block_match",
    "text_similarity", "position", "color", "implement_rate", "state_ssim", "state_text",
    "region_ssim", "region_text", "region_position", "viewport_ssim", "viewport_block_match",
)  # fmt: skip


def _as_imported_answer(run_dir: Path, task: str) -> None:
    """A synthetic run made into the task's reference imported as an answer (no session)."""
    for name in ("run.json", "transcript.jsonl", "mllm_trace.jsonl", "system_prompt.md"):
        (run_dir / name).unlink(missing_ok=True)
    (run_dir / "outcome.json").write_text(
        json.dumps(
            {
                "kind": "external_answer",
                "status": "ok",
                "set": "reference",
                "condition": REFERENCE,
                "task": task,
                "source": "task_references",
                "source_path": "tasks/<task>/reference.html",
                "answer_present": True,
                "files": {"answer.html": "sha256:" + "cd" * 32},
                "answer_sha256": "sha256:" + "ef" * 32,
            }
        )
    )


def _every_metric(run_dir: Path, ceiling: bool) -> None:
    path = run_dir / "metrics.json"
    data = json.loads(path.read_text())
    values = data["metrics"]
    data["metrics"] = {
        m: (0.0 if m == "mae" else 1.0) if ceiling else values.get(m, 0.5) for m in METRICS
    }
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("reads")
    exp = write_experiment(
        root / "results", conditions=("base", "treat", REFERENCE), tasks=3, images=True, seed=4
    )
    for (condition, task, _), spec in exp.runs.items():
        run_dir = exp.exp_dir / condition / task / f"r{spec.replicate}"
        if condition == REFERENCE:
            _as_imported_answer(run_dir, task)
        _every_metric(run_dir, ceiling=condition == REFERENCE)
    assert veriharness("collect", "--experiment-dir", exp.exp_dir).returncode == 0
    # An offline experiment: every run's agent cost is the same, $0.
    table = exp.exp_dir / "tables" / "runs.parquet"
    runs = pd.read_parquet(table)
    runs.loc[runs["answer_source"] == "session", "cost_usd"] = 0.0
    runs.to_parquet(table)
    compared = veriharness(
        "compare", "--experiment-dir", exp.exp_dir, "--resamples", "200",
        "--baseline", "base", "--treatment", "treat",
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    out = root / "report"
    done = veriharness(
        "report", "--experiment-dir", exp.exp_dir, "--out", out, "--tasks-dir", exp.tasks_dir
    )
    assert done.returncode == 0, done.stderr
    return exp.exp_dir, out


def test_the_banner_and_comparison_md_count_the_same_session_runs(built) -> None:
    exp, out = built
    comparison = (exp / "comparison.md").read_text()
    index = (out / "index.html").read_text()
    assert "OFFLINE: 6 of 6 session runs ran" in comparison
    assert "OFFLINE: 6 of 6 session runs ran" in index
    assert "The 3 imported answers, external:&lt;name&gt;, ran no session" in index


def test_the_verdict_in_html_has_no_backticks(built) -> None:
    _, out = built
    verdict = (out / "index.html").read_text().split("<h2>Verdict</h2>")[1].split("<h2>")[0]
    assert "`" not in verdict and "<code>treat</code>" in verdict


def test_comparison_md_defines_its_terms_merges_identical_rows_and_sets_tasks_by_ceilings(
    built,
) -> None:
    exp, _ = built
    text = (exp / "comparison.md").read_text()
    assert "W/T/L" not in text and "? (higher" not in text
    for term in ("`n`", "`excl.`", "`n/a`", "`floor b/t`", "`95% CI`", "`p (Holm)`",
                 "`higher/tie/lower`", "`better`", "`itt`", "`ceiling`"):  # fmt: skip
        assert f"- {term}" in text or f"; {term}" in text, term
    primary = text.split("## Primary outcome(s)")[1].split("\n## ")[0]
    assert primary.count("| metric_ssim |") == 1 and "| metric_ssim | itt = pp |" in primary
    assert "`itt = pp`: the intention-to-treat and per-protocol figures" in primary
    per_task = text.split("## Per task: metric_ssim (ITT), with each task's ceiling")[1]
    rows = [line for line in per_task.split("\n## ")[0].splitlines() if line.startswith("| task-")]
    assert len(rows) == 3 and all(line.endswith("| 1 |") for line in rows)
    process = text.split("## What the agent did")[1].split("\n## ")[0]
    assert "| cost_usd | itt | " in process and process.count("| –") >= 1


def test_no_empty_table_and_no_plot_of_a_constant(built) -> None:
    _, out = built
    index = (out / "index.html").read_text()
    assert "<h2>Runs that are not ok: 0</h2><p>None: every run is ok.</p>" in index
    assert not (out / "cost_vs_fidelity.png").exists()
    assert "cost_vs_fidelity: left out, every run&#x27;s agent cost is $0.0000" in index
    assert "Per task, metric_ssim" in index


def test_nothing_is_wider_than_the_screen(built) -> None:
    _, out = built
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(find_chromium()), args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto((out / "index.html").as_uri())
        width = page.evaluate("document.documentElement.scrollWidth")
        browser.close()
    assert width <= 1400


def test_a_report_redrawn_after_costs_vary_draws_the_cost_plot_again(built, tmp_path) -> None:
    exp, _ = built
    copy = tmp_path / "exp"
    shutil.copytree(exp / "tables", copy / "tables")
    runs = pd.read_parquet(copy / "tables" / "runs.parquet")
    runs["cost_usd"] = [0.1 * i for i in range(len(runs))]
    runs.to_parquet(copy / "tables" / "runs.parquet")
    out = tmp_path / "report"
    assert veriharness("report", "--experiment-dir", copy, "--out", out).returncode == 0
    assert (out / "cost_vs_fidelity.png").is_file()
