"""The start order (experiment/start_order.py): blocked by (task, replicate), shuffled from the
seed, the same for one seed and another for another; the seed resolved from the config, an
earlier start's record, or chosen once; and experiment.json's `start_order` through the real
`check-experiment` command, run by hand (no executor) as Snakemake runs it (with one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiment.test_config import make_project
from experiment.test_experiment import check
from veriharness.experiment.start_order import (
    EFFECTIVE_CONFIG_NAME,
    RunKey,
    StartOrderError,
    block_order,
    executor_guarantee,
    matrix_runs,
    record_executor,
    resolve_seed,
    running_imbalance,
    start_order,
    start_priorities,
)

CONDITIONS = ["b3-absent", "b3-present"]
TASKS = [f"task-{i}" for i in range(9)]


def _runs(replicates: int = 3, tasks: list[str] = TASKS) -> list[RunKey]:
    return matrix_runs(CONDITIONS, tasks, range(1, replicates + 1))


def test_each_block_holds_one_run_of_every_condition_side_by_side() -> None:
    runs = _runs()
    order = start_order(runs, 11)
    assert sorted(order) == sorted(runs)
    blocks = block_order(order)
    assert len(blocks) == len(TASKS) * 3 == len(set(blocks))  # each block's runs are adjacent
    for place, (task, replicate) in enumerate(blocks):
        members = order[2 * place : 2 * place + 2]
        assert {(r.task, r.replicate) for r in members} == {(task, replicate)}
        assert sorted(r.condition for r in members) == CONDITIONS
    assert running_imbalance([r.condition for r in order]) == 1


def test_one_seed_gives_one_order_and_another_seed_another() -> None:
    runs = _runs()
    first = start_order(runs, 11)
    assert start_order(list(reversed(runs)), 11) == first  # however the runs are listed
    other = start_order(runs, 12)
    assert block_order(other) != block_order(first)
    assert [r.condition for r in other] != [r.condition for r in first]  # conditions shuffled


def test_a_block_keeps_its_place_among_the_others_when_the_matrix_grows() -> None:
    smaller = start_order(_runs(tasks=TASKS[:5]), 11)
    larger = start_order(_runs(tasks=TASKS), 11)
    assert [r for r in larger if r.task in TASKS[:5]] == smaller


def test_the_priorities_put_the_order_first_to_last() -> None:
    order = start_order(_runs(), 3)
    priorities = start_priorities(order)
    assert sorted(priorities, key=priorities.__getitem__, reverse=True) == order
    assert set(priorities.values()) == set(range(1, len(order) + 1))


def test_the_20000_run_plan_is_balanced_throughout() -> None:
    """The SLURM plan's size (bench/cluster_plan.py): 6 tasks x 2 conditions x 1,667."""
    runs = matrix_runs(CONDITIONS, TASKS[:6], range(1, 1668))
    order = start_order(runs, 7)
    assert running_imbalance([r.condition for r in order]) == 1
    assert block_order(start_order(runs, 8)) != block_order(order)


def test_running_imbalance_counts_every_condition_named() -> None:
    assert running_imbalance(["a", "a", "b", "a"]) == 2
    assert running_imbalance(["a"], of=["a", "b", "c"]) == 1
    assert running_imbalance(["a", "b", "c"]) == 1


def test_the_seed_comes_from_the_config_then_an_earlier_start_then_is_chosen(
    tmp_path: Path,
) -> None:
    assert resolve_seed(5, tmp_path).model_dump() == {"seed": 5, "seed_source": "config"}
    chosen = resolve_seed(None, tmp_path)
    assert chosen.seed_source == "chosen"
    wrapped = {"kind": "effective_config", "config": {}, "start_order": chosen.model_dump()}
    (tmp_path / EFFECTIVE_CONFIG_NAME).write_text(json.dumps(wrapped))
    # A dry run's parse wrote it: the real start reuses it.
    assert resolve_seed(None, tmp_path) == chosen
    record = {"kind": "experiment_record", "start_order": {"seed": 42, "seed_source": "config"}}
    (tmp_path / "experiment.json").write_text(json.dumps(record))
    assert resolve_seed(None, tmp_path).model_dump() == {"seed": 42, "seed_source": "config"}
    assert resolve_seed(6, tmp_path).seed == 6  # the config wins over the record


def test_a_record_whose_seed_cannot_be_read_is_named_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "experiment.json"
    path.write_text("{not json")
    with pytest.raises(
        StartOrderError, match=r"experiment\.json: unreadable .*execution\.order_seed"
    ):
        resolve_seed(None, tmp_path)
    path.write_text(json.dumps({"start_order": {"seed": "soon", "seed_source": "chosen"}}))
    with pytest.raises(StartOrderError, match=r'start_order is \{"seed": "soon"'):
        resolve_seed(None, tmp_path)


def test_what_each_executor_keeps_of_the_order() -> None:
    assert executor_guarantee("local", None)[0] is True
    assert executor_guarantee("slurm", None)[0] is True
    kept, why = executor_guarantee("slurm", "agents")
    assert kept is False and "group agents" in why and "not kept" in why
    assert executor_guarantee(None, None)[0] is None
    kept, why = executor_guarantee("kubernetes", None)
    assert kept is None and "not checked" in why


def _record(root: Path) -> dict[str, object]:
    data = json.loads((root / "results" / "t" / "experiment.json").read_text())
    assert isinstance(data["start_order"], dict)
    return data["start_order"]


def test_check_experiment_chooses_a_seed_once_and_reuses_it(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    assert check(root).returncode == 0
    first = _record(root)
    assert first["seed_source"] == "chosen" and isinstance(first["seed"], int)
    assert first["executor"] is None and first["keeps_order"] is None
    assert first["blocked_by"] == ["task", "replicate"]
    assert check(root).returncode == 0
    assert _record(root) == first
    # The record is the same state: no earlier one was kept for it.
    assert not (root / "results" / "t" / "records").exists()


def test_the_workflow_s_seed_and_executor_reach_the_record(tmp_path: Path) -> None:
    """As the workflow runs it: the parse writes the seed into config.effective.json, onstart
    the executor, and check-experiment reads that file as its config."""
    root = make_project(tmp_path)
    config = {"experiment": "t", "execution": {"order_seed": 9}}
    folder = root / "results" / "t"
    folder.mkdir(parents=True)
    effective = folder / EFFECTIVE_CONFIG_NAME
    seed = resolve_seed(9, folder)
    wrapped: dict[str, object] = {
        "kind": "effective_config",
        "sources": [],
        "scheduler": None,
        "config": config,
    }
    effective.write_text(json.dumps({**wrapped, "start_order": seed.model_dump()}))
    record_executor(effective, "slurm", None)
    done = check(root, config=str(effective.relative_to(root)))
    assert done.returncode == 0, done.stderr
    recorded = _record(root)
    assert recorded["seed"] == 9 and recorded["seed_source"] == "config"
    assert recorded["executor"] == "slurm" and recorded["keeps_order"] is True
    assert "submits" in str(recorded["guarantee"])
