"""The running answer of a study (`analysis.monitor`): a confidence sequence of the primary
outcome's mean paired task difference, looked at as tasks complete, and the stop it may call.

Design notes (docs/metrics.md, "The running answer"; docs/decisions.md P-63, P-64):

- A task is complete when every run of both conditions of each compared pair has been scored
  (the workflow's `monitor_look` job per task waits for exactly those files). Its look reads the
  task's runs through the collect stage (`collect_runs`, `runs_df`) and takes each pair's and
  each primary outcome's paired difference from `compare.task_difference_series`: the ITT rules
  of `compare` (exclusions, floors, floor flags, replicate means), not a copy of them.
- Looks are appended to `monitor/looks.jsonl` under a lock; after each, the whole state is
  recomputed from the looks (`monitor/state.json`, which `status` shows) and `monitor/stop.json`
  (spend/early_stop.py, which run-agent reads) is written when every primary outcome's answer is
  known, removed when it is not.
- The sequence's order is the start order's (experiment.json `start_order`, P-60): tasks ranked
  by the place of their last block, the sequence the longest prefix of that ranking whose tasks
  have all been looked at. That order was drawn before any session and is independent of every
  value, which is what the confidence sequence assumes. A record without a start order falls
  back to the order the looks arrived in, and says so (`order`).
- A task some of whose runs a stop kept from starting is left out (its runs were not all run);
  so is a task without a pair under `betting`, as `compare` leaves it out. Under `betting_wor`
  the population is every task of the matrix, so an unpaired task that no stop explains is a
  problem named in the state, and that outcome's answer is never called known.
- Each primary outcome gets alpha / m (m primary outcomes): the study's answer is known when
  every one is, and the chance that any of their sequences ever misses its true difference is at
  most alpha. Pairs are not corrected against each other, as in `compare`.
- A difference lies within plus or minus the measure's range (`Measure.bounds`: SSIM is an
  index in [-1, 1], the other metrics lie in [0, 1]); it is mapped onto [0, 1] for the
  sequence (`confseq`), and a value outside is a problem, never clipped.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from veriharness._util import atomic
from veriharness.collect.compare import (
    ComparisonError,
    recorded_analysis,
    task_difference_series,
)
from veriharness.collect.confseq import rejected, running_interval
from veriharness.collect.matrix import collect_runs
from veriharness.collect.monitor_state import (
    STATE_NAME,
    Answer,
    MonitorError,
    MonitorState,
    Track,
)
from veriharness.collect.tables import runs_df
from veriharness.experiment.analysis import (
    FIDELITY_MEASURES,
    AnalysisSettings,
    MonitorSettings,
    monitor_key,
)
from veriharness.experiment.record import EXPERIMENT_RECORD, RecordError, read_record
from veriharness.experiment.start_order import block_order, matrix_runs, start_order
from veriharness.experiment.workflow import comparison_pairs
from veriharness.spend.early_stop import EarlyStop, clear_early_stop, write_early_stop

__all__ = [
    "LOOKS_NAME",
    "STOPPED_EARLY",
    "Study",
    "TaskLook",
    "look_at_task",
    "monitor_state",
    "monitor_verdicts",
    "read_looks",
    "study_of",
    "task_look",
    "task_ranking",
    "track_answers",
]

LOOKS_NAME = "monitor/looks.jsonl"
LOOK_FOLDER = "monitor/looks"  # one file per task looked at: the workflow's output of the look
STOPPED_EARLY = "stopped_early"  # outcome.json reason of a run the monitor's stop kept back


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- the study as its record declares it ---------------------------------------------------------


class Study(NamedTuple):
    """What experiment.json declares that the monitor needs."""

    settings: AnalysisSettings
    monitor: MonitorSettings
    pairs: list[tuple[str, str]]
    cells: dict[str, dict[str, str]] | None
    tasks: list[str]
    ranking: list[str] | None  # the tasks in start order (by their last block); None: none


def study_of(experiment_dir: Path) -> Study:
    path = Path(experiment_dir) / "experiment.json"
    try:
        record = read_record(path, EXPERIMENT_RECORD)
        cells, settings = recorded_analysis(path)
    except (RecordError, ComparisonError) as error:
        raise MonitorError(str(error)) from None
    if settings.monitor is None:
        raise MonitorError(f"{path}: config.analysis.monitor is null: no monitor was declared")
    config = record.get("config") or {}
    matrix = record.get("matrix") or {}
    tasks = [str(t) for t in matrix.get("tasks") or []]
    seed = (record.get("start_order") or {}).get("seed")
    ranking = None
    if isinstance(seed, int) and not isinstance(seed, bool):
        replicates = range(1, int(matrix.get("replicates") or 1) + 1)
        conditions = [str(c) for c in matrix.get("conditions") or []]
        runs = matrix_runs(conditions, tasks, replicates)
        ranking = task_ranking(block_order(start_order(runs, seed)))
    return Study(settings, settings.monitor, comparison_pairs(config), cells, tasks, ranking)


def task_ranking(blocks: Sequence[tuple[str, int]]) -> list[str]:
    """The tasks in the order they complete when blocks complete in start order: each task at
    the place of its last (task, replicate) block."""
    last = {task: place for place, (task, _) in enumerate(blocks)}
    return sorted(last, key=last.__getitem__)


# --- one task's look -----------------------------------------------------------------------------


class LookValue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    baseline: str
    treatment: str
    measure: str
    value: float | None  # the task's paired ITT difference, treatment minus baseline
    why: str | None = None  # why there is none; `stopped_early` when a stop kept runs back


class TaskLook(BaseModel):
    """One line of looks.jsonl: a task's differences when its last run had been scored."""

    model_config = ConfigDict(extra="forbid")
    task: str
    time: str
    stopped: bool  # some run of a compared condition was not started by the monitor's stop
    values: list[LookValue]


