"""Sessions that fail, through the whole workflow (Snakemake, the real claude CLI, the mllm server,
the embedded offline model, Chromium) in a copy of the project (support.pipeline): every run still
gets its row. Sessions only: no external answer set (the reference set's import, render and score
are test_pipeline.py's, and so are the answers that break the later stages: they are written
into its finished experiment)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from support.pipeline import snakemake

pytestmark = pytest.mark.slow


def test_failed_sessions_are_recorded_and_the_others_go_on(project: Path) -> None:
    # One turn is too few to write an answer: every session stops at its turn limit. One task in
    # both conditions: the limit is the same in every cell.
    short = snakemake(
        project, "--cores", "4", "all",
        extra_config="experiment: short\nagent: {max_turns: 1}\nallow_uncommitted: true\n"
        "external_answers: []\ntasks: [landing-page]\n",
    )  # fmt: skip
    assert short.returncode == 0, short.stderr[-3000:]
    experiment = project / "results" / "short"
    runs = pd.read_csv(experiment / "tables" / "runs.csv").query("answer_source == 'session'")
    assert len(runs) == 2
    assert set(runs["status"]) == {"max_turns"}, runs[["status", "reason"]]
    for metrics in experiment.glob("b3-*/*/r1/metrics.json"):
        assert json.loads(metrics.read_text())["status"] == "no_render"
    record = json.loads((experiment / "experiment.json").read_text())
    assert record["provenance"]["uncommitted_changes"] is True
    assert "config/extra.yaml" in json.dumps(record["provenance"]["git_dirty_files"])
