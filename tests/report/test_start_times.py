"""The report's start times (report/start_times.py): the balance line, the sessions at once, the
flag of conditions that ran at clearly different times and when it stays down; and through the
real `collect` and `report` commands, the plot, its line and the first screen's flag."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
from PIL import Image

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness.report.start_times import (
    balance_line,
    most_at_once,
    session_starts,
    start_balance,
    timing_caveat,
)

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _runs(conditions: str, seconds_each: int = 60, at_once: int = 2) -> pd.DataFrame:
    """Sessions started `at_once` at a time, in the order of `conditions` (one letter each)."""
    rows = []
    for place, condition in enumerate(conditions):
        start = T0 + timedelta(seconds=seconds_each * (place // at_once))
        rows.append(
            {
                "condition": condition,
                "task": f"t{place}",
                "replicate": 1,
                "answer_source": "session",
                "status": "ok",
                "started_at": start.isoformat(timespec="seconds"),
                "finished_at": (start + timedelta(seconds=seconds_each)).isoformat(
                    timespec="seconds"
                ),
            }
        )
    return pd.DataFrame(rows)


def test_a_blocked_order_is_balanced_and_not_flagged() -> None:
    balance = start_balance(session_starts(_runs("abbaabbaabbaba" * 3)))
    assert balance is not None
    assert balance.at_once == 2 and balance.largest_imbalance <= balance.allowed == 3
    assert timing_caveat(balance) is None
    line = balance_line(balance)
    assert line.startswith("Median start: a 2026-12-01 09:")
    assert "Largest running imbalance: " in line and "within what the blocked start order" in line


def test_conditions_run_one_after_the_other_are_flagged() -> None:
    balance = start_balance(session_starts(_runs("a" * 20 + "b" * 20)))
    assert balance is not None and balance.largest_imbalance == 20
    assert "more than the blocked start order allows" in balance_line(balance)
    caveat = timing_caveat(balance)
    assert caveat is not None and caveat.startswith(
        "The conditions ran at clearly different times: a and b (Kolmogorov-Smirnov D = 1.00"
    )


def test_a_small_study_s_chance_pattern_is_not_flagged() -> None:
    """The issue's README demo: 18 sessions, 6 of the first 8 one condition's."""
    balance = start_balance(session_starts(_runs("bbabbabb" + "aaababaabb")))
    assert balance is not None and balance.largest_imbalance > balance.allowed
    assert balance.pairs[0].d > 0.1 and timing_caveat(balance) is None


def test_sessions_at_once_do_not_count_one_ending_as_another_starts() -> None:
    starts = session_starts(_runs("abab", at_once=1))
    assert most_at_once(starts) == 1


def test_runs_without_start_times_give_no_balance() -> None:
    runs = _runs("ab").assign(started_at=None)
    assert start_balance(session_starts(runs)) is None
    assert start_balance(session_starts(_runs("ab").drop(columns="started_at"))) is None
    external = _runs("ab").assign(answer_source="external")
    assert start_balance(session_starts(external)) is None


def test_the_report_shows_the_start_times_and_flags_them(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "results", tasks=6)
    # Every base session before any treat session, one at a time.
    for place, (condition, task, rep) in enumerate(sorted(exp.runs)):
        path = exp.exp_dir / condition / task / f"r{rep}" / "outcome.json"
        outcome = json.loads(path.read_text())
        start = T0 + timedelta(minutes=place)
        outcome["started_at"] = start.isoformat(timespec="seconds")
        outcome["finished_at"] = (start + timedelta(seconds=50)).isoformat(timespec="seconds")
        path.write_text(json.dumps(outcome))
    assert veriharness("collect", "--experiment-dir", exp.exp_dir).returncode == 0
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet")
    assert runs["started_at"].notna().all() and runs["finished_at"].notna().all()
    out = exp.exp_dir / "report"
    done = veriharness(
        "report", "--experiment-dir", exp.exp_dir, "--out", out, "--tasks-dir", exp.tasks_dir
    )
    assert done.returncode == 0, done.stderr
    with Image.open(out / "start_times.png") as image:
        assert image.format == "PNG" and image.width > 200
    caption = (out / "start_times.rst").read_text()
    assert "Median start: base 2026-12-01 09:02:30 UTC (6 sessions), treat 2026-12-01 09:08:30" in (
        caption
    )
    assert "Largest running imbalance: 6 session(s) (more than the blocked" in caption
    index = (out / "index.html").read_text()
    first_screen = index.split("<h2>Verdict</h2>")[0]
    assert "The conditions ran at clearly different times: base and treat" in first_screen
    assert "start_times.png" in index
