"""``veriharness status``: where an experiment stands, read from its folder while it runs.

Per condition: runs done (the session ended as ok, max_turns or timeout), running (a transcript
and no outcome yet), failed, stopped by a spending cap (budget_exhausted, or not started for
the budget) or by the monitor's stop (not started, stopped_early), and to go; the spend so far
from the ledger, the agent's and CallMLLM's apart, against the cap; the spend rate over the
newest ledger lines; an estimate of the time and money left, from the pace and the mean cost of
the runs finished so far; and, with `analysis.monitor`, the running answer: tasks complete and
each primary outcome's confidence sequence with what it says.

It reads only ``experiment.json`` (the matrix and the caps), the first bytes of each run's
``outcome.json``, the tail of the ledger and the monitor's ``monitor/state.json``: no lock, no
table, no Snakemake. So it works on a login node while jobs run elsewhere, and stays fast at
tens of thousands of runs.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from veriharness.collect.monitor_state import MonitorError, MonitorState, read_state
from veriharness.experiment.record import EXPERIMENT_RECORD, RecordError, read_record
from veriharness.pace.provider_pace import PaceSummary, read_pace
from veriharness.runfolder.outcome import read_status_reason
from veriharness.spend.ledger import ledger_path, newest_entry, tail_entries

__all__ = [
    "ConditionStatus",
    "ExperimentStatus",
    "read_status",
    "format_status",
    "experiment_record",
    "money",
    "newest_experiment",
]

_HEAD_BYTES = 512
_STATUS = re.compile(rb'"status":\s*"([a-z_]+)"')
_REASON = re.compile(rb'"reason":\s*(?:"([a-z_]+)"|null)')
_DONE = frozenset({"ok", "max_turns", "timeout", "resource_limit"})
_STOPPED = frozenset({"budget", "stopped_early"})  # a cap, or the monitor's stop
_RATE_LINES = 200
COLUMNS = ("runs", "done", "running", "failed", "stopped", "to_go")


@dataclass
class ConditionStatus:
    runs: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    agent_usd: float = 0.0
    mllm_usd: float = 0.0


@dataclass
class ExperimentStatus:
    experiment_dir: Path
    conditions: dict[str, ConditionStatus]
    max_usd: float | None
    max_usd_per_run: float | None
    spent_usd: float
    rate_usd_per_hour: float | None
    finished_per_hour: float | None
    read_at: float
    pace: list[PaceSummary] = field(default_factory=list)
    waiting_sessions: int = 0
    # analysis.monitor as recorded (None: not declared), its newest state, or why it is unread.
    monitor: dict[str, Any] | None = None
    monitor_state: MonitorState | None = None
    monitor_error: str | None = None

    def total(self, column: str) -> int:
        return sum(self._count(c, column) for c in self.conditions.values())

    @staticmethod
    def _count(status: ConditionStatus, column: str) -> int:
        if column == "runs":
            return status.runs
        return status.counts[column]

    def remaining(self) -> int:
        return self.total("to_go") + self.total("running") + self.total("stopped")

    def cost_to_finish(self) -> float | None:
        finished = self.total("done") + self.total("failed")
        if not finished:
            return None
        return self.spent_usd / finished * self.remaining()

    def hours_to_finish(self) -> float | None:
        if not self.finished_per_hour:
            return None
        return self.remaining() / self.finished_per_hour


def _run_state(run_dir: str) -> tuple[str, float | None]:
    """The run's column and, for a finished run, when its outcome was written."""
    try:
        fd = os.open(os.path.join(run_dir, "outcome.json"), os.O_RDONLY)
    except FileNotFoundError:
        if os.path.exists(os.path.join(run_dir, "transcript.jsonl")):
            return "running", None
        return "to_go", None
    try:
        head, written = os.read(fd, _HEAD_BYTES), os.fstat(fd).st_mtime
    finally:
        os.close(fd)
    status, reason = _STATUS.search(head), _REASON.search(head)
    if status is None or reason is None:  # not the layout run-agent writes: read it all
        stated = read_status_reason(Path(run_dir))
        if stated is None:
            return "failed", written
        value, why = stated
    else:
        value = status.group(1).decode()
        why = reason.group(1).decode() if reason and reason.group(1) else None
    if value in _DONE:
        return "done", written
    if value == "not_started" and why == "stopped_early":
        return "stopped_early", None  # counted as stopped, and apart
    if value == "budget_exhausted" or (value == "not_started" and why in _STOPPED):
        return "stopped", None
    if value == "not_started":
        return "to_go", None
    return "failed", written


