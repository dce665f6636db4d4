"""Run and experiment records, the identity hash, and their differences (``record diff``).

A record has three parts kept apart on purpose:

- ``identity``: every input that defines what a run is. Its canonical-JSON sha256 is the
  ``identity_hash``. Inputs enter by the sha256 of their bytes (prompt sources, task files,
  condition file, taxonomy, catalog file) plus the values that matter (prompt template and
  resolved digests, agent model and session limits, the catalog's public part and private hash,
  the CallMLLM request schema version).
- ``provenance``: where and when it was made (git commit, dirty files, package and ``claude``
  versions, host, time). Recorded, never hashed.
- ``execution``: how runs are executed (concurrency, retries, workspaces, sampling, results
  folder). Recorded, never hashed.

The replicate index is written in the run record but kept out of the identity, so the replicates of
one cell share an identity hash and can be grouped by it. The experiment's identity hash covers
the matrix: every cell's identity hash, and the replicate count.

``experiment.json`` is never overwritten (``write_experiment_record``): a start whose record
differs from the one there keeps the earlier one as ``records/experiment-<n>.json`` beside it
first; a start that changes nothing but the record's time leaves the file as it is (P-59).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from veriharness._util import atomic
from veriharness._util.hashing import sha256_file, sha256_json
from veriharness.experiment.config import ExecutionRecord
from veriharness.experiment.kinds import EFFECTIVE_CONFIG, EXPERIMENT_RECORD, RUN_RECORD
from veriharness.experiment.provenance import Provenance
from veriharness.experiment.start_order import StartOrderRecord
from veriharness.experiment.task_set import TaskSetRecord

__all__ = [
    "RUN_RECORD",
    "EXPERIMENT_RECORD",
    "EFFECTIVE_CONFIG",
    "RecordError",
    "read_record",
    "FORMAT_VERSION",
    "TOOL_SCHEMA_VERSION",
    "RunRecord",
    "MatrixRecord",
    "ModelsChecked",
    "ModelsNotChecked",
    "ExperimentRecord",
    "task_identity",
    "identity_hash",
    "experiment_identity_hash",
    "flatten",
    "diff_records",
    "RECORDS",
    "write_experiment_record",
]

FORMAT_VERSION = 1
# The CallMLLM request contract (instruction, typed inputs, capability_tags, output,
# model_profile). A change to what the tool accepts is a new version here.
TOOL_SCHEMA_VERSION = "callmllm-request-v0.3"

_HASHED_PREFIXES = ("identity_hash", "identity.", "cells.", "conditions.", "tasks.", "shared.")


class RunRecord(BaseModel):
    """``run.json``: one cell of the matrix, one replicate."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["run_record"] = RUN_RECORD
    format_version: int = FORMAT_VERSION
    experiment: str
    condition: str
    task: str
    replicate: int
    identity_hash: str
    identity: dict[str, Any]
    provenance: Provenance
    execution: ExecutionRecord
    offline: bool


class RecordError(ValueError):
    """A record file that cannot be read as the kind asked for; the message names the file."""


