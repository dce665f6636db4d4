"""What the Snakefile does at parse time: command-line text read as the schema's types, the task
list, and the merged config file the verbs read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from veriharness.experiment.workflow import (
    coerce_command_line_values,
    list_tasks,
    unwrap_experiment_record,
    write_effective_config,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def test_command_line_text_becomes_the_schema_types() -> None:
    config: dict[str, Any] = {
        "allow_uncommitted": "true",
        "replicates": "3",
        "check_models": "False",
        "execution": {"debug": "on", "retries": "2", "workspace_root": "null", "sample": "x"},
        "tasks": ["landing-page"],
    }
    coerce_command_line_values(config, SCHEMA)
    assert config["allow_uncommitted"] is True
    assert config["replicates"] == 3
    assert config["check_models"] is False
    assert config["execution"]["debug"] is True
    assert config["execution"]["retries"] == 2
    assert config["execution"]["workspace_root"] is None
    # Text that is not a well-formed value stays as given, for validation to name it.
    assert config["execution"]["sample"] == "x"
    assert config["tasks"] == ["landing-page"]


def test_task_list_sample_and_missing_task(tmp_path: Path) -> None:
    for name in ("b", "a", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "task.yaml").write_text("id: x\n")
    (tmp_path / "not-a-task").mkdir()
    config = {"tasks_dir": str(tmp_path), "tasks": "all", "execution": {"sample": 2}}
    assert list_tasks(config) == ["a", "b"]
    with pytest.raises(ValueError, match=r"\['zzz'\]"):
        list_tasks({"tasks_dir": str(tmp_path), "tasks": ["a", "zzz"], "execution": {}})


def test_effective_config_names_its_sources_and_is_rewritten_only_on_change(tmp_path: Path) -> None:
    scheduler = {"resources": {"agent_sessions": 2, "cores": 4}}
    path = Path(
        write_effective_config({"experiment": "x"}, str(tmp_path), ["/p/config.yaml"], scheduler)
    )
    data = json.loads(path.read_text())
    assert data == {"kind": "effective_config", "sources": ["/p/config.yaml"],
                    "scheduler": scheduler, "config": {"experiment": "x"}}  # fmt: skip
    before = path.stat().st_mtime_ns
    write_effective_config({"experiment": "x"}, str(tmp_path), ["/p/config.yaml"], scheduler)
    assert path.stat().st_mtime_ns == before


def test_an_experiment_record_given_as_config_is_unwrapped() -> None:
    config = {"kind": "experiment_record", "config": {"experiment": "old"}, "experiment": "new"}
    unwrap_experiment_record(config)
    assert config == {"experiment": "old"}


def test_command_line_overrides_still_apply_to_an_unwrapped_record() -> None:
    config = {
        "kind": "experiment_record",
        "config": {"experiment": "old", "execution": {"debug": False, "retries": 1}},
        "experiment": "new",
    }
    unwrap_experiment_record(config, {"experiment": "new", "execution": {"debug": "true"}})
    assert config == {"experiment": "new", "execution": {"debug": "true", "retries": 1}}


def test_a_record_given_as_config_is_not_rewritten_in_place(tmp_path: Path) -> None:
    from veriharness.experiment.workflow import refuse_overwriting_a_record

    record = tmp_path / "results" / "exp" / "experiment.json"
    refuse_overwriting_a_record([tmp_path / "config.yaml"], record)
    with pytest.raises(ValueError, match="--config experiment=<new-name>"):
        refuse_overwriting_a_record([tmp_path / "config.yaml", record], record)


def test_the_rerun_digest_follows_the_records_identity_rule() -> None:
    from veriharness.experiment.workflow import identity_settings_digest

    base = {"agent": {"model": "claude-sonnet-4-5", "endpoint": "anthropic"}}
    key_moved = {"agent": {**base["agent"], "api_key_env": "OTHER_KEY"}}
    longer = {"agent": {**base["agent"], "max_turns": 41}}
    assert identity_settings_digest(key_moved) == identity_settings_digest(base)
    assert identity_settings_digest(longer) != identity_settings_digest(base)


def test_the_rerun_digest_follows_the_chromium_only_where_a_condition_states_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A session told another Chromium path is another run (its facts module says it); a
    condition that states no path keeps its digest, so nothing of it is redone."""
    from veriharness.experiment import workflow

    config = {
        "agent": {"model": "claude-sonnet-4-5", "endpoint": "anthropic"},
        "conditions_dir": str(ROOT / "conditions"),
        "prompts_dir": str(ROOT / "prompts"),
    }
    plain = tmp_path / "plain.yaml"
    plain.write_text("id: plain\ndescription: x\nmodules: [b1-callmllm-v0.1]\n")
    without_facts = {**config, "conditions_dir": str(tmp_path)}
    before = workflow.identity_settings_digest(config, "b3-absent")
    unchanged = workflow.identity_settings_digest(without_facts, "plain")
    assert unchanged == workflow.identity_settings_digest(config)
    workflow._chromium.cache_clear()
    monkeypatch.setenv("VERIHARNESS_CHROMIUM", str(plain))  # any file: a Chromium elsewhere
    try:
        assert workflow.identity_settings_digest(config, "b3-absent") != before
        assert workflow.identity_settings_digest(without_facts, "plain") == unchanged
    finally:
        workflow._chromium.cache_clear()
