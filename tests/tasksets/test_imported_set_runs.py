"""An imported task set is an experiment's tasks: one run of an imported page through Snakemake,
the real claude CLI with the offline model, Chromium and the scorer, in a copy of the project
whose only tasks are the set's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support.cli import veriharness
from support.pipeline import snakemake
from support.project_copy import copy_project, git
from tasksets.published_layouts import write_html_folder

pytestmark = pytest.mark.slow


def test_an_imported_page_runs_scores_and_is_named_in_the_record(tmp_path: Path) -> None:
    config = "experiment: imported\ntasks_dir: tasks/site\ntasks: all\n"
    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project", [], {"config/test.yaml": config}, "No tasks")
    source = write_html_folder(tmp_path / "site")
    proc = veriharness(
        "import-tasks", "html-folder", source, project / "tasks" / "site",
        "--width", "800", "--height", "600",
        env={"VERIHARNESS_CHROMIUM": "/usr/bin/chromium"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # pages were skipped, as the fixture intends
    git(project, "add", "-A")
    git(project, "commit", "-qm", "Task set site")

    run = Path("results/imported/b3-present/about/r1")
    result = snakemake(project, "--cores", "2", str(run / "metrics.json"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    outcome = json.loads((project / run / "outcome.json").read_text())
    assert outcome["status"] == "ok" and outcome["offline"] is True
    metrics = json.loads((project / run / "metrics.json").read_text())
    assert metrics["status"] == "ok"
    # The text-block metrics need the imported reference.html and its reference_dom.json.
    assert metrics["metrics"]["block_match"] is not None
    record = json.loads((project / "results" / "imported" / "experiment.json").read_text())
    manifest = yaml.safe_load((project / "tasks" / "site" / "manifest.yaml").read_text())
    assert record["task_ids"] == ["Contact-Us", "about"]
    assert record["task_set"]["name"] == "site"
    assert record["task_set"]["manifest"] == "tasks/site/manifest.yaml"
    assert record["task_set"]["files_verified"] == len(manifest["files"])
