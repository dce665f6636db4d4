"""`veriharness collect`: run folders → tables (parquet + CSV).

Design notes:

- One pass reads each run folder once (`extract_run`) and yields its `runs` row plus its agent tool
  calls and CallMLLM calls; folders are independent, so the pass fans out over processes.
- Columns are declared in `table_columns`; a ``file:path`` column is read generically, and a value
  of the wrong type becomes null *and* is named in the run's `read_errors`.
- No run is ever dropped. The row set is the union of the expected matrix (``--expected`` or
  experiment.json) and the folders found; an expected run without a folder gets status `missing`,
  a folder without an outcome `not_started`; unreadable files are listed in `read_errors`.
- Files are written to a temporary name and renamed, so an interrupted collect never leaves a
  half-written table in place of a good one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from multiprocessing import Pool
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from veriharness.table_columns import (
    AGENT_TOOL_CALLS,
    CAPABILITY_COMBINATIONS,
    CAPABILITY_TAGS,
    MLLM_CALLS,
    RUNS,
    Column,
)

__all__ = [
    "RunKey",
    "load_json",
    "read_jsonl",
    "typed_value",
    "summarize_input",
    "tool_call_rows",
    "mllm_call_rows",
    "Extraction",
    "Tables",
    "MatrixError",
    "load_expected",
    "discover_runs",
    "extract_run",
    "collect_runs",
    "runs_df",
    "agent_tool_calls_df",
    "mllm_calls_df",
    "capability_tags_df",
    "capability_combinations_df",
    "collect_tables",
    "write_table",
    "add_arguments",
    "run",
]

RESERVED_FOLDERS = frozenset({"tables", "report", "logs"})
_REPLICATE = re.compile(r"r(\d+)")
_PARALLEL_FROM = 200  # below this, starting worker processes costs more than it saves


class RunKey(NamedTuple):
    condition: str
    task: str
    replicate: int


class MatrixError(ValueError):
    """The expected-matrix file is malformed."""


class RunExtract(NamedTuple):
    run: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    mllm_calls: list[dict[str, Any]]


class Extraction(NamedTuple):
    experiment: str
    extracts: list[RunExtract]
    missing: list[RunKey]


class Tables(NamedTuple):
    runs: pd.DataFrame
    agent_tool_calls: pd.DataFrame
    mllm_calls: pd.DataFrame
    capability_tags: pd.DataFrame
    capability_combinations: pd.DataFrame
    missing: list[RunKey]


# --- reading files defensively -------------------------------------------------------------------

_SUMMARY_VALUE_CHARS = 120
_SUMMARY_CHARS = 400


def load_json(path: Path, name: str, errors: list[str]) -> dict[str, Any] | None:
    """A JSON object from `path`, or None with the problem appended to `errors`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        errors.append(f"{name}: absent")
        return None
    except OSError as exc:
        errors.append(f"{name}: unreadable ({exc.strerror})")
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        errors.append(f"{name}: invalid JSON ({exc})")
        return None
    if not isinstance(data, dict):
        errors.append(f"{name}: expected a JSON object, got {type(data).__name__}")
        return None
    return data


