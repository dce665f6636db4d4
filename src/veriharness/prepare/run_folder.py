"""``veriharness prepare``: one run's record and prompt snapshot, before the agent starts.

Writes, in the run folder, ``run.json`` (identity, provenance, execution, offline flag),
``system_prompt.md`` (the assembled text for ``--append-system-prompt-file``) and
``prompt/<module-id>.md`` (each resolved module). It makes no network request and hashes only the
one task it prepares, so it stays cheap when Snakemake runs it for every cell.

When the config is an experiment record (or ``--experiment-record`` names one), the cell's
identity hash must equal the one ``check-experiment`` recorded: a prompt, task or condition edited
after the check is refused instead of producing a run the experiment record does not describe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veriharness._util import atomic
from veriharness.experiment.config import ConfigError
from veriharness.experiment.definition import (
    Definition,
    cell_identity,
    execution_record,
    resolved_models,
)
from veriharness.experiment.prompts import AssembledPrompt
from veriharness.experiment.provenance import collect_provenance
from veriharness.experiment.record import (
    EXPERIMENT_RECORD,
    RecordError,
    RunRecord,
    identity_hash,
    read_record,
)
from veriharness.runfolder.run_record import RUN_RECORD

__all__ = ["prepare_run", "recorded_experiment", "write_run"]


def recorded_experiment(path: Path) -> dict[str, Any] | None:
    """The experiment record at `path`, or None when `path` is a plain config file."""
    try:
        return read_record(path, EXPERIMENT_RECORD)
    except RecordError:
        return None


def prepare_run(
    defn: Definition,
    condition_id: str,
    task_id: str,
    replicate: int,
    recorded: dict[str, Any] | None = None,
) -> tuple[RunRecord, AssembledPrompt]:
    if not 1 <= replicate <= defn.config.replicates:
        raise ConfigError(
            f"replicate {replicate} is outside 1..{defn.config.replicates} "
            "(the config's replicates)"
        )
    identity, prompt = cell_identity(defn, condition_id, task_id)
    digest = identity_hash(identity)
    models = resolved_models({})
    if recorded is not None:
        expected = recorded.get("cells", {}).get(condition_id, {}).get(task_id)
        if expected != digest:
            raise ConfigError(
                f"cell {condition_id}/{task_id}: identity {digest} differs from {expected} in the "
                "experiment record; its inputs changed since check-experiment (run it again)"
            )
        models = resolved_models(recorded.get("model_check", {}))
    provenance = collect_provenance(defn.git, defn.uncommitted, models)
    record = RunRecord(
        experiment=defn.config.experiment,
        condition=condition_id,
        task=task_id,
        replicate=replicate,
        identity_hash=digest,
        identity=identity,
        provenance=provenance,
        execution=execution_record(defn.config, defn.config_file),
        offline=defn.offline,
    )
    return record, prompt


def write_run(run_dir: Path, record: RunRecord, prompt: AssembledPrompt) -> None:
    for module in prompt.modules:
        atomic.write_text(run_dir / "prompt" / f"{module.id}.md", module.text)
    atomic.write_text(run_dir / "system_prompt.md", prompt.text)
    # run.json last: its presence means the folder is complete.
    RUN_RECORD.write(run_dir, record)
