"""The start check of an experiment (verb `check-experiment`): the definition, its models, and the
runs a changed input would redo.

``check_experiment`` loads the definition (`experiment.definition`), asks the providers whether
the model names exist (skippable for dry runs; for the embedded offline model the names must be
the offline model names), builds the experiment record, and guards finished paid runs: a run that
used a real model and whose identity no longer matches its cell is redone only when the config
says ``supersede_paid_runs`` (its folder is moved aside first), otherwise the start is refused.
The lookups never print or record a base URL or a key; errors name the profile and the model.
A start with sessions to run refuses a Claude Code CLI that is missing or not the pinned one
(`check_claude`); one with none to run (every run of the matrix ended under its cell's identity)
only records its absence.

It sits in the prepare stage, above the run folder, because the guard reads earlier runs'
`outcome.json` (through `runfolder.outcome`) and `run.json`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from veriharness._util.containment import (
    limits_refusal,
    limits_unavailable,
    network_namespace_unavailable_reason,
)
from veriharness._util.programs import MissingTool, find_bwrap
from veriharness.experiment.catalog import CatalogError, ProviderSettings
from veriharness.experiment.config import ExperimentConfig
from veriharness.experiment.definition import (
    DEFINITION_ERRORS,
    Definition,
    build_experiment_record,
    cell_identity,
    config_wrapper,
    load_definition,
)
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL, OFFLINE_VISION_MODEL
from veriharness.experiment.record import (
    RUN_RECORD,
    ExperimentRecord,
    ModelsChecked,
    ModelsNotChecked,
    RecordError,
    read_record,
)
from veriharness.experiment.start_order import StartOrderError, start_order_of
from veriharness.runfolder.outcome import read_status
from veriharness.runfolder.superseded import SUPERSEDED, move_to_superseded

__all__ = [
    "ClaudeUnavailable",
    "ModelCheckError",
    "PaidRunsWouldBeRedone",
    "START_ERRORS",
    "ContainmentUnavailable",
    "check_claude",
    "check_containment",
    "check_models",
    "changed_inputs",
    "paid_runs_to_redo",
    "sessions_to_run",
    "guard_paid_runs",
    "check_experiment",
]

ANTHROPIC_API = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class ModelCheckError(RuntimeError):
    """A model name is unknown to its provider, or the lookup could not be made."""


def _lookup(url: str, headers: dict[str, str], what: str) -> str | None:
    import httpx  # here: most experiments (the offline model among them) look up nothing

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


class PaidRunsWouldBeRedone(RuntimeError):
    """Finished paid runs would be redone because their inputs changed, and that was not asked."""


_SESSION_HAPPENED = frozenset(
    {"ok", "failed", "timeout", "max_turns", "resource_limit", "budget_exhausted"}
)
_SHOWN_RUNS = 20


def _run_record(run_dir: Path) -> dict[str, Any] | None:
    """The run's `run.json` as written, or None when there is none to compare with."""
    try:
        return read_record(run_dir / "run.json", RUN_RECORD)
    except RecordError:
        return None


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


def _matrix_runs(
    defn: Definition, record: ExperimentRecord, experiment_dir: Path
) -> Iterator[tuple[Path, str, str, str | None]]:
    """Each session run of the matrix: its folder, condition, task and cell identity hash."""
    for condition, tasks in record.cells.items():
        for task in record.selected_task_ids:
            for replicate in range(1, defn.config.replicates + 1):
                run_dir = experiment_dir / condition / task / f"r{replicate}"
                yield run_dir, condition, task, tasks.get(task)


