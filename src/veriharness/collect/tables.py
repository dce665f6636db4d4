"""`veriharness collect`: run folders → tables (parquet + CSV).

Design notes:

- `matrix` finds the runs and reads each folder once; this module assembles the tables
  from that pass and writes them.
- Columns are declared in `columns`; a ``file:path`` column is read generically, and a value
  of the wrong type becomes null *and* is named in the run's `read_errors`.
- ``--summary`` writes the runs rows of one slice of the matrix: one condition (``--condition``,
  what the per-condition Snakemake rule asks for) or one task across all conditions (``--task``).
- Files are written to a temporary name and renamed, so an interrupted collect never leaves a
  half-written table in place of a good one.
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from veriharness._util import atomic
from veriharness.collect.agreement import agreement_rows, with_declared
from veriharness.collect.columns import (
    AGENT_REQUESTS,
    AGENT_TOOL_CALLS,
    CALL_EFFECTS,
    CALL_EFFECTS_BY_COMBINATION,
    CAPABILITY_COMBINATIONS,
    CAPABILITY_TAGS,
    INFERRED_TAGS,
    INTERACTIONS,
    MLLM_CALLS,
    RUNS,
    TAG_AGREEMENT,
    TRAJECTORY,
    Column,
)
from veriharness.collect.matrix import Extraction
from veriharness.collect.run_rows import RunKey

__all__ = [
    "Tables",
    "runs_df",
    "agent_tool_calls_df",
    "mllm_calls_df",
    "interactions_df",
    "agent_requests_df",
    "capability_tags_df",
    "capability_combinations_df",
    "inferred_tags_df",
    "tag_agreement_df",
    "trajectory_df",
    "call_effects_df",
    "call_effects_by_combination_df",
    "collect_tables",
    "write_summary",
    "write_table",
    "write_tables",
    "TableWriteError",
]


class Tables(NamedTuple):
    runs: pd.DataFrame
    agent_tool_calls: pd.DataFrame
    mllm_calls: pd.DataFrame
    capability_tags: pd.DataFrame
    capability_combinations: pd.DataFrame
    inferred_tags: pd.DataFrame
    tag_agreement: pd.DataFrame
    missing: list[RunKey]
    agent_requests: pd.DataFrame
    interactions: pd.DataFrame
    trajectory: pd.DataFrame
    call_effects: pd.DataFrame
    call_effects_by_combination: pd.DataFrame


# --- building the tables -------------------------------------------------------------------------


def _cast(series: pd.Series, dtype: str) -> pd.Series:
    if dtype == "list<string>":
        return series.astype(object)
    return series.astype(dtype)


def _frame(
    rows: Sequence[Mapping[str, object]], columns: tuple[Column, ...], extra: Sequence[str] = ()
) -> pd.DataFrame:
    names = [c.name for c in columns] + list(extra)
    df = pd.DataFrame.from_records(rows, columns=names) if rows else pd.DataFrame(columns=names)
    for col in columns:
        df[col.name] = _cast(df[col.name], col.dtype)
    return df


def runs_df(extraction: Extraction) -> pd.DataFrame:
    rows: list[dict[str, object]] = [{**ex.run, **ex.families} for ex in extraction.extracts]
    declared = {c.name for c in RUNS}
    extra = sorted({k for r in rows for k in r} - declared)
    df = _frame(rows, RUNS, extra)
    for name in extra:
        if name.startswith("tool_calls_"):
            # A run whose transcript was read and has no use of this tool used it zero times.
            df[name] = (
                df[name].astype("Int64").where(df["agent_tool_calls"].isna(), df[name].fillna(0))
            )
        elif name.startswith(("metric_", "gain_", "call_change_")):
            df[name] = df[name].astype("Float64")
        elif name.startswith("audit_"):
            df[name] = df[name].astype("boolean")
    return df


def agent_tool_calls_df(extraction: Extraction) -> pd.DataFrame:
    return _frame([t for ex in extraction.extracts for t in ex.tool_calls], AGENT_TOOL_CALLS)


def interactions_df(extraction: Extraction) -> pd.DataFrame:
    return _frame([i for ex in extraction.extracts for i in ex.interactions], INTERACTIONS)


def mllm_calls_df(extraction: Extraction) -> pd.DataFrame:
    return _frame([c for ex in extraction.extracts for c in ex.mllm_calls], MLLM_CALLS)


def agent_requests_df(extraction: Extraction) -> pd.DataFrame:
    return _frame([r for ex in extraction.extracts for r in ex.agent_requests], AGENT_REQUESTS)


def _with_families(
    rows: Sequence[Mapping[str, object]], columns: tuple[Column, ...]
) -> pd.DataFrame:
    """A table whose rows also hold metric families (every extra column is a float)."""
    declared = {c.name for c in columns}
    extra = sorted({k for r in rows for k in r} - declared)
    df = _frame(rows, columns, extra)
    for name in extra:
        df[name] = df[name].astype("Float64")
    return df


def trajectory_df(extraction: Extraction) -> pd.DataFrame:
    return _with_families([t for ex in extraction.extracts for t in ex.trajectory], TRAJECTORY)


def call_effects_df(extraction: Extraction) -> pd.DataFrame:
    effects = [e for ex in extraction.extracts for e in ex.call_effects]
    return _with_families(effects, CALL_EFFECTS)


def call_effects_by_combination_df(effects: pd.DataFrame) -> pd.DataFrame:
    """Per condition and declared combination: the calls, their runs, the share followed by a
    change (of those made while an answer existed) and each metric's mean change."""
    tagged = effects.dropna(subset=["combination"])
    if tagged.empty:
        return _with_families([], CALL_EFFECTS_BY_COMBINATION)
    changes = [c for c in tagged.columns if c.startswith("change_")]
    run_id = tagged["task"].astype(str) + "/r" + tagged["replicate"].astype(str)
    with_answer = tagged["snapshot_at_call"].notna()
    followed = tagged["changed_before_end"].astype("boolean").where(with_answer)
    frame = tagged.assign(run_id=run_id, followed=followed.astype("Float64"))
    grouped = frame.groupby(["condition", "combination"], observed=True)
    df = grouped.agg(
        calls=("call_id", "size"),
        runs=("run_id", "nunique"),
        share_followed_by_change=("followed", "mean"),
        **{f"mean_{c}": (c, "mean") for c in changes},
    ).reset_index()
    df = df.sort_values(["condition", "calls", "combination"], ascending=[True, False, True])
    return _with_families(df.to_dict("records"), CALL_EFFECTS_BY_COMBINATION)


