"""The spending ledger under concurrent writers: separate processes racing to admit and charge
requests never lose a charge, keep exact running totals, and never exceed the cap by more than
the requests in flight (one per writer)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
from pathlib import Path

import pytest

from veriharness.runfolder.spend import TokenCounts
from veriharness.spend.ledger import (
    BudgetExhausted,
    SpendGate,
    SpendSettings,
    ledger_path,
    newest_entry,
    read_stop,
    tail_entries,
)

WRITERS = 12
MAX_COST = 0.05
CAP = 1.0


def _writer(exp_dir: str, index: int, seed: int) -> None:
    rng = random.Random(seed)
    run_dir = Path(exp_dir) / f"c{index % 2}" / "t" / f"r{index}"
    run_dir.mkdir(parents=True, exist_ok=True)
    gate = SpendGate(
        SpendSettings(
            experiment_dir=Path(exp_dir),
            run_dir=run_dir,
            condition=f"c{index % 2}",
            task="t",
            replicate=index,
            max_usd=CAP,
        )
    )
    for request in range(10_000):
        try:
            gate.admit()
        except BudgetExhausted:
            return
        time.sleep(rng.uniform(0, 0.004))  # the request is in flight
        cost = rng.uniform(0.01, MAX_COST)
        gate.charge(
            "mllm" if request % 2 else "agent", "m", f"{index}-{request}", TokenCounts(), cost
        )


@pytest.mark.parametrize("seed", [1, 2])
def test_racing_writers_never_lose_a_charge_or_pass_the_cap_by_more_than_in_flight(
    tmp_path: Path, seed: int
) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_writer, args=(str(tmp_path), i, seed * 100 + i))
        for i in range(WRITERS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    lines = [json.loads(x) for x in ledger_path(tmp_path).read_text().splitlines()]
    running, by_condition = 0.0, {"c0": 0.0, "c1": 0.0}
    for line in lines:  # every line continues the running total of the line before it
        running += line["cost_usd"]
        by_condition[line["condition"]] += line["cost_usd"]
        assert line["total_usd"] == pytest.approx(running, abs=1e-9)
    assert len({x["request_id"] for x in lines}) == len(lines)
    final = newest_entry(ledger_path(tmp_path))
    assert final is not None and final.total_usd == pytest.approx(running)
    for condition, total in by_condition.items():
        assert sum(final.by_condition.get(condition, {}).values()) == pytest.approx(total)
    overshoot = final.total_usd - CAP
    assert 0 <= overshoot < WRITERS * MAX_COST  # at most one request in flight per writer
    # Each run's own file adds up to what the ledger charged that run.
    for i in range(WRITERS):
        run_dir = tmp_path / f"c{i % 2}" / "t" / f"r{i}"
        own_file = run_dir / "spend.jsonl"  # absent when the cap came before its first charge
        text = own_file.read_text() if own_file.exists() else ""
        own = [json.loads(x) for x in text.splitlines()]
        charged = sum(x["cost_usd"] for x in lines if x["run"] == f"c{i % 2}/t/r{i}")
        assert (own[-1]["total_usd"] if own else 0.0) == pytest.approx(charged)
        assert read_stop(run_dir) is not None  # every writer was stopped by the cap


def test_a_torn_last_line_is_skipped_and_isolated(tmp_path: Path) -> None:
    run_dir = tmp_path / "c" / "t" / "r1"
    run_dir.mkdir(parents=True)
    settings = SpendSettings(
        experiment_dir=tmp_path, run_dir=run_dir, condition="c", task="t", replicate=1
    )
    gate = SpendGate(settings)
    gate.charge("mllm", "m", "a", TokenCounts(), 0.5)
    with open(ledger_path(tmp_path), "a") as handle:
        handle.write('{"time": "2026-12-01T00:00:00+00:00", "run": "c/t/r1", "cost_u')
    assert newest_entry(ledger_path(tmp_path)).total_usd == 0.5
    gate.charge("mllm", "m", "b", TokenCounts(), 0.25)
    assert [e.request_id for e in tail_entries(ledger_path(tmp_path), 10)] == ["a", "b"]
    assert newest_entry(ledger_path(tmp_path)).total_usd == 0.75


def test_per_run_cap_stops_only_that_run(tmp_path: Path) -> None:
    def gate(rep: int) -> SpendGate:
        run_dir = tmp_path / "c" / "t" / f"r{rep}"
        run_dir.mkdir(parents=True, exist_ok=True)
        return SpendGate(
            SpendSettings(
                experiment_dir=tmp_path,
                run_dir=run_dir,
                condition="c",
                task="t",
                replicate=rep,
                max_usd_per_run=0.3,
            )
        )

    first, second = gate(1), gate(2)
    first.charge("agent", "m", "x", TokenCounts.of(1000, 10), 0.3)
    with pytest.raises(BudgetExhausted, match="run c/t/r1 has spent \\$0.3000 of its "):
        first.admit()
    second.admit()  # another run still has its own budget
    assert os.path.exists(tmp_path / "c" / "t" / "r1" / "budget_stop.json")
    assert not os.path.exists(tmp_path / "c" / "t" / "r2" / "budget_stop.json")
