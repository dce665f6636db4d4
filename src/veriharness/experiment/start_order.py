"""The order sessions start in: blocked by (task, replicate), shuffled from a seed (P-60).

A block is the runs of one task and replicate, one per condition; its runs are adjacent in the
order, so however far the study has got, the conditions have started equally often up to one
block. The blocks' order and each block's order of conditions are shuffled from
`execution.order_seed`: a block's place is the sha256 of (seed, task, replicate), a condition's
place in its block the sha256 of (seed, task, replicate, condition), each sorted ascending. A
keyed hash, not a random generator: the order is reproducible from the record in any language,
does not depend on how the runs are listed, and a block keeps its place relative to the others
when the matrix grows or `execution.sample` changes.

The workflow hands the order to Snakemake as job priorities (`start_priorities`); the seed is
resolved once per start in the main process (`resolve_seed`: the config's, else the one an
earlier start recorded, else a new one) and written into config.effective.json, from which
`check-experiment` records it in experiment.json as `start_order` (`StartOrderRecord`), with
what the executor guarantees of it (`executor_guarantee`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby, product
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from veriharness._util import atomic
from veriharness.experiment.kinds import EFFECTIVE_CONFIG

__all__ = [
    "RunKey",
    "SeedSource",
    "StartOrderError",
    "StartOrderSeed",
    "StartOrderRecord",
    "EXPERIMENT_RECORD_NAME",
    "EFFECTIVE_CONFIG_NAME",
    "matrix_runs",
    "start_order",
    "block_order",
    "start_priorities",
    "running_imbalance",
    "resolve_seed",
    "executor_guarantee",
    "start_order_record",
    "record_executor",
    "recorded_start_order",
    "start_order_of",
]

EXPERIMENT_RECORD_NAME = "experiment.json"
EFFECTIVE_CONFIG_NAME = "config.effective.json"
# Seeds chosen at a first start: 32 bits, short enough to quote.
_CHOSEN_SEED_BITS = 32
_DOMAIN = "veriharness-start-order-v1"

SeedSource = Literal["config", "chosen"]


class RunKey(NamedTuple):
    """One session run of the matrix."""

    condition: str
    task: str
    replicate: int


class StartOrderError(ValueError):
    """A recorded seed that cannot be read; the message names the file, the field and the fix."""


def matrix_runs(
    conditions: Sequence[str], tasks: Sequence[str], replicates: Iterable[int]
) -> list[RunKey]:
    """Every session run of conditions x tasks x replicates."""
    return [RunKey(c, t, int(r)) for t, r, c in product(tasks, replicates, conditions)]


def _key(seed: int, *parts: object) -> bytes:
    text = "\n".join([_DOMAIN, str(seed), *(str(p) for p in parts)])
    return hashlib.sha256(text.encode("utf-8")).digest()


def start_order(runs: Iterable[RunKey], seed: int) -> list[RunKey]:
    """`runs` in the order their sessions are to start: blocks of one (task, replicate), the
    blocks and each block's conditions shuffled from `seed` (the module's docstring says how)."""
    blocks: dict[tuple[str, int], list[RunKey]] = {}
    for run in runs:
        key = RunKey(*run)
        blocks.setdefault((key.task, key.replicate), []).append(key)
    ordered: list[RunKey] = []
    for task, replicate in sorted(blocks, key=lambda b: _key(seed, b[0], b[1])):
        members = blocks[(task, replicate)]
        ordered += sorted(members, key=lambda r: _key(seed, task, replicate, r.condition))
    return ordered


def block_order(order: Sequence[RunKey]) -> list[tuple[str, int]]:
    """The (task, replicate) blocks of an order, each once, in the order they first appear."""
    return [block for block, _ in groupby((r.task, r.replicate) for r in order)]


def start_priorities(order: Sequence[RunKey]) -> dict[RunKey, int]:
    """Job priorities that make Snakemake's scheduler start `order` front to back: the first
    run len(order), the last 1 (the scheduler picks the ready job of highest priority first)."""
    return {run: len(order) - place for place, run in enumerate(order)}


def running_imbalance(conditions: Sequence[str], of: Iterable[str] | None = None) -> int:
    """The largest difference, over every prefix of a sequence of started runs' conditions,
    between the condition started most and the one started least (the conditions named in
    `of`, default those in the sequence, count from 0)."""
    counts = dict.fromkeys(of if of is not None else dict.fromkeys(conditions), 0)
    largest = 0
    for condition in conditions:
        counts[condition] = counts.get(condition, 0) + 1
        largest = max(largest, max(counts.values()) - min(counts.values()))
    return largest


class StartOrderSeed(BaseModel):
    """The seed of this start and where it came from."""

    model_config = ConfigDict(extra="forbid")
    seed: int
    seed_source: SeedSource
    """config: execution.order_seed; chosen: picked by VeriHarness at the experiment's first
    start. A seed reused from an earlier start keeps the source it had then."""


def _recorded(path: Path) -> StartOrderSeed | None:
    """The seed an earlier start wrote into `path` (experiment.json or config.effective.json);
    None when the file is absent or holds none (a record from before start orders)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise StartOrderError(
            f"{path}: unreadable ({error}), so the start order seed an earlier start recorded "
            "in it cannot be reused; set execution.order_seed to that seed, or move the file "
            "away to have a new one chosen"
        ) from None
    found = data.get("start_order") if isinstance(data, dict) else None
    if found is None:
        return None
    try:
        value = StartOrderSeed.model_validate(
            {k: found.get(k) for k in ("seed", "seed_source")} if isinstance(found, dict) else found
        )
    except ValidationError:
        raise StartOrderError(
            f"{path}: start_order is {json.dumps(found)[:200]}, expected an object with an "
            "integer seed and seed_source config or chosen; set execution.order_seed to the "
            "seed the study used, or move the file away to have a new one chosen"
        ) from None
    return value


