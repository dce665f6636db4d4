"""Paid results are never lost: a changed prompt module under the same experiment name would
redo finished runs; check-experiment refuses, naming them and the module, unless the researcher
asks for it, and then moves the old folders to superseded/<identity_hash>/ first. Offline runs
are redone freely. Collect can include or leave out superseded runs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from experiment.test_config import git, make_project
from support.cli import veriharness


def _check(root: Path, *extra: str) -> tuple[int, str, str]:
    proc = veriharness(
        "check-experiment", "--config", root / "config" / "config.yaml", "--project-root", root,
        "--out", root / "results" / "t" / "experiment.json", "--skip-model-check", *extra,
        cwd=None,
    )  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr


def _finished_run(root: Path, condition: str, task: str, paid: bool) -> Path:
    """A prepared run with an outcome; `paid` marks its record as not offline, as a run
    against real models would be."""
    run_dir = root / "results" / "t" / condition / task / "r1"
    proc = veriharness(
        "prepare", "--config", root / "config" / "config.yaml", "--project-root", root,
        "--condition", condition, "--task", task, "--replicate", "1", "--run-dir", run_dir,
        cwd=None,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps(record | {"offline": not paid}))
    outcome = {"kind": "agent_outcome", "status": "ok", "offline": not paid}
    (run_dir / "outcome.json").write_text(json.dumps(outcome))
    (run_dir / "transcript.jsonl").write_text('{"type": "result"}\n')
    return run_dir


def test_a_changed_prompt_module_refuses_then_supersedes_paid_runs(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    assert _check(root)[0] == 0
    paid = _finished_run(root, "b3-present", "alpha", paid=True)
    offline = _finished_run(root, "b3-present", "beta", paid=False)
    untouched = _finished_run(root, "b3-absent", "alpha", paid=True)  # no B3 module
    old_hash = json.loads((paid / "run.json").read_text())["identity_hash"]
    module = root / "prompts" / "b3-verification-v0.2.md"
    module.write_text(module.read_text() + "\nA comment that changes the file.\n")
    git(root, "commit", "-qam", "edit B3")

    code, _, err = _check(root)
    assert code == 2
    assert "1 finished run(s) that were not offline would be redone" in err
    assert "b3-present/alpha/r1 (prompt module b3-verification-v0.2 changed)" in err
    assert "beta" not in err and "b3-absent" not in err
    assert "supersede_paid_runs: true" in err
    assert (paid / "outcome.json").is_file()  # nothing moved or lost

    code, out, err = _check(root, "--config-json", '{"supersede_paid_runs": true}')
    assert code == 0, err
    moved = root / "results" / "t" / "superseded" / old_hash.removeprefix("sha256:")
    moved_run = moved / "b3-present" / "alpha" / "r1"
    assert json.loads((moved_run / "outcome.json").read_text())["status"] == "ok"
    assert json.loads((moved_run / "run.json").read_text())["identity_hash"] == old_hash
    assert not paid.exists()
    assert (
        f"superseded b3-present/alpha/r1 (prompt module b3-verification-v0.2) -> {moved_run}" in out
    )
    assert offline.is_dir() and untouched.is_dir()  # offline: the workflow just redoes it

    exp = root / "results" / "t"
    for flag, rows in (((), 2), (("--include-superseded",), 3)):
        proc = veriharness("collect", "--experiment-dir", exp, "--jobs", "1", *flag)
        assert proc.returncode == 0, proc.stderr
        runs = pd.read_csv(exp / "tables" / "runs.csv")
        present = runs[runs["status"] != "missing"]
        assert len(present) == rows
        if flag:
            old = present[present["superseded"]]
            assert list(old["identity_hash"]) == [old_hash]
            assert list(old["run_record"]) == [
                f"t/superseded/{old_hash.removeprefix('sha256:')}/b3-present/alpha/r1/run.json"
            ]
