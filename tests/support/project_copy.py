"""A copy of the project, as its own git repository, for tests that run the whole workflow."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT_PARTS = (
    "Snakefile", "pyproject.toml", "workflow", "profiles", "config", "prompts", "conditions",
)  # fmt: skip
_IDENTITY = ["-c", "user.name=veriharness-tests", "-c", "user.email=tests@example.org"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *_IDENTITY, *args], check=True, capture_output=True)


def copy_project(
    dest: Path,
    tasks: Sequence[str],
    files: Mapping[str, str],
    message: str,
    *,
    without: Sequence[str] = (),
) -> Path:
    """Copy the workflow, its inputs and `tasks`, add `files` (path -> text), remove the paths
    in `without`, commit all."""
    for name in PROJECT_PARTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name)
        else:
            shutil.copy2(source, dest / name)
    for task in tasks:
        shutil.copytree(ROOT / "tasks" / task, dest / "tasks" / task)
    for relative, text in files.items():
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        (dest / relative).write_text(text)
    for relative in without:
        (dest / relative).unlink()
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", message)
    return dest