def _statuses(runs: pd.DataFrame, condition: str) -> str:
    mine = runs[runs["condition"] == condition]
    counts = mine["status"].astype(str).value_counts().to_dict() if len(mine) else {}
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no run"


def task_look(runs: pd.DataFrame, task: str, study: Study) -> TaskLook:
    """The look at one task from its runs (a runs table holding at least that task's runs)."""
    mine = runs[runs["task"] == task]
    stopped_by = mine["stopped_by"] if "stopped_by" in mine else pd.Series(dtype=object)
    compared = {c for pair in study.pairs for c in pair}
    stopped = bool(
        (stopped_by.eq(STOPPED_EARLY).fillna(False) & mine["condition"].isin(compared)).any()
    )
    values = []
    for baseline, treatment in study.pairs:
        for measure in study.settings.primary:
            value: float | None = None
            why: str | None = STOPPED_EARLY if stopped else None
            try:
                found = task_difference_series(
                    mine, baseline, treatment, measure, study.settings, study.cells
                )
            except ComparisonError as error:
                why = why or str(error)
            else:
                if len(found):
                    value = float(found.iloc[0])
                elif why is None:
                    why = (
                        f"no pair: {baseline} {_statuses(mine, baseline)}; "
                        f"{treatment} {_statuses(mine, treatment)}"
                    )
            values.append(LookValue(baseline=baseline, treatment=treatment, measure=measure,
                                    value=value, why=why))  # fmt: skip
    return TaskLook(task=task, time=_now(), stopped=stopped, values=values)


# --- the answer of one sequence ------------------------------------------------------------------


class TrackAnswers(NamedTuple):
    """Per sequence (row): the answer after its last value, and after how many values it was
    first known (0: not known)."""

    answer: np.ndarray  # of Answer strings
    within_margin: np.ndarray  # bool: the sequence lies inside (-margin, margin)
    known_after: np.ndarray  # int


def difference_bounds(measure: str) -> tuple[float, float]:
    low, high = FIDELITY_MEASURES[measure].bounds
    return low - high, high - low


def _unit(diffs: np.ndarray, measure: str) -> np.ndarray:
    low, high = difference_bounds(measure)
    return (np.asarray(diffs, dtype=float) - low) / (high - low)


