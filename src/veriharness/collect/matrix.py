"""Which runs an experiment has, and one extraction pass over their folders.

Design notes:

- One pass reads each run folder once (`trace_reading.extract_run`) and yields its `runs` row plus
  its agent tool calls and CallMLLM calls; folders are independent, so the pass fans out over
  processes. This module decides which runs to read; `tables` turns the pass into tables.
- No run is ever dropped. The row set is the union of the expected matrix (``--expected`` or
  experiment.json) and the folders found; an expected run without a folder gets status `missing`,
  a folder without an outcome `not_started`; unreadable files are listed in `read_errors`.
"""

from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import Pool
from pathlib import Path
from typing import Any, NamedTuple

from veriharness.collect.columns import RunFields
from veriharness.collect.run_rows import (
    RunExtract,
    RunKey,
    extract_run,
    run_keys,
    run_record_path,
)
from veriharness.experiment.record import EXPERIMENT_RECORD, RecordError, read_record
from veriharness.runfolder.superseded import SUPERSEDED

__all__ = [
    "MatrixError",
    "Extraction",
    "load_expected",
    "discover_runs",
    "collect_runs",
]

RESERVED_FOLDERS = frozenset(
    {"tables", "report", "logs", "inputs", "benchmarks", "spend", "monitor", SUPERSEDED}
)
_REPLICATE = re.compile(r"r(\d+)")
_PARALLEL_FROM = 200  # below this, starting worker processes costs more than it saves


class MatrixError(ValueError):
    """The expected-matrix file is malformed."""


class Extraction(NamedTuple):
    experiment: str
    extracts: list[RunExtract]
    missing: list[RunKey]


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
    """The runs experiment.json expects: its "matrix", a list of runs or {conditions, tasks,
    replicates}. None when there is no experiment.json or it has no matrix; a matrix that cannot
    be read is a MatrixError, since collecting without it would not list the missing runs."""
    path = exp_dir / "experiment.json"
    if not path.is_file():
        return None
    try:
        matrix = read_record(path, EXPERIMENT_RECORD).get("matrix")
    except RecordError as exc:
        raise MatrixError(str(exc)) from exc
    if matrix is None:
        return None
    if isinstance(matrix, list):
        return [_matrix_entry(e, f"{path} matrix item {i}") for i, e in enumerate(matrix)]
    if not isinstance(matrix, dict):
        raise MatrixError(f"{path}: field 'matrix' must be a list or an object, got {matrix!r:.80}")
    try:
        reps = matrix["replicates"]
        if isinstance(reps, int) and not isinstance(reps, bool):
            reps = range(1, reps + 1)
        elif not isinstance(reps, list):
            raise MatrixError(
                f"{path}: field 'matrix.replicates' must be a count or a list, got {reps!r:.80}"
            )
        runs = [
            _matrix_entry({"condition": c, "task": t, "replicate": r}, f"{path} matrix")
            for c in matrix["conditions"]
            for t in matrix["tasks"]
            for r in reps
        ]
        return runs + [
            _matrix_entry({"condition": c, "task": t, "replicate": 1}, f"{path} matrix.external")
            for c in matrix.get("external", ())
            for t in matrix["tasks"]
        ]
    except KeyError as exc:
        raise MatrixError(f"{path}: field 'matrix.{exc.args[0]}' is missing") from exc
    except TypeError as exc:
        raise MatrixError(f"{path}: field 'matrix' is malformed ({exc}): {matrix!r:.120}") from exc


# --- finding and reading run folders -----------------------------------------------------------


def _subdirs(path: Path) -> list[os.DirEntry[str]]:
    return sorted((e for e in os.scandir(path) if e.is_dir()), key=lambda e: e.name)


def discover_runs(
    exp_dir: Path, condition: str | None = None, task: str | None = None
) -> list[RunKey]:
    """Every <condition>/<task>/r<k>/ folder under the experiment folder (optionally one slice)."""
    found: list[RunKey] = []
    for cond in _subdirs(exp_dir):
        if cond.name in RESERVED_FOLDERS or cond.name.startswith("."):
            continue
        if condition is not None and cond.name != condition:
            continue
        for task_dir in _subdirs(Path(cond.path)):
            if task is not None and task_dir.name != task:
                continue
            for rep in _subdirs(Path(task_dir.path)):
                if match := _REPLICATE.fullmatch(rep.name):
                    found.append(RunKey(cond.name, task_dir.name, int(match.group(1))))
    return found


def _extract_star(args: tuple[Path, str, RunKey]) -> RunExtract:
    try:
        return extract_run(*args)
    except Exception as exc:  # noqa: BLE001 - one unreadable run must not cost the tables
        exp_dir, experiment, key = args
        failed: RunFields = {
            "run_record": run_record_path(experiment, key),
            "status": "collect_failed",
            "reason": f"collect_failed: {type(exc).__name__}: {exc}",
            "read_errors": "",
        }
        return RunExtract({**run_keys(experiment, key), **failed})


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cycle collector paused while the workers' rows are unpickled: they hold no cycles,
    and its full passes over millions of new objects took 40% of the unpickling (P-49)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _superseded_runs(exp_dir: Path, experiment: str) -> list[RunExtract]:
    """Every run moved to superseded/<identity_hash>/, marked as such and outside the matrix."""
    folder = exp_dir / SUPERSEDED
    if not folder.is_dir():
        return []
    extracts = []
    for entry in _subdirs(folder):
        for key in discover_runs(Path(entry.path)):
            extract = extract_run(Path(entry.path), experiment, key)
            extract.run["superseded"], extract.run["in_matrix"] = True, False
            extract.run["run_record"] = (
                f"{experiment}/{SUPERSEDED}/{entry.name}/{key.condition}/"
                f"{key.task}/r{key.replicate}/run.json"
            )
            extracts.append(extract)
    return extracts


def collect_runs(
    exp_dir: Path,
    expected: list[RunKey] | None = None,
    condition: str | None = None,
    jobs: int | None = None,
    task: str | None = None,
    include_superseded: bool = False,
) -> Extraction:
    """Read every expected or present run of the experiment (optionally of one condition or
    one task), and with `include_superseded` the runs moved to superseded/ too."""
    exp_dir = Path(exp_dir)
    if not exp_dir.is_dir():
        raise FileNotFoundError(f"--experiment-dir {exp_dir}: no such folder")
    experiment = exp_dir.resolve().name
    if expected is None:
        expected = _matrix_from_experiment_json(exp_dir)
    found = discover_runs(exp_dir, condition, task)
    wanted = [
        k
        for k in expected or ()
        if (condition is None or k.condition == condition) and (task is None or k.task == task)
    ]
    keys = sorted(set(found) | set(wanted))
    work = [(exp_dir, experiment, k) for k in keys]
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1 and len(work) >= _PARALLEL_FROM:
        with Pool(jobs) as pool, _no_cycle_collection():
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
    present = set(found)
    missing = [k for k in keys if k not in present]
    if include_superseded:
        extracts += [
            ex
            for ex in _superseded_runs(exp_dir, experiment)
            if (condition is None or ex.run["condition"] == condition)
            and (task is None or ex.run["task"] == task)
        ]
    return Extraction(experiment, extracts, missing)
