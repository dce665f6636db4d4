"""What the import tests share: the verb run through real Chromium, a set's files hashed here
independently of the importer, and `check-experiment` on a set."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from support.cli import ROOT, veriharness

__all__ = ["CHROMIUM", "check_set", "hashed_files", "read_manifest", "run_import", "sha256_of"]

CHROMIUM = {"VERIHARNESS_CHROMIUM": "/usr/bin/chromium"}


def sha256_of(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def hashed_files(dest: Path) -> dict[str, str]:
    """Every file of every task folder of a set, hashed here independently of the importer."""
    return {
        p.relative_to(dest).as_posix(): sha256_of(p)
        for p in sorted(dest.rglob("*"))
        if p.is_file() and p.name != "manifest.yaml"
    }


def read_manifest(dest: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load((dest / "manifest.yaml").read_text())
    return manifest


def run_import(
    layout: str, source: Path, dest: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    return veriharness("import-tasks", layout, source, dest, *options, env=CHROMIUM, timeout=600)


def check_set(tmp_path: Path, tasks_dir: Path | None) -> tuple[int, str, dict[str, Any] | None]:
    """`check-experiment` of the project's config with `tasks_dir` (None: the examples);
    returns its exit status, standard error and the experiment record it wrote."""
    out = tmp_path / "exp" / "experiment.json"
    out.unlink(missing_ok=True)
    overrides = {"experiment": "imported"} | ({"tasks_dir": str(tasks_dir)} if tasks_dir else {})
    proc = veriharness(
        "check-experiment", "--config", ROOT / "config" / "config.yaml", "--project-root", ROOT,
        "--out", out, "--allow-uncommitted", "--config-json", json.dumps(overrides),
        env=CHROMIUM, timeout=120,
    )  # fmt: skip
    record = json.loads(out.read_text()) if out.is_file() else None
    return proc.returncode, proc.stderr, record
