"""Every column `collect/columns.py` declares as read from a run file (`file:dotted.path`) names
a field of that file's model in `runfolder`, so a renamed or mistyped field cannot leave a
column silently empty."""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from veriharness.collect.columns import FAMILIES, RUNS_FAMILIES, TABLES
from veriharness.experiment.record import RunRecord
from veriharness.runfolder.agent_requests import AgentRequest
from veriharness.runfolder.audit import AuditRecord
from veriharness.runfolder.inferred_tags import AnnotationRecord
from veriharness.runfolder.metrics import MetricsRecord
from veriharness.runfolder.mllm_trace import (
    CallCompleted,
    CallFailed,
    CallRejected,
    CallStarted,
)
from veriharness.runfolder.outcome import AgentOutcome, ExternalOutcome
from veriharness.runfolder.render import RenderRecord
from veriharness.runfolder.snapshots import SnapshotEntry, TrajectoryRecord

_TRACE = (CallStarted, CallCompleted, CallFailed, CallRejected)

# The models of each file a source names; a path resolves when any of them has it.
MODELS: dict[str, tuple[type[BaseModel], ...]] = {
    "run.json": (RunRecord,),
    "outcome.json": (AgentOutcome, ExternalOutcome),
    "metrics.json": (MetricsRecord,),
    "audit.json": (AuditRecord,),
    "render/render.json": (RenderRecord,),
    "agent_requests": (AgentRequest,),
    "inferred_tags": (AnnotationRecord,),
    "mllm_trace": _TRACE,
    "snapshots": (SnapshotEntry,),
    "trajectory.json": (TrajectoryRecord,),
}
# Sources that are no run file's model: computed by collect, another table's column, or Claude
# Code's stream-json (not our format; `runfolder/transcript.py` reads it as objects).
NOT_A_MODEL = {"derived", "mllm_calls", "call_effects", "transcript", "transcript.jsonl"}


def _members(annotation: Any) -> list[Any]:
    """The types a field may hold, with Optional, unions, Annotated, lists and mappings opened."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in _members(arg)]
    if origin in (list, tuple):
        return [m for arg in get_args(annotation) if arg is not Ellipsis for m in _members(arg)]
    return [annotation]  # a model, a mapping (opened by the next part of a path) or a leaf


def resolves(models: tuple[type[BaseModel], ...], path: str) -> bool:
    """Whether `path` (dotted) names a field of one of `models`, nested models walked; a trace
    path may start with the event it is read from (`mllm_call_started.time`)."""
    parts = path.split(".")
    if models == _TRACE:
        chosen = [m for m in _TRACE if m.model_fields["event"].default == parts[0]]
        if chosen:
            models, parts = tuple(chosen), parts[1:]
    current: list[Any] = list(models)
    for part in parts:
        found = []
        for model in current:
            if isinstance(model, type) and issubclass(model, BaseModel):
                field = model.model_fields.get(part)
                if field is not None:
                    found.extend(_members(field.annotation))
            elif get_origin(model) is dict:  # a mapping: any key may be there
                found.extend(_members(get_args(model)[1]))
            elif model is Any:
                found.append(Any)
        if not found:
            return False
        current = found
    return True


def _sources() -> list[str]:
    columns = [c.source for table in TABLES.values() for c in table]
    families = [f for group in (RUNS_FAMILIES, *FAMILIES.values()) for f in group]
    return sorted({*columns, *(f.source for f in families)})


@pytest.mark.parametrize("source", _sources())
def test_every_declared_source_resolves_in_its_files_model(source: str) -> None:
    file, _, path = source.partition(":")
    if file in NOT_A_MODEL:
        if file in ("mllm_calls", "call_effects"):  # another table's column
            assert path in {c.name for c in TABLES[file]}, source
        return
    assert file in MODELS, f"{source}: no run-folder model is known for {file!r}"
    assert resolves(MODELS[file], path), f"{source}: {path!r} is no field of {MODELS[file]}"


def test_a_path_no_model_has_does_not_resolve() -> None:
    assert resolves((AgentOutcome, ExternalOutcome), "spend.total_usd")
    assert resolves((AgentOutcome, ExternalOutcome), "answer_sha256")  # ExternalOutcome's
    assert not resolves((AgentOutcome, ExternalOutcome), "spend.totl_usd")
    assert not resolves(_TRACE, "mllm_call_failed.usage.input_tokens")
    assert resolves(_TRACE, "usage.input_tokens")
    assert not resolves((AnnotationRecord,), "calls.code")
    assert resolves((MetricsRecord,), "metrics.ssim")
    assert not resolves((MetricsRecord,), "status.ok")  # a Literal leaf ends a path
