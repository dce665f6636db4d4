"""Reading one run folder: run.json, outcome.json, transcript.jsonl, mllm_trace.jsonl,
agent_requests.jsonl, and the metrics, audit and render JSON files, into the rows the collected
tables are built from.

Design notes:

- Readers are defensive (`runfolder`): a missing file, a line that is not JSON or a value of the
  wrong type never raises; the value becomes null and the problem is appended to the run's error
  list, which `collect` writes out as `read_errors`. Nothing read is dropped silently.
- Tool uses and CallMLLM calls, and the link between them, come from `calls`.
- The rows are the typed rows of `columns`. Columns read generically by their declared source
  (``file:path``) are filled by name; `typed_value` gives each the type its field declares.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, cast, get_args

from veriharness.collect.call_links import linked_call_rows, transcript_tool_uses
from veriharness.collect.columns import (
    AGENT_REQUEST_SUMS,
    AGENT_REQUESTS,
    RUNS,
    AgentRequestRow,
    AgentToolCallRow,
    InferredFields,
    InferredTagRow,
    InteractionFields,
    InteractionRow,
    MllmCallRow,
    RequestFields,
    RunFields,
    RunKeys,
    RunRow,
)
from veriharness.collect.trajectory_rows import trajectory_of_run
from veriharness.collect.typed import typed_value
from veriharness.runfolder._files import read_object, read_object_lines, salvage
from veriharness.runfolder.agent_requests import AGENT_REQUESTS as REQUESTS_FILE
from veriharness.runfolder.attempts import ATTEMPTS, attempt_numbers, read_attempt
from veriharness.runfolder.audit import AUDIT
from veriharness.runfolder.inferred_tags import INFERRED_TAGS, read_inferred_tags
from veriharness.runfolder.metrics import METRICS, InteractionScore
from veriharness.runfolder.outcome import NAME as OUTCOME_NAME
from veriharness.runfolder.outcome import Status
from veriharness.runfolder.render import RENDER_NAME
from veriharness.runfolder.run_record import RUN_RECORD
from veriharness.runfolder.transcript import read_transcript

__all__ = ["RunKey", "RunExtract", "FamilyValue", "run_keys", "run_record_path", "extract_run"]


class RunKey(NamedTuple):
    condition: str
    task: str
    replicate: int


# A value of a runs column family (tool_calls_<tool>, metric_<name>, audit_<flag>).
FamilyValue = int | float | bool | None


@dataclass
class RunExtract:
    """One run folder read once: its `runs` row and the rows of its per-run tables."""

    run: RunRow
    tool_calls: list[AgentToolCallRow] = field(default_factory=list)
    mllm_calls: list[MllmCallRow] = field(default_factory=list)
    agent_requests: list[AgentRequestRow] = field(default_factory=list)
    inferred: list[InferredTagRow] = field(default_factory=list)
    interactions: list[InteractionRow] = field(default_factory=list)
    # The runs row's family columns, named by the data (`columns.RUNS_FAMILIES`).
    families: dict[str, FamilyValue] = field(default_factory=dict)
    # The answer's snapshots and what each CallMLLM call was followed by (`trajectory_rows`);
    # rows with their metric families, keyed like the per-run tables.
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    call_effects: list[dict[str, Any]] = field(default_factory=list)


# The names in a run folder, listed once: most runs have no inferred tags, agent requests or
# kept attempts, and one listing answers for all three instead of a lookup each (P-49). None when
# the folder could not be listed; then each file is looked up.
Names = frozenset[str] | None


def _entries(run_dir: Path) -> Names:
    try:
        return frozenset(os.listdir(run_dir))
    except OSError:
        return None


def _listed(name: str, names: Names) -> bool:
    """Whether `name` (or its first folder) may be in the run folder: False only when the
    listing shows it is not."""
    return names is None or name.split("/", 1)[0] in names


def run_keys(experiment: str, key: RunKey) -> RunKeys:
    return {
        "experiment": experiment,
        "condition": key.condition,
        "task": key.task,
        "replicate": key.replicate,
    }


def _inferred_rows(run_dir: Path, names: Names, errors: list[str]) -> list[InferredFields]:
    """One row per call annotation of `inferred_tags.json` (absent before annotation ran)."""
    if not _listed(INFERRED_TAGS.name, names) or not INFERRED_TAGS.exists(run_dir):
        return []
    record = read_inferred_tags(run_dir, errors)
    if record is None:
        return []
    annotator = record.annotator
    shared: InferredFields = {
        "annotator_kind": annotator.kind,
        "annotator": annotator.id,
        "annotator_version": annotator.version,
        "annotator_prompt_sha256": annotator.prompt_sha256,
        "annotator_profile": annotator.profile,
    }
    return [
        {
            **shared,
            "call_id": call.call_id,
            "status": call.status,
            "codes": list(call.codes),
            "invalid_codes": list(call.invalid_codes),
            "error": call.error,
        }
        for call in record.calls
    ]


def _request_rows(run_dir: Path, names: Names, errors: list[str]) -> list[RequestFields] | None:
    """The agent_requests rows of one run (without the run keys); None when it has no file (runs
    made before the model proxy). Each line is read as the object it holds, like the other
    declared sources (`_read_object`), so a bad value loses its column, not its line."""
    if not _listed(REQUESTS_FILE.name, names) or not REQUESTS_FILE.exists(run_dir):
        return None
    records = read_object_lines(REQUESTS_FILE.path(run_dir), REQUESTS_FILE.name, errors) or []
    rows: list[RequestFields] = []
    for seq, record in enumerate(records):
        values: dict[str, object] = {"seq": seq}
        for col in AGENT_REQUESTS:
            file, _, name = col.source.partition(":")
            if file == "agent_requests":
                where = f"{REQUESTS_FILE.name} line {seq + 1} {name}"
                values[col.name] = typed_value(record.get(name), col.dtype, where, errors)
        rows.append(cast(RequestFields, values))
    return rows


def _request_sums(requests: list[RequestFields]) -> dict[str, object]:
    """The runs columns summed from the run's agent requests."""
    sums: dict[str, object] = {
        "agent_requests": len(requests),
        "agent_request_errors": sum(1 for r in requests if r.get("error")),
        "agent_request_seconds": round(sum(r.get("total_ms") or 0.0 for r in requests) / 1000, 3),
        "agent_requests_unpriced": sum(1 for r in requests if r.get("cost_unpriced_reason")),
    }
    for total, name in AGENT_REQUEST_SUMS.items():
        sums[total] = sum(_column(r, name) or 0 for r in requests)
    # What answered, not what was named: a provider switching snapshots shows here.
    answered = sorted({m for r in requests if (m := r.get("response_model")) is not None})
    sums["agent_response_models"] = answered
    sums["agent_response_model_count"] = len(answered)
    return sums


