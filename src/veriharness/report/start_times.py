"""When each condition's sessions started: a plot, a balance line, and the flag of a study whose
conditions ran at clearly different times (docs/decisions.md P-60).

Read from the runs table's `started_at` and `finished_at` (outcome.json, to the second), session
runs only. Starts in the same second are counted together: the counts are compared after each
second in which a session started, which is as finely as the record tells them apart.

- **Running imbalance**: the largest difference, after any such second, between the number of
  sessions started of the condition started most and of the one started least. The blocked
  start order keeps it within the sessions running at once plus one (`experiment.start_order`).
- **Sessions at once**: the most sessions whose [start, end) overlapped.
- **Clearly different times**, per pair of conditions: the two-sample Kolmogorov-Smirnov
  statistic D of their start times (the largest difference between the shares of each
  condition's sessions started by any moment) is above `CLEARLY_D` and its p-value below
  `CLEARLY_P`. The p-value keeps a small study's chance pattern from being flagged, D keeps a
  large study's negligible one from being flagged.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import ks_2samp

from veriharness.report.plots import _figure, _save

__all__ = [
    "CLEARLY_D",
    "CLEARLY_P",
    "PairTiming",
    "StartBalance",
    "session_starts",
    "most_at_once",
    "imbalance_by_second",
    "start_balance",
    "balance_line",
    "timing_caveat",
    "plot_start_times",
    "start_times_plot",
    "timing_flag",
]

CLEARLY_D = 0.1
CLEARLY_P = 0.01


def session_starts(runs: pd.DataFrame) -> pd.DataFrame:
    """The session runs that started, with `started` and `finished` as UTC timestamps, in the
    order they started (condition, task, replicate, started, finished)."""
    if "started_at" not in runs:
        return pd.DataFrame(columns=["condition", "task", "replicate", "started", "finished"])
    mine = runs
    if "superseded" in mine:
        mine = mine[~mine["superseded"].fillna(False).astype(bool)]
    if "answer_source" in mine:
        mine = mine[mine["answer_source"] == "session"]
    if "status" in mine:
        mine = mine[~mine["status"].isin(["missing", "not_started"])]
    mine = mine.dropna(subset=["started_at"])
    out = pd.DataFrame(
        {
            "condition": mine["condition"].astype(str),
            "task": mine["task"].astype(str),
            "replicate": mine["replicate"].astype(int),
            "started": pd.to_datetime(mine["started_at"].astype(str), utc=True, format="ISO8601"),
            "finished": pd.to_datetime(
                mine["finished_at"].astype(str), utc=True, format="ISO8601", errors="coerce"
            )
            if "finished_at" in mine
            else pd.NaT,
        }
    )
    return out.sort_values("started", kind="stable").reset_index(drop=True)


def most_at_once(starts: pd.DataFrame) -> int:
    """The most sessions running at one moment ([start, end): one ending as another starts in
    the same second is not counted twice). A session without an end counts only at its start."""
    ends = starts["finished"].fillna(starts["started"])
    events = sorted(
        [(t, 1) for t in starts["started"]] + [(t, -1) for t in ends],
        key=lambda e: (e[0], e[1]),
    )
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def imbalance_by_second(starts: pd.DataFrame, conditions: list[str]) -> list[int]:
    """After each second in which a session started: the most started condition's count minus
    the least started one's."""
    counts = pd.crosstab(starts["started"], starts["condition"]).reindex(
        columns=conditions, fill_value=0
    )
    totals = counts.cumsum()
    return [int(v) for v in (totals.max(axis=1) - totals.min(axis=1))]


@dataclass(frozen=True)
class PairTiming:
    first: str
    second: str
    d: float
    p_value: float

    @property
    def clearly_apart(self) -> bool:
        return self.d > CLEARLY_D and self.p_value < CLEARLY_P


@dataclass(frozen=True)
class StartBalance:
    medians: dict[str, pd.Timestamp]
    sessions: dict[str, int]
    span_seconds: float
    largest_imbalance: int
    at_once: int
    pairs: tuple[PairTiming, ...]

    @property
    def allowed(self) -> int:
        """What the blocked start order keeps the running imbalance within."""
        return self.at_once + 1

    @property
    def apart(self) -> tuple[PairTiming, ...]:
        return tuple(p for p in self.pairs if p.clearly_apart)