def experiment_record(experiment_dir: Path) -> dict[str, Any]:
    """The experiment's `experiment.json`; `RecordError` (a ValueError) names the file and what
    is wrong with it."""
    return read_record(Path(experiment_dir) / "experiment.json", EXPERIMENT_RECORD)


def _record(experiment_dir: Path) -> dict[str, Any]:
    try:
        record = experiment_record(experiment_dir)
    except RecordError as error:
        raise ValueError(f"cannot read the experiment record: {error}") from None
    if not isinstance(record.get("matrix"), dict):
        raise ValueError(
            f"{experiment_dir / 'experiment.json'}: not an experiment record with a matrix"
        )
    return record


def _pace(stamps: list[float], now: float) -> float | None:
    """Finished runs per hour over the span from the first finish to now."""
    if len(stamps) < 2:
        return None
    span = now - min(stamps)
    return len(stamps) / span * 3600 if span > 0 else None


def _spend_rate(experiment_dir: Path) -> float | None:
    entries = tail_entries(ledger_path(experiment_dir), _RATE_LINES)
    if len(entries) < 2:
        return None
    first, last = entries[0], entries[-1]
    hours = (
        datetime.fromisoformat(last.time) - datetime.fromisoformat(first.time)
    ).total_seconds() / 3600
    spent = last.total_usd - first.total_usd + first.charged_usd
    return spent / hours if hours > 0 else None


def read_status(experiment_dir: Path) -> ExperimentStatus:
    experiment_dir = Path(experiment_dir)
    record = _record(experiment_dir)
    matrix = record["matrix"]
    replicates = int(matrix["replicates"])
    execution = record.get("config", {}).get("execution", {})
    conditions: dict[str, ConditionStatus] = {}
    stamps: list[float] = []
    for condition in matrix["conditions"]:
        status = conditions[condition] = ConditionStatus()
        base = str(experiment_dir / condition)
        for task in matrix["tasks"]:
            for replicate in range(1, replicates + 1):
                state, written = _run_state(f"{base}/{task}/r{replicate}")
                status.runs += 1
                if state == "stopped_early":
                    status.counts["stopped_early"] += 1
                    state = "stopped"
                status.counts[state] += 1
                if written is not None:
                    stamps.append(written)
    newest = newest_entry(ledger_path(experiment_dir))
    if newest is not None:
        for condition, totals in newest.by_condition.items():
            status = conditions.setdefault(condition, ConditionStatus())
            status.agent_usd = totals.get("agent", 0.0)
            status.mllm_usd = totals.get("mllm", 0.0)
    now = time.time()
    pace, waiting = read_pace(experiment_dir)
    monitor = (record.get("config") or {}).get("analysis", {}).get("monitor")
    looked, problem = None, None
    if isinstance(monitor, dict):
        try:
            looked = read_state(experiment_dir)
        except MonitorError as error:
            problem = str(error)
    return ExperimentStatus(
        experiment_dir=experiment_dir,
        conditions=conditions,
        max_usd=execution.get("max_usd"),
        max_usd_per_run=execution.get("max_usd_per_run"),
        spent_usd=newest.total_usd if newest is not None else 0.0,
        rate_usd_per_hour=_spend_rate(experiment_dir),
        finished_per_hour=_pace(stamps, now),
        read_at=now,
        pace=pace,
        waiting_sessions=waiting,
        monitor=monitor if isinstance(monitor, dict) else None,
        monitor_state=looked,
        monitor_error=problem,
    )


def money(value: object) -> str:
    """USD as the status and the report show it; "–" for no value (None, NaN, a missing cell)."""
    if not isinstance(value, numbers.Real) or math.isnan(float(value)):
        return "–"
    return f"${float(value):,.4f}"


def _duration(hours: float | None) -> str:
    if hours is None:
        return "unknown (too few finished runs)"
    minutes = hours * 60
    return f"{minutes:.0f} min" if minutes < 120 else f"{hours:.1f} h"