def inferred_tags_df(extraction: Extraction, mllm_calls: pd.DataFrame) -> pd.DataFrame:
    """One row per annotated call, with its declared tags and the per-call Jaccard."""
    rows = [i for ex in extraction.extracts for i in ex.inferred]
    frame = _frame(rows, tuple(c for c in INFERRED_TAGS if c.name not in ("declared", "jaccard")))
    joined = with_declared(frame, mllm_calls)
    return _frame(joined[[c.name for c in INFERRED_TAGS]].to_dict("records"), INFERRED_TAGS)


def tag_agreement_df(inferred: pd.DataFrame) -> pd.DataFrame:
    return _frame(agreement_rows(inferred) if len(inferred) else [], TAG_AGREEMENT)


def capability_tags_df(
    mllm_calls: pd.DataFrame, inferred: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per tag of a call: declared ones, then the valid inferred ones (`source`)."""
    names = [c.name for c in CAPABILITY_TAGS]
    declared = mllm_calls.assign(source="declared", annotator=None)
    parts = [declared]
    if inferred is not None and len(inferred):
        keys = ["condition", "task", "replicate", "call_id"]
        ok = inferred[inferred["status"] == "ok"]
        unique = ok["codes"].map(lambda c: sorted(set(c)))
        given = ok[[*keys, "annotator"]].assign(
            source="inferred",
            tags=list(unique),
            combination=unique.map(lambda c: "+".join(c) or None),
            n_tags=unique.map(len),
        )
        outcome = mllm_calls[[*keys, "outcome", "experiment"]]
        parts.append(given.merge(outcome, on=keys, how="left"))
    calls = pd.concat(parts, ignore_index=True)
    long = calls.explode("tags").dropna(subset=["tags"]).rename(columns={"tags": "tag"})
    long = long.assign(family=long["tag"].astype(str).str[0])
    return _frame(long[names].to_dict("records") if len(long) else [], CAPABILITY_TAGS)


def capability_combinations_df(mllm_calls: pd.DataFrame) -> pd.DataFrame:
    tagged = mllm_calls.dropna(subset=["combination"])
    if tagged.empty:
        return _frame([], CAPABILITY_COMBINATIONS)
    run_id = tagged["task"].astype(str) + "/r" + tagged["replicate"].astype(str)
    grouped = tagged.assign(run_id=run_id).groupby(["condition", "combination"], observed=True)
    df = grouped.agg(
        n_tags=("n_tags", "first"), calls=("call_id", "size"), runs=("run_id", "nunique")
    )
    df = df.reset_index()
    per_condition = df.groupby("condition")["calls"].transform("sum")
    df["share_of_calls"] = df["calls"] / per_condition
    df = df.sort_values(["condition", "calls", "combination"], ascending=[True, False, True])
    return _frame(df.to_dict("records"), CAPABILITY_COMBINATIONS)


def collect_tables(extraction: Extraction) -> Tables:
    calls = mllm_calls_df(extraction)
    inferred = inferred_tags_df(extraction, calls)
    effects = call_effects_df(extraction)
    return Tables(
        runs_df(extraction),
        agent_tool_calls_df(extraction),
        calls,
        capability_tags_df(calls, inferred),
        capability_combinations_df(calls),
        inferred,
        tag_agreement_df(inferred),
        extraction.missing,
        agent_requests_df(extraction),
        interactions_df(extraction),
        trajectory_df(extraction),
        effects,
        call_effects_by_combination_df(effects),
    )


# --- writing ------------------------------------------------------------------------------------


def _csv_ready(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for name in out.columns:
        if out[name].dtype == object and out[name].map(lambda v: isinstance(v, list)).any():
            out[name] = out[name].map(lambda v: json.dumps(v) if isinstance(v, list) else v)
    return out


def write_table(
    df: pd.DataFrame, stem: Path, formats: tuple[str, ...] = ("parquet", "csv")
) -> None:
    for fmt in formats:
        with atomic.replacing(stem.with_suffix(f".{fmt}")) as tmp:
            if fmt == "parquet":
                df.to_parquet(tmp, index=False)
            else:
                _csv_ready(df).to_csv(tmp, index=False)


def write_summary(runs: pd.DataFrame, path: Path) -> None:
    """The runs rows of one slice of the matrix, as CSV."""
    with atomic.replacing(path) as tmp:
        _csv_ready(runs).to_csv(tmp, index=False)


# Past this many rows, the per-event tables (the tool uses, about 20 a run, the answer's
# versions, up to the snapshot cap a run, and what each CallMLLM call was followed by) are built
# and written by a forked process while this one does the others (P-49).
_FORK_FROM = 20_000
_EVENT_TABLES = "agent_tool_calls, trajectory, call_effects and call_effects_by_combination tables"


class TableWriteError(RuntimeError):
    """The process writing one of the tables failed; the tables folder may be part-updated."""


@contextmanager
def _forked(name: str, work: Callable[[], None]) -> Iterator[None]:
    """`work` done in a forked child while the block runs; raises when it failed. The child is
    forked before this process builds any frame, so it inherits no thread of pyarrow's."""
    child = multiprocessing.get_context("fork").Process(target=work, name=f"collect {name}")
    child.start()
    try:
        yield
    finally:
        child.join()
    if child.exitcode != 0:
        raise TableWriteError(
            f"writing the {name} failed in its process (exit code {child.exitcode}); "
            "its error is printed above"
        )


def write_tables(exp_dir: Path, extraction: Extraction) -> pd.DataFrame:
    """Every table into `<exp_dir>/tables/` (parquet and CSV), and the missing runs (CSV); returns
    the runs table."""
    out = Path(exp_dir) / "tables"
    events = sum(len(ex.tool_calls) + len(ex.trajectory) for ex in extraction.extracts)
    side = _forked if events >= _FORK_FROM else _inline
    with side(_EVENT_TABLES, lambda: _write_event_tables(extraction, out)):
        calls = mllm_calls_df(extraction)
        inferred = inferred_tags_df(extraction, calls)
        runs = runs_df(extraction)
        for name, table in (
            ("runs", runs),
            ("interactions", interactions_df(extraction)),
            ("mllm_calls", calls),
            ("agent_requests", agent_requests_df(extraction)),
            ("capability_tags", capability_tags_df(calls, inferred)),
            ("capability_combinations", capability_combinations_df(calls)),
            ("inferred_tags", inferred),
            ("tag_agreement", tag_agreement_df(inferred)),
        ):
            write_table(table, out / name)
    missing = pd.DataFrame(
        [k._asdict() for k in extraction.missing], columns=["condition", "task", "replicate"]
    )
    write_table(missing, out / "missing", ("csv",))
    print(f"collect: {len(runs)} runs -> {out}")
    return runs


def _write_event_tables(extraction: Extraction, out: Path) -> None:
    """The tables with a row per event of a session: its tool uses, its answer's versions and
    the effect of each CallMLLM call."""
    write_table(agent_tool_calls_df(extraction), out / "agent_tool_calls")
    write_table(trajectory_df(extraction), out / "trajectory")
    effects = call_effects_df(extraction)
    write_table(effects, out / "call_effects")
    write_table(call_effects_by_combination_df(effects), out / "call_effects_by_combination")


@contextmanager
def _inline(name: str, work: Callable[[], None]) -> Iterator[None]:
    """`work` done here, after the block (a small experiment: forking would cost more)."""
    yield
    work()