def read_jsonl(path: Path, name: str, errors: list[str]) -> list[dict[str, Any]] | None:
    """The object lines of a JSON-lines file; a bad line is reported and skipped, not fatal."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        errors.append(f"{name}: absent")
        return None
    except OSError as exc:
        errors.append(f"{name}: unreadable ({exc.strerror})")
        return None
    events: list[dict[str, Any]] = []
    bad: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            bad.append(number)
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad.append(number)
    if bad:
        shown = ", ".join(map(str, bad))
        errors.append(f"{name}: {len(bad)} line(s) not a JSON object (line {shown})")
    return events


def typed_value(value: Any, dtype: str, where: str, errors: list[str]) -> Any:
    """`value` if it fits `dtype`, else None with the mismatch named in `errors`."""
    if value is None:
        return None
    ok = {
        "string": isinstance(value, str),
        "Int64": isinstance(value, int) and not isinstance(value, bool),
        "Float64": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }.get(dtype, True)
    if dtype == "Int64" and isinstance(value, float) and value.is_integer():
        return int(value)
    if not ok:
        errors.append(f"{where}: expected {dtype}, got {value!r:.60}")
        return None
    return value


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _SUMMARY_VALUE_CHARS:
        return value[:_SUMMARY_VALUE_CHARS] + f"…[{len(value)} chars]"
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value


def summarize_input(value: Any) -> str:
    """A tool input as compact JSON, every long string and the whole text visibly shortened."""
    text = json.dumps(_cut(value), ensure_ascii=False, separators=(",", ":"))
    if len(text) > _SUMMARY_CHARS:
        text = text[:_SUMMARY_CHARS] + f"…[{len(text)} chars]"
    return text


def _blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def tool_call_rows(path: Path, errors: list[str]) -> list[dict[str, Any]] | None:
    """One row per tool_use of a stream-json transcript, joined to its tool_result."""
    events = read_jsonl(path, "transcript.jsonl", errors)
    if events is None:
        return None
    rows: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    turn, last_message = -1, object()
    for event in events:
        kind = event.get("type")
        if kind == "assistant":
            message_id = (event.get("message") or {}).get("id")
            if message_id is None or message_id != last_message:
                turn += 1
            last_message = message_id
            for block in _blocks(event):
                if block.get("type") != "tool_use":
                    continue
                row = {
                    "seq": len(rows),
                    "turn": turn,
                    "tool_use_id": block.get("id"),
                    "tool": str(block.get("name")),
                    "input_summary": summarize_input(block.get("input")),
                    "is_error": None,
                    "has_result": False,
                    "timestamp": event.get("timestamp"),
                }
                rows.append(row)
                by_id[str(block.get("id"))] = row
        elif kind == "user":
            for block in _blocks(event):
                row = by_id.get(str(block.get("tool_use_id")))
                if block.get("type") == "tool_result" and row is not None:
                    row["is_error"] = bool(block.get("is_error", False))
                    row["has_result"] = True
    return rows


_CALL_END = {
    "mllm_call_completed": "completed",
    "mllm_call_failed": "failed",
    "mllm_call_rejected": "rejected",
}


def _request_fields(request: dict[str, Any]) -> dict[str, Any]:
    tags = request.get("declared_capability_tags") or request.get("capability_tags") or []
    tags = [str(t) for t in tags] if isinstance(tags, list) else [str(tags)]
    inputs = [i for i in request.get("inputs") or [] if isinstance(i, dict)]
    images = [i for i in inputs if i.get("kind") == "image"]
    output = request.get("output") if isinstance(request.get("output"), dict) else {}
    taxonomy = request.get("taxonomy") if isinstance(request.get("taxonomy"), dict) else {}
    unique = sorted(set(tags))
    return {
        "tags": tags,
        "combination": "+".join(unique) if unique else None,
        "n_tags": len(unique),
        "taxonomy_version": taxonomy.get("version"),
        "instruction_chars": len(request.get("instruction") or ""),
        "image_count": len(images),
        "region_count": sum(1 for i in images if i.get("region")),
        "text_count": sum(1 for i in inputs if i.get("kind") == "text"),
        "output_kind": output.get("kind"),
        "schema_present": output.get("schema") is not None if output else None,
        "requested_profile": request.get("requested_model_profile") or request.get("model_profile"),
        "resolved_profile": request.get("resolved_model_profile"),
    }


def mllm_call_rows(path: Path, errors: list[str]) -> list[dict[str, Any]] | None:
    """One row per CallMLLM call of an mllm_trace.jsonl, start and end events merged."""
    events = read_jsonl(path, "mllm_trace.jsonl", errors)
    if events is None:
        return None
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        name, call_id = event.get("event"), event.get("call_id")
        if call_id is None:
            errors.append(f"mllm_trace.jsonl: {name!r} event without call_id")
            continue
        row = calls.setdefault(
            str(call_id),
            {"call_id": str(call_id), "seq": len(calls), "outcome": "unfinished", "tags": None},
        )
        if name == "mllm_call_started":
            row["started_at"] = event.get("time")
            row.update(_request_fields(event))
        elif name in _CALL_END:
            row["outcome"] = _CALL_END[name]
            usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
            where = f"mllm_trace.jsonl {call_id}"
            row["latency_ms"] = typed_value(event.get("latency_ms"), "Float64", where, errors)
            row["input_tokens"] = typed_value(usage.get("input_tokens"), "Int64", where, errors)
            row["output_tokens"] = typed_value(usage.get("output_tokens"), "Int64", where, errors)
            for field in ("parse_status", "provider_model", "error_type", "error"):
                row[field] = event.get(field)
            request = event.get("request")
            if name == "mllm_call_rejected" and isinstance(request, dict) and row["tags"] is None:
                row.update(_request_fields(request))
        else:
            errors.append(f"mllm_trace.jsonl: unknown event {name!r} for call {call_id}")
    return list(calls.values())


# --- the expected matrix ---------------------------------------------------------------------


def _matrix_entry(entry: Any, where: str) -> RunKey:
    if not isinstance(entry, dict):
        raise MatrixError(
            f"{where}: expected an object with condition, task, replicate, got {entry!r}"
        )
    for field in ("condition", "task", "replicate"):
        if field not in entry:
            raise MatrixError(f"{where}: field '{field}' is missing in {entry!r}")
    rep = entry["replicate"]
    if isinstance(rep, str) and _REPLICATE.fullmatch(rep):
        rep = int(rep[1:])
    if isinstance(rep, bool) or not isinstance(rep, int) or rep < 0:
        raise MatrixError(f"{where}: field 'replicate' must be a whole number, got {rep!r}")
    for field in ("condition", "task"):
        if not isinstance(entry[field], str) or not entry[field]:
            raise MatrixError(
                f"{where}: field '{field}' must be a non-empty string, got {entry[field]!r}"
            )
    return RunKey(entry["condition"], entry["task"], rep)


def load_expected(path: Path) -> list[RunKey]:
    """Read an explicit matrix file: a JSON list of {condition, task, replicate}."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MatrixError(f"--expected {path}: cannot read JSON ({exc})") from exc
    if isinstance(data, dict) and "matrix" in data:
        data = data["matrix"]
    if not isinstance(data, list):
        raise MatrixError(f"--expected {path}: expected a JSON list, got {type(data).__name__}")
    return [_matrix_entry(entry, f"--expected {path} item {i}") for i, entry in enumerate(data)]