def read_record(path: Path, *kinds: str) -> dict[str, Any]:
    """The JSON object in `path`, whose `kind` must be one of `kinds`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path}: no such file") from None
    except OSError as error:
        raise RecordError(f"{path}: unreadable ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise RecordError(f"{path}: not UTF-8 text ({error.reason})") from None
    except ValueError as error:
        raise RecordError(f"{path}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: a JSON {type(data).__name__}, expected a record object")
    if data.get("kind") not in kinds:
        found = data.get("kind")
        raise RecordError(f"{path}: field 'kind' is {found!r}, expected one of {list(kinds)}")
    return data


class MatrixRecord(BaseModel):
    """The runs an experiment expects: every condition x task x replicate, and one run
    (replicate 1) per task of each external answer set."""

    model_config = ConfigDict(extra="forbid")
    conditions: list[str]
    tasks: list[str]
    replicates: int
    external: list[str]


class ModelsChecked(BaseModel):
    """What the start check found for each model name (no URL, no key)."""

    model_config = ConfigDict(extra="forbid")
    checked: Literal[True] = True
    agent_model: str | None  # None: the provider knows the name but does not say what it is
    profiles: dict[str, str]


class ModelsNotChecked(BaseModel):
    """The start check was skipped (``check_models: false``)."""

    model_config = ConfigDict(extra="forbid")
    checked: Literal[False] = False


class ExperimentRecord(BaseModel):
    """``experiment.json``: the resolved config and the identity of every cell."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["experiment_record"] = EXPERIMENT_RECORD
    format_version: int = FORMAT_VERSION
    experiment: str
    identity_hash: str
    config: dict[str, Any]
    task_ids: list[str]
    selected_task_ids: list[str]
    conditions: dict[str, dict[str, Any]]
    tasks: dict[str, dict[str, Any]]
    shared: dict[str, Any]
    cells: dict[str, dict[str, str]]
    matrix: MatrixRecord
    model_check: ModelsChecked | ModelsNotChecked
    provenance: Provenance
    execution: ExecutionRecord
    offline: bool
    task_set: TaskSetRecord | None = None
    """The set tasks_dir holds (its manifest's name, version and digest), checksums verified;
    None when tasks_dir has no manifest. Recorded, not hashed (experiment.task_set, P-45)."""
    start_order: StartOrderRecord | None = None
    """The order sessions start in: its seed, where the seed came from, and what the executor
    keeps of it (P-60). Recorded, not hashed; None only in records from before it."""


def task_identity(folder: Path, task_id: str) -> dict[str, Any]:
    """Every file of a task folder by sha256 (relative POSIX paths, sorted)."""
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            files[relative.as_posix()] = sha256_file(path)
    return {"id": task_id, "files": files}


def identity_hash(identity: dict[str, Any]) -> str:
    return sha256_json(identity)


def experiment_identity_hash(cells: dict[str, dict[str, str]], replicates: int) -> str:
    return sha256_json({"cells": cells, "replicates": replicates})


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as ``a.b.c`` keys; lists and scalars are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _is_hashed(field: str) -> bool:
    return any(field == p.rstrip(".") or field.startswith(p) for p in _HASHED_PREFIXES)


def diff_records(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    """``(section, field, a_value, b_value)`` for every differing field; hashed fields first."""
    flat_a, flat_b = flatten(a), flatten(b)
    missing = object()
    rows = []
    for field in sorted(set(flat_a) | set(flat_b)):
        left, right = flat_a.get(field, missing), flat_b.get(field, missing)
        if left != right:
            section = "hashed" if _is_hashed(field) else "recorded"
            rows.append(
                (
                    section,
                    field,
                    "<absent>" if left is missing else left,
                    "<absent>" if right is missing else right,
                )
            )
    rows.sort(key=lambda row: (row[0] != "hashed", row[1]))
    return rows


# Where the earlier states of an experiment's record are kept, beside experiment.json.
RECORDS = "records"
_KEPT = re.compile(r"experiment-(\d+)\.json")
# What differs between two starts of an unchanged experiment.
_START_TIME = "provenance.created_at"


def _same_state(old: bytes, new: dict[str, Any]) -> bool:
    try:
        earlier = json.loads(old)
    except ValueError:
        return False
    return isinstance(earlier, dict) and all(
        field == _START_TIME for _, field, _, _ in diff_records(earlier, new)
    )


def write_experiment_record(path: Path, record: dict[str, Any]) -> Path | None:
    """Write `record` to `path` (experiment.json) without losing the one there: a differing
    earlier record is first kept as records/experiment-<n>.json (n = 1, 2, ... in the order the
    states were replaced), whose path is returned; one that differs only in its time is left as
    it is (touched, so it reads as the latest start's)."""
    path = Path(path)
    try:
        old = path.read_bytes()
    except FileNotFoundError:
        atomic.write_json(path, record)
        return None
    if _same_state(old, record):
        os.utime(path)
        return None
    folder = path.parent / RECORDS
    taken = [int(m.group(1)) for p in folder.glob("*") if (m := _KEPT.fullmatch(p.name))]
    kept = folder / f"experiment-{max(taken, default=0) + 1}.json"
    atomic.write_bytes(kept, old)
    atomic.write_json(path, record)
    return kept
