"""`results/<experiment>/preregistration.json`: the analysis and the run matrix an experiment
registered before its first session.

The start check (`check-experiment`, `prepare/preregistration.py`) writes it once, when there is
none, and never again: `write_once` creates it under its name only if no file holds that name, so
a later start with another analysis leaves the bytes as they are. It holds the declared analysis
(primary, secondary, floor flags, alpha), the compared pairs, the run matrix with every run's
identity hash, the start order's seed, the harness and claude CLI versions, the time, and
`digest`: the sha256 of the canonical JSON of every other field (`content_digest`), which the
start prints so a paper can quote it and a reader can tell an edited file from the one written.

An experiment whose sessions began before registration existed gets a record that says so
(`before_sessions` false, `sessions_found`), with no analysis in it: one written after the
answers were seen would register nothing.

`analysis_changes` and `matrix_changes` word what differs between the registration and the
analysis or matrix in force; the start check and `compare` both use them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from veriharness._util import atomic
from veriharness._util.harness import HarnessVersion
from veriharness._util.hashing import sha256_json
from veriharness.experiment.analysis import AnalysisSettings, MonitorSettings
from veriharness.runfolder._files import JsonFile, read_object

__all__ = [
    "KIND",
    "NAME",
    "PREREGISTRATION",
    "Preregistration",
    "RegisteredAnalysis",
    "RegisteredMatrix",
    "RegisteredPair",
    "RegisteredRun",
    "analysis_changes",
    "content_digest",
    "matrix_changes",
    "matrix_of",
    "pairs_text",
    "read_preregistration",
    "run_name",
    "write_once",
]

NAME = "preregistration.json"
KIND: Literal["preregistration"] = "preregistration"
FORMAT_VERSION = 1


class RegisteredAnalysis(BaseModel):
    """The config's `analysis` as declared (secondary null: every other metric)."""

    primary: list[str]
    secondary: list[str] | None
    floor_flags: list[str]
    alpha: float
    # analysis.monitor: the running answer and its stop rule (None: none declared, or a
    # registration from before the monitor).
    monitor: MonitorSettings | None = None

    @classmethod
    def of(cls, settings: AnalysisSettings) -> RegisteredAnalysis:
        return cls(
            primary=list(settings.primary),
            secondary=None if settings.secondary is None else list(settings.secondary),
            floor_flags=list(settings.floor_flags),
            alpha=settings.alpha,
            monitor=settings.monitor,
        )

    def settings(self) -> AnalysisSettings:
        """As the comparison's settings; raises ValueError for a name no longer known."""
        return AnalysisSettings.model_validate(self.model_dump())


class RegisteredPair(BaseModel):
    baseline: str
    treatment: str


class RegisteredRun(BaseModel):
    condition: str
    task: str
    replicate: int
    identity_hash: str | None


class RegisteredMatrix(BaseModel):
    """Every session run of the matrix with its identity hash (the cell's: replicates share it),
    and the external answer sets by name (they run no session)."""

    conditions: list[str]
    tasks: list[str]
    replicates: int
    external: list[str]
    runs: list[RegisteredRun]