def _matrix_from_experiment_json(exp_dir: Path) -> list[RunKey] | None:
    """Lenient: a list under "matrix", or {conditions, tasks, replicates}; else no matrix."""
    path = exp_dir / "experiment.json"
    if not path.is_file():
        return None
    try:
        matrix = json.loads(path.read_text(encoding="utf-8")).get("matrix")
        if isinstance(matrix, list):
            return [_matrix_entry(e, f"{path} matrix item {i}") for i, e in enumerate(matrix)]
        if isinstance(matrix, dict):
            reps = matrix["replicates"]
            reps = range(1, reps + 1) if isinstance(reps, int) else reps
            return [
                RunKey(c, t, int(r))
                for c in matrix["conditions"]
                for t in matrix["tasks"]
                for r in reps
            ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"collect: ignoring the matrix of {path}: {exc}", file=sys.stderr)
    return None


# --- finding and reading run folders -----------------------------------------------------------


def _subdirs(path: Path) -> list[os.DirEntry[str]]:
    return sorted((e for e in os.scandir(path) if e.is_dir()), key=lambda e: e.name)


def discover_runs(exp_dir: Path, condition: str | None = None) -> list[RunKey]:
    """Every <condition>/<task>/r<k>/ folder under the experiment folder."""
    found: list[RunKey] = []
    for cond in _subdirs(exp_dir):
        if cond.name in RESERVED_FOLDERS or cond.name.startswith("."):
            continue
        if condition is not None and cond.name != condition:
            continue
        for task in _subdirs(Path(cond.path)):
            for rep in _subdirs(Path(task.path)):
                if match := _REPLICATE.fullmatch(rep.name):
                    found.append(RunKey(cond.name, task.name, int(match.group(1))))
    return found


def _file_columns(row: dict[str, Any], docs: dict[str, Any], errors: list[str]) -> None:
    for col in RUNS:
        file, _, path = col.source.partition(":")
        if file == "derived" or docs.get(file) is None:
            continue
        value: Any = docs[file]
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        row[col.name] = typed_value(value, col.dtype, f"{file} {path}", errors)


def _status(run_dir: Path, outcome: dict[str, Any] | None, outcome_error: bool) -> tuple[str, str]:
    if outcome is None:
        if outcome_error:
            return "failed", "outcome.json is unreadable"
        return "not_started", "no outcome.json: the agent stage has not finished"
    status = outcome.get("status")
    if status in ("failed", "timeout", "max_turns", "not_started"):
        detail = outcome.get("error") or outcome.get("result_subtype") or ""
        return status, f"agent status {status}" + (f": {detail}" if detail else "")
    if status != "ok":
        return "failed", f"outcome.json status has an unknown value {status!r}"
    if not (run_dir / "answer" / "answer.html").is_file():
        return "missing_answer", "agent finished but answer/answer.html is absent"
    return "ok", ""


