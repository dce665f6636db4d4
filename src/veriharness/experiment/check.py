"""The loaded experiment definition, the identity of each cell, and ``check-experiment``.

``load_definition`` turns a config into everything a run depends on (conditions, task ids, model
catalog, taxonomy, git state) and refuses what would make results untrustworthy: placeholder model
names, missing tasks, conditions or modules, and uncommitted inputs unless allowed.
``cell_identity`` gives the hashed identity of one (condition, task) cell together with its
assembled prompt; ``prepare`` uses the same function, so a run's record and the experiment record
agree by construction.

``check-experiment`` also asks the providers whether the model names exist (skippable for dry
runs). For the embedded offline model the names must be the offline model names. The lookups
never print or record a base URL or a key; errors name the profile and the model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from veriharness._util import atomic
from veriharness._util.harness import harness_version
from veriharness._util.hashing import sha256_bytes, sha256_file
from veriharness._util.programs import project_root
from veriharness._util.superseded import SUPERSEDED, move_to_superseded
from veriharness.experiment.analysis import design_warnings
from veriharness.experiment.config import (
    ConditionSpec,
    ConfigError,
    ExecutionRecord,
    ExperimentConfig,
    is_placeholder_model,
    load_condition,
    load_config,
    load_task,
    parse_json_overrides,
    resolve_task_ids,
)
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
from veriharness.experiment.taxonomy import Taxonomy, load_taxonomy
from veriharness.mllm.catalog import CatalogError, ModelCatalog, ProviderSettings, load_catalog
from veriharness.mllm.schema import tool_contract_sha256
from veriharness.offline import OFFLINE_AGENT_MODEL, OFFLINE_VISION_MODEL

__all__ = [
    "ModelCheckError",
    "Definition",
    "DEFINITION_ERRORS",
    "load_definition",
    "missing_prices",
    "PaidRunsWouldBeRedone",
    "changed_inputs",
    "paid_runs_to_redo",
    "shared_identity",
    "prompt_values",
    "condition_identity",
    "cell_identity",
    "execution_record",
    "config_wrapper",
    "add_common_arguments",
    "load_from_args",
    "check_models",
    "build_experiment_record",
    "resolved_models",
    "add_arguments",
    "run",
]

ANTHROPIC_API = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
# Snakemake always loads this file first, so it is an input of every experiment it starts.
DEFAULT_CONFIG = "config/config.yaml"


class ModelCheckError(RuntimeError):
    """A model name is unknown to its provider, or the lookup could not be made."""


DEFINITION_ERRORS = (ConfigError, PromptError, CatalogError, UncommittedChanges, ModelCheckError)


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
    # the workflow's merged config stands for the files it was merged from.
    wrapper = config_wrapper(config_file)
    if wrapper.get("kind") == EFFECTIVE_CONFIG:
        candidates.extend(
            str(source)
            for source in wrapper.get("sources", [])
            if config_wrapper(root / str(source)).get("kind") != EXPERIMENT_RECORD
        )
    elif config_file is not None and wrapper.get("kind") != EXPERIMENT_RECORD:
        candidates.append(str(config_file))
    return [str((root / item).resolve()) for item in candidates if (root / item).exists()]


def _git_checkable(paths: list[str], root: Path) -> tuple[list[str], list[str]]:
    """Input paths inside the project (relative to it), and those outside it, which git cannot
    vouch for."""
    inside, outside = [], []
    for path in map(Path, paths):
        if path.is_relative_to(root):
            inside.append(path.relative_to(root).as_posix() or ".")
        else:
            outside.append(f"{path} (outside the project, so not under its git)")
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


def prompt_values(defn: Definition) -> dict[str, str]:
    return {
        "MODEL_PROFILE_CATALOG": defn.catalog.public_text(),
        "REFERENCE_IMAGE_PATH": REFERENCE_IMAGE_PATH,
    }


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
    load_task(defn.root / defn.config.tasks_dir, task_id)
    prompt = assemble(
        defn.root / defn.config.prompts_dir,
        defn.conditions[condition_id].modules,
        prompt_values(defn),
    )
    modules = [
        # The placeholder's value is public (the catalog's names and descriptions, or the
        # reference image's name in the workspace): the record keeps it, not just its hash.
        m.model_dump(exclude={"text"}) | {"value_sha256": _value_hash(m.value)}
        for m in prompt.modules
    ]
    identity = {
        "condition": condition_identity(defn, condition_id),
        "task": task_identity(defn.root / defn.config.tasks_dir / task_id, task_id),
        "prompts": {"modules": modules, "system_prompt_sha256": prompt.sha256},
        **(shared or shared_identity(defn)),
    }
    return identity, prompt


def _value_hash(value: str | None) -> str | None:
    return None if value is None else sha256_bytes(value.encode("utf-8"))


def _lookup(url: str, headers: dict[str, str], what: str) -> str | None:
    try:
        response = httpx.get(url, headers=headers, timeout=30.0)
    except httpx.HTTPError as error:
        raise ModelCheckError(
            f"{what}: the provider could not be reached ({type(error).__name__})"
        ) from None
    if response.status_code != 200:
        raise ModelCheckError(
            f"{what}: the provider answered HTTP {response.status_code} "
            "to the model lookup (unknown model name, or no access)"
        )
    try:
        found = response.json().get("id")
    except (ValueError, AttributeError):
        found = None
    return found if isinstance(found, str) else None


def _env_key(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ModelCheckError(f"{what}: the API key variable {name} is not set")
    return value


def check_models(defn: Definition) -> ModelsChecked:
    """Look every model name up; return what each resolved to (no URL, no key)."""
    agent = defn.config.agent
    what = f"agent model {agent.model!r} (endpoint {agent.endpoint})"
    if agent.endpoint == "offline":
        if agent.model != OFFLINE_AGENT_MODEL:
            raise ModelCheckError(
                f"{what}: the offline endpoint serves only {OFFLINE_AGENT_MODEL!r}"
            )
        resolved_agent: str | None = agent.model
    else:
        base = ANTHROPIC_API
        if agent.endpoint == "gateway":
            base = ProviderSettings(
                api_style="anthropic-messages", base_url=agent.base_url or "", model=agent.model
            ).resolved_base_url()
        headers = {
            "x-api-key": _env_key(agent.api_key_env, what),
            "anthropic-version": ANTHROPIC_VERSION,
        }
        # None when the provider knows the name but does not say what it resolves to.
        resolved_agent = _lookup(f"{base}/v1/models/{agent.model}", headers, what)
    profiles: dict[str, str] = {}
    for profile in defn.catalog.profiles:
        settings = profile.provider
        what = f"model {settings.model!r} of profile {profile.name!r} ({settings.api_style})"
        if settings.offline:
            if settings.model != OFFLINE_VISION_MODEL:
                raise ModelCheckError(
                    f"{what}: the offline model serves only {OFFLINE_VISION_MODEL!r}"
                )
            profiles[profile.name] = "found"
            continue
        try:
            base = settings.resolved_base_url()
        except CatalogError as error:
            raise ModelCheckError(f"{what}: {error}") from None
        key = _env_key(settings.api_key_env, what) if settings.api_key_env else None
        if settings.api_style == "anthropic-messages":
            headers = {"anthropic-version": ANTHROPIC_VERSION}
            if key:
                headers["x-api-key"] = key
            _lookup(f"{base}/v1/models/{settings.model}", headers, what)
        else:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            _lookup(f"{base}/models/{settings.model}", headers, what)
        profiles[profile.name] = "found"
    return ModelsChecked(agent_model=resolved_agent, profiles=profiles)


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
    )


def execution_record(config: ExperimentConfig, config_file: Path | None = None) -> ExecutionRecord:
    """Execution settings, the start checks' switches, and the scheduler's cores and resource
    caps when Snakemake ran it: recorded, never hashed."""
    return ExecutionRecord(
        **config.execution.model_dump(),
        allow_uncommitted=config.allow_uncommitted,
        check_models=config.check_models,
        scheduler=config_wrapper(config_file).get("scheduler"),
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--skip-model-check",
        action="store_true",
        help="do not look model names up with their provider (dry runs)",
    )
    parser.add_argument("--out", type=Path, required=True, help="where to write experiment.json")


class PaidRunsWouldBeRedone(RuntimeError):
    """Finished paid runs would be redone because their inputs changed, and that was not asked."""


_SESSION_HAPPENED = frozenset({"ok", "failed", "timeout", "max_turns", "budget_exhausted"})
_SHOWN_RUNS = 20


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _paid(record: dict[str, Any]) -> bool:
    """A run that used a real model: not offline, or its agent was not the offline model."""
    agent = record.get("identity", {}).get("agent", {})
    return record.get("offline") is False or agent.get("endpoint", "offline") != "offline"


def changed_inputs(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The inputs that differ between two run identities, named for people."""
    names = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if key == "prompts" and isinstance(before, dict) and isinstance(after, dict):
            was = {m.get("id"): m for m in before.get("modules", [])}
            now = {m.get("id"): m for m in after.get("modules", [])}
            names += [f"prompt module {m}" for m in sorted(set(was) | set(now), key=str)
                      if was.get(m) != now.get(m)]  # fmt: skip
        elif key == "task" and isinstance(before, dict) and isinstance(after, dict):
            was, now = before.get("files", {}), after.get("files", {})
            changed = sorted(f for f in set(was) | set(now) if was.get(f) != now.get(f))
            names.append("task files " + ", ".join(changed))
        elif key in ("agent", "condition") and isinstance(before, dict) and isinstance(after, dict):
            fields = sorted(f for f in set(before) | set(after) if before.get(f) != after.get(f))
            names.append(f"{key} " + ", ".join(fields))
        else:
            names.append(key.replace("_", " "))
    return names


