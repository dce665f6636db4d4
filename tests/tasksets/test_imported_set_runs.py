"""An imported task set is an experiment's tasks: one run of an imported page through Snakemake,
the real claude CLI with the offline model, Chromium and the scorer, in a copy of the project
whose only tasks are the set's (a static page, and an Interaction2Code page whose interactions
are replayed on the answer and scored). The static page runs the cell without the verification
module, whose session is the shorter; the interactive page the cell with it, where the offline
agent wires every stated interaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support.cli import veriharness
from support.pipeline import snakemake
from support.project_copy import copy_project, git
from tasksets.published_layouts import write_html_folder, write_interaction2code

pytestmark = pytest.mark.slow


def _project_with_set(tmp_path: Path, name: str, *import_args: str | Path) -> Path:
    """A project copy whose tasks are the set imported with `import_args` into tasks/<name>."""
    config = f"experiment: imported\ntasks_dir: tasks/{name}\ntasks: all\n"
    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project", [], {"config/test.yaml": config}, "No tasks")
    proc = veriharness(
        "import-tasks", import_args[0], import_args[1], project / "tasks" / name,
        *import_args[2:], env={"VERIHARNESS_CHROMIUM": "/usr/bin/chromium"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # pages were skipped, as the fixtures intend
    git(project, "add", "-A")
    git(project, "commit", "-qm", f"Task set {name}")
    return project


def test_an_imported_page_runs_scores_and_is_named_in_the_record(tmp_path: Path) -> None:
    source = write_html_folder(tmp_path / "site")
    args = ("html-folder", source, "--width", "800", "--height", "600")
    project = _project_with_set(tmp_path, "site", *args)

    run = Path("results/imported/b3-absent/about/r1")
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


def test_an_imported_interactive_page_runs_and_its_interactions_are_scored(tmp_path) -> None:
    source = write_interaction2code(tmp_path / "dataset")
    project = _project_with_set(tmp_path, "i2c", "interaction2code", source)
    run = Path("results/imported/b3-present/1/r1")
    result = snakemake(project, "--cores", "2", str(run / "metrics.json"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    metrics = json.loads((project / run / "metrics.json").read_text())
    assert metrics["status"] == "ok"
    # Both imported interactions were stated to the agent, replayed on its answer and scored.
    assert metrics["interactions_stated"] == 2
    # The offline agent wires every stated interaction (a click and a hover): the replay on its
    # answer finds each trigger by the output contract.
    assert [(i["id"], i["implemented"]) for i in metrics["interactions"]] == [
        ("action-1", True),
        ("action-2", True),
    ]
    assert metrics["metrics"]["implement_rate"] == 1.0
    states = json.loads((project / run / "render" / "states.json").read_text())
    assert [i["id"] for i in states["interactions"]] == ["action-1", "action-2"]
    record = json.loads((project / "results" / "imported" / "experiment.json").read_text())
    assert record["task_ids"] == ["1", "2"]
    assert record["task_set"]["source_layout"] == "interaction2code"