def track_answers(
    diffs: np.ndarray,
    measure: str,
    alpha: float,
    margin: float | None,
    population: int | None,
) -> TrackAnswers:
    """The running answer of each row of `diffs` (shape (S, T): S sequences of T paired task
    differences of `measure`, in the order they were observed): treatment higher or lower (the
    sequence excludes 0, on that side), within the margin, not yet known, or empty (both sides
    excluded: the running intersection closed). Exact: the two capitals are evaluated at 0 and
    at plus and minus the margin, not read off a grid."""
    x = _unit(diffs, measure)
    low, high = difference_bounds(measure)
    points = [0.5]
    if margin is not None:
        points += [0.5 - margin / (high - low), 0.5 + margin / (high - low)]
    up, down = rejected(x, np.asarray(points), alpha, population)
    higher, lower = up[..., 0], down[..., 0]
    inside = (up[..., 1] & down[..., 2]) if margin is not None else np.zeros_like(higher)
    known = higher | lower | inside
    count = known.shape[-1]
    first = np.where(known.any(axis=-1), known.argmax(axis=-1) + 1, 0)
    last_h, last_l, last_in = higher[..., -1], lower[..., -1], inside[..., -1]
    answer = np.select(
        [last_h & last_l, last_h, last_l, last_in],
        ["empty", "higher", "lower", "within_margin"],
        "not_yet_known",
    )
    return TrackAnswers(answer, last_in, first if count else np.zeros_like(first))


# --- the state over every look -------------------------------------------------------------------


def _latest(looks: Sequence[TaskLook]) -> tuple[dict[str, TaskLook], list[str]]:
    """Each task's newest look, and the tasks in the order their first look arrived."""
    latest: dict[str, TaskLook] = {}
    for look in looks:
        latest[look.task] = look
    return latest, list(dict.fromkeys(look.task for look in looks))


def _sequence(
    latest: dict[str, TaskLook], arrived: list[str], ranking: list[str] | None
) -> list[str]:
    if ranking is None:
        return arrived
    prefix = []
    for task in ranking:
        if task not in latest:
            break
        prefix.append(task)
    return prefix


def _track(
    study: Study,
    pair: tuple[str, str],
    measure: str,
    order: list[str],
    found_by_task: dict[str, LookValue],
) -> Track:
    monitor = study.monitor
    alpha = (monitor.alpha or study.settings.alpha) / len(study.settings.primary)
    low, high = difference_bounds(measure)
    wor = monitor.method == "betting_wor"
    diffs, left_out, problem = [], [], None
    for task in order:
        found = found_by_task.get(task)
        if found is None:
            continue
        if found.value is None:
            left_out.append(f"{task}: {found.why}")
            if wor and found.why != STOPPED_EARLY and problem is None:
                problem = (
                    f"betting_wor counts every task of the matrix, and task {task} has no "
                    f"paired difference ({found.why}); use method betting"
                )
            continue
        if not low <= found.value <= high:
            problem = problem or (
                f"task {task}'s difference {found.value:g} is outside [{low:g}, {high:g}], the "
                f"range of {measure}'s differences"
            )
            continue
        diffs.append(found.value)
    population = len(study.tasks) if wor else None
    if population is not None and len(diffs) > population:
        problem = problem or f"{len(diffs)} differences from a matrix of {population} tasks"
    track = Track(
        baseline=pair[0],
        treatment=pair[1],
        measure=measure,
        alpha=alpha,
        bounds=(low, high),
        tasks=len(diffs),
        mean=float(np.mean(diffs)) if diffs else None,
        low=None,
        high=None,
        answer="not_yet_known",
        within_margin=False,
        known_after=None,
        left_out=left_out,
        problem=problem,
    )
    if not diffs or problem:
        return track
    values = np.asarray(diffs, dtype=float)
    answers = track_answers(values[None, :], measure, alpha, monitor.margin, population)
    unit_low, unit_high = running_interval(_unit(values, measure), alpha, population)
    answer: Answer = answers.answer[0].item()
    return track.model_copy(
        update={
            "low": low + unit_low * (high - low),
            "high": low + unit_high * (high - low),
            "answer": answer,
            "within_margin": bool(answers.within_margin[0]),
            "known_after": int(answers.known_after[0]) or None,
        }
    )