def format_status(status: ExperimentStatus) -> str:
    stamp = datetime.fromtimestamp(status.read_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    head = ["condition", *COLUMNS, "agent_usd", "callmllm_usd"]
    rows = []
    for name, cond in status.conditions.items():
        counts = [str(ExperimentStatus._count(cond, c)) for c in COLUMNS]
        rows.append([name, *counts, f"{cond.agent_usd:.4f}", f"{cond.mllm_usd:.4f}"])
    agent = sum(c.agent_usd for c in status.conditions.values())
    mllm = sum(c.mllm_usd for c in status.conditions.values())
    totals = [str(status.total(c)) for c in COLUMNS]
    rows.append(["all", *totals, f"{agent:.4f}", f"{mllm:.4f}"])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [f"{status.experiment_dir}  ({stamp})", ""]
    for row in [head, *rows]:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
    cap = status.max_usd
    share = f" ({status.spent_usd / cap:.0%})" if cap else ""
    lines += [
        "",
        f"spend      {money(status.spent_usd)} of max_usd {money(cap)}{share}; "
        f"max_usd_per_run {money(status.max_usd_per_run)}",
        f"rate       {money(status.rate_usd_per_hour)}/h (newest ledger lines); "
        + (
            f"{status.finished_per_hour:.1f} runs finished/h"
            if status.finished_per_hour
            else "pace unknown"
        ),
        f"to finish  {status.remaining()} runs, about {money(status.cost_to_finish())} "
        f"and {_duration(status.hours_to_finish())}",
    ]
    lines += _pace_lines(status)
    lines += _monitor_lines(status)
    if cap is not None and status.spent_usd >= cap:
        lines.append("the spending cap is reached: raise execution.max_usd and run again")
    return "\n".join(lines) + "\n"


def _monitor_lines(status: ExperimentStatus) -> list[str]:
    """The running answer (analysis.monitor): tasks complete, each primary outcome's confidence
    sequence and what it says, and whether the stop is in force."""
    monitor = status.monitor
    if monitor is None:
        return []
    alpha, margin = monitor.get("alpha"), monitor.get("margin")
    declared = (
        f"{monitor.get('method', 'betting')}, "
        + ("alpha of analysis.alpha" if alpha is None else f"alpha {alpha:g}")
        + (", no margin" if margin is None else f", margin {margin:g}")
        + f", stop {str(bool(monitor.get('stop'))).lower()}"
    )
    state = status.monitor_state
    if status.monitor_error is not None:
        return [f"monitor    {declared}: {status.monitor_error}"]
    if state is None:
        return [f"monitor    {declared}: no task complete yet: not yet known"]
    order = "start order" if state.order == "start_order" else "the order tasks completed in"
    lines = [
        f"monitor    {declared}: {state.tasks_looked} of {state.tasks_total} tasks complete, "
        f"{len(state.sequence)} in the sequence ({order}; newest look {state.time})",
        *(f"           {line}" for line in state.lines()),
    ]
    stopped = sum(c.counts["stopped_early"] for c in status.conditions.values())
    if state.known and monitor.get("stop"):
        lines.append(
            f"stopped    the running answer is known: no new session starts "
            f"(analysis.monitor.stop: true); {stopped} run(s) not started by it; set "
            "analysis.monitor.stop: false and run the workflow again to run them"
        )
    elif stopped:
        lines.append(
            f"stopped    {stopped} run(s) were not started by the monitor's stop; the next "
            "start of the workflow runs them"
        )
    return lines


def _pace_lines(status: ExperimentStatus) -> list[str]:
    """Each provider's pace over the last minute, its 429/529 answers, and the sessions waiting
    to start for it."""
    lines = []
    for p in status.pace:
        limits = ", ".join(
            f"limit {value} {unit}/min"
            for value, unit in ((p.limit_requests, "requests"), (p.limit_tokens, "tokens"))
            if value
        )
        refused = ", ".join(f"{n} x {code}" for code, n in sorted(p.saturated.items()))
        blocked = (
            f"; held {p.blocked_for_s:.0f} s more ({p.block_reason})" if p.blocked_for_s else ""
        )
        lines.append(
            f"pace       {p.provider}: {p.requests_last_minute} requests, "
            f"{p.tokens_last_minute} tokens in the last minute"
            + (f" ({limits})" if limits else "")
            + f"; {p.answered} answered, {refused or 'no 429/529'}{blocked}"
        )
    if status.waiting_sessions:
        lines.append(
            f"waiting    {status.waiting_sessions} session(s) wait to start for the provider"
        )
    return lines


def newest_experiment(results_dir: Path = Path("results")) -> Path | None:
    """The experiment folder under `results_dir` whose `experiment.json` was written last."""
    records = sorted(results_dir.glob("*/experiment.json"), key=lambda p: p.stat().st_mtime)
    return records[-1].parent if records else None