class Preregistration(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["preregistration"] = KIND
    format_version: int = FORMAT_VERSION
    experiment: str
    created_at: str
    before_sessions: bool
    """False: sessions had started when it was first written, so it registers nothing."""
    sessions_found: int
    """Runs with a session started when it was written (0 when before_sessions)."""
    analysis: RegisteredAnalysis | None
    pairs: list[RegisteredPair] | None
    matrix: RegisteredMatrix | None
    experiment_identity_hash: str | None
    order_seed: int | None
    """The start order's seed (experiment.json start_order.seed); null: none recorded."""
    harness: HarnessVersion | None
    claude_version: str | None
    digest: str
    """sha256 of the canonical JSON of every other field (`content_digest`)."""


PREREGISTRATION = JsonFile(NAME, Preregistration)


def content_digest(data: Mapping[str, Any]) -> str:
    """The digest of a registration's content: every field but `digest`, canonical JSON."""
    return sha256_json({k: v for k, v in data.items() if k != "digest"})


def read_preregistration(
    exp_dir: Path, errors: list[str]
) -> tuple[Preregistration | None, str | None]:
    """The registration, leniently, and the digest of its content as read (None without a
    readable file): a digest that differs from the file's `digest` field is an edited file."""
    path = PREREGISTRATION.path(exp_dir)
    if not path.is_file():
        return None, None
    data = read_object(path, NAME, errors)
    if data is None:
        return None, None
    return PREREGISTRATION.read(exp_dir, errors), content_digest(data)


def write_once(exp_dir: Path, value: Preregistration) -> bool:
    """Create the file from `value` unless one exists; True when this call created it. The
    bytes are written whole under a temporary name and linked to the file's name, which fails
    when the name is taken, so two starts at once leave exactly one registration."""
    path = PREREGISTRATION.path(exp_dir)
    if path.exists():
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    atomic.write_json(tmp, value.model_dump(mode="json"))
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def matrix_of(
    matrix: Mapping[str, Any], cells: Mapping[str, Mapping[str, str]]
) -> RegisteredMatrix:
    """The run matrix of an experiment record's `matrix` and `cells`."""
    conditions = [str(c) for c in matrix.get("conditions", [])]
    tasks = [str(t) for t in matrix.get("tasks", [])]
    replicates = int(matrix.get("replicates", 1))
    runs = [
        RegisteredRun(condition=c, task=t, replicate=k, identity_hash=(cells.get(c) or {}).get(t))
        for c in conditions
        for t in tasks
        for k in range(1, replicates + 1)
    ]
    external = [str(e) for e in matrix.get("external", [])]
    return RegisteredMatrix(
        conditions=conditions, tasks=tasks, replicates=replicates, external=external, runs=runs
    )


def run_name(run: RegisteredRun) -> str:
    return f"{run.condition}/{run.task}/r{run.replicate}"


def pairs_text(pairs: Sequence[tuple[str, str]]) -> str:
    """Compared pairs worded, treatment first (`a` vs `b`)."""
    return ", ".join(f"`{t}` vs `{b}`" for b, t in pairs) or "none"


def _listed(values: Sequence[str] | None, none: str) -> str:
    if values is None:
        return none
    return ", ".join(f"`{v}`" for v in values) if values else "none"


def analysis_changes(
    registered: RegisteredAnalysis, current: RegisteredAnalysis
) -> list[tuple[str, str, str]]:
    """(what, as registered, as now) for each part of the analysis that differs, worded."""
    changes = []
    if registered.primary != current.primary:
        what = "primary outcome" if len(registered.primary) == 1 else "primary outcomes"
        changes.append((what, _listed(registered.primary, ""), _listed(current.primary, "")))
    if registered.secondary != current.secondary:
        every = "every other metric (secondary: null)"
        changes.append(
            (
                "secondary outcomes",
                _listed(registered.secondary, every),
                _listed(current.secondary, every),
            )
        )
    if registered.floor_flags != current.floor_flags:
        changes.append(
            (
                "floor flags",
                _listed(registered.floor_flags, ""),
                _listed(current.floor_flags, ""),
            )
        )
    if registered.alpha != current.alpha:
        changes.append(("alpha", f"{registered.alpha:g}", f"{current.alpha:g}"))
    # The monitor's sequence (method, alpha, margin); its `stop` says whether sessions start,
    # not what is analysed, and setting it false is how a stopped study is finished.
    if _monitor_text(registered.monitor) != _monitor_text(current.monitor):
        changes.append(
            ("monitor", _monitor_text(registered.monitor), _monitor_text(current.monitor))
        )
    return changes


def _monitor_text(monitor: MonitorSettings | None) -> str:
    if monitor is None:
        return "none (analysis.monitor: null)"
    alpha = "analysis.alpha" if monitor.alpha is None else f"{monitor.alpha:g}"
    margin = "none" if monitor.margin is None else f"{monitor.margin:g}"
    return f"{monitor.method}, alpha {alpha}, margin {margin}"


_SHOWN_RUNS = 10


def _runs_text(runs: list[RegisteredRun]) -> str:
    names = [run_name(r) for r in runs[:_SHOWN_RUNS]]
    more = f" and {len(runs) - _SHOWN_RUNS} more" if len(runs) > _SHOWN_RUNS else ""
    return ", ".join(names) + more


def _shape(matrix: RegisteredMatrix) -> str:
    return (
        f"{len(matrix.runs)} runs ({len(matrix.conditions)} condition(s) x "
        f"{len(matrix.tasks)} task(s) x {matrix.replicates} replicate(s))"
    )


def _parts(registered: list[str], current: list[str], what: str) -> list[str]:
    added = [v for v in current if v not in registered]
    removed = [v for v in registered if v not in current]
    out = []
    if added:
        out.append(f"{what} added: " + ", ".join(f"`{v}`" for v in added))
    if removed:
        out.append(f"{what} removed: " + ", ".join(f"`{v}`" for v in removed))
    return out


def matrix_changes(registered: RegisteredMatrix, current: RegisteredMatrix) -> list[str]:
    """Sentences naming how the run matrix differs from the registered one: its size (grown or
    shrunk, by which conditions, tasks and replicates, and which runs), the external answer
    sets, and the runs whose identity (their inputs) changed; empty when it is the same."""
    before = {run_name(r): r for r in registered.runs}
    now = {run_name(r): r for r in current.runs}
    added = [r for name, r in now.items() if name not in before]
    removed = [r for name, r in before.items() if name not in now]
    changed = [
        r
        for name, r in now.items()
        if name in before and before[name].identity_hash != r.identity_hash
    ]
    lines = []
    if added or removed:
        grown = (
            "grew" if len(now) > len(before) else "shrank" if len(now) < len(before) else "changed"
        )
        parts = _parts(registered.conditions, current.conditions, "conditions")
        parts += _parts(registered.tasks, current.tasks, "tasks")
        if registered.replicates != current.replicates:
            parts.append(f"replicates {registered.replicates} -> {current.replicates}")
        runs = []
        if added:
            runs.append(f"{len(added)} run(s) added ({_runs_text(added)})")
        if removed:
            runs.append(f"{len(removed)} run(s) removed ({_runs_text(removed)})")
        lines.append(
            f"the run matrix {grown}: it was registered as {_shape(registered)} before any "
            f"session; it is now "
            f"{_shape(current)}: " + "; ".join(parts + runs)
        )
    external = _parts(registered.external, current.external, "external answer sets")
    if external:
        lines.append("the external answer sets changed: " + "; ".join(external))
    if changed:
        lines.append(
            f"{len(changed)} run(s) of the registered matrix now have another identity (their "
            f"inputs changed after registration): {_runs_text(changed)}"
        )
    return lines