def _column(row: RequestFields, name: str) -> int | None:
    """A count column of a request row named by a declaration (`AGENT_REQUEST_SUMS`)."""
    value = cast(dict[str, object], row).get(name)
    return value if isinstance(value, int) else None


def _set_columns(row: RunRow, values: dict[str, object]) -> None:
    """Columns filled by their declared name; `typed_value` gave each its declared type."""
    cast(dict[str, object], row).update(values)


def _file_columns(docs: dict[str, Any], errors: list[str]) -> dict[str, object]:
    """The runs columns whose source is a file of the run folder (``file:dotted.path``)."""
    values: dict[str, object] = {}
    for col in RUNS:
        file, _, path = col.source.partition(":")
        if file == "derived" or docs.get(file) is None:
            continue
        value: Any = docs[file]
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        values[col.name] = typed_value(value, col.dtype, f"{file} {path}", errors)
    return values


def _cost_columns(row: RunRow, outcome: Any, errors: list[str]) -> dict[str, object]:
    """`cost_usd` and its parts from the outcome's spend, null when part of it is the caps'
    estimate of requests whose reply reported no usage (P-36): an estimate is not a cost, and
    a sum that took it for one would enter the comparison as a measurement. `charged_usd`
    keeps what the caps counted."""
    spend = outcome.get("spend") if isinstance(outcome, dict) else None
    if not isinstance(spend, dict):
        return {}
    if row.get("cost_estimated") is True:
        return {"cost_usd": None, "agent_cost_usd": None, "mllm_cost_usd": None}
    return {
        "cost_usd": row.get("charged_usd"),  # no estimate in it: the cost
        "agent_cost_usd": typed_value(
            spend.get("agent_usd"), "Float64", "outcome.json spend.agent_usd", errors
        ),
        "mllm_cost_usd": typed_value(
            spend.get("mllm_usd"), "Float64", "outcome.json spend.mllm_usd", errors
        ),
    }


