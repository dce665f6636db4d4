"""The spending ledger and the caps it enforces.

Every priced request (an agent request through the proxy, a CallMLLM call, or, without the proxy,
a whole agent session afterwards) is appended as one JSON line to the experiment's ledger,
``results/<experiment>/spend/ledger.jsonl``, and to its run's ``spend.jsonl``. Each line carries
running totals (the experiment's, and per condition the agent's and CallMLLM's), so the newest
line alone answers "how much so far": a check before a request reads the file's tail, not the
whole file, however long the experiment has run.

Concurrency: a writer holds a POSIX record lock (``fcntl.lockf``) on the ledger while it reads
the newest line and appends the next one at the end of the file it sees (``pwrite`` at
``fstat().st_size``, then ``fsync``). Record locks work across processes on one machine and,
through the NFS lock protocol (NLM for v3, built into v4), across cluster nodes sharing the
results folder; an NFS client revalidates its cached size and data when it takes a lock and
flushes its writes before releasing it, so each writer appends after the last writer's line. No
server of ours is involved. Threads of one process share a process lock first, because POSIX
locks belong to the process (and closing any descriptor of the file would drop them).

Caps (``execution.max_usd``, ``execution.max_usd_per_run``) are checked before each request
(`SpendGate.admit`): the request is refused when the total already reached the cap. A request is
charged when its cost is known, after its reply. The worst case overshoot is therefore the cost
of the requests already admitted and not yet charged when the cap was crossed: at most one
request per concurrent requester (see docs/decisions.md and tests/spend/test_spend_ledger.py).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from veriharness._util import atomic
from veriharness.runfolder.outcome import read_status_reason
from veriharness.runfolder.spend import (
    BUDGET_STOP,
    SPEND,
    BudgetStop,
    RunEntry,
    Source,
    TokenCounts,
    Unpriced,
)
from veriharness.runfolder.superseded import (
    forget_later_stages,
    forget_summaries,
    move_to_superseded,
)

__all__ = [
    "LEDGER_NAME",
    "STOP_NAME",
    "BudgetExhausted",
    "LedgerEntry",
    "SpendSettings",
    "SpendGate",
    "ledger_path",
    "newest_entry",
    "tail_entries",
    "read_stop",
    "note_stopped",
    "stopped_runs",
    "requeue_stopped",
]

LEDGER_NAME = "spend/ledger.jsonl"
STOPPED_NAME = "spend/stopped.jsonl"
STOP_NAME = BUDGET_STOP.name  # named here for agent/session.py
_CHUNK = 16384


class BudgetExhausted(RuntimeError):
    """A cap is reached; the message says which, what was spent and how to go on."""

    def __init__(self, stop: BudgetStop) -> None:
        super().__init__(stop.message)
        self.stop = stop


class LedgerEntry(Unpriced):
    """One line of the experiment's ledger."""

    model_config = ConfigDict(extra="forbid")
    time: str
    run: str
    condition: str
    source: Source
    model: str
    request_id: str
    tokens: TokenCounts
    total_usd: float = Field(
        description="the experiment's total after this request, estimates of unpriced requests "
        "included (P-36)"
    )
    by_condition: dict[str, dict[str, float]] = Field(
        description="running totals per condition: agent (agent requests and sessions), mllm"
    )


class SpendSettings(BaseModel):
    """What a requester needs to charge and check one run (handed to the mllm server)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    experiment_dir: Path
    run_dir: Path
    condition: str
    task: str
    replicate: int
    max_usd: float | None = None
    max_usd_per_run: float | None = None

    @property
    def run(self) -> str:
        return f"{self.condition}/{self.task}/r{self.replicate}"


def ledger_path(experiment_dir: Path) -> Path:
    return Path(experiment_dir) / LEDGER_NAME


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def _process_lock(path: Path) -> threading.Lock:
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(str(path.resolve()), threading.Lock())


@contextmanager
def _locked(path: Path) -> Iterator[int]:
    """The file open read-write and locked against every other process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _process_lock(path):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # releases the lock, after the data reached the file (fsync)


def _tail_lines(fd: int, size: int, want: int = 1) -> list[bytes]:
    """Up to `want` complete lines from the end of the file, oldest first. A last line without
    its newline (a writer died mid-write, or is writing now) is not complete."""
    end, data = size, b""
    while True:
        start = max(0, end - _CHUNK)
        data = os.pread(fd, end - start, start) + data
        end = start
        complete = data[: data.rfind(b"\n") + 1]
        lines = complete.split(b"\n")[:-1]
        if end > 0 and lines:
            lines = lines[1:]  # may begin mid-line
        lines = [line for line in lines if line.strip()]
        if len(lines) >= want or end == 0:
            return lines[-want:]


