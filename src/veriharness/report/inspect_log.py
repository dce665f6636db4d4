"""`veriharness export inspect`: an experiment's runs as Inspect AI eval logs, one per condition,
written through `inspect_ai`'s own log API (the optional extra `inspect`), so `inspect view`
and Inspect's readers open them.

Design notes:

- The runs table (`tables/runs.parquet`) decides which runs there are: every current row is a
  sample, including runs that never started or whose folder is missing (their error says so), so
  the viewer's sample list is the table's. A sample's id is its task and its epoch the replicate.
- Messages come from the Claude Code transcript: the appended system prompt, the user turn every
  session gets, then each assistant message (stream-json splits one message into an event per
  content block; consecutive events of one message id are joined) with its text, thinking and
  tool calls, and each tool result as a tool message.
- Each CallMLLM call is a model event of the sample, linked to its tool use as the tables link it
  (`collect.call_links`): its instruction, text inputs and images as the model received them (the
  bytes kept in `call_images/`, else a region cropped from the file the trace's digest finds), and
  its response, usage and latency.
- Scores are the metrics (one score per non-null metric), the declared primary outcome(s) first
  (`analysis.primary` of experiment.json), so the log's headline score, the first, is the
  verdict's outcome; the audit flags, status, costs and identity are sample metadata; token
  usage is per model (agent and CallMLLM provider).
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from inspect_ai.event import ModelEvent
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalMetric,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    condense_sample,
    write_eval_log,
)
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall, ToolCallError
from PIL import Image

from veriharness import __version__
from veriharness.agent.plan import USER_MESSAGE
from veriharness.collect.call_links import (
    TraceCall,
    callmllm_uses,
    group_trace,
    link_calls,
    message_blocks,
)
from veriharness.experiment.analysis import AnalysisSettings
from veriharness.experiment.record import RecordError
from veriharness.report.run_page import RunImages
from veriharness.report.status import experiment_record
from veriharness.runfolder.mllm_trace import read_trace_objects
from veriharness.runfolder.transcript import read_transcript

__all__ = ["ExportError", "export_inspect", "log_name"]

_METRIC, _AUDIT = "metric_", "audit_"
# The agent model of a run neither experiment.json nor its transcript names (e.g. never started).
_UNNAMED = "agent-model-not-recorded"
# Runs-table columns a sample carries as metadata (besides the metrics, which are its scores).
_FACTS = (
    "identity_hash",
    "status",
    "reason",
    "offline",
    "answer_source",
    "cost_usd",
    "agent_cost_usd",
    "mllm_cost_usd",
    "cost_estimated",
    "charged_usd",
    "claude_cost_usd",
    "turns",
    "wall_seconds",
    "session_id",
    "attempts",
    "read_errors",
    "agent_tool_calls",
    "mllm_calls",
)


class ExportError(ValueError):
    """The experiment cannot be exported; the message names what is missing or wrong."""


def log_name(experiment: str, condition: str) -> str:
    """The log file of one condition; `:` (as in `external:reference`) would break Windows
    readers of the folder, so it becomes `-`."""
    return f"{experiment}_{condition.replace(':', '-')}.eval"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _plain(value: Any) -> Any:
    """A table cell as JSON-able Python: None for every kind of missing value, a list for a list
    column's cell (parquet gives it back as an array)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.ndarray):
        return [_plain(item) for item in value.tolist()]
    return value.item() if hasattr(value, "item") else value


# --- messages from the transcript ----------------------------------------------------------------