def _attempt_columns(
    run_dir: Path, names: Names, outcome: Any, errors: list[str]
) -> tuple[int | None, str]:
    """`attempts` and `attempt_causes` from the kept attempts (`agent/attempts.py`): each
    `attempts/<n>/` is an earlier attempt, finished (its outcome.json says why it was redone) or
    lost; the run's own outcome.json is one more, unless no session was started."""
    kept = attempt_numbers(run_dir) if _listed(ATTEMPTS, names) else []
    causes = []
    for number in kept:
        folder = f"{ATTEMPTS}/{number}"
        record = read_attempt(run_dir, number, errors)
        if record is not None and record.finished:
            # Read as the object it holds: a kept outcome may be of any age.
            name = f"{folder}/{OUTCOME_NAME}"
            earlier = read_object(run_dir / name, name, errors) or {}
            status = earlier.get("status") or record.status
            cause = earlier.get("error") or record.reason
        else:
            status, cause = "lost", record.reason if record is not None else None
        causes.append(f"{folder}: {status}: {cause or 'no cause recorded'}")
    reported = isinstance(outcome, dict) and outcome.get("status") not in (None, "not_started")
    count = len(kept) + int(reported)
    return count or None, "; ".join(causes)


_SESSION_STATUSES = frozenset(get_args(Status))
# outcome.json of an answer no session wrote (`veriharness.external`).
_EXTERNAL_KIND = "external_answer"


def _status(run_dir: Path, docs: dict[str, Any], outcome_error: bool) -> tuple[str, str]:
    outcome = docs["outcome.json"]
    if isinstance(outcome, dict) and outcome.get("kind") == _EXTERNAL_KIND:
        if outcome.get("status") == "missing_answer":
            return "missing_answer", f"external answer missing: {outcome.get('error') or ''}"
        if not (run_dir / "answer" / "answer.html").is_file():
            return "missing_answer", "external answer: answer/answer.html is absent"
        return _scoring_status(docs)
    if outcome is None:
        if outcome_error:
            return "failed", "outcome.json is unreadable"
        return "not_started", "no outcome.json: the agent stage has not finished"
    status = outcome.get("status")
    if status in _SESSION_STATUSES and status != "ok":
        detail = outcome.get("error") or outcome.get("result_subtype") or ""
        return status, f"agent status {status}" + (f": {detail}" if detail else "")
    if status != "ok":
        return "failed", f"outcome.json status has an unknown value {status!r}"
    if not (run_dir / "answer" / "answer.html").is_file():
        if "answer.html" in (outcome.get("answer_links_refused") or []):
            return "missing_answer", "answer.html was a symbolic link, refused (never followed)"
        return "missing_answer", "agent finished but answer/answer.html is absent"
    return _scoring_status(docs)


def _scoring_status(docs: dict[str, Any]) -> tuple[str, str]:
    """`render_failed` / `score_failed` when a later stage could not measure the answer."""
    render = docs["render/render.json"] or {}
    if render.get("status") == "error":
        step = render.get("failed_step") or "capture"
        return "render_failed", f"render_failed: {step}: {render.get('error') or ''}".strip()
    metrics = docs["metrics.json"] or {}
    if metrics.get("status") == "score_failed":
        details = metrics.get("details")
        why = details.get("reason") if isinstance(details, dict) else None
        return "score_failed", f"score_failed: {why or 'no reason recorded'}"
    return "ok", ""


def _flat_family(
    families: dict[str, FamilyValue],
    prefix: str,
    mapping: Any,
    dtype: Literal["Float64", "boolean"],
    where: str,
    errors: list[str],
) -> None:
    if mapping is None:
        return
    if not isinstance(mapping, dict):
        errors.append(f"{where}: expected an object, got {type(mapping).__name__}")
        return
    for name, value in mapping.items():
        # A Float64 or boolean value, or None: what `dtype` allows.
        families[prefix + str(name)] = cast(
            FamilyValue, typed_value(value, dtype, f"{where}.{name}", errors)
        )


def _read_object(run_dir: Path, name: str, errors: list[str]) -> dict[str, Any] | None:
    """A run file as the JSON object it holds, for the columns read by their declared source
    (``file:path``); `tests/runfolder/test_column_sources.py` checks each source against the
    file's model, and `typed_value` gives each value its column's type."""
    return read_object(run_dir / name, name, errors)


def run_record_path(experiment: str, key: RunKey) -> str:
    """The `run_record` column: run.json's path relative to results/."""
    return f"{experiment}/{key.condition}/{key.task}/r{key.replicate}/run.json"


