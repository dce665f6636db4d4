"""The whole matrix through Snakemake in a copy of the project, as the workflow tests run it: the
copy (its own git repository, with contamination markers planted in it, one task made
screenshot-only) and the `snakemake` command in it. `tests/workflow/conftest.py` gives each test
file its own copy as the `project` fixture."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from support.project_copy import copy_project
from veriharness._util.programs import find_claude

TASKS = ["landing-page", "pricing-table"]
SCREENSHOT_ONLY = "pricing-table"
CONDITIONS = ["b3-absent", "b3-present"]
MARKER_FILE = f"CLAUDE-MD-MARKER-{uuid.uuid4().hex}"
MARKER_COMMIT = f"COMMIT-MARKER-{uuid.uuid4().hex}"


def pipeline_project(dest: Path) -> Path:
    """2 tasks x 2 conditions x 1 replicate in `dest`: CLAUDE.md and the first commit's message
    hold the markers; SCREENSHOT_ONLY has no reference.html, as a task from a screenshot dataset
    would not."""
    files = {
        "CLAUDE.md": f"Project notes. {MARKER_FILE}\n",
        "config/test.yaml": f"tasks: {json.dumps(TASKS)}\nexecution:\n  debug: true\n",
    }
    return copy_project(
        dest,
        TASKS,
        files,
        f"Initial import {MARKER_COMMIT}",
        without=[
            f"tasks/{SCREENSHOT_ONLY}/{name}" for name in ("reference.html", "reference_dom.json")
        ],
    )


def default_sigint() -> None:
    """For `preexec_fn`: a child that SIGINT stops even when this test run was started in the
    background, where the shell left SIGINT ignored (an ignored signal stays ignored across
    exec, and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def snakemake_env() -> dict[str, str]:
    return {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}


def snakemake(
    project: Path, *args: str, extra_config: str | None = None, package: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Snakemake in the copy; `extra_config` is YAML layered over config/test.yaml; `package`
    is a folder whose veriharness package is used instead of the installed one."""
    configs = ["config/test.yaml"]
    if extra_config is not None:
        (project / "config" / "extra.yaml").write_text(extra_config)
        configs.append("config/extra.yaml")
    env = snakemake_env()
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args, "--configfile", *configs],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def run_dir(experiment: Path, condition: str, task: str) -> Path:
    return experiment / condition / task / "r1"


def planned_jobs(result: subprocess.CompletedProcess[str], rule: str) -> int:
    """How many `rule` jobs a finished Snakemake invocation planned (0 if none)."""
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(rf"^{rule}\s+(\d+)\s*$", result.stdout + result.stderr, re.MULTILINE)
    return int(match.group(1)) if match else 0


def planned_agent_jobs(result: subprocess.CompletedProcess[str]) -> int:
    return planned_jobs(result, "run_agent")