def _data_uri(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _result_content(content: Any) -> str | list[Content]:
    """A tool result's content: its text, or its text and image blocks in order."""
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts: list[Content] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        source = block.get("source")
        if block.get("type") == "image" and isinstance(source, dict) and source.get("data"):
            media = str(source.get("media_type", "image/png"))
            parts.append(ContentImage(image=f"data:{media};base64,{source['data']}"))
        else:
            parts.append(ContentText(text=str(block.get("text", f"[{block.get('type')}]"))))
    return parts


def _tool_call(block: dict[str, Any]) -> ToolCall:
    tool_input = block.get("input")
    arguments = tool_input if isinstance(tool_input, dict) else {"input": tool_input}
    return ToolCall(id=str(block.get("id")), function=str(block.get("name")), arguments=arguments)


@dataclass
class _Assistant:
    message_id: Any
    content: list[Content]
    calls: list[ToolCall]
    model: str | None

    def message(self) -> ChatMessageAssistant:
        return ChatMessageAssistant(
            content=self.content, tool_calls=self.calls or None, model=self.model, source="generate"
        )


def _assistant_part(event: dict[str, Any]) -> _Assistant:
    message = _mapping(event.get("message"))
    part = _Assistant(message.get("id"), [], [], message.get("model"))
    for block in message_blocks(event):
        kind = block.get("type")
        if kind == "text":
            part.content.append(ContentText(text=str(block.get("text"))))
        elif kind == "thinking":
            part.content.append(ContentReasoning(reasoning=str(block.get("thinking"))))
        elif kind == "tool_use":
            part.calls.append(_tool_call(block))
    return part


def _user_messages(event: dict[str, Any], functions: dict[str, str]) -> list[ChatMessage]:
    message = _mapping(event.get("message"))
    if isinstance(message.get("content"), str):
        return [ChatMessageUser(content=message["content"])]
    out: list[ChatMessage] = []
    for block in message_blocks(event):
        if block.get("type") == "tool_result":
            use_id = str(block.get("tool_use_id"))
            content = _result_content(block.get("content"))
            error = None
            if block.get("is_error"):
                text = content if isinstance(content, str) else ""
                error = ToolCallError(type="unknown", message=text or "the tool reported an error")
            out.append(
                ChatMessageTool(
                    content=content,
                    tool_call_id=use_id,
                    function=functions.get(use_id),
                    error=error,
                )
            )
        elif block.get("type") == "text":
            out.append(ChatMessageUser(content=str(block.get("text"))))
    return out


def transcript_messages(events: list[dict[str, Any]]) -> list[ChatMessage]:
    """The conversation a transcript records, after the session's system and user turns."""
    out: list[ChatMessage] = []
    functions: dict[str, str] = {}
    pending: _Assistant | None = None
    for event in events:
        kind = event.get("type")
        if kind == "assistant":
            part = _assistant_part(event)
            functions.update({call.id: call.function for call in part.calls})
            if pending is not None and part.message_id is not None:
                if part.message_id == pending.message_id:
                    pending.content += part.content
                    pending.calls += part.calls
                    continue
            if pending is not None:
                out.append(pending.message())
            pending = part
        elif kind == "user":
            if pending is not None:
                out.append(pending.message())
                pending = None
            out += _user_messages(event, functions)
    if pending is not None:
        out.append(pending.message())
    return out


# --- CallMLLM calls as model events --------------------------------------------------------------


def _image_content(item: dict[str, Any], images: RunImages) -> Content:
    """The image a call sent: the bytes the mllm server kept as attached, else the file found by
    its digest, cropped to the region it asked for (the mllm server sends a region as PNG), or a
    note naming what is not available."""
    digest, label = str(item.get("file_sha256")), str(item.get("label"))
    kept = images.attached(item.get("attached_sha256"))
    if kept is not None:
        media = str(item.get("media_type") or "image/png")
        return ContentImage(image=_data_uri(media, kept.read_bytes()))
    source = images.find(digest)
    if source is None:
        return ContentText(
            text=f"[image {label}: {item.get('path')} ({digest}) is not available; the workspace "
            "is gone and no kept file has this digest]"
        )
    region = item.get("region")
    if not isinstance(region, dict):
        media = str(item.get("media_type") or "image/png")
        return ContentImage(image=_data_uri(media, source.read_bytes()))
    box = (
        int(region["x"]),
        int(region["y"]),
        int(region["x"]) + int(region["width"]),
        int(region["y"]) + int(region["height"]),
    )
    out = io.BytesIO()
    with Image.open(source) as image:
        image.crop(box).save(out, format="PNG")
    return ContentImage(image=_data_uri("image/png", out.getvalue()))


def _call_input(request: dict[str, Any], images: RunImages) -> list[Content]:
    parts: list[Content] = [ContentText(text=str(request.get("instruction")))]
    for item in request.get("inputs") or []:
        if not isinstance(item, dict):
            continue
        parts.append(ContentText(text=f"[{item.get('kind')} input {item.get('label')}]"))
        if item.get("kind") == "image":
            parts.append(_image_content(item, images))
        else:
            parts.append(ContentText(text=str(item.get("content"))))
    return parts


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _call_event(
    call: TraceCall, tool_use_id: str | None, how: str, images: RunImages
) -> ModelEvent:
    request, end = call.request, call.end or {}
    usage = _mapping(end.get("usage"))
    model = str(end.get("provider_model") or request.get("resolved_model_profile") or "mllm")
    tokens_in, tokens_out = (
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
    )
    response = str(end.get("raw_response") or "")
    output = ModelOutput(
        model=model,
        choices=[
            ChatCompletionChoice(
                message=ChatMessageAssistant(content=response, model=model, source="generate"),
                stop_reason="stop",
            )
        ],
        usage=ModelUsage(
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            total_tokens=tokens_in + tokens_out,
            total_cost=end.get("cost_usd"),
        ),
        time=(float(end["latency_ms"]) / 1000 if end.get("latency_ms") is not None else None),
    )
    error = None
    if end.get("event") != "mllm_call_completed":
        what = " ".join(str(end.get(k) or "") for k in ("error_type", "error")).strip()
        error = f"{end.get('event', 'no end event')}: {what}"
    fields: dict[str, Any] = {}
    if (started := _time(request.get("time"))) is not None:
        fields["timestamp"] = started
    return ModelEvent(
        model=model,
        role="CallMLLM",
        input=[ChatMessageUser(content=_call_input(request, images))],
        tools=[],
        tool_choice="none",
        config=GenerateConfig(),
        output=output,
        error=error,
        metadata={
            "call_id": call.call_id,
            "tool_use_id": tool_use_id,
            "tool_use_link": how,
            "declared_capability_tags": request.get("declared_capability_tags")
            or request.get("capability_tags"),
            "output": request.get("output"),
        },
        **fields,
    )


# --- one run, one sample -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    row: dict[str, Any]
    run_dir: Path
    reference: Path


def _usage(row: dict[str, Any], agent_model: str, calls: list[ModelEvent]) -> dict[str, ModelUsage]:
    usage: dict[str, ModelUsage] = {}
    counts = [row.get(c) for c in ("input_tokens", "output_tokens")]
    if all(c is not None for c in counts):
        read, write = row.get("cache_read_tokens"), row.get("cache_write_tokens")
        usage[agent_model] = ModelUsage(
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            total_tokens=sum(int(v or 0) for v in (*counts, read, write)),
            input_tokens_cache_read=read,
            input_tokens_cache_write=write,
            total_cost=row.get("agent_cost_usd"),
        )
    for event in calls:
        if event.error is not None:  # a failed call reported no usage
            continue
        used = event.output.usage or ModelUsage()
        total = usage.get(event.model, ModelUsage(total_cost=0.0))
        usage[event.model] = total + ModelUsage(
            input_tokens=used.input_tokens,
            output_tokens=used.output_tokens,
            total_tokens=used.total_tokens,
            total_cost=used.total_cost or 0.0,
        )
    return usage


def _sample(run: _Run, recorded_model: str | None) -> EvalSample:
    row, errors = run.row, list[str]()
    events = read_transcript(run.run_dir, errors) or [] if run.run_dir.is_dir() else []
    agent_model = _session_model(events) or recorded_model or _UNNAMED
    trace = read_trace_objects(run.run_dir, errors) or [] if events else []
    calls = group_trace(trace, errors)
    links = link_calls(callmllm_uses(events), calls, errors)
    images = RunImages(run.reference, run.run_dir / "answer", run.run_dir, errors)
    call_events = [
        _call_event(call, link.tool_use_id, link.how, images)
        for call, link in zip(calls, links, strict=True)
    ]
    prompt = run.run_dir / "system_prompt.md"
    opening: list[ChatMessage] = []
    if prompt.is_file():
        opening.append(ChatMessageSystem(content=prompt.read_text(encoding="utf-8")))
    opening.append(ChatMessageUser(content=USER_MESSAGE, source="input"))
    messages = opening + transcript_messages(events)
    result: dict[str, Any] = next((e for e in reversed(events) if e.get("type") == "result"), {})
    status, reason = str(row["status"]), row.get("reason") or ""
    scores = {
        name.removeprefix(_METRIC): Score(value=float(value))
        for name, value in row.items()
        if name.startswith(_METRIC) and value is not None
    }
    metadata = {name: row.get(name) for name in _FACTS if name in row}
    metadata["condition"], metadata["replicate"] = row["condition"], int(row["replicate"])
    metadata["flags"] = {
        name.removeprefix(_AUDIT): value for name, value in row.items() if name.startswith(_AUDIT)
    }
    # What this export could not read or link (collect's own findings are in read_errors).
    metadata["export_read_errors"] = errors
    metadata["unscored"] = sorted(
        name.removeprefix(_METRIC)
        for name, value in row.items()
        if name.startswith(_METRIC) and value is None
    )
    sample = EvalSample(
        id=str(row["task"]),
        epoch=int(row["replicate"]),
        input=[*opening],
        target=f"{row['task']}/reference.png",
        messages=messages,
        output=ModelOutput.from_content(agent_model, str(result.get("result") or "")),
        scores=scores or None,
        metadata=metadata,
        model_usage=_usage(row, agent_model, call_events),
        total_time=row.get("wall_seconds"),
        events=list(call_events),
        error=(
            None
            if status == "ok"
            else EvalError(
                message=f"{status}: {reason}".rstrip(": "), traceback="", traceback_ansi=""
            )
        ),
    )
    return condense_sample(sample)


# --- one condition, one log ----------------------------------------------------------------------


def _results(samples: list[EvalSample], metrics: list[str]) -> EvalResults:
    scores = []
    for metric in metrics:
        values = [s.scores[metric].as_float() for s in samples if s.scores and metric in s.scores]
        if not values:
            continue
        mean = sum(values) / len(values)
        spread = (
            math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
            if len(values) > 1
            else 0.0
        )
        scores.append(
            EvalScore(
                name=metric,
                scorer=metric,
                scored_samples=len(values),
                unscored_samples=len(samples) - len(values),
                metrics={
                    "mean": EvalMetric(name="mean", value=mean),
                    "stderr": EvalMetric(name="stderr", value=spread),
                },
            )
        )
    completed = sum(1 for s in samples if s.error is None)
    return EvalResults(total_samples=len(samples), completed_samples=completed, scores=scores)


def _total_usage(samples: list[EvalSample]) -> dict[str, ModelUsage]:
    total: dict[str, ModelUsage] = {}
    for sample in samples:
        for model, usage in sample.model_usage.items():
            total[model] = total[model] + usage if model in total else usage
    return total


def _headline_first(names: set[str], primary: list[str]) -> list[str]:
    """Score names, the declared primary outcome(s) first in their declared order, then the rest
    alphabetically."""
    first = [p for p in primary if p in names]
    return first + sorted(names - set(first))


def _condition_log(
    experiment: str,
    condition: str,
    runs: list[_Run],
    recorded_model: str | None,
    created: str,
    primary: list[str],
) -> EvalLog:
    samples = [_sample(run, recorded_model) for run in runs]
    for sample in samples:
        if sample.scores:
            order = _headline_first(set(sample.scores), primary)
            sample.scores = {name: sample.scores[name] for name in order}
    named = [m for s in samples for m in s.model_usage if m == s.output.model]
    agent_model = recorded_model or max(set(named), key=named.count, default=_UNNAMED)
    metrics = _headline_first({m for s in samples for m in (s.scores or {})}, primary)
    tasks = sorted({str(s.id) for s in samples})
    replicates = max((int(s.epoch) for s in samples), default=1)
    digest = hashlib.sha256(f"{experiment}/{condition}".encode()).hexdigest()[:22]
    offline = {run.row.get("offline") for run in runs} - {None}
    spec = EvalSpec(
        eval_id=digest,
        run_id=hashlib.sha256(experiment.encode()).hexdigest()[:22],
        created=created,
        task=f"{experiment}/{condition}",
        task_id=digest,
        task_display_name=condition,
        dataset=EvalDataset(name=experiment, samples=len(tasks), sample_ids=list(tasks)),
        model=agent_model,
        config=EvalConfig(epochs=replicates),
        packages={"veriharness": __version__},
        metadata={
            "experiment": experiment,
            "condition": condition,
            "offline": sorted(offline),
            "primary_outcome": primary,
        },
    )
    return EvalLog(
        status="success",
        eval=spec,
        results=_results(samples, metrics),
        stats=EvalStats(
            started_at=created, completed_at=created, model_usage=_total_usage(samples)
        ),
        samples=samples,
    )


def _primary_scores(record: dict[str, Any]) -> list[str]:
    """The declared primary outcome(s) as score names (`analysis.primary`; the default for a
    record without one, as `compare` reads it)."""
    try:
        settings = AnalysisSettings.model_validate(record.get("config", {}).get("analysis") or {})
    except ValueError:
        settings = AnalysisSettings()
    return [name.removeprefix(_METRIC) for name in settings.primary]


def _recorded_model(record: dict[str, Any]) -> str | None:
    """The agent model experiment.json names (None without a record)."""
    model = record.get("config", {}).get("agent", {}).get("model")
    return model if isinstance(model, str) and model else None


def _session_model(events: list[dict[str, Any]]) -> str | None:
    """The model the session's own init event names."""
    for event in events:
        if event.get("type") == "system" and isinstance(event.get("model"), str):
            return str(event["model"])
    return None


def export_inspect(exp_dir: Path, out: Path, tasks_dir: Path) -> list[Path]:
    """Write one Inspect eval log per condition of the runs table under `out`; the paths."""
    table = exp_dir / "tables" / "runs.parquet"
    if not table.is_file():
        raise ExportError(f"{table} not found; run `veriharness collect` first")
    runs = pd.read_parquet(table)
    if "superseded" in runs:
        runs = runs[~runs["superseded"].fillna(False).astype(bool)]
    try:
        record = experiment_record(exp_dir)
    except RecordError:
        record = {}
    agent_model = _recorded_model(record)
    created = datetime.now(UTC).isoformat(timespec="seconds")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    rows = [{k: _plain(v) for k, v in r.items()} for r in runs.to_dict("records")]
    for condition in sorted({str(r["condition"]) for r in rows}):
        mine = [
            _Run(
                r,
                exp_dir / condition / r["task"] / f"r{r['replicate']}",
                tasks_dir / r["task"] / "reference.png",
            )
            for r in rows
            if r["condition"] == condition
        ]
        log = _condition_log(
            exp_dir.name, condition, mine, agent_model, created, _primary_scores(record)
        )
        path = out / log_name(exp_dir.name, condition)
        write_eval_log(log, str(path), format="eval")
        written.append(path)
    return written