def extract_run(exp_dir: Path, experiment: str, key: RunKey) -> RunExtract:
    """Read one run folder; never raises for bad content, it lands in `read_errors` instead."""
    run_dir = exp_dir / key.condition / key.task / f"r{key.replicate}"
    keys = run_keys(experiment, key)
    first: RunFields = {"superseded": False, "run_record": run_record_path(experiment, key)}
    row: RunRow = {**keys, **first}
    if not os.path.isdir(run_dir):
        row["status"], row["reason"], row["read_errors"] = "missing", "run folder is absent", ""
        return RunExtract(row)
    errors: list[str] = []
    names = _entries(run_dir)
    outcome = _read_object(run_dir, OUTCOME_NAME, errors)
    # An external answer has no run record, transcript or trace: their absence is no error.
    external = isinstance(outcome, dict) and outcome.get("kind") == _EXTERNAL_KIND
    session_files = () if external else (RUN_RECORD.name,)
    docs = {
        name: _read_object(run_dir, name, errors)
        for name in (*session_files, METRICS.name, AUDIT.name, RENDER_NAME)
    }
    docs[OUTCOME_NAME] = outcome
    outcome_error = any(e.startswith("outcome.json:") and "absent" not in e for e in errors)
    _set_columns(row, _file_columns(docs, errors))
    _set_columns(row, _cost_columns(row, docs.get(OUTCOME_NAME), errors))
    row["status"], row["reason"] = _status(run_dir, docs, outcome_error)
    row["answer_source"] = "external" if external else "session"
    record = docs.get("run.json") or {}
    for name in ("experiment", "condition", "task"):
        if name in record and record[name] != keys[name]:
            errors.append(
                f"run.json {name} {record[name]!r} differs from the folder {keys[name]!r}"
            )
    metrics, audit = docs["metrics.json"] or {}, docs["audit.json"] or {}
    families: dict[str, FamilyValue] = {}
    _flat_family(
        families, "metric_", metrics.get("metrics"), "Float64", "metrics.json metrics", errors
    )
    _flat_family(families, "audit_", audit.get("flags"), "boolean", "audit.json flags", errors)

    if external:
        tools, calls = None, None
    else:
        events = read_transcript(run_dir, errors)
        tools, uses = transcript_tool_uses(events) if events is not None else (None, None)
        calls = linked_call_rows(run_dir, uses, errors)
    if tools is not None:
        row["agent_tool_calls"] = len(tools)
        for tool, count in Counter(t["tool"] for t in tools).items():
            families[f"tool_calls_{tool}"] = count
    if calls is not None:
        outcomes = Counter(c["outcome"] for c in calls)
        row["mllm_calls"] = len(calls)
        row["mllm_calls_failed"] = outcomes["failed"]
        row["mllm_calls_rejected"] = outcomes["rejected"]
        row["mllm_response_models"] = sorted(
            {
                f"{c.get('resolved_profile') or '?'}: {model}"
                for c in calls
                if (model := c.get("provider_model")) is not None
            }
        )
    if not external:
        row["attempts"], row["attempt_causes"] = _attempt_columns(run_dir, names, outcome, errors)
    inferred = [] if external else _inferred_rows(run_dir, names, errors)
    requests = None if external else _request_rows(run_dir, names, errors)
    if requests is not None:
        _set_columns(row, _request_sums(requests))
    interactions = _interaction_rows(metrics.get("interactions"), errors)
    trajectory = None if external else trajectory_of_run(run_dir, calls, tools, errors)
    if trajectory is not None:
        _set_columns(row, trajectory.run_columns)
        families.update(trajectory.families)
    row["read_errors"] = "; ".join(errors)
    return RunExtract(
        row,
        [{**keys, **t} for t in tools or ()],
        [{**keys, **c} for c in calls or ()],
        [{**keys, **r} for r in requests or ()],
        [{**keys, **i} for i in inferred],
        [{**keys, **i} for i in interactions],
        families,
        [{**keys, **t} for t in trajectory.snapshots] if trajectory else [],
        [{**keys, **e} for e in trajectory.call_effects] if trajectory else [],
    )


def _interaction_rows(scores: Any, errors: list[str]) -> list[InteractionFields]:
    """One row per interaction metrics.json scores (none for a static task)."""
    if scores is None:
        return []
    if not isinstance(scores, list):
        errors.append(f"metrics.json interactions: expected a list, got {type(scores).__name__}")
        return []
    rows: list[InteractionFields] = []
    for number, item in enumerate(scores):
        score = salvage(InteractionScore, item, f"metrics.json interactions.{number}", errors)
        if score is None:
            continue
        row: InteractionFields = {
            "interaction": score.id,
            "implemented": score.implemented,
            "trigger_matches": score.trigger_matches,
            "state_ssim": score.state_ssim,
            "state_text": score.state_text,
            "region_ssim": score.region_ssim,
            "region_text": score.region_text,
            "trigger_position": score.trigger_position,
            "region_position": score.region_position,
            "state_mae": score.state_mae,
            "state_block_match": score.state_block_match,
        }
        rows.append(row)
    return rows