def _flat_family(
    row: dict[str, Any], prefix: str, mapping: Any, dtype: str, where: str, errors: list[str]
) -> None:
    if mapping is None:
        return
    if not isinstance(mapping, dict):
        errors.append(f"{where}: expected an object, got {type(mapping).__name__}")
        return
    for name, value in mapping.items():
        row[prefix + str(name)] = typed_value(value, dtype, f"{where}.{name}", errors)


def extract_run(exp_dir: Path, experiment: str, key: RunKey) -> RunExtract:
    """Read one run folder; never raises for bad content, it lands in `read_errors` instead."""
    run_dir = exp_dir / key.condition / key.task / f"r{key.replicate}"
    row: dict[str, Any] = {"experiment": experiment, **key._asdict()}
    row["run_record"] = f"{experiment}/{key.condition}/{key.task}/r{key.replicate}/run.json"
    if not run_dir.is_dir():
        row.update(status="missing", reason="run folder is absent", read_errors="")
        return RunExtract(row, [], [])
    errors: list[str] = []
    docs = {
        name: load_json(run_dir / name, name, errors)
        for name in ("run.json", "outcome.json", "metrics.json", "audit.json", "render/render.json")
    }
    outcome_error = any(e.startswith("outcome.json:") and "absent" not in e for e in errors)
    _file_columns(row, docs, errors)
    row["status"], row["reason"] = _status(run_dir, docs["outcome.json"], outcome_error)
    record = docs["run.json"] or {}
    for field in ("experiment", "condition", "task"):
        if field in record and record[field] != row[field]:
            errors.append(
                f"run.json {field} {record[field]!r} differs from the folder {row[field]!r}"
            )
    metrics, audit = docs["metrics.json"] or {}, docs["audit.json"] or {}
    _flat_family(row, "metric_", metrics.get("metrics"), "Float64", "metrics.json metrics", errors)
    _flat_family(row, "audit_", audit.get("flags"), "boolean", "audit.json flags", errors)

    tools = tool_call_rows(run_dir / "transcript.jsonl", errors)
    calls = mllm_call_rows(run_dir / "mllm_trace.jsonl", errors)
    keys = {"experiment": experiment, **key._asdict()}
    if tools is not None:
        row["agent_tool_calls"] = len(tools)
        for name, count in Counter(t["tool"] for t in tools).items():
            row[f"tool_calls_{name}"] = count
    if calls is not None:
        outcomes = Counter(c["outcome"] for c in calls)
        row["mllm_calls"] = len(calls)
        row["mllm_calls_failed"] = outcomes["failed"]
        row["mllm_calls_rejected"] = outcomes["rejected"]
    row["read_errors"] = "; ".join(errors)
    return RunExtract(
        row, [{**keys, **t} for t in tools or ()], [{**keys, **c} for c in calls or ()]
    )


def _extract_star(args: tuple[Path, str, RunKey]) -> RunExtract:
    return extract_run(*args)