def monitor_state(looks: Sequence[TaskLook], study: Study) -> MonitorState:
    """The running answer of every pair and primary outcome after `looks` (oldest first)."""
    latest, arrived = _latest(looks)
    order = _sequence(latest, arrived, study.ranking)
    tracks = []
    for pair in study.pairs:
        for measure in study.settings.primary:
            values = {
                task: v
                for task, look in latest.items()
                for v in look.values
                if (v.baseline, v.treatment, v.measure) == (*pair, measure)
            }
            tracks.append(_track(study, pair, measure, order, values))
    return MonitorState(
        time=_now(),
        key=monitor_key(study.settings, study.pairs),
        method=study.monitor.method,
        margin=study.monitor.margin,
        stop=study.monitor.stop,
        tasks_total=len(study.tasks),
        tasks_looked=len(latest),
        order="start_order" if study.ranking is not None else "arrival",
        sequence=order,
        tracks=tracks,
        known=bool(tracks) and all(t.known for t in tracks),
    )


# --- the look, with its files --------------------------------------------------------------------


@contextmanager
def _locked_looks(experiment_dir: Path) -> Iterator[int]:
    """looks.jsonl open for appending and locked against every other look (a POSIX record
    lock, as the spending ledger's: it holds across the nodes of a shared results folder)."""
    path = Path(experiment_dir) / LOOKS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _read_looks(data: bytes) -> list[TaskLook]:
    looks = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            looks.append(TaskLook.model_validate_json(line))
        except ValidationError:
            continue  # a line torn by a look that died mid-write; its task is looked at again
    return looks


def read_looks(experiment_dir: Path) -> list[TaskLook]:
    path = Path(experiment_dir) / LOOKS_NAME
    return _read_looks(path.read_bytes()) if path.is_file() else []


def _stop_message(state: MonitorState) -> str:
    answers = "; ".join(state.lines())
    return (
        f"the running answer is known ({answers}): no new session starts while "
        "analysis.monitor.stop is true; set it to false and run the workflow again to run the "
        "sessions not started"
    )


def _publish(experiment_dir: Path, state: MonitorState) -> None:
    atomic.write_text(Path(experiment_dir) / STATE_NAME, state.model_dump_json(indent=2) + "\n")
    if state.known:
        tasks = min((t.known_after or t.tasks) for t in state.tracks)
        stop = EarlyStop(time=state.time, key=state.key, tasks=tasks, message=_stop_message(state))
        write_early_stop(experiment_dir, stop)
    else:
        clear_early_stop(experiment_dir)


def look_at_task(experiment_dir: Path, task: str) -> MonitorState:
    """Look at `task` (every run of its compared conditions scored): append its look, recompute
    the state, write state.json and stop.json (or remove stop.json), and the task's look file."""
    experiment_dir = Path(experiment_dir)
    study = study_of(experiment_dir)
    if task not in study.tasks:
        raise MonitorError(f"--task {task!r} is not a task of the matrix {study.tasks}")
    runs = runs_df(collect_runs(experiment_dir, task=task))
    look = task_look(runs, task, study)
    with _locked_looks(experiment_dir) as fd:
        line = (look.model_dump_json() + "\n").encode("utf-8")
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # isolate a line torn by a look that died mid-write
        os.write(fd, line)
        os.fsync(fd)
        looks = _read_looks(os.pread(fd, os.fstat(fd).st_size, 0))
        state = monitor_state(looks, study)
        _publish(experiment_dir, state)
    atomic.write_text(experiment_dir / LOOK_FOLDER / f"{task}.json", look.model_dump_json(indent=2))
    return state


# --- the running answer in the comparison --------------------------------------------------------


def _stopped_runs(runs: pd.DataFrame, conditions: Sequence[str]) -> pd.Series:
    """Whether each run of `runs` is one of `conditions`' runs the monitor's stop kept back."""
    stopped_by = runs["stopped_by"] if "stopped_by" in runs else pd.Series(pd.NA, index=runs.index)
    status = runs["status"] if "status" in runs else pd.Series(pd.NA, index=runs.index)
    kept_back = stopped_by.eq(STOPPED_EARLY).fillna(False) & status.eq("not_started").fillna(False)
    return kept_back.astype(bool) & runs["condition"].isin(list(conditions))