_Line = TypeVar("_Line", bound=BaseModel)


def _newest_valid(fd: int, size: int, model: type[_Line]) -> _Line | None:
    want = 4
    while True:
        lines = _tail_lines(fd, size, want)
        for line in reversed(lines):
            try:
                return model.model_validate_json(line)
            except ValidationError:
                continue  # a torn line left by a crashed writer; its charge is lost here
        if len(lines) < want:
            return None
        want *= 4


def newest_entry(path: Path) -> LedgerEntry | None:
    """The newest complete line of an experiment ledger, read without a lock (status)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        entry = _newest_valid(fd, os.fstat(fd).st_size, LedgerEntry)
    finally:
        os.close(fd)
    return entry


def tail_entries(path: Path, count: int) -> list[LedgerEntry]:
    """Up to `count` of the newest complete, valid ledger lines, oldest first."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    try:
        lines = _tail_lines(fd, os.fstat(fd).st_size, count)
    finally:
        os.close(fd)
    entries = []
    for line in lines:
        try:
            entries.append(LedgerEntry.model_validate_json(line))
        except ValidationError:
            continue
    return entries


def _append(fd: int, size: int, line: str) -> None:
    data = line.encode("utf-8") + b"\n"
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data  # isolate a torn line left by a writer that died mid-write
    os.pwrite(fd, data, size)
    os.fsync(fd)


def read_stop(run_dir: Path) -> BudgetStop | None:
    return BUDGET_STOP.read_quietly(run_dir)


class SpendGate:
    """Checks the caps before a request and charges its cost after, for one run."""

    def __init__(self, settings: SpendSettings) -> None:
        self.settings = settings
        self.ledger = ledger_path(settings.experiment_dir)
        self.run_ledger = SPEND.path(settings.run_dir)

    def _totals(self) -> tuple[float, float]:
        experiment = run = 0.0
        if self.settings.max_usd is not None:
            with _locked(self.ledger) as fd:
                entry = _newest_valid(fd, os.fstat(fd).st_size, LedgerEntry)
            experiment = entry.total_usd if entry is not None else 0.0
        if self.settings.max_usd_per_run is not None:
            with _locked(self.run_ledger) as fd:
                newest = _newest_valid(fd, os.fstat(fd).st_size, RunEntry)
            run = newest.total_usd if newest is not None else 0.0
        return experiment, run

    def admit(self) -> None:
        """Raise `BudgetExhausted` (and leave ``budget_stop.json`` in the run folder, which ends
        the session) when the experiment or the run has reached its cap."""
        s = self.settings
        experiment, run = self._totals()
        stop = None
        if s.max_usd is not None and experiment >= s.max_usd:
            stop = BudgetStop(
                cap="max_usd",
                limit_usd=s.max_usd,
                spent_usd=experiment,
                time=_now(),
                message=(
                    f"spending cap reached: the experiment has spent ${experiment:.4f} of its "
                    f"execution.max_usd ${s.max_usd:.4f}; no request was sent. Raise "
                    "execution.max_usd and run the workflow again to go on"
                ),
            )
        elif s.max_usd_per_run is not None and run >= s.max_usd_per_run:
            stop = BudgetStop(
                cap="max_usd_per_run",
                limit_usd=s.max_usd_per_run,
                spent_usd=run,
                time=_now(),
                message=(
                    f"spending cap reached: run {s.run} has spent ${run:.4f} of its "
                    f"execution.max_usd_per_run ${s.max_usd_per_run:.4f}; no request was sent"
                ),
            )
        if stop is not None:
            path = Path(s.run_dir) / STOP_NAME
            if not path.exists():
                atomic.write_text(path, stop.model_dump_json(indent=2) + "\n")
            raise BudgetExhausted(stop)

    def charge(
        self,
        source: Source,
        model: str,
        request_id: str,
        tokens: TokenCounts,
        cost: float,
        unpriced_reason: str | None = None,
    ) -> LedgerEntry:
        """Append the request's cost to the experiment's ledger and the run's spend.jsonl.

        With `unpriced_reason` the reply reported no usage: `tokens` and `cost` are then the
        conservative estimate (`spend/prices.py: estimate_tokens`), counted in the totals and so
        by the caps, and the lines say so: `cost_usd` null, the reason, the estimate (P-36)."""
        s = self.settings
        if unpriced_reason is None:
            priced = Unpriced(cost_usd=cost)
        else:
            priced = Unpriced(
                cost_usd=None,
                cost_unpriced_reason=unpriced_reason,
                estimated_tokens=tokens,
                estimated_usd=cost,
            )
            tokens = TokenCounts()
        with _locked(self.ledger) as fd:
            size = os.fstat(fd).st_size
            last = _newest_valid(fd, size, LedgerEntry)
            totals = {c: dict(v) for c, v in last.by_condition.items()} if last else {}
            kind = "mllm" if source == "mllm" else "agent"
            cell = totals.setdefault(s.condition, {"agent": 0.0, "mllm": 0.0})
            cell[kind] = cell.get(kind, 0.0) + cost
            entry = LedgerEntry(
                time=_now(),
                run=s.run,
                condition=s.condition,
                source=source,
                model=model,
                request_id=request_id,
                tokens=tokens,
                total_usd=(last.total_usd if last is not None else 0.0) + cost,
                by_condition=totals,
                **priced.model_dump(),
            )
            _append(fd, size, entry.model_dump_json())
        with _locked(self.run_ledger) as fd:
            size = os.fstat(fd).st_size
            newest = _newest_valid(fd, size, RunEntry)
            run_entry = RunEntry(
                time=entry.time,
                source=source,
                model=model,
                request_id=request_id,
                tokens=tokens,
                total_usd=(newest.total_usd if newest is not None else 0.0) + cost,
                **priced.model_dump(),
            )
            _append(fd, size, run_entry.model_dump_json())
        return entry


