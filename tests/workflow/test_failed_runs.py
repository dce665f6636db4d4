"""Sessions that fail and answers that break the later stages, through the whole workflow
(Snakemake, the real claude CLI, the mllm server, the embedded offline model, Chromium) in a copy
of the project (support.pipeline): every run still gets its row, and the comparison and the report
are still written. Sessions only: no external answer set (the reference set's import, render and
score are test_pipeline.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from support.hostile import bomb_png
from support.pipeline import run_dir, snakemake

pytestmark = pytest.mark.slow


def test_failed_sessions_are_recorded_and_the_others_go_on(project: Path) -> None:
    # One turn is too few to write an answer: every session stops at its turn limit.
    short = snakemake(
        project, "--cores", "4", "all",
        extra_config="experiment: short\nagent: {max_turns: 1}\nallow_uncommitted: true\n"
        "external_answers: []\n",
    )  # fmt: skip
    assert short.returncode == 0, short.stderr[-3000:]
    experiment = project / "results" / "short"
    runs = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    assert len(runs) == 4
    assert set(runs["status"]) == {"max_turns"}, runs[["status", "reason"]]
    for metrics in experiment.glob("b3-*/*/r1/metrics.json"):
        assert json.loads(metrics.read_text())["status"] == "no_render"
    record = json.loads((experiment / "experiment.json").read_text())
    assert record["provenance"]["uncommitted_changes"] is True
    assert "config/extra.yaml" in json.dumps(record["provenance"]["git_dirty_files"])


def test_hostile_answers_still_yield_tables_comparison_and_report(project: Path) -> None:
    extra = "experiment: hostile\nallow_uncommitted: true\nexternal_answers: []\n"
    assert snakemake(project, "--cores", "4", "all", extra_config=extra).returncode == 0
    experiment = project / "results" / "hostile"
    spinning = run_dir(experiment, "b3-present", "landing-page")
    bomb = run_dir(experiment, "b3-absent", "pricing-table")
    garbled = run_dir(experiment, "b3-absent", "landing-page")
    # What an agent could have written: a page that never finishes loading, an image bomb in
    # assets/, and a transcript cut into bytes that are not JSON and not UTF-8.
    (spinning / "answer" / "answer.html").write_text(
        "<h1>Spins</h1><script>onload = () => { for (;;) alert('again') }</script>"
    )
    (bomb / "answer" / "assets").mkdir(exist_ok=True)
    bomb_png(bomb / "answer" / "assets" / "huge.png", 30_000, 30_000)
    (bomb / "answer" / "answer.html").write_text("<h1>Bomb</h1><img src='assets/huge.png'>")
    with open(garbled / "transcript.jsonl", "ab") as transcript:
        transcript.write(b'{"type": "assistant", "mess\xff\xfe\n\x00\x00[not json\n')
    # Snakemake redoes a missing intermediate file only when something downstream is missing too.
    for run in (spinning, bomb):
        for name in ("render/render.json", "render/render.png", "render/dom.json", "metrics.json"):
            (run / name).unlink()
    for summary in experiment.glob("*/summary.csv"):
        summary.unlink()
    again = snakemake(project, "--cores", "4", "all", extra_config=extra)
    assert again.returncode == 0, again.stderr[-4000:]
    table = pd.read_csv(experiment / "tables" / "runs.csv")
    runs = table[table["answer_source"] == "session"].set_index(["condition", "task"])
    assert len(runs) == 4
    spun = runs.loc[("b3-present", "landing-page")]
    assert spun["status"] == "render_failed" and spun["reason"].startswith("render_failed: load")
    assert runs.loc[("b3-absent", "pricing-table"), "audit_oversized_images"] == True  # noqa: E712
    assert "transcript.jsonl" in runs.loc[("b3-absent", "landing-page"), "read_errors"]
    comparison = (experiment / "comparison.md").read_text()
    # A page that broke its own render counts for its condition, at the floor (P-33).
    assert "## Runs excluded: 0 (not the agent's doing)" in comparison
    csv = pd.read_csv(experiment / "comparison.csv")
    ssim = csv[(csv.measure == "metric_ssim") & (csv.population == "itt")].iloc[0]
    assert (ssim.n_floor_b, ssim.n_floor_t) == (0, 1) and ssim.n_pairs == 2
    assert "## Run statuses by condition" in comparison
    assert (experiment / "report" / "index.html").is_file()
