"""The one check of an experiment's definition before any session (issue 39), through the
commands a user types: `snakemake` (dry runs where that suffices) and `veriharness check`.
Every problem is one line with the file, the field, the value, what is expected and a
suggestion; a refusal says what works, and nothing ends in a traceback or a schema dump."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.cli import veriharness
from support.pipeline import snakemake_env
from support.project_copy import copy_project, git

TASKS = ["landing-page", "pricing-toggle"]


def _project(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    (tmp_path / "project").mkdir()
    return copy_project(tmp_path / "project", TASKS, files or {}, "a project")


def _snakemake(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", *args],
        cwd=project, env=snakemake_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _no_dump(stderr: str) -> None:
    assert "Traceback" not in stderr and "CalledProcessError" not in stderr
    assert "Failed validating" not in stderr and "$schema" not in stderr


def test_a_typo_in_a_config_key_is_one_line_naming_the_file_and_the_key_meant(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path, {"config/typo.yaml": "replicate: 3\n"})
    proc = _snakemake(project, "-n", "all", "--configfile", "config/typo.yaml")
    assert proc.returncode == 2, proc.stderr
    assert (
        "config/typo.yaml: replicate = 3: unknown key; did you mean `replicates`?"
        in proc.stderr.splitlines()
    ), proc.stderr
    _no_dump(proc.stderr)
    assert len(proc.stderr.splitlines()) < 10, proc.stderr


def test_every_problem_of_the_definition_is_reported_at_once_one_line_each(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    task = project / "tasks" / "landing-page" / "task.yaml"
    text = task.read_text().replace("viewport: {width: 1280, height: 800}", "viewport: [1280, 800]")
    task.write_text(text + "interaction: click the button\n")
    condition = project / "conditions" / "b3-present.yaml"
    condition.write_text(
        condition.read_text().replace("b3-verification-v0.2", "b3-verificaton-v0.2")
    )
    mine = project / "config" / "mine.yaml"
    mine.write_text("replicate: 3\nagent: {endpoint: offlin}\nmax_usd: 5\n")
    git(project, "commit", "-qam", "mistakes")
    expected = [
        "config/mine.yaml: replicate = 3: unknown key; did you mean `replicates`?",
        'config/mine.yaml: agent.endpoint = "offlin": not an allowed value; expected one of '
        '"offline", "anthropic", "gateway"',
        "config/mine.yaml: max_usd = 5: unknown key; did you mean `execution.max_usd`?",
        "tasks/landing-page/task.yaml: viewport = [1280, 800]: not the right type; expected a "
        "mapping with keys width, height; write `viewport: {width: 1280, height: 800}`",
        'tasks/landing-page/task.yaml: interaction = "click the button": not the right type; '
        "expected null; the field is no longer read: delete it, and state each requirement "
        "under `interactions:` (docs/task-format.md)",
        'conditions/b3-present.yaml: modules[3] = "b3-verificaton-v0.2": no prompt module '
        "prompts/b3-verificaton-v0.2.md; did you mean `b3-verification-v0.2`?",
    ]
    checked = veriharness(
        "check", "--project-root", project, "--configfile", "config/mine.yaml", cwd=project
    )
    assert checked.returncode == 2
    lines = checked.stderr.splitlines()
    assert all(line in lines for line in expected), checked.stderr
    assert len(lines) == len(expected) + 1  # and the count
    _no_dump(checked.stderr)
    # The workflow's start prints the same lines, a dry run too.
    proc = _snakemake(project, "-n", "all", "--configfile", "config/mine.yaml")
    assert proc.returncode == 2
    assert all(line in proc.stderr.splitlines() for line in expected), proc.stderr
    _no_dump(proc.stderr)
    assert veriharness("check", "--project-root", project, cwd=project).returncode == 2
    git(project, "checkout", "-q", "HEAD~1", "--", "tasks", "conditions")
    ok = veriharness("check", "--project-root", project, cwd=project)
    assert ok.returncode == 0 and "no problem" in ok.stdout, ok.stderr


def test_a_refusal_says_what_works_and_ends_without_a_traceback(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with open(project / "prompts" / "b3-verification-v0.2.md", "a") as handle:
        handle.write("\nA late note.\n")
    target = "results/example/inputs/task-landing-page.sha256"
    proc = _snakemake(project, target)
    assert proc.returncode != 0
    assert "uncommitted changes in prompts/b3-verification-v0.2.md" in proc.stderr
    assert "`--config allow_uncommitted=true` on the snakemake command line" in proc.stderr
    _no_dump(proc.stderr)
    # What it says works, as typed.
    allowed = _snakemake(project, target, "--config", "allow_uncommitted=true")
    assert allowed.returncode == 0, allowed.stderr
    assert (project / target).is_file()


def test_a_config_file_outside_the_project_starts_and_is_recorded(tmp_path: Path) -> None:
    project = _project(tmp_path)
    outside = tmp_path / "studies" / "my-experiment.yaml"
    outside.parent.mkdir()
    outside.write_text("experiment: outside\ntasks: [landing-page]\n")
    target = "results/outside/inputs/task-landing-page.sha256"
    proc = _snakemake(project, target, "--configfile", str(outside))
    assert proc.returncode == 0, proc.stderr
    record = json.loads((project / "results" / "outside" / "experiment.json").read_text())
    assert record["config"]["tasks"] == ["landing-page"]
    assert record["provenance"]["uncommitted_changes"] is False
