"""The answer over a session (snapshots/ and trajectory.json) and what each CallMLLM call was
followed by: the rows of the `trajectory` and `call_effects` tables and the runs columns made
from them.

Where a call stands among the snapshots. A snapshot is taken as a model request arrives, and
records how many tool uses the conversation held then (`tool_uses`): every one of them had run.
A call is the tool use at `tool_use_seq` (0-based) of the transcript. The answer at the call is
therefore the latest snapshot whose `tool_uses` is at most `tool_use_seq` (taken before the
agent asked for the call), and the next snapshot after it is the first whose `tool_uses` passes
`tool_use_seq` (the answer changed after the call's result was back). Snapshots are kept only
when the answer changed, so that first later one is the next change. This order comes from the
conversation itself, not from clocks, so it holds whatever the timing. A snapshot without a
conversation count (a side request of Claude Code's, or the capture at the session's end) is
placed after every tool use.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from veriharness.collect.columns import CallEffectFields, CallFields, SnapshotFields, ToolUseFields
from veriharness.runfolder.snapshots import (
    SNAPSHOT_INDEX,
    SnapshotEntry,
    SnapshotScore,
    read_index,
    read_trajectory,
)

__all__ = ["Trajectory", "trajectory_of_run"]

Row = dict[str, Any]


class Trajectory(NamedTuple):
    """One run's trajectory rows, call-effect rows, and its runs columns and families."""

    snapshots: list[Row]
    call_effects: list[Row]
    run_columns: dict[str, object]
    families: dict[str, float | None]


def _scores(run_dir: Path, errors: list[str]) -> dict[int, SnapshotScore] | None:
    record = read_trajectory(run_dir, errors)
    return None if record is None else {s.n: s for s in record.snapshots}


def _change(now: float | None, before: float | None) -> float | None:
    return None if now is None or before is None else now - before


def _snapshot_row(
    entry: SnapshotEntry,
    score: SnapshotScore | None,
    previous: dict[str, float | None] | None,
    final: bool,
) -> Row:
    row: SnapshotFields = {
        "snapshot": entry.n or 0,
        "at": entry.at,
        "request_seq": entry.request_seq,
        "turn": entry.turn,
        "tool_uses": entry.tool_uses,
        "tool_uses_since": entry.tool_uses_since,
        "seconds": entry.seconds,
        "time": entry.time,
        "answer_sha256": entry.answer_sha256,
        "answer_digest": entry.answer_digest,
        "bytes": entry.bytes,
        "final": final,
        "score_status": None if score is None else score.status,
        "scored_as": None if score is None else score.scored_as,
        "reused_final": None if score is None else score.reused_final,
    }
    out: Row = dict(row)
    metrics = {} if score is None else score.metrics
    for name, value in metrics.items():
        out[f"metric_{name}"] = value
        out[f"change_{name}"] = None if previous is None else _change(value, previous.get(name))
    return out


def _placed(entry: SnapshotEntry) -> float:
    """Tool uses by the snapshot's request; after every tool use when unknown."""
    return float("inf") if entry.tool_uses is None else entry.tool_uses


def _effect_row(
    call: CallFields,
    seq: int | None,
    entries: list[SnapshotEntry],
    metrics: dict[int, dict[str, float]],
    tools: list[ToolUseFields],
) -> Row:
    row: CallEffectFields = {
        "call_id": call.get("call_id") or "",
        "tool_use_id": call.get("tool_use_id"),
        "outcome": call.get("outcome") or "",
        "combination": call.get("combination"),
        "tool_use_seq": seq,
    }
    out: Row = dict(row)
    if seq is None:
        return out
    before = [e for e in entries if _placed(e) <= seq]
    after = [e for e in entries if _placed(e) > seq]
    at = before[-1] if before else None
    nxt = after[0] if after else None
    out["snapshot_at_call"] = None if at is None else at.n
    out["next_snapshot"] = None if nxt is None else nxt.n
    out["changed_before_end"] = nxt is not None
    out["next_tool"] = tools[seq + 1]["tool"] if seq + 1 < len(tools) else None
    if nxt is not None:
        if nxt.tool_uses is not None:
            out["tool_uses_between"] = nxt.tool_uses - seq - 1
        started = call.get("started_at")
        out["seconds_between"] = _seconds_between(started, nxt.time)
    if at is None:
        return out
    now = metrics.get(at.n or 0, {})
    later = metrics.get(nxt.n or 0, {}) if nxt is not None else now
    for name, value in now.items():
        out[f"at_call_{name}"] = value
        out[f"change_{name}"] = _change(later.get(name), value)
    return out


