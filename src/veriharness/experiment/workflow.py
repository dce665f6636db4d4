"""The little the Snakefile needs at parse time: the task list, each run's input files, and the
merged config written where the verbs read it.

Every cluster job parses the workflow again, so everything here is cheap: directory listings and
small YAML reads, cached per task and per condition; no file is hashed at parse time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from veriharness._util import atomic
from veriharness._util.hashing import sha256_json
from veriharness._util.programs import MissingTool, find_chromium
from veriharness._util.yaml_text import load_yaml
from veriharness.experiment.config import AgentSettings, deep_merge, task_ids
from veriharness.experiment.environment import CHROMIUM_PLACEHOLDER
from veriharness.experiment.record import EFFECTIVE_CONFIG, EXPERIMENT_RECORD

__all__ = [
    "unwrap_experiment_record",
    "refuse_overwriting_a_record",
    "coerce_command_line_values",
    "comparison_pairs",
    "list_tasks",
    "task_files",
    "condition_inputs",
    "identity_settings_digest",
    "write_effective_config",
    "effective_config_path",
    "scheduler_settings",
]

EFFECTIVE_CONFIG_NAME = "config.effective.json"


def unwrap_experiment_record(
    config: dict[str, Any], overrides: Mapping[str, Any] | None = None
) -> None:
    """Let `--configfile results/<exp>/experiment.json` rerun that experiment: the record's
    resolved config replaces whatever the default config file had put there, and `overrides`
    (Snakemake's `--config` values) still apply on top, as they would to any config file."""
    if config.get("kind") != EXPERIMENT_RECORD:
        return
    resolved = deep_merge(config["config"], overrides or {})
    config.clear()
    config.update(resolved)


def refuse_overwriting_a_record(configfiles: Iterable[str | Path], record: str | Path) -> None:
    """Stop when a config file given is the very experiment.json this run would rewrite: the
    record of finished runs would be replaced by one of a new start."""
    target = Path(record).resolve()
    for path in configfiles:
        if Path(path).resolve() == target:
            raise ValueError(
                f"--configfile {path} is the record this experiment would rewrite at start-up. "
                "Rerun it under a new name (--config experiment=<new-name>) or from a copy of "
                "the record kept elsewhere"
            )


_TRUE, _FALSE = ("true", "yes", "on"), ("false", "no", "off")


def comparison_pairs(config: dict[str, Any]) -> list[tuple[str, str]]:
    """The (baseline, treatment) pairs of a schema-validated config's `compare` (one pair, a
    list of pairs, or null)."""
    listed = config.get("compare")
    if listed is None:
        return []
    return [
        (p["baseline"], p["treatment"]) for p in (listed if isinstance(listed, list) else [listed])
    ]


def coerce_command_line_values(config: dict[str, Any], schema_path: str | Path) -> None:
    """Read `--config` text as the schema's types: Snakemake's parser keeps `true` and nested
    values (`execution={debug: true}`) as strings. Only well-formed text is converted; anything
    else stays as given, and schema validation then names the key and the value."""
    schema = load_yaml(Path(schema_path).read_text(encoding="utf-8"))
    _coerce(config, schema)


def _kinds(spec: dict[str, Any]) -> set[Any]:
    """The JSON types a key accepts, its `anyOf` options' included."""
    kinds = spec.get("type")
    found = set(kinds) if isinstance(kinds, list) else {kinds}
    for option in spec.get("anyOf", []):
        found |= _kinds(option)
    return found


def _option(spec: dict[str, Any], kind: str) -> dict[str, Any]:
    """The part of `spec` that describes values of JSON type `kind`."""
    for option in spec.get("anyOf", []):
        if kind in _kinds(option):
            return dict(option)
    return spec


def _coerce(node: dict[str, Any], schema: dict[str, Any]) -> None:
    for key, spec in schema.get("properties", {}).items():
        value = node.get(key)
        kinds = _kinds(spec)
        if isinstance(value, dict) and "object" in kinds:
            _coerce(value, _option(spec, "object"))
        elif isinstance(value, list) and "array" in kinds:
            items = _option(spec, "array").get("items", {})
            node[key] = [_scalar(item, items) for item in value]
        elif isinstance(value, str):
            node[key] = _scalar(value, spec)


def _scalar(value: Any, spec: dict[str, Any]) -> Any:
    if not isinstance(value, str):
        return value
    kinds = _kinds(spec)
    text = value.strip()
    if "boolean" in kinds and text.lower() in _TRUE + _FALSE:
        return text.lower() in _TRUE
    if "integer" in kinds and text.lstrip("-").isdigit():
        return int(text)
    if "number" in kinds:
        try:
            return float(text)
        except ValueError:
            pass
    if "null" in kinds and text.lower() in ("null", "none", "~"):
        return None
    return value


def list_tasks(config: dict[str, Any]) -> list[str]:
    """The task ids of the experiment: `tasks: all` lists tasks_dir; `execution.sample` keeps
    the first N (sorted) ids."""
    ids = list(task_ids(Path(config["tasks_dir"]), config["tasks"]))
    sample = config.get("execution", {}).get("sample")
    return ids[: int(sample)] if sample else ids


@cache
def _task_files(tasks_dir: str, task: str) -> tuple[str, ...]:
    folder = Path(tasks_dir) / task
    return tuple(sorted(str(p) for p in folder.rglob("*") if p.is_file()))


def task_files(config: dict[str, Any], task: str) -> list[str]:
    return list(_task_files(str(config["tasks_dir"]), task))


@cache
def _condition_inputs(conditions_dir: str, prompts_dir: str, condition: str) -> tuple[str, ...]:
    path = Path(conditions_dir) / f"{condition}.yaml"
    if not path.is_file():
        raise ValueError(f"conditions: no file {path} for condition {condition!r}")
    modules = load_yaml(path.read_text(encoding="utf-8")).get("modules", [])
    return (str(path), *(str(Path(prompts_dir) / f"{module}.md") for module in modules))


def condition_inputs(config: dict[str, Any], condition: str) -> list[str]:
    return list(
        _condition_inputs(str(config["conditions_dir"]), str(config["prompts_dir"]), condition)
    )


def scheduler_settings(global_resources: dict[str, Any]) -> dict[str, Any]:
    """Cores and resource caps as Snakemake parsed them (command line and profile)."""
    values = {}
    for name, resource in global_resources.items():
        value = getattr(resource, "value", resource)
        if isinstance(value, int | float | str) or value is None:
            values[name.lstrip("_")] = value
    return {"resources": dict(sorted(values.items()))}


def effective_config_path(experiment_dir: str) -> str:
    return str(Path(experiment_dir) / EFFECTIVE_CONFIG_NAME)


def identity_settings_digest(config: dict[str, Any], condition: str | None = None) -> str:
    """A digest of the values (not files) that define a run, by the same rule the run record
    hashes them: a change reruns its sessions through Snakemake's params trigger. For a
    condition whose modules state the Chromium path (environment facts), that path too, so a
    session is told the program the machine has now; other conditions' digest ignores it, as
    their identity does."""
    settings: dict[str, Any] = {"agent": AgentSettings(**config["agent"]).identity()}
    if condition is not None and _names_chromium(
        _condition_inputs(str(config["conditions_dir"]), str(config["prompts_dir"]), condition)
    ):
        settings["chromium"] = _chromium()
    return sha256_json(settings)


@cache
def _names_chromium(files: tuple[str, ...]) -> bool:
    token = "{{" + CHROMIUM_PLACEHOLDER + "}}"
    return any(Path(f).is_file() and token in Path(f).read_text(encoding="utf-8") for f in files)


@cache
def _chromium() -> str | None:
    try:
        return str(find_chromium())
    except MissingTool:
        return None  # check-experiment refuses such a condition, naming the placeholder


def write_effective_config(
    config: dict[str, Any],
    experiment_dir: str,
    sources: list[str],
    scheduler: dict[str, Any],
    start_order: dict[str, Any] | None = None,
) -> str:
    """Write the merged config as JSON (atomically, only when it changed) and return its path.

    `sources` are the config files it was merged from: the uncommitted-input check covers them,
    not this generated file. `scheduler` holds Snakemake's cores and resource caps (such as
    agent_sessions), so the experiment record reports the caps the run really had; `start_order`
    the seed this start resolved (experiment.start_order), which check-experiment records."""
    path = Path(experiment_dir) / EFFECTIVE_CONFIG_NAME
    wrapped = {
        "kind": EFFECTIVE_CONFIG,
        "sources": sources,
        "scheduler": scheduler,
        "config": config,
        **({"start_order": start_order} if start_order is not None else {}),
    }
    text = json.dumps(wrapped, indent=2, sort_keys=True, default=str) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return str(path)
    atomic.write_text(path, text)
    return str(path)