def paid_runs_to_redo(
    defn: Definition, record: ExperimentRecord, experiment_dir: Path
) -> list[tuple[Path, list[str]]]:
    """Finished runs that were not offline and whose identity differs from their new cell:
    the workflow would redo them. Each with the inputs that changed."""
    shared = record.shared
    found = []
    for condition, tasks in record.cells.items():
        for task in record.selected_task_ids:
            for replicate in range(1, defn.config.replicates + 1):
                run_dir = experiment_dir / condition / task / f"r{replicate}"
                outcome = _read_json(run_dir / "outcome.json")
                if outcome is None or outcome.get("status") not in _SESSION_HAPPENED:
                    continue
                old = _read_json(run_dir / "run.json")
                if old is None or not _paid(old):
                    continue  # offline runs are redone freely
                if old.get("identity_hash") == tasks.get(task):
                    continue
                identity, _ = cell_identity(defn, condition, task, shared)
                found.append((run_dir, changed_inputs(old.get("identity", {}), identity)))
    return found


def _guard_paid_runs(defn: Definition, record: ExperimentRecord, experiment_dir: Path) -> None:
    redo = paid_runs_to_redo(defn, record, experiment_dir)
    if not redo:
        return
    if not defn.config.supersede_paid_runs:
        shown = [
            f"{run.relative_to(experiment_dir)} ({'; '.join(changes) or 'identity'} changed)"
            for run, changes in redo[:_SHOWN_RUNS]
        ]
        more = f", and {len(redo) - _SHOWN_RUNS} more" if len(redo) > _SHOWN_RUNS else ""
        raise PaidRunsWouldBeRedone(
            f"refusing to start: {len(redo)} finished run(s) that were not offline would be "
            f"redone because their inputs changed: {', '.join(shown)}{more}. Restore the inputs, "
            "run under a new experiment name, or set supersede_paid_runs: true to redo them "
            f"(their folders are moved to {experiment_dir / SUPERSEDED}/<identity_hash>/ first)"
        )
    for run, changes in redo:
        moved = move_to_superseded(experiment_dir, run)
        print(f"superseded {run.relative_to(experiment_dir)} ({'; '.join(changes)}) -> {moved}")


def run(args: argparse.Namespace) -> int:
    try:
        config, root = load_from_args(args)
        defn = load_definition(config, root, args.config)
        model_check = check_models(defn) if config.check_models else ModelsNotChecked()
        record = build_experiment_record(defn, model_check)
        _guard_paid_runs(defn, record, args.out.parent)
    except (*DEFINITION_ERRORS, PaidRunsWouldBeRedone) as error:
        print(f"check-experiment: {error}", file=sys.stderr)
        return 2
    atomic.write_json(args.out, record.model_dump(mode="json"))
    cells = sum(len(v) for v in record.cells.values())
    print(
        f"experiment {record.experiment}: {len(record.conditions)} condition(s) x "
        f"{len(record.task_ids)} task(s), {cells} cell(s), identity {record.identity_hash}"
        f"{' (uncommitted inputs)' if defn.uncommitted else ''} -> {args.out}"
    )
    for line in design_warnings(config.analysis, len(defn.selected_task_ids)):
        print(f"check-experiment: WARNING: {line}", file=sys.stderr)
    return 0
