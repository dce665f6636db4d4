"""The identity hash moves with every hashed input and only with them; ``record diff``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiment.test_config import make_project
from experiment.test_experiment import vh
from veriharness.experiment.config import ExperimentConfig
from veriharness.experiment.definition import cell_identity, load_definition
from veriharness.experiment.record import diff_records, flatten, identity_hash
from veriharness.prepare.run_folder import prepare_run, write_run

CELL = ("b3-present", "alpha")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("record"))


def _hash(root: Path, config: ExperimentConfig) -> str:
    defn = load_definition(config, root)
    return identity_hash(cell_identity(defn, *CELL)[0])


BASE = ExperimentConfig(allow_uncommitted=True, replicates=2)

HASHED_FILES = [
    "prompts/b1-callmllm-v0.1.md",
    "prompts/b2-image-to-code-v0.1.md",
    "prompts/env-facts-v0.1.md",
    "prompts/b3-verification-v0.2.md",
    "conditions/b3-present.yaml",
    "tasks/alpha/task.yaml",
    "tasks/alpha/reference.png",
    "tasks/alpha/reference.html",
    "config/model-catalog.offline.yaml",
    "prompts/taxonomy/capabilities-v0.1.yaml",
]


@pytest.mark.parametrize("relative", HASHED_FILES)
def test_one_byte_in_any_hashed_file_changes_the_identity(root: Path, relative: str) -> None:
    before = _hash(root, BASE)
    path = root / relative
    original = path.read_bytes()
    # Replace the last byte: the file stays loadable, its digest changes.
    path.write_bytes(original[:-1] + (b" " if original[-1:] != b" " else b"\n"))
    try:
        assert _hash(root, BASE) != before
    finally:
        path.write_bytes(original)
    assert _hash(root, BASE) == before


def test_files_of_other_cells_do_not_change_this_identity(root: Path) -> None:
    before = _hash(root, BASE)
    path = root / "tasks" / "beta" / "reference.html"
    original = path.read_bytes()
    path.write_bytes(original + b" ")
    try:
        assert _hash(root, BASE) == before
    finally:
        path.write_bytes(original)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model", "veriharness-offline-agent-2"),
        ("max_turns", 41),
        ("wall_clock_seconds", 901),
        ("allowed_tools", ("Read",)),
        ("tool_search", True),
        ("endpoint", "anthropic"),
    ],
)
def test_every_agent_setting_is_hashed(root: Path, field: str, value: object) -> None:
    changed = BASE.model_copy(update={"agent": BASE.agent.model_copy(update={field: value})})
    assert _hash(root, changed) != _hash(root, BASE)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    retries=st.integers(0, 5),
    workspace=st.none() | st.text(min_size=1, max_size=20),
    keep=st.booleans(),
    debug=st.booleans(),
    sample=st.none() | st.integers(1, 100),
    results=st.text(min_size=1, max_size=20),
    check_models=st.booleans(),
    name=st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True),
)
def test_execution_settings_never_change_the_identity(
    root: Path,
    retries: int,
    workspace: str | None,
    keep: bool,
    debug: bool,
    sample: int | None,
    results: str,
    check_models: bool,
    name: str,
) -> None:
    execution = BASE.execution.model_copy(
        update=dict(
            retries=retries,
            workspace_root=workspace,
            keep_workspaces=keep,
            debug=debug,
            sample=sample,
            results_dir=results,
        )
    )
    changed = BASE.model_copy(
        update={
            "execution": execution,
            "check_models": check_models,
            "experiment": name,
            "compare": None,
            "agent": BASE.agent.model_copy(update={"api_key_env": "K"}),
        }
    )
    assert _hash(root, changed) == _hash(root, BASE)


def test_flatten_and_diff_put_hashed_fields_first() -> None:
    assert flatten({"a": {"b": 1, "c": [1]}, "d": {}}) == {"a.b": 1, "a.c": [1], "d": {}}
    a = {"kind": "run_record", "replicate": 1, "identity": {"x": 1}, "identity_hash": "h1"}
    b = {"kind": "run_record", "replicate": 2, "identity": {"x": 2}, "identity_hash": "h2"}
    assert diff_records(a, b) == [
        ("hashed", "identity.x", 1, 2),
        ("hashed", "identity_hash", "h1", "h2"),
        ("recorded", "replicate", 1, 2),
    ]
    assert diff_records(a, a) == []


def diff(a: Path, b: Path) -> subprocess.CompletedProcess[str]:
    return vh("record", "diff", str(a / "run.json"), str(b / "run.json"))


def test_record_diff_command(root: Path, tmp_path: Path) -> None:
    defn = load_definition(BASE, root)
    first, prompt = prepare_run(defn, *CELL, 1)
    write_run(tmp_path / "r1", first, prompt)
    other = BASE.model_copy(update={"execution": BASE.execution.model_copy(update={"debug": True})})
    second, prompt = prepare_run(load_definition(other, root), *CELL, 1)
    write_run(tmp_path / "r2", second, prompt)
    proc = diff(tmp_path / "r1", tmp_path / "r2")
    assert proc.returncode == 1
    fields = [line.split(":")[0].split() for line in proc.stdout.splitlines()[:-1]]
    assert ["recorded", "execution.debug"] in fields
    assert all(section == "recorded" for section, _ in fields)

    path = root / "tasks" / "alpha" / "task.yaml"
    original = path.read_bytes()
    path.write_bytes(original + b"# edited\n")
    try:
        third, prompt = prepare_run(load_definition(BASE, root), *CELL, 2)
    finally:
        path.write_bytes(original)
    write_run(tmp_path / "r3", third, prompt)
    proc = diff(tmp_path / "r1", tmp_path / "r3")
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("hashed   identity.task.files.task.yaml: ")
    assert any(line.startswith("hashed   identity_hash: ") for line in lines)
    assert any(line.startswith("recorded replicate: 1 -> 2") for line in lines)
    assert lines[-1].endswith("of them hashed")

    same = diff(tmp_path / "r1", tmp_path / "r1")
    assert (same.returncode, same.stdout.strip()) == (0, "no differences")
    (tmp_path / "other.json").write_text(json.dumps({"kind": "metrics"}))
    bad = vh("record", "diff", str(tmp_path / "r1" / "run.json"), str(tmp_path / "other.json"))
    assert bad.returncode == 2  # as diff(1): 0 the same, 1 different, 2 not comparable
    assert "field 'kind' is 'metrics', expected one of" in bad.stderr
    assert "exit status: 0 no field differs, 1 some field differs, 2 a file is not" in (
        vh("record", "diff", "--help").stdout.replace("\n", " ").replace("  ", " ")
    )