def _seconds_between(started: str | None, then: str) -> float | None:
    if not started:
        return None
    try:
        gap = datetime.fromisoformat(then) - datetime.fromisoformat(started)
    except ValueError:
        return None
    return round(gap.total_seconds(), 3)


def _tool_use_seq(call: CallFields, tools: list[ToolUseFields], order: list[int]) -> int | None:
    """The call's place among the run's tool uses: by its tool use's id, else (a trace without
    ids, linked by order) the k-th CallMLLM tool use."""
    wanted = call.get("tool_use_id")
    if wanted is not None:
        for tool in tools:
            if tool.get("tool_use_id") == wanted:
                return tool["seq"]
        return None
    k = call.get("seq")
    return order[k] if k is not None and 0 <= k < len(order) else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def trajectory_of_run(
    run_dir: Path,
    calls: list[CallFields] | None,
    tools: list[ToolUseFields] | None,
    errors: list[str],
) -> Trajectory | None:
    """The run's trajectory; None for a run without snapshots/ (an external answer, or a
    session recorded before snapshots were kept)."""
    if not SNAPSHOT_INDEX.exists(run_dir):
        return None
    entries, skipped = read_index(run_dir, errors)
    scores = _scores(run_dir, errors)
    metrics: dict[int, dict[str, float]] = {}
    rows: list[Row] = []
    previous: dict[str, float | None] | None = None
    for entry in entries:
        score = None if scores is None else scores.get(entry.n or 0)
        if scores is not None and score is None:
            errors.append(f"trajectory.json: snapshot {entry.n} not scored")
        rows.append(_snapshot_row(entry, score, previous, entry is entries[-1]))
        usable = score is not None and score.status == "ok"
        values = dict(score.metrics) if usable and score is not None else {}
        metrics[entry.n or 0] = {k: v for k, v in values.items() if v is not None}
        previous = values if usable else None
    tool_rows = tools or []
    order = [t["seq"] for t in tool_rows if t["tool"] == "mcp__mllm__call"]
    effects = [
        _effect_row(call, _tool_use_seq(call, tool_rows, order), entries, metrics, tool_rows)
        for call in calls or []
    ]
    with_answer = [e for e in effects if e.get("snapshot_at_call") is not None]
    run_columns: dict[str, object] = {
        "answer_snapshots": len(entries),
        "answer_revisions": max(len(entries) - 1, 0),
        "snapshots_skipped": skipped,
        "calls_followed_by_change": (
            _mean([1.0 if e["changed_before_end"] else 0.0 for e in with_answer])
            if with_answer
            else None
        ),
    }
    families: dict[str, float | None] = {}
    if entries:
        first, last = metrics.get(entries[0].n or 0, {}), metrics.get(entries[-1].n or 0, {})
        for name in sorted(set(first) | set(last)):
            families[f"gain_{name}"] = _change(last.get(name), first.get(name))
    names = sorted({k[len("change_") :] for e in with_answer for k in e if k.startswith("change_")})
    for name in names:
        changes = [v for e in with_answer if (v := e.get(f"change_{name}")) is not None]
        families[f"call_change_{name}"] = _mean(changes)
    return Trajectory(rows, effects, run_columns, families)
