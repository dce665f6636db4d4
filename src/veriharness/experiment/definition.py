"""The loaded experiment definition and the identity of each cell.

``load_definition`` turns a config into everything a run depends on (conditions, task ids, model
catalog, taxonomy, git state) and refuses what would make results untrustworthy: placeholder model
names, missing tasks, conditions or modules, missing prices under a spending cap, and uncommitted
inputs unless allowed. ``cell_identity`` gives the hashed identity of one (condition, task) cell
together with its assembled prompt; the start check (``prepare.experiment_check``) and
``prepare`` use the same function, so a run's record and the experiment record agree by
construction. ``build_experiment_record`` is ``experiment.json`` of a definition.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriharness._util.harness import harness_version
from veriharness._util.hashing import sha256_bytes, sha256_file, sha256_json
from veriharness._util.programs import project_root
from veriharness.experiment.catalog import CatalogError, ModelCatalog, load_catalog
from veriharness.experiment.config import (
    ConditionSpec,
    ConfigError,
    ExecutionRecord,
    ExperimentConfig,
    TaskSpec,
    is_placeholder_model,
    load_condition,
    load_config,
    load_task,
    parse_json_overrides,
    resolve_task_ids,
)
from veriharness.experiment.environment import PromptValues, environment_facts
from veriharness.experiment.interactions import interactions_text, viewports_text
from veriharness.experiment.prompts import (
    REFERENCE_IMAGE_PATH,
    AssembledPrompt,
    PromptError,
    assemble,
)
from veriharness.experiment.provenance import (
    GitState,
    UncommittedChanges,
    collect_provenance,
    git_state,
    require_committed,
    require_committed_harness,
)
from veriharness.experiment.record import (
    EFFECTIVE_CONFIG,
    EXPERIMENT_RECORD,
    TOOL_SCHEMA_VERSION,
    ExperimentRecord,
    MatrixRecord,
    ModelsChecked,
    ModelsNotChecked,
    RecordError,
    experiment_identity_hash,
    identity_hash,
    read_record,
    task_identity,
)
from veriharness.experiment.task_set import task_set_record
from veriharness.experiment.taxonomy import Taxonomy, load_taxonomy
from veriharness.experiment.tool_contract import tool_contract_sha256

__all__ = [
    "Definition",
    "DEFINITION_ERRORS",
    "load_definition",
    "missing_prices",
    "shared_identity",
    "prompt_values",
    "condition_identity",
    "cell_modules",
    "cell_identity",
    "resolved_models",
    "stated_counts",
    "build_experiment_record",
    "execution_record",
    "config_wrapper",
    "add_common_arguments",
    "load_from_args",
]

# Snakemake always loads this file first, so it is an input of every experiment it starts.
DEFAULT_CONFIG = "config/config.yaml"


DEFINITION_ERRORS = (ConfigError, PromptError, CatalogError, UncommittedChanges)


@dataclass(frozen=True)
class Definition:
    root: Path
    config: ExperimentConfig
    task_ids: tuple[str, ...]
    conditions: dict[str, ConditionSpec]
    catalog: ModelCatalog
    taxonomy: Taxonomy
    git: GitState
    uncommitted: bool
    config_file: Path | None = None

    def path(self, relative: str) -> Path:
        return (self.root / relative).resolve()

    @property
    def offline(self) -> bool:
        return self.config.agent.endpoint == "offline" or self.catalog.offline

    @property
    def selected_task_ids(self) -> tuple[str, ...]:
        sample = self.config.execution.sample
        return self.task_ids if sample is None else self.task_ids[:sample]


def _input_paths(config: ExperimentConfig, root: Path, config_file: Path | None) -> list[str]:
    candidates = [
        config.prompts_dir,
        config.conditions_dir,
        config.tasks_dir,
        config.taxonomy,
        config.model_catalog,
        DEFAULT_CONFIG,
    ]
    # An experiment record is an output whose every value is recorded; a config file is an input;
    # the workflow's merged config stands for the files it was merged from. A config file outside
    # the project is not git's to vouch for: the record holds every value it set (P-58).
    wrapper = config_wrapper(config_file)
    configs: list[str] = []
    if wrapper.get("kind") == EFFECTIVE_CONFIG:
        configs = [
            str(source)
            for source in wrapper.get("sources", [])
            if config_wrapper(root / str(source)).get("kind") != EXPERIMENT_RECORD
        ]
    elif config_file is not None and wrapper.get("kind") != EXPERIMENT_RECORD:
        configs = [str(config_file)]
    candidates += [c for c in configs if (root / c).resolve().is_relative_to(root.resolve())]
    return [str((root / item).resolve()) for item in candidates if (root / item).exists()]


def _git_checkable(paths: list[str], root: Path) -> tuple[list[str], list[str]]:
    """Input paths inside the project (relative to it), and those outside it, which git cannot
    vouch for."""
    inside, outside = [], []
    for path in map(Path, paths):
        if path.is_relative_to(root):
            inside.append(path.relative_to(root).as_posix() or ".")
        else:
            outside.append(
                f"{path} (outside the project, so not under its git: move it under the project "
                "and commit it)"
            )
    return inside, outside


def config_wrapper(path: Path | None) -> dict[str, Any]:
    """The envelope of a JSON config that carries its config under "config" (an experiment
    record, or the workflow's merged config with its sources and scheduler settings); empty for
    a plain config file."""
    if path is None:
        return {}
    try:
        data = read_record(path, EXPERIMENT_RECORD, EFFECTIVE_CONFIG)
    except RecordError:
        return {}  # a plain config file (YAML or JSON)
    return {k: v for k, v in data.items() if k != "config"}


def missing_prices(config: ExperimentConfig, catalog: ModelCatalog) -> list[str]:
    """The models of the experiment the price table does not price (the offline model is
    free unless priced)."""
    agent, prices = config.agent, config.prices
    missing = []
    if prices.agent(agent.model, agent.endpoint == "offline") is None:
        missing.append(f"prices.models.{agent.model} (the agent model)")
    for profile in catalog.profiles:
        if prices.profile(profile.name, profile.provider.offline) is None:
            missing.append(f"prices.profiles.{profile.name} (model catalog profile)")
    return missing


def _require_prices(config: ExperimentConfig, catalog: ModelCatalog) -> None:
    execution = config.execution
    caps = [
        f"{name} {value}"
        for name, value in (
            ("execution.max_usd", execution.max_usd),
            ("execution.max_usd_per_run", execution.max_usd_per_run),
        )
        if value is not None
    ]
    missing = missing_prices(config, catalog)
    if caps and missing:
        raise ConfigError(
            f"a spending cap ({', '.join(caps)}) needs a price for every model, and these have "
            f"none: {'; '.join(missing)}. Add them (USD per million tokens: input, output, "
            "cache_read, cache_write) to the config's prices section"
        )


def load_definition(
    config: ExperimentConfig, root: Path, config_file: Path | None = None
) -> Definition:
    root = root.resolve()
    catalog = load_catalog(root / config.model_catalog)
    _require_prices(config, catalog)
    for profile in catalog.profiles:
        if is_placeholder_model(profile.provider.model):
            raise ConfigError(
                f"model catalog {config.model_catalog}: profile {profile.name!r} "
                f"has a placeholder model {profile.provider.model!r}"
            )
    taxonomy_path = root / config.taxonomy
    if not taxonomy_path.is_file():
        raise ConfigError(f"taxonomy: no file {taxonomy_path}")
    conditions = {c: load_condition(root / config.conditions_dir, c) for c in config.conditions}
    for condition in conditions.values():
        unknown = [
            m for m in condition.modules if not (root / config.prompts_dir / f"{m}.md").is_file()
        ]
        if unknown:
            raise ConfigError(
                f"condition {condition.id!r} ({config.conditions_dir}/{condition.id}.yaml) "
                f"modules: no prompt module {', '.join(map(repr, unknown))} in "
                f"{config.prompts_dir}/"
            )
    task_ids = resolve_task_ids(config, root)
    for index, answers in enumerate(config.external_answers):
        if answers.source == "folder" and not (root / str(answers.dir)).is_dir():
            raise ConfigError(
                f"external_answers[{index}].dir {answers.dir!r} ({answers.name!r}) is not a "
                f"folder under {root}"
            )
    inside, outside = _git_checkable(_input_paths(config, root, config_file), root)
    state = git_state(root, inside)
    if outside:
        state = state.model_copy(update={"dirty_files": (*state.dirty_files, *outside)})
    uncommitted = require_committed(state, config.allow_uncommitted)
    # Any real model costs money: a real agent with the offline catalog is paid for too.
    paid = config.agent.endpoint != "offline" or not all(
        p.provider.offline for p in catalog.profiles
    )
    require_committed_harness(harness_version(), not paid, config.allow_uncommitted)
    return Definition(
        root,
        config,
        task_ids,
        conditions,
        catalog,
        load_taxonomy(taxonomy_path),
        state,
        uncommitted,
        config_file,
    )


def shared_identity(defn: Definition) -> dict[str, Any]:
    """The hashed inputs every cell of the experiment shares."""
    agent = defn.config.agent.identity()
    return {
        "agent": agent,
        "model_catalog": {
            "source_sha256": defn.catalog.source_sha256,
            "public": defn.catalog.public_part(),
            "private_sha256": defn.catalog.private_hash(),
        },
        "taxonomy": {
            "id": defn.taxonomy.id,
            "version": defn.taxonomy.version,
            "sha256": defn.taxonomy.sha256,
        },
        "tool_schema_version": TOOL_SCHEMA_VERSION,
        "tool_contract_sha256": tool_contract_sha256(defn.taxonomy.codes),
    }


def prompt_values(defn: Definition, task_id: str) -> PromptValues:
    """Every placeholder's value for one task's cells: the catalog's public text, the reference
    image's name, the task's interactions and extra viewports, and the environment facts
    (computed only if a module names one)."""
    task_dir = defn.root / defn.config.tasks_dir / task_id
    task = load_task(task_dir.parent, task_id)
    return PromptValues(
        {
            "MODEL_PROFILE_CATALOG": defn.catalog.public_text(),
            "REFERENCE_IMAGE_PATH": REFERENCE_IMAGE_PATH,
            "INTERACTIONS": interactions_text(task.interactions),
            "VIEWPORTS": viewports_text(task.viewports),
        },
        lambda: environment_facts(
            defn.config.agent, load_task(task_dir.parent, task_id), task_dir, defn.root
        ),
    )


def stated_counts(defn: Definition) -> dict[str, int]:
    """How many selected tasks state interactions and extra viewports (the counts a measure's
    `applies_when` names)."""
    tasks = [load_task(defn.root / defn.config.tasks_dir, t) for t in defn.selected_task_ids]
    return {
        "interactions_stated": sum(bool(t.interactions) for t in tasks),
        "viewports_stated": sum(bool(t.viewports) for t in tasks),
    }


# The task module that an interactive or responsive task's cells use in place of a condition's
# static one (P-41): every condition gets the same, so conditions still differ only by B3.
INTERACTIVE_TASK_MODULES = {"b2-image-to-code-v0.1": "b2-image-to-code-interactive-v0.1"}


def cell_modules(condition: ConditionSpec, task: TaskSpec) -> tuple[str, ...]:
    """The prompt modules of one cell: the condition's, with its task module swapped for the
    interactive one when the task states interactions or viewports."""
    if not task.interactive:
        return condition.modules
    static = [m for m in condition.modules if m in INTERACTIVE_TASK_MODULES]
    if not static:
        raise ConfigError(
            f"task {task.id!r} states interactions or viewports, but condition {condition.id!r} "
            f"lists no task module with an interactive counterpart (modules "
            f"{list(condition.modules)}; known: {sorted(INTERACTIVE_TASK_MODULES)})"
        )
    return tuple(INTERACTIVE_TASK_MODULES.get(m, m) for m in condition.modules)


def condition_identity(defn: Definition, condition_id: str) -> dict[str, Any]:
    spec = defn.conditions[condition_id]
    path = defn.root / defn.config.conditions_dir / f"{condition_id}.yaml"
    return {"id": spec.id, "file_sha256": sha256_file(path), "modules": list(spec.modules)}


def cell_identity(
    defn: Definition, condition_id: str, task_id: str, shared: dict[str, Any] | None = None
) -> tuple[dict[str, Any], AssembledPrompt]:
    if condition_id not in defn.conditions:
        raise ConfigError(f"condition {condition_id!r} is not one of {list(defn.conditions)}")
    if task_id not in defn.task_ids:
        raise ConfigError(
            f"task {task_id!r} is not one of the experiment's tasks {list(defn.task_ids)}"
        )
    task = load_task(defn.root / defn.config.tasks_dir, task_id)
    prompt = assemble(
        defn.root / defn.config.prompts_dir,
        cell_modules(defn.conditions[condition_id], task),
        prompt_values(defn, task_id),
    )
    modules = [
        # A placeholder's value is public (the catalog's names and descriptions, the reference
        # image's name in the workspace, the environment facts): the record keeps it, not just
        # its hash.
        m.model_dump(mode="json", exclude={"text"}) | {"value_sha256": _value_hash(m.value)}
        for m in prompt.modules
    ]
    identity = {
        "condition": condition_identity(defn, condition_id),
        "task": task_identity(defn.root / defn.config.tasks_dir / task_id, task_id),
        "prompts": {"modules": modules, "system_prompt_sha256": prompt.sha256},
        **(shared or shared_identity(defn)),
    }
    return identity, prompt


def _value_hash(value: str | dict[str, str] | None) -> str | None:
    if isinstance(value, dict):
        return sha256_json(value)
    return None if value is None else sha256_bytes(value.encode("utf-8"))


def resolved_models(model_check: Mapping[str, object]) -> dict[str, str | None]:
    """What the agent's model name resolved to at the model check; None when the check was
    skipped or the provider did not say (never the requested name passed off as resolved)."""
    resolved = model_check.get("agent_model") if model_check.get("checked") else None
    return {"agent": resolved if isinstance(resolved, str) else None}


def build_experiment_record(
    defn: Definition, model_check: ModelsChecked | ModelsNotChecked
) -> ExperimentRecord:
    shared = shared_identity(defn)
    cells: dict[str, dict[str, str]] = {}
    tasks: dict[str, dict[str, Any]] = {}
    for condition_id in defn.config.conditions:
        cells[condition_id] = {}
        for task_id in defn.task_ids:
            identity, _ = cell_identity(defn, condition_id, task_id, shared)
            cells[condition_id][task_id] = identity_hash(identity)
            tasks[task_id] = identity["task"] | {"sha256": identity_hash(identity["task"])}
    conditions = {}
    for c in defn.config.conditions:
        ident = condition_identity(defn, c)
        conditions[c] = ident | {"sha256": identity_hash(ident)}
    models = resolved_models(model_check.model_dump())
    provenance = collect_provenance(defn.git, defn.uncommitted, models)
    config = defn.config.resolved()
    return ExperimentRecord(
        experiment=defn.config.experiment,
        identity_hash=experiment_identity_hash(cells, defn.config.replicates),
        config=config,
        task_ids=list(defn.task_ids),
        selected_task_ids=list(defn.selected_task_ids),
        conditions=conditions,
        tasks=tasks,
        shared=shared,
        cells=cells,
        matrix=MatrixRecord(
            conditions=list(defn.config.conditions),
            tasks=list(defn.selected_task_ids),
            replicates=defn.config.replicates,
            # Answers no session wrote: one run (replicate 1) per task and set.
            external=[a.condition for a in defn.config.external_answers],
        ),
        model_check=model_check,
        provenance=provenance,
        execution=execution_record(defn.config, defn.config_file),
        offline=defn.offline,
        task_set=task_set_record(defn.root / defn.config.tasks_dir, defn.root),
    )


def execution_record(config: ExperimentConfig, config_file: Path | None = None) -> ExecutionRecord:
    """Execution settings, the start checks' switches, and the scheduler's cores and resource
    caps when Snakemake ran it: recorded, never hashed."""
    return ExecutionRecord(
        **config.execution.model_dump(),
        allow_uncommitted=config.allow_uncommitted,
        check_models=config.check_models,
        scheduler=config_wrapper(config_file).get("scheduler"),
        limits=config.agent.limits,
    )


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        required=True,
        help="config YAML/JSON, or an experiment.json to rerun",
    )
    parser.add_argument("--config-json", help="JSON object merged over the config file")
    parser.add_argument("--project-root", type=Path, help="default: the VeriHarness checkout")
    parser.add_argument(
        "--allow-uncommitted",
        action="store_true",
        help="run with uncommitted inputs; records say so",
    )


def load_from_args(args: argparse.Namespace) -> tuple[ExperimentConfig, Path]:
    overrides = parse_json_overrides(args.config_json)
    if args.allow_uncommitted:
        overrides["allow_uncommitted"] = True
    if getattr(args, "skip_model_check", False):
        overrides["check_models"] = False
    config = load_config(args.config, overrides)
    root = args.project_root or project_root()
    return config, root