def collect_runs(
    exp_dir: Path,
    expected: list[RunKey] | None = None,
    condition: str | None = None,
    jobs: int | None = None,
) -> Extraction:
    """Read every expected or present run of the experiment (optionally of one condition)."""
    exp_dir = Path(exp_dir)
    if not exp_dir.is_dir():
        raise FileNotFoundError(f"--experiment-dir {exp_dir}: no such folder")
    experiment = exp_dir.resolve().name
    if expected is None:
        expected = _matrix_from_experiment_json(exp_dir)
    found = discover_runs(exp_dir, condition)
    wanted = [k for k in expected or () if condition is None or k.condition == condition]
    keys = sorted(set(found) | set(wanted))
    work = [(exp_dir, experiment, k) for k in keys]
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1 and len(work) >= _PARALLEL_FROM:
        with Pool(jobs) as pool:
            extracts = pool.map(_extract_star, work, chunksize=max(1, len(work) // (jobs * 8)))
    else:
        extracts = [_extract_star(w) for w in work]
    in_matrix = set(wanted)
    for ex in extracts:
        ex.run["in_matrix"] = (
            (RunKey(ex.run["condition"], ex.run["task"], ex.run["replicate"]) in in_matrix)
            if expected is not None
            else None
        )
    missing = [k for k in keys if k not in set(found)]
    return Extraction(experiment, extracts, missing)


# --- building the tables -------------------------------------------------------------------------


def _cast(series: pd.Series, dtype: str) -> pd.Series:
    if dtype == "list<string>":
        return series.astype(object)
    return series.astype(dtype)


def _frame(
    rows: list[dict[str, Any]], columns: tuple[Column, ...], extra: list[str] = ()
) -> pd.DataFrame:
    names = [c.name for c in columns] + list(extra)
    df = pd.DataFrame.from_records(rows, columns=names) if rows else pd.DataFrame(columns=names)
    for col in columns:
        df[col.name] = _cast(df[col.name], col.dtype)
    return df


def runs_df(extraction: Extraction) -> pd.DataFrame:
    rows = [ex.run for ex in extraction.extracts]
    declared = {c.name for c in RUNS}
    extra = sorted({k for r in rows for k in r} - declared)
    df = _frame(rows, RUNS, extra)
    for name in extra:
        if name.startswith("tool_calls_"):
            # A run whose transcript was read and has no use of this tool used it zero times.
            df[name] = (
                df[name].astype("Int64").where(df["agent_tool_calls"].isna(), df[name].fillna(0))
            )
        elif name.startswith("metric_"):
            df[name] = df[name].astype("Float64")
        elif name.startswith("audit_"):
            df[name] = df[name].astype("boolean")
    return df


def agent_tool_calls_df(extraction: Extraction) -> pd.DataFrame:
    return _frame([t for ex in extraction.extracts for t in ex.tool_calls], AGENT_TOOL_CALLS)


def mllm_calls_df(extraction: Extraction) -> pd.DataFrame:
    return _frame([c for ex in extraction.extracts for c in ex.mllm_calls], MLLM_CALLS)


def capability_tags_df(mllm_calls: pd.DataFrame) -> pd.DataFrame:
    names = [c.name for c in CAPABILITY_TAGS]
    long = mllm_calls.explode("tags").dropna(subset=["tags"]).rename(columns={"tags": "tag"})
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
    return Tables(
        runs_df(extraction),
        agent_tool_calls_df(extraction),
        calls,
        capability_tags_df(calls),
        capability_combinations_df(calls),
        extraction.missing,
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
    stem.parent.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        final = stem.with_suffix(f".{fmt}")
        tmp = final.with_name(f".{final.name}.tmp")
        if fmt == "parquet":
            df.to_parquet(tmp, index=False)
        else:
            _csv_ready(df).to_csv(tmp, index=False)
        os.replace(tmp, final)


# --- command line -------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment-dir", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--expected", type=Path, help="JSON list of {condition, task, replicate}")
    parser.add_argument("--condition", help="only this condition (with --summary)")
    parser.add_argument("--summary", type=Path, help="write one row per run of --condition here")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores)")


def run(args: argparse.Namespace) -> int:
    if (args.summary is None) != (args.condition is None):
        print("collect: --summary and --condition go together", file=sys.stderr)
        return 2
    if args.jobs is not None and args.jobs < 1:
        print(f"collect: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    try:
        expected = load_expected(args.expected) if args.expected else None
        extraction = collect_runs(args.experiment_dir, expected, args.condition, args.jobs)
    except (MatrixError, FileNotFoundError) as exc:
        print(f"collect: {exc}", file=sys.stderr)
        return 2
    runs = runs_df(extraction)
    if args.summary is not None:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.summary.with_name(f".{args.summary.name}.tmp")
        _csv_ready(runs).to_csv(tmp, index=False)
        os.replace(tmp, args.summary)
        print(f"collect: {len(runs)} runs of {args.condition} -> {args.summary}")
    else:
        tables = collect_tables(extraction)
        out = Path(args.experiment_dir) / "tables"
        for name in (
            "runs",
            "agent_tool_calls",
            "mllm_calls",
            "capability_tags",
            "capability_combinations",
        ):
            write_table(getattr(tables, name), out / name)
        missing = pd.DataFrame(
            [k._asdict() for k in extraction.missing], columns=["condition", "task", "replicate"]
        )
        write_table(missing, out / "missing", ("csv",))
        print(f"collect: {len(runs)} runs -> {out}")
    counts = runs["status"].value_counts().to_dict()
    print("collect: status " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    if extraction.missing:
        print(
            f"collect: {len(extraction.missing)} expected runs have no folder "
            "(listed in tables/missing.csv):",
            file=sys.stderr,
        )
        for key in extraction.missing:
            print(f"  missing {key.condition}/{key.task}/r{key.replicate}", file=sys.stderr)
    return 0