def _saved_usd(runs: pd.DataFrame, stopped: pd.Series) -> float | None:
    """The sessions not started at the mean cost of their condition's sessions that ran (None:
    no session of theirs has a cost, so nothing is priced)."""
    if "cost_usd" not in runs or not stopped.any():
        return None
    total = 0.0
    for condition, count in runs.loc[stopped, "condition"].value_counts().items():
        costs = pd.to_numeric(runs.loc[runs["condition"] == condition, "cost_usd"], "coerce")
        costs = costs[~stopped[runs["condition"] == condition]].dropna()
        if costs.empty:
            return None
        total += float(costs.mean()) * int(count)
    return total


def _final_tracks(
    runs: pd.DataFrame, study: Study, pair: tuple[str, str], looks: list[TaskLook]
) -> list[Track]:
    """The pair's tracks over every task now (the comparison's runs): the values recomputed
    from the table in the sequence's order, the looks giving that order when no start order
    was recorded."""
    _, arrived = _latest(looks)
    order = study.ranking if study.ranking is not None else arrived
    stopped_tasks = set(runs.loc[_stopped_runs(runs, pair), "task"].astype(str))
    tracks = []
    for measure in study.settings.primary:
        found = task_difference_series(runs, *pair, measure, study.settings, study.cells)
        values = {
            task: LookValue(
                baseline=pair[0],
                treatment=pair[1],
                measure=measure,
                value=None if task in stopped_tasks or task not in found else float(found[task]),
                why=STOPPED_EARLY if task in stopped_tasks else "no pair",
            )
            for task in study.tasks
        }
        tracks.append(_track(study, pair, measure, order, values))
    return tracks


def _declared(study: Study) -> str:
    monitor = study.monitor
    alpha = monitor.alpha if monitor.alpha is not None else study.settings.alpha
    margin = f", margin {monitor.margin:g}" if monitor.margin is not None else ""
    return f"analysis.monitor: {monitor.method}, alpha {alpha:g}{margin}"


def monitor_verdicts(
    tables: list[pd.DataFrame], runs: pd.DataFrame, experiment_dir: Path, settings: AnalysisSettings
) -> None:
    """Each pair's running answer in its verdict (`attrs["verdict"]`) and `attrs["monitor"]`:
    after a stop, first, as the result, with the sessions it saved and the note that the
    fixed-sample figures are not valid; otherwise after the fixed-sample sentences."""
    if settings.monitor is None:
        return
    try:
        study = study_of(experiment_dir)
    except MonitorError as error:
        for table in tables:
            table.attrs["verdict"] = [*table.attrs["verdict"], f"No running answer: {error}."]
        return
    looks = read_looks(experiment_dir)
    for table in tables:
        a = table.attrs
        pair = (a["baseline"], a["treatment"])
        if pair not in study.pairs:
            continue
        tracks = _final_tracks(runs, study, pair, looks)
        in_pair = runs[runs["condition"].isin(list(pair))]
        stopped = _stopped_runs(in_pair, pair)
        mine = len(in_pair)
        saved = _saved_usd(in_pair, stopped)
        a["monitor"] = {
            "settings": study.monitor.model_dump(mode="json"),
            "tracks": [t.model_dump(mode="json") for t in tracks],
            "sessions_not_started": int(stopped.sum()),
            "sessions": mine,
            "saved_usd": saved,
        }
        words = [t.sentence(study.monitor.margin) for t in tracks]
        if not stopped.any():
            a["verdict"] = [
                *a["verdict"],
                f"Running answer ({_declared(study)}): " + "; ".join(words) + ".",
            ]
            continue
        known = [t.known_after for t in tracks if t.known_after]
        when = f" after {max(known)} tasks" if known and len(known) == len(tracks) else ""
        money = (
            f", about ${saved:,.4f} at the mean cost of each condition's sessions that ran"
            if saved  # None: unpriced; 0: the offline model, which costs nothing
            else ""
        )
        a["verdict"] = [
            f"Stopped early by the monitor ({_declared(study)}): the answer was known{when}. "
            f"The result is the confidence sequence, over every task that finished: "
            + "; ".join(words)
            + ". The fixed-sample p-values and bootstrap intervals below are not valid after a "
            "stop (the number of tasks was chosen by looking at the results). The stop saved "
            f"{int(stopped.sum())} of {mine} sessions ({stopped.sum() / max(mine, 1):.0%}){money}.",
            *a["verdict"],
        ]