class StoppedRun(BaseModel):
    """One line of ``spend/stopped.jsonl``: a run the cap kept from starting or ended early."""

    time: str
    run: str
    status: str


def note_stopped(settings: SpendSettings, status: str) -> None:
    """List the run among those a cap stopped, so the next start of the workflow redoes it."""
    path = Path(settings.experiment_dir) / STOPPED_NAME
    line = StoppedRun(time=_now(), run=settings.run, status=status).model_dump_json()
    with _locked(path) as fd:
        _append(fd, os.fstat(fd).st_size, line)


def stopped_runs(experiment_dir: Path) -> list[StoppedRun]:
    path = Path(experiment_dir) / STOPPED_NAME
    if not path.is_file():
        return []
    return _parse_stopped(path.read_bytes())


def _parse_stopped(data: bytes) -> list[StoppedRun]:
    runs = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            runs.append(StoppedRun.model_validate_json(line))
        except ValidationError:
            continue
    return runs


# The empty files a run that never started holds in place of a session's outputs.
_PLACEHOLDERS = ("outcome.json", "transcript.jsonl", "mllm_trace.jsonl", "answer")


def _clear_unpaid_outputs(experiment_dir: Path, run_dir: Path) -> None:
    for name in _PLACEHOLDERS:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    forget_later_stages(experiment_dir, run_dir)


def requeue_stopped(experiment_dir: Path) -> list[str]:
    """Make the workflow redo the runs a cap (or the monitor's stop, which only keeps sessions
    from starting) stopped: a run that never started loses what the later stages wrote (nothing
    was spent, nothing is lost); a session the cap ended is moved whole to superseded/ (it was
    paid for). Returns the runs requeued. Called when the workflow starts, so raising the cap
    (or setting analysis.monitor.stop false) and running again continues with exactly these
    runs; a stop still in force stops them again."""
    experiment_dir = Path(experiment_dir)
    path = experiment_dir / STOPPED_NAME
    if not path.is_file():
        return []
    done = []
    with _locked(path) as fd:
        # Read through the locked descriptor: closing another one would drop the lock.
        listed = _parse_stopped(os.pread(fd, os.fstat(fd).st_size, 0))
        for run in dict.fromkeys(s.run for s in listed):
            run_dir = experiment_dir / run
            stated = read_status_reason(run_dir)
            if stated is None or stated[1] not in ("budget", "stopped_early"):
                continue  # already redone, or moved, or not stopped by a cap or the monitor
            if stated[0] == "not_started":
                _clear_unpaid_outputs(experiment_dir, run_dir)
            else:
                move_to_superseded(experiment_dir, run_dir)
                forget_summaries(experiment_dir, run_dir)
            done.append(run)
        os.ftruncate(fd, 0)
    return done
