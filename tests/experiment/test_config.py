"""The experiment config: schema and models agree, defaults are complete, bad input is named.

``make_project`` (also used by the record, experiment and prepare tests) builds a small project
in a real temporary git repository from the repository's own prompts, conditions, catalog and
taxonomy, plus two tiny tasks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from veriharness.experiment.config import (
    ConfigError,
    ExperimentConfig,
    config_from_mapping,
    load_condition,
    load_config,
    load_task,
    resolve_task_ids,
)
from veriharness.experiment.config_schema import schema_yaml
from veriharness.runfolder.render import DomRecord, Size

ROOT = Path(__file__).resolve().parents[2]


def git(root: Path, *args: str) -> str:
    out = subprocess.run(
        [
            "git",
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@example.invalid",
            "-C",
            str(root),
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


# The modules of the repository's example conditions.
MODULES = ("b1-callmllm-v0.1", "b2-image-to-code-v0.1", "env-facts-v0.1", "b3-verification-v0.2")


def write_task(tasks_dir: Path, task_id: str, colour: str = "#336699") -> Path:
    folder = tasks_dir / task_id
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(
        yaml.safe_dump(
            {
                "id": task_id,
                "title": f"Task {task_id}",
                "kind": "landing_page",
                "description": "A small test page.",
                "viewport": {"width": 64, "height": 48},
                "interaction": None,
            }
        )
    )
    Image.new("RGB", (64, 48), colour).save(folder / "reference.png")
    (folder / "reference.html").write_text(f"<body style='background:{colour}'></body>\n")
    size = Size(width=64, height=48)
    dom = DomRecord(viewport=size, page=size, texts=[], images=[])
    (folder / "reference_dom.json").write_text(dom.model_dump_json())
    return folder


def make_project(tmp: Path, *, commit: bool = True, config: dict[str, Any] | None = None) -> Path:
    """A committed project folder with prompts, conditions, catalog, taxonomy and two tasks."""
    root = tmp / "project"
    (root / "config").mkdir(parents=True)
    for module in MODULES:
        (root / "prompts").mkdir(exist_ok=True)
        shutil.copy(ROOT / "prompts" / f"{module}.md", root / "prompts")
    shutil.copytree(ROOT / "prompts" / "taxonomy", root / "prompts" / "taxonomy")
    shutil.copytree(ROOT / "conditions", root / "conditions")
    shutil.copy(ROOT / "config" / "model-catalog.offline.yaml", root / "config")
    write_task(root / "tasks", "alpha", "#336699")
    write_task(root / "tasks", "beta", "#993366")
    (root / "config" / "config.yaml").write_text(yaml.safe_dump(config or {"experiment": "t"}))
    (root / ".gitignore").write_text("results/\n")
    if commit:
        git(root, "init", "-q")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", "fixture")
    return root


SCHEMA_PATH = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def test_the_committed_schema_is_the_one_the_models_generate() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_yaml(), (
        "regenerate: python -m veriharness.experiment.config_schema --write"
    )


def test_model_defaults_equal_config_yaml_and_schema_defaults() -> None:
    defaults = ExperimentConfig().resolved()
    assert load_config(ROOT / "config" / "config.yaml").resolved() == defaults
    filled: dict[str, Any] = {}
    validate(filled, str(SCHEMA_PATH), set_default=True)
    assert filled == defaults


def test_snakemake_validation_accepts_config_yaml() -> None:
    data = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    validate(data, str(SCHEMA_PATH), set_default=True)


def _schema_paths(schema: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    out = {}
    for key, sub in schema.get("properties", {}).items():
        out[prefix + key] = sub
        out.update(_schema_paths(sub, f"{prefix}{key}."))
        for option in sub.get("anyOf", []):  # e.g. compare: one pair, a list of pairs, or null
            out.update(_schema_paths(option, f"{prefix}{key}."))
    return out


def _value_paths(data: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        out.append(prefix + key)
        if isinstance(value, dict):
            out.extend(_value_paths(value, f"{prefix}{key}."))
    return out


def test_schema_describes_every_key_of_the_resolved_config() -> None:
    documented = _schema_paths(yaml.safe_load(SCHEMA_PATH.read_text()))
    for key in _value_paths(ExperimentConfig().resolved()):
        assert key in documented, key
        assert len(documented[key].get("description", "")) > 10, key


@pytest.mark.parametrize("name", ["your-model", "TODO", "<model>", "ChangeMe", "", "  "])
def test_placeholder_agent_model_refused_naming_field_and_value(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"agent": {"model": name}})
    assert "agent.model" in str(caught.value)
    assert repr(name) in str(caught.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"replicates": 0}, "replicates"),
        ({"agent": {"modle": "x"}}, "modle"),
        ({"execution": {"sample": "3"}}, "execution.sample"),
        ({"conditions": ["b3-absent", "b3-absent"]}, "conditions"),
        ({"agent": {"endpoint": "cloud"}}, "agent.endpoint"),
        ({"compare": {"baseline": "b3-absent", "treatment": "other"}}, "'other'"),
        ({"scoring": {"block_detection": "ocr"}}, "scoring.block_detection"),
    ],
)
def test_bad_values_are_refused_with_the_field_named(data: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(data)
    assert expected in str(caught.value)


def test_private_gateway_url_is_refused_but_env_reference_and_loopback_pass() -> None:
    with pytest.raises(ConfigError, match="agent.base_url"):
        config_from_mapping(
            {"agent": {"endpoint": "gateway", "base_url": "https://internal.example.com/llm"}}
        )
    for url in ("${GATEWAY_URL}", "http://127.0.0.1:8080/v1"):
        assert config_from_mapping({"agent": {"endpoint": "gateway", "base_url": url}})


def test_overrides_merge_deeply_and_record_feeds_back(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"experiment": "x", "agent": {"max_turns": 7}}))
    config = load_config(path, {"agent": {"tool_search": True}})
    assert (config.agent.max_turns, config.agent.tool_search) == (7, True)
    record = tmp_path / "experiment.json"
    record.write_text(
        json.dumps({"kind": "experiment_record", "identity": {}, "config": config.resolved()})
    )
    assert load_config(record) == config


def test_tasks_resolve_and_load(tmp_path: Path) -> None:
    root = make_project(tmp_path, commit=False)
    config = ExperimentConfig()
    assert resolve_task_ids(config, root) == ("alpha", "beta")
    assert resolve_task_ids(config.model_copy(update={"tasks": ("beta",)}), root) == ("beta",)
    spec = load_task(root / "tasks", "alpha")
    assert (spec.viewport.width, spec.viewport.height) == (64, 48)
    assert spec.interaction is None and not spec.interactive
    with pytest.raises(ConfigError, match=r"\['gamma'\]"):
        resolve_task_ids(config.model_copy(update={"tasks": ("gamma",)}), root)


def test_task_problems_are_named(tmp_path: Path) -> None:
    root = make_project(tmp_path, commit=False)
    (root / "tasks" / "alpha" / "reference.png").unlink()
    with pytest.raises(ConfigError, match="task 'alpha': missing reference.png"):
        load_task(root / "tasks", "alpha")
    (root / "tasks" / "beta" / "reference_dom.json").unlink()
    with pytest.raises(
        ConfigError,
        match=r"task 'beta': .* has reference.html but no reference_dom.json; write it with "
        r"`veriharness render-reference .*tasks/beta`",
    ):
        load_task(root / "tasks", "beta")
    (root / "tasks" / "beta" / "reference.html").unlink()
    assert load_task(root / "tasks", "beta").id == "beta"  # screenshot-only
    data = yaml.safe_load((root / "tasks" / "beta" / "task.yaml").read_text())
    (root / "tasks" / "beta" / "task.yaml").write_text(yaml.safe_dump(data | {"id": "gamma"}))
    with pytest.raises(ConfigError, match="declares id 'gamma'"):
        load_task(root / "tasks", "beta")
    data["viewport"] = {"width": 0, "height": 10}
    (root / "tasks" / "beta" / "task.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="viewport.width"):
        load_task(root / "tasks", "beta")


def test_repository_conditions_load() -> None:
    present = load_condition(ROOT / "conditions", "b3-present")
    absent = load_condition(ROOT / "conditions", "b3-absent")
    assert present.modules == (*absent.modules, "b3-verification-v0.2")
    with pytest.raises(ConfigError, match="no file"):
        load_condition(ROOT / "conditions", "b4")


def test_every_exported_name_exists() -> None:
    import importlib
    import pkgutil

    import veriharness

    for info in pkgutil.walk_packages(veriharness.__path__, "veriharness."):
        if info.name == "veriharness.__main__":
            continue
        module = importlib.import_module(info.name)
        exported = getattr(module, "__all__", [])
        assert [n for n in exported if not hasattr(module, n)] == [], info.name


def test_the_real_model_example_prices_every_model_it_names() -> None:
    from veriharness.experiment.catalog import load_catalog
    from veriharness.experiment.definition import missing_prices

    config = load_config(ROOT / "config" / "example-real.yaml")
    catalog = load_catalog(ROOT / config.model_catalog)
    assert config.execution.max_usd is not None and config.prices.read_on
    assert missing_prices(config, catalog) == []
    assert config.prices.models[config.agent.model].output > 0


def test_compare_takes_one_pair_a_list_of_pairs_or_null() -> None:
    one = config_from_mapping({"compare": {"baseline": "b3-absent", "treatment": "b3-present"}})
    assert one.comparison_pairs() == (("b3-absent", "b3-present"),)
    conditions = ["a", "b", "c"]
    pairs = [{"baseline": "a", "treatment": "b"}, {"baseline": "a", "treatment": "c"}]
    data = {"conditions": conditions, "compare": pairs}
    assert config_from_mapping(data).comparison_pairs() == (("a", "b"), ("a", "c"))
    snakemake_view = {"conditions": conditions, "compare": pairs}
    validate(snakemake_view, str(SCHEMA_PATH), set_default=True)
    assert config_from_mapping({"compare": None}).comparison_pairs() == ()
    for bad, expected in (
        ([{"baseline": "a", "treatment": "z"}], "compare[0].treatment 'z' is not one of"),
        (pairs + pairs[:1], "compare lists the pair(s) [('a', 'b')] more than once"),
        ([], "compare"),
        ([{"baseline": "a"}], "treatment"),
        ([{"baseline": "a", "treatment": "a"}], "compare[0].baseline and compare[0].treatment"),
    ):
        with pytest.raises(ConfigError) as caught:
            config_from_mapping({"conditions": conditions, "compare": bad})
        assert expected in str(caught.value), (bad, str(caught.value))
    # Snakemake's own validation refuses the malformed shapes too.
    for malformed in ([{"baseline": "a"}], [{"baseline": "a", "treatment": "b", "x": 1}], "a"):
        with pytest.raises(WorkflowError):
            validate({"conditions": conditions, "compare": malformed}, str(SCHEMA_PATH))
