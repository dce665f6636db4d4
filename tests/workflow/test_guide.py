"""docs/guide.md's commands, run as written: every fenced `sh` block in order, in a fresh copy of
the project with the offline model, each one succeeding, and the files the guide says appear.
The guide's real-model and cluster blocks are plain fences: shown, not run (they need keys and a
cluster)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.pipeline import snakemake_env
from support.project_copy import ROOT, copy_project

pytestmark = pytest.mark.slow

GUIDE = ROOT / "docs" / "guide.md"
# What the guide says its commands leave, checked after the last block (each named in the guide).
LEFT = [
    "tasks/notice-card/reference.png",
    "tasks/notice-card/reference_dom.json",
    "results/pilot/comparison.md",
    "results/pilot/report/index.html",
    "results/pilot/tables/trajectory.csv",
    "results/pilot/tables/call_effects.csv",
    "results/pilot/b3-present/notice-card/r1/attempts/1/",
]


def shell_blocks(text: str) -> list[str]:
    """The bodies of the ```sh fences, in order (plain ``` fences are not run)."""
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def plain_block(text: str, first_line: str) -> str:
    """The body of the plain ``` fence whose first line starts with `first_line` (shown, not
    run)."""
    (body,) = re.findall(
        rf"^```\n({re.escape(first_line)}.*?)^```$", text, flags=re.MULTILINE | re.DOTALL
    )
    return body


def test_guide_marks_its_blocks_and_names_what_the_test_checks() -> None:
    text = GUIDE.read_text()
    blocks = shell_blocks(text)
    assert len(blocks) >= 8
    assert not re.search(r"^```(bash|shell|console)$", text, flags=re.MULTILINE)
    for path in LEFT:
        assert path in text, path
    # The real-model and cluster steps are shown, not run: none of their commands is in an sh block.
    run = "\n".join(blocks)
    for shown_only in ("config/study.yaml", "profiles/slurm", "veriharness status"):
        assert shown_only in text and shown_only not in run, shown_only


def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    tasks = sorted(p.parent.name for p in (ROOT / "tasks").glob("*/task.yaml"))
    (tmp_path / "project").mkdir()
    project = copy_project(
        tmp_path / "project",
        tasks,
        {
            name: (ROOT / name).read_text()
            for name in ("tasks/manifest.yaml", "tasks/make_assets.py")
        },
        "The project as cloned",
    )
    env = {
        **snakemake_env(),
        # `veriharness` and `snakemake` as a user types them: this interpreter's scripts first.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "GIT_AUTHOR_NAME": "guide",
        "GIT_AUTHOR_EMAIL": "guide@example.org",
        "GIT_COMMITTER_NAME": "guide",
        "GIT_COMMITTER_EMAIL": "guide@example.org",
    }
    outputs: list[str] = []
    for number, block in enumerate(shell_blocks(GUIDE.read_text()), start=1):
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=project, env=env, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        assert proc.returncode == 0, (number, block, proc.stdout[-3000:], proc.stderr[-6000:])
        outputs.append(proc.stdout + proc.stderr)
    for path in LEFT:
        assert (project / path).exists(), path
    everything = "\n".join(outputs)
    assert "ok tasks/notice-card: 800x500" in everything
    assert "check: no problem in config/config.yaml, config/pilot.yaml" in everything
    assert "a study needs" in everything
    assert "results/pilot/comparison.md" in everything
    # The pilot ran both tasks under both conditions, and the redo ran one session again.
    for condition in ("b3-only", "b3-present"):
        for task in ("notice-card", "signup-form"):
            assert (project / "results/pilot" / condition / task / "r1/metrics.json").is_file()
    assert not (project / "results/pilot/b3-only/notice-card/r1/attempts").exists()
    # The real-model config the guide shows is not run (it needs keys), but it passes the check.
    study = plain_block(GUIDE.read_text(), "# config/study.yaml, committed; the keys the catalog")
    (project / "config" / "study.yaml").write_text(study)
    proc = subprocess.run(
        ["bash", "-c", "veriharness check --configfile config/study.yaml"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