def start_balance(starts: pd.DataFrame) -> StartBalance | None:
    """The balance of the conditions' start times; None with fewer than two conditions."""
    conditions = sorted(starts["condition"].unique())
    if len(conditions) < 2:
        return None
    seconds = {
        c: (starts.loc[starts["condition"] == c, "started"].astype("int64") / 1e9).to_numpy()
        for c in conditions
    }
    pairs = []
    for first, second in combinations(conditions, 2):
        with warnings.catch_warnings():
            # With ties (starts to the second) scipy's exact method may not converge; it then
            # gives the asymptotic p-value and warns of that on stderr.
            warnings.simplefilter("ignore", RuntimeWarning)
            test = ks_2samp(seconds[first], seconds[second])
        pairs.append(PairTiming(first, second, float(test.statistic), float(test.pvalue)))
    span = (starts["started"].max() - starts["started"].min()).total_seconds()
    return StartBalance(
        medians={c: starts.loc[starts["condition"] == c, "started"].median() for c in conditions},
        sessions={c: int((starts["condition"] == c).sum()) for c in conditions},
        span_seconds=float(span),
        largest_imbalance=max(imbalance_by_second(starts, conditions)),
        at_once=most_at_once(starts),
        pairs=tuple(pairs),
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def balance_line(balance: StartBalance) -> str:
    """The conditions' median start times and their largest running imbalance, in a sentence."""
    medians = ", ".join(
        f"{c} {t.strftime('%Y-%m-%d %H:%M:%S')} UTC ({balance.sessions[c]} sessions)"
        for c, t in balance.medians.items()
    )
    times = list(balance.medians.values())
    gap = (max(times) - min(times)).total_seconds()
    share = f", {gap / balance.span_seconds:.0%} of the" if balance.span_seconds else " in a"
    kept = (
        "within what the blocked start order keeps it to"
        if balance.largest_imbalance <= balance.allowed
        else "more than the blocked start order allows"
    )
    return (
        f"Median start: {medians}; the medians lie {_duration(gap)} apart{share} "
        f"{_duration(balance.span_seconds)} from the first start to the last. Largest running "
        f"imbalance: {balance.largest_imbalance} session(s) ({kept}: the sessions running at "
        f"once, at most {balance.at_once}, plus one)."
    )


def timing_caveat(balance: StartBalance) -> str | None:
    """The flag of conditions that ran at clearly different times; None when none did."""
    if not balance.apart:
        return None
    pairs = "; ".join(
        f"{p.first} and {p.second} (Kolmogorov-Smirnov D = {p.d:.2f}, p = {p.p_value:.2g})"
        for p in balance.apart
    )
    return (
        f"The conditions ran at clearly different times: {pairs}. Whatever changed over the "
        "study (the provider's load, its model snapshot, its rate limits, the time of day) is "
        "mixed into the comparison; see the start-time plot."
    )


def plot_start_times(starts: pd.DataFrame, balance: StartBalance, path: Path) -> Path:
    """Left: each condition's share of its sessions started, over the clock. Right: the running
    difference between the conditions' counts, start by start, with the band the blocked order
    keeps it in."""
    fig = _figure(10.0, 3.6)
    over_time, running = fig.subplots(1, 2)
    origin = starts["started"].min()
    for i, (condition, group) in enumerate(starts.groupby("condition", sort=True)):
        minutes = (group["started"] - origin).dt.total_seconds().to_numpy() / 60
        share = np.arange(1, len(group) + 1) / len(group)
        over_time.step(minutes, share, where="post", color=f"C{i}", label=str(condition))
    over_time.set_xlabel(f"minutes since the first start ({origin.strftime('%Y-%m-%d %H:%M')} UTC)")
    over_time.set_ylabel("share of the condition's sessions started")
    over_time.legend(fontsize=8)
    started = pd.crosstab(starts["started"], starts["condition"]).cumsum()
    running.step(
        started.sum(axis=1).to_numpy(),
        imbalance_by_second(starts, sorted(balance.medians)),
        where="post",
        color="C0",
    )
    running.axhline(balance.allowed, color="C3", lw=0.8, ls="--", label="blocked order's bound")
    running.set_xlabel("sessions started")
    running.set_ylabel("most minus least started condition")
    running.yaxis.get_major_locator().set_params(integer=True)
    running.legend(fontsize=8)
    return _save(
        fig,
        path,
        "When each condition's sessions started (outcome.json, to the second). Left: the share "
        "of each condition's sessions started by each moment; curves that lie together mean the "
        "conditions ran at the same times. Right: after each second in which sessions started, "
        "the most started condition's count minus the least started one's; the dashed line is "
        "the sessions running at once plus one, which the blocked start order keeps it within. "
        + balance_line(balance),
    )


def start_times_plot(runs: pd.DataFrame, path: Path) -> Path | None:
    """The report's start-time plot of the runs table, its caption the balance line; None (and
    an earlier plot removed) with fewer than two conditions of started sessions."""
    balance = start_balance(starts := session_starts(runs))
    if balance is None:
        for stale in (path, path.with_suffix(".rst")):
            stale.unlink(missing_ok=True)
        return None
    return plot_start_times(starts, balance, path)


def timing_flag(runs: pd.DataFrame) -> str | None:
    """The report's first-screen flag of conditions that ran at clearly different times."""
    balance = start_balance(session_starts(runs))
    return timing_caveat(balance) if balance is not None else None
