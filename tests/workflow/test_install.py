"""The package installed the ordinary way (a wheel, not an editable checkout) works.

The verbs are run from a checkout's folder, as a researcher does, but the code comes from the
virtual environment's site-packages: nothing may find its files through the package's own
location inside the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiment.test_identity_pin import PINNED_CELLS
from support.cli import ROOT

SOURCE_PARTS = ("pyproject.toml", "README.md", "src")


@pytest.fixture(scope="module")
def installed_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with `pip install .` of a copy of the source tree (the
    dependencies come from this environment: the venv sees its site-packages)."""
    base = tmp_path_factory.mktemp("install")
    source = base / "source"
    source.mkdir()
    for part in SOURCE_PARTS:
        if (ROOT / part).is_dir():
            shutil.copytree(
                ROOT / part,
                source / part,
                ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
            )
        else:
            shutil.copy2(ROOT / part, source / part)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", str(source)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    shutil.rmtree(source)  # the installed copy must not lean on the tree it was built from
    return python


def _run(python: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [python, *map(str, args)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300
    )


def test_the_package_is_imported_from_the_environment_not_the_checkout(
    installed_python: Path,
) -> None:
    proc = _run(installed_python, "-c", "import veriharness; print(veriharness.__file__)")
    assert proc.returncode == 0, proc.stderr
    location = Path(proc.stdout.strip())
    assert location.is_relative_to(installed_python.parents[1]), location
    assert not location.is_relative_to(ROOT)


def test_installed_verbs_check_and_prepare_the_example_experiment(
    installed_python: Path, tmp_path: Path
) -> None:
    record = tmp_path / "experiment.json"
    proc = _run(
        installed_python, "-m", "veriharness", "check-experiment",
        "--config", "config/config.yaml", "--out", record, "--allow-uncommitted",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(record.read_text())["cells"] == PINNED_CELLS
    run_dir = tmp_path / "run"
    proc = _run(
        installed_python, "-m", "veriharness", "prepare",
        "--config", record, "--condition", "b3-present", "--task", "article",
        "--replicate", "1", "--run-dir", run_dir,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run = json.loads((run_dir / "run.json").read_text())
    assert run["identity_hash"] == PINNED_CELLS["b3-present"]["article"]
    proc = _run(installed_python, "-m", "veriharness", "check-setup")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # As root on this machine kind, every containment the sessions need is there (P-37).
    for part in ("network", "memory limit", "processes limit", "disk limit"):
        assert f"ok       {part}:" in proc.stdout, proc.stdout