def resolve_seed(configured: int | None, experiment_dir: Path) -> StartOrderSeed:
    """This start's seed: the config's; else the one an earlier start of the experiment recorded
    (experiment.json, else the config.effective.json an earlier parse such as a dry run wrote);
    else a new random one."""
    if configured is not None:
        return StartOrderSeed(seed=int(configured), seed_source="config")
    for name in (EXPERIMENT_RECORD_NAME, EFFECTIVE_CONFIG_NAME):
        if (earlier := _recorded(Path(experiment_dir) / name)) is not None:
            return earlier
    return StartOrderSeed(seed=secrets.randbits(_CHOSEN_SEED_BITS), seed_source="chosen")


class StartOrderRecord(StartOrderSeed):
    """`start_order` of experiment.json: the seed, how the order is made from it, and whether
    the executor that ran the start keeps it. Recorded, never hashed."""

    blocked_by: tuple[str, ...] = ("task", "replicate")
    method: str = (
        "blocks of one (task, replicate) sorted by sha256('veriharness-start-order-v1\\n<seed>"
        "\\n<task>\\n<replicate>'), each block's conditions by sha256 of the same with "
        "'\\n<condition>' appended"
    )
    executor: str | None = None
    """Snakemake's executor of this start (local, slurm, ...); None outside Snakemake."""
    keeps_order: bool | None = None
    """Whether that executor starts (local) or submits (slurm) the sessions in the order; None:
    not known."""
    guarantee: str
    """What the order holds to with that executor, in a sentence."""


_LOCAL = (
    "Snakemake starts the ready session of highest priority first (each session's priority is "
    "its place in the order, its run's preparation has the same, so runs are prepared in the "
    "order too); sessions that become ready in the same scheduling round start in either order "
    "between them, so the running difference between the conditions stays within the sessions "
    "running at once plus one"
)
_SLURM = (
    "Snakemake submits the ready session of highest priority first, as locally (sessions chosen "
    "in the same scheduling round are submitted in either order between them); when a submitted "
    "job starts is SLURM's decision: with equal priorities and sizes it starts them in "
    "submission order, unless backfill starts a later one early"
)
_GROUPED = (
    "sessions are grouped into cluster jobs (group {group}), and Snakemake forms the groups "
    "from an unordered set, so the order is not kept: each group starts as a whole, in the order "
    "of its earliest session"
)


def executor_guarantee(executor: str | None, sessions_group: str | None) -> tuple[bool | None, str]:
    """Whether `executor` keeps the order, and what it holds to. `sessions_group`: the group
    run_agent's jobs are put in, None when each session is a job of its own."""
    if executor is None:
        return None, (
            "no executor recorded (check-experiment ran outside Snakemake): sessions start in "
            "whatever order they are started"
        )
    if sessions_group is not None:
        return False, _GROUPED.format(group=sessions_group)
    if executor == "local":
        return True, _LOCAL
    if executor == "slurm":
        return True, _SLURM
    return None, (
        f"the order reaches the {executor} executor as job priorities; whether it starts the "
        "jobs in that order is not checked"
    )


def start_order_record(
    seed: StartOrderSeed, executor: str | None = None, sessions_group: str | None = None
) -> StartOrderRecord:
    keeps, guarantee = executor_guarantee(executor, sessions_group)
    return StartOrderRecord(
        **seed.model_dump(), executor=executor, keeps_order=keeps, guarantee=guarantee
    )


def record_executor(effective_config: Path, executor: str, sessions_group: str | None) -> None:
    """Complete the start order in config.effective.json with the executor of this start (known
    only once Snakemake executes, after the parse wrote the seed), for check-experiment."""
    path = Path(effective_config)
    wrapped: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    found = wrapped["start_order"]
    seed = StartOrderSeed.model_validate({k: found.get(k) for k in StartOrderSeed.model_fields})
    record = start_order_record(seed, executor, sessions_group)
    wrapped["start_order"] = record.model_dump(mode="json")
    atomic.write_text(path, json.dumps(wrapped, indent=2, sort_keys=True, default=str) + "\n")


def recorded_start_order(wrapper: Mapping[str, Any]) -> StartOrderRecord | None:
    """The start order the workflow wrote into config.effective.json's envelope, if any."""
    found = wrapper.get("start_order")
    if not isinstance(found, dict):
        return None
    if "guarantee" not in found:  # the parse's seed alone: Snakemake did not execute
        return start_order_record(StartOrderSeed.model_validate(found))
    return StartOrderRecord.model_validate(found)


def start_order_of(
    wrapper: Mapping[str, Any], configured: int | None, experiment_dir: Path
) -> StartOrderRecord:
    """experiment.json's `start_order`: what the workflow resolved and wrote into
    config.effective.json (`wrapper`, its envelope), else, for check-experiment run by hand, the
    seed resolved here (no executor)."""
    if wrapper.get("kind") == EFFECTIVE_CONFIG and (found := recorded_start_order(wrapper)):
        return found
    return start_order_record(resolve_seed(configured, experiment_dir))
