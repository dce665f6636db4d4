"""check-experiment refuses a start whose sessions need a Claude Code CLI that is missing or not
the pinned one, in one line saying what is missing and how to get it; a start that runs no
session (every run of the matrix has ended under its cell's identity: rebuilding the tables, the
report, a rescore) only records the CLI's absence. Through the real command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from experiment.test_config import make_project
from support.cli import veriharness
from veriharness._util.programs import CLAUDE_CODE_VERSION


def _check(root: Path, claude: Path | None) -> subprocess.CompletedProcess[str]:
    env = {} if claude is None else {"VERIHARNESS_CLAUDE": str(claude)}
    return veriharness("check-experiment", "--config", root / "config" / "config.yaml",
                       "--project-root", root, "--out", root / "results" / "t" / "experiment.json",
                       cwd=None, env=env, timeout=120)  # fmt: skip


def _refusal(sessions: int, why: str) -> str:
    return (
        f"check-experiment: refusing to start: {sessions} session(s) to run need the Claude Code "
        f"CLI, and {why}"
    )


def test_a_missing_claude_is_refused_in_one_line_naming_it_and_setup(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    missing = tmp_path / "no-claude"
    proc = _check(root, missing)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        _refusal(
            4,
            f"Claude Code CLI not found at {missing}: run ./setup.sh in the VeriHarness checkout "
            f"(it installs @anthropic-ai/claude-code@{CLAUDE_CODE_VERSION} under .tools/claude)",
        )
    ]
    assert not (root / "results" / "t" / "experiment.json").exists()


def test_a_claude_of_another_version_is_refused_naming_both_versions(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    other = tmp_path / "claude"
    other.write_text('#!/bin/sh\necho "1.0.0 (Claude Code)"\n')
    other.chmod(0o755)
    proc = _check(root, other)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        _refusal(
            4,
            f"Claude Code CLI at {other} is version '1.0.0', the project pins "
            f"'{CLAUDE_CODE_VERSION}': run ./setup.sh in the VeriHarness checkout",
        )
    ]


def test_a_start_that_runs_no_session_records_a_missing_claude_and_goes_on(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path)
    first = _check(root, None)  # the pinned CLI of this checkout
    assert first.returncode == 0, first.stderr
    record = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert record["provenance"]["claude_version"] == CLAUDE_CODE_VERSION
    for condition, tasks in record["cells"].items():
        for task, identity in tasks.items():
            run = root / "results" / "t" / condition / task / "r1"
            run.mkdir(parents=True)
            (run / "run.json").write_text(
                json.dumps({"kind": "run_record", "identity_hash": identity})
            )
            (run / "outcome.json").write_text(json.dumps({"status": "ok"}))

    missing = tmp_path / "no-claude"
    ended = _check(root, missing)
    assert ended.returncode == 0, ended.stderr
    record = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert record["provenance"]["claude_version"] is None
    assert f"Claude Code CLI not found at {missing}" in record["provenance"]["claude_version_error"]

    # One session to run again (its outcome gone), and the CLI is needed once more.
    (root / "results" / "t" / "b3-present" / "alpha" / "r1" / "outcome.json").unlink()
    again = _check(root, missing)
    assert again.returncode == 2
    assert again.stderr.startswith(_refusal(1, f"Claude Code CLI not found at {missing}"))
