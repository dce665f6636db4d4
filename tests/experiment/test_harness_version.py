"""The harness's own version in every record: package version, source digest, git commit and
dirty flag of the VeriHarness code. Uncommitted harness changes refuse an experiment against
real models unless allowed, and are then recorded; `record diff` shows it all. Run against a copy
of the package that is its own git checkout, so the test controls its state."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from experiment.test_config import git, make_project

SRC = Path(__file__).resolve().parents[2] / "src" / "veriharness"


def _harness(tmp_path: Path) -> Path:
    checkout = tmp_path / "harness"
    shutil.copytree(
        SRC, checkout / "src" / "veriharness", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(SRC.parents[1] / "workflow", checkout / "workflow")
    (checkout / "pyproject.toml").write_text("[project]\nname = 'harness-copy'\n")
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    git(checkout, "commit", "-q", "-m", "harness")
    return checkout


def _check(harness: Path, root: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(harness / "src")}
    command = [sys.executable, "-m", "veriharness", "check-experiment", "--config",
               str(root / "config" / "config.yaml"), "--project-root", str(root), "--out",
               str(out), "--skip-model-check", *extra]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_uncommitted_harness_code_refuses_a_real_experiment_and_is_recorded(
    tmp_path: Path,
) -> None:
    harness = _harness(tmp_path)
    real = {"experiment": "t", "agent": {"endpoint": "anthropic", "model": "claude-sonnet-4-5"}}
    root = make_project(tmp_path, config=real)
    clean = tmp_path / "clean.json"
    proc = _check(harness, root, clean)
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads(clean.read_text())["provenance"]["harness"]
    assert recorded["git_commit"] == git(harness, "rev-parse", "HEAD").strip()
    assert recorded["git_dirty"] is False and recorded["source_sha256"].startswith("sha256:")
    assert recorded["source_path"] == str(harness / "src" / "veriharness")

    scorer = harness / "src" / "veriharness" / "score" / "command.py"
    scorer.write_text(scorer.read_text() + "\n# a local change\n")
    proc = _check(harness, root, tmp_path / "refused.json")
    assert proc.returncode == 2
    assert "the VeriHarness code in" in proc.stderr
    assert "src/veriharness/score/command.py" in proc.stderr
    assert not (tmp_path / "refused.json").exists()

    dirty = tmp_path / "dirty.json"
    proc = _check(harness, root, dirty, "--allow-uncommitted")
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads(dirty.read_text())["provenance"]["harness"]
    assert recorded["git_dirty"] is True
    assert recorded["git_dirty_files"] == ["src/veriharness/score/command.py"]
    assert json.loads(dirty.read_text())["execution"]["allow_uncommitted"] is True

    env = {**os.environ, "PYTHONPATH": str(harness / "src")}
    diff = subprocess.run(
        [sys.executable, "-m", "veriharness", "record", "diff", str(clean), str(dirty)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert diff.returncode == 1
    assert "recorded provenance.harness.git_dirty: false -> true" in diff.stdout
    assert "recorded provenance.harness.source_sha256:" in diff.stdout
    assert "hashed" not in diff.stdout.split("field(s) differ")[0].replace("0 of them hashed", "")
    assert json.loads(clean.read_text())["cells"] == json.loads(dirty.read_text())["cells"]


def test_an_offline_experiment_runs_with_uncommitted_harness_code(tmp_path: Path) -> None:
    harness = _harness(tmp_path)
    root = make_project(tmp_path)
    (harness / "src" / "veriharness" / "new_module.py").write_text("X = 1\n")
    out = tmp_path / "offline.json"
    proc = _check(harness, root, out)
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads(out.read_text())["provenance"]["harness"]
    assert recorded["git_dirty"] is True
    assert recorded["git_dirty_files"] == ["src/veriharness/new_module.py"]
    assert yaml.safe_load((root / "config" / "config.yaml").read_text())["experiment"] == "t"
