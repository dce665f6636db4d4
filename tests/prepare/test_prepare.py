"""prepare through the real command: run folder contents, replicates, drift, missing claude."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiment.test_config import make_project
from experiment.test_experiment import check, vh
from veriharness.experiment.prompts import SEPARATOR, load_module


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path, config={"experiment": "t", "replicates": 2})
    assert check(root).returncode == 0
    return root


def prepare(
    root: Path,
    condition: str,
    task: str,
    replicate: int,
    *extra: str,
    env: dict[str, str] | None = None,
) -> tuple[int, str, Path]:
    run_dir = root / "results" / "t" / condition / task / f"r{replicate}"
    proc = vh(
        "prepare",
        "--config",
        str(root / "results" / "t" / "experiment.json"),
        "--project-root",
        str(root),
        "--condition",
        condition,
        "--task",
        task,
        "--replicate",
        str(replicate),
        "--run-dir",
        str(run_dir),
        *extra,
        env=env,
    )
    return proc.returncode, proc.stderr, run_dir


def test_run_folder_holds_record_prompt_and_snapshots(project: Path) -> None:
    code, err, run_dir = prepare(project, "b3-present", "alpha", 1)
    assert code == 0, err
    record = json.loads((run_dir / "run.json").read_text())
    experiment = json.loads((project / "results" / "t" / "experiment.json").read_text())
    assert record["kind"] == "run_record"
    assert (record["condition"], record["task"], record["replicate"]) == ("b3-present", "alpha", 1)
    assert record["identity_hash"] == experiment["cells"]["b3-present"]["alpha"]
    assert record["offline"] is True
    assert record["execution"]["results_dir"] == "results"
    assert record["provenance"]["uncommitted_changes"] is False
    assert "replicate" not in json.dumps(record["identity"])
    ids = [m["id"] for m in record["identity"]["prompts"]["modules"]]
    assert ids == [
        "b1-callmllm-v0.1",
        "b2-image-to-code-v0.1",
        "env-facts-v0.1",
        "b3-verification-v0.2",
    ]
    snapshots = [(run_dir / "prompt" / f"{i}.md").read_text() for i in ids]
    assert (run_dir / "system_prompt.md").read_text() == SEPARATOR.join(snapshots) + "\n"
    assert "`reference.png`" in snapshots[1]


def test_b3_absent_and_present_differ_by_exactly_the_b3_block(project: Path) -> None:
    _, _, absent = prepare(project, "b3-absent", "beta", 1)
    _, _, present = prepare(project, "b3-present", "beta", 1)
    b3 = load_module(project / "prompts", "b3-verification-v0.2").template
    absent_text = (absent / "system_prompt.md").read_text()
    assert (present / "system_prompt.md").read_text() == (
        absent_text.rstrip("\n") + SEPARATOR + b3 + "\n"
    )


def test_replicates_share_the_identity_and_tasks_share_the_b2_snapshot(project: Path) -> None:
    records = {}
    for task, rep in (("alpha", 1), ("alpha", 2), ("beta", 1)):
        code, err, run_dir = prepare(project, "b3-absent", task, rep)
        assert code == 0, err
        records[(task, rep)] = json.loads((run_dir / "run.json").read_text())
    assert records[("alpha", 1)]["identity_hash"] == records[("alpha", 2)]["identity_hash"]
    assert records[("alpha", 1)]["identity_hash"] != records[("beta", 1)]["identity_hash"]
    b2 = [r["identity"]["prompts"]["modules"][1]["resolved_sha256"] for r in records.values()]
    assert len(set(b2)) == 1


def test_inputs_changed_after_the_check_are_refused(project: Path) -> None:
    (project / "tasks" / "alpha" / "reference.html").write_text("<p>changed</p>\n")
    code, err, run_dir = prepare(project, "b3-absent", "alpha", 1, "--allow-uncommitted")
    assert code == 2
    assert "cell b3-absent/alpha" in err and "changed since check-experiment" in err
    assert not run_dir.exists()
    # The same cross-check with a plain config and the record named separately.
    proc = vh(
        "prepare",
        "--config",
        str(project / "config" / "config.yaml"),
        "--experiment-record",
        str(project / "results" / "t" / "experiment.json"),
        "--project-root",
        str(project),
        "--condition",
        "b3-absent",
        "--task",
        "alpha",
        "--replicate",
        "1",
        "--run-dir",
        str(run_dir),
        "--allow-uncommitted",
    )
    assert proc.returncode == 2 and "changed since check-experiment" in proc.stderr
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("condition", "task", "replicate", "message"),
    [
        ("b3-absent", "alpha", 3, "replicate 3 is outside 1..2"),
        ("b3-absent", "gamma", 1, "task 'gamma' is not one of"),
        ("b4", "alpha", 1, "condition 'b4' is not one of"),
    ],
)
def test_bad_cells_are_named(
    project: Path, condition: str, task: str, replicate: int, message: str
) -> None:
    code, err, run_dir = prepare(project, condition, task, replicate)
    assert code == 2 and message in err
    assert not run_dir.exists()


def test_missing_claude_is_recorded_not_fatal(project: Path) -> None:
    missing = project / "no-such-claude"
    code, err, run_dir = prepare(
        project, "b3-absent", "alpha", 1, env={"VERIHARNESS_CLAUDE": str(missing)}
    )
    assert code == 0, err
    provenance = json.loads((run_dir / "run.json").read_text())["provenance"]
    assert provenance["claude_version"] is None
    assert str(missing) in provenance["claude_version_error"]
    assert provenance["packages"]["pydantic"]
    # The session job then stops on one line that names the path and the fix, not a traceback,
    # and leaves the prepared run as it was.
    before = _contents(run_dir)
    session = vh(
        "run-agent",
        "--config",
        str(project / "results" / "t" / "experiment.json"),
        "--run-dir",
        str(run_dir),
        "--task-dir",
        str(project / "tasks" / "alpha"),
        env={"VERIHARNESS_CLAUDE": str(missing)},
    )
    assert session.returncode == 2, session.stderr
    assert session.stderr.startswith("veriharness run-agent: ")
    assert "Traceback" not in session.stderr
    assert str(missing) in session.stderr and "./setup.sh" in session.stderr
    assert _contents(run_dir) == before


def _contents(folder: Path) -> dict[Path, bytes]:
    """Every file below `folder`, by its relative path."""
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