def paid_runs_to_redo(
    defn: Definition, record: ExperimentRecord, experiment_dir: Path
) -> list[tuple[Path, list[str]]]:
    """Finished runs that were not offline and whose identity differs from their new cell:
    the workflow would redo them. Each with the inputs that changed."""
    shared = record.shared
    found = []
    for run_dir, condition, task, cell_hash in _matrix_runs(defn, record, experiment_dir):
        if read_status(run_dir) not in _SESSION_HAPPENED:
            continue
        old = _run_record(run_dir)
        if old is None or not _paid(old):
            continue  # offline runs are redone freely
        if old.get("identity_hash") == cell_hash:
            continue
        identity, _ = cell_identity(defn, condition, task, shared)
        found.append((run_dir, changed_inputs(old.get("identity", {}), identity)))
    return found


def sessions_to_run(defn: Definition, record: ExperimentRecord, experiment_dir: Path) -> int:
    """How many runs of the matrix have no ended session under their cell's identity: the
    sessions the workflow would run (or run again)."""
    to_run = 0
    for run_dir, _, _, cell_hash in _matrix_runs(defn, record, experiment_dir):
        old = _run_record(run_dir) if read_status(run_dir) in _SESSION_HAPPENED else None
        to_run += old is None or old.get("identity_hash") != cell_hash
    return to_run


class ClaudeUnavailable(RuntimeError):
    """Sessions are to run, and the pinned Claude Code CLI is missing or another version."""


def check_claude(defn: Definition, record: ExperimentRecord, experiment_dir: Path) -> None:
    """Refuse to start sessions without the pinned CLI, in one line naming what is missing and
    how to get it (`_util.programs.find_claude`); with no session to run, the record's
    `claude_version_error` is all that says it is missing."""
    missing = record.provenance.claude_version_error
    if missing is None:
        return
    to_run = sessions_to_run(defn, record, experiment_dir)
    if to_run:
        raise ClaudeUnavailable(
            f"refusing to start: {to_run} session(s) to run need the Claude Code CLI, and {missing}"
        )


def guard_paid_runs(defn: Definition, record: ExperimentRecord, experiment_dir: Path) -> None:
    """Refuse to start when finished paid runs would be redone, unless the config allows it;
    then move each of them aside (superseded) first."""
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


class ContainmentUnavailable(RuntimeError):
    """The machine cannot hold the sessions as the config asks, and the config does not allow
    running without it."""


def check_containment(config: ExperimentConfig) -> None:
    """Refuse an experiment whose sessions this machine cannot contain: `agent.network: none`
    without a network namespace (every session would fail), or a real model without its
    limits unless `agent.limits.allow_unavailable`. `run-agent` checks again where each
    session runs (a cluster node may differ from this machine)."""
    agent = config.agent
    if agent.isolation == "bwrap" and agent.network == "none":
        try:
            reason = network_namespace_unavailable_reason(find_bwrap())
        except MissingTool as not_installed:
            reason = str(not_installed)
        if reason:
            raise ContainmentUnavailable(
                f"agent.network is 'none' but {reason}; set agent.network: open to share the "
                "machine's network with the sessions (recorded in every run's identity)"
            )
    if agent.endpoint == "offline" or agent.limits.allow_unavailable:
        return
    missing = limits_unavailable(Path(tempfile.gettempdir()))
    if missing:
        raise ContainmentUnavailable(limits_refusal(missing))


START_ERRORS = (
    *DEFINITION_ERRORS,
    ModelCheckError,
    PaidRunsWouldBeRedone,
    ContainmentUnavailable,
    ClaudeUnavailable,
    StartOrderError,
)


def check_experiment(
    config: ExperimentConfig, root: Path, config_file: Path | None, experiment_dir: Path
) -> tuple[Definition, ExperimentRecord]:
    """The experiment's definition and record, once its models are checked and its finished
    paid runs guarded (`START_ERRORS` say why not)."""
    defn = load_definition(config, root, config_file)
    check_containment(config)
    model_check = check_models(defn) if config.check_models else ModelsNotChecked()
    record = build_experiment_record(defn, model_check)
    check_claude(defn, record, experiment_dir)
    record.start_order = start_order_of(
        config_wrapper(config_file), config.execution.order_seed, experiment_dir
    )
    guard_paid_runs(defn, record, experiment_dir)
    return defn, record
