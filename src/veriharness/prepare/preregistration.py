"""The start's registration of the analysis (`preregistration.json`) and its drift check.

`register` runs in `check-experiment`, after the experiment record is written and before any job
of the workflow: the first start whose experiment folder holds no registration writes one
(`runfolder.preregistration`). When sessions have already started there (an experiment begun
before registration existed), the record it writes says so and registers nothing. A later start
never writes it again; when its analysis or matrix differs from the registered one it says so
in one line, and `compare` names the change beside the verdict.

`claude_drift` is the start's one-line warning when the claude CLI it would run differs from the
one the finished runs ran with (their `outcome.json`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veriharness._util.harness import harness_version
from veriharness.experiment.analysis import AnalysisSettings
from veriharness.experiment.record import ExperimentRecord
from veriharness.experiment.workflow import comparison_pairs
from veriharness.runfolder import agent_requests, outcome, transcript
from veriharness.runfolder._files import read_object
from veriharness.runfolder.attempts import ATTEMPTS, FINISHED
from veriharness.runfolder.preregistration import (
    PREREGISTRATION,
    Preregistration,
    RegisteredAnalysis,
    RegisteredPair,
    analysis_changes,
    content_digest,
    matrix_changes,
    matrix_of,
    pairs_text,
    read_preregistration,
    write_once,
)
from veriharness.runfolder.superseded import SUPERSEDED

__all__ = [
    "Registered",
    "claude_drift",
    "register",
    "registration_of",
    "sessions_started",
]

# A run folder holding any of these had a session start (an outcome counts unless it says the
# session never started).
_SESSION_FILES = (transcript.NAME, agent_requests.NAME, ATTEMPTS, FINISHED)
_NEVER_STARTED = "not_started"
_EXTERNAL = "external:"


def _session_started(run_dir: Path) -> bool:
    if any((run_dir / name).exists() for name in _SESSION_FILES):
        return True
    data = read_object(run_dir / outcome.NAME, outcome.NAME, [])
    return data is not None and data.get("status") != _NEVER_STARTED


def _run_folders(root: Path) -> list[Path]:
    """`<condition>/<task>/r<k>` folders under `root`, external answer sets left out."""
    return [
        run
        for run in root.glob("*/*/r*")
        if run.is_dir() and not run.parent.parent.name.startswith(_EXTERNAL)
    ]


def sessions_started(exp_dir: Path) -> int:
    """How many run folders of the experiment (its superseded ones included) had a session
    start."""
    folders = _run_folders(exp_dir)
    superseded = exp_dir / SUPERSEDED
    if superseded.is_dir():
        for kept in superseded.iterdir():
            folders += _run_folders(kept)
    return sum(_session_started(run) for run in folders)


def _analysis(record: ExperimentRecord) -> RegisteredAnalysis:
    return RegisteredAnalysis.of(
        AnalysisSettings.model_validate(record.config.get("analysis") or {})
    )


def registration_of(record: ExperimentRecord, sessions: int) -> Preregistration:
    """The registration of an experiment record; one that registers nothing when `sessions`
    had started already."""
    data: dict[str, Any] = record.model_dump(mode="json")
    config = record.config
    registers = sessions == 0
    analysis = _analysis(record)
    pairs = [RegisteredPair(baseline=b, treatment=t) for b, t in comparison_pairs(config)]
    seed = (data.get("start_order") or {}).get("seed")
    fields: dict[str, Any] = {
        "experiment": record.experiment,
        "created_at": record.provenance.created_at,
        "before_sessions": registers,
        "sessions_found": sessions,
        "analysis": analysis if registers else None,
        "pairs": pairs if registers else None,
        "matrix": matrix_of(data["matrix"], record.cells) if registers else None,
        "experiment_identity_hash": record.identity_hash if registers else None,
        "order_seed": seed if isinstance(seed, int) and registers else None,
        "harness": record.provenance.harness or harness_version(),
        "claude_version": record.provenance.claude_version,
        "digest": "",
    }
    draft = Preregistration.model_validate(fields)
    return draft.model_copy(update={"digest": content_digest(draft.model_dump(mode="json"))})


@dataclass(frozen=True)
class Registered:
    """What the start found or wrote: the registration, whether this start wrote it, and how
    the start's analysis and matrix differ from it (one phrase each)."""

    path: Path
    value: Preregistration | None
    written: bool
    differences: list[str]
    problems: list[str]


def register(record: ExperimentRecord, exp_dir: Path) -> Registered:
    """Write the experiment's registration if it has none; otherwise compare the start's
    analysis and matrix with it."""
    path = PREREGISTRATION.path(exp_dir)
    if not path.exists():
        value = registration_of(record, sessions_started(exp_dir))
        if write_once(exp_dir, value):
            return Registered(path, value, True, [], [])
    problems: list[str] = []
    found, digest = read_preregistration(exp_dir, problems)
    if found is not None and digest != found.digest:
        problems.append(
            f"its content's digest is {digest}, not the {found.digest} it states: it was edited "
            "after it was written"
        )
    differences: list[str] = []
    if found is not None and found.analysis is not None:
        now = _analysis(record)
        differences += [
            f"the {what} {'were' if what.endswith('s') else 'was'} registered as {before}, "
            f"{'are' if what.endswith('s') else 'is'} now {after}"
            for what, before, after in analysis_changes(found.analysis, now)
        ]
    if found is not None and found.pairs is not None:
        was = [(p.baseline, p.treatment) for p in found.pairs]
        now_pairs = comparison_pairs(record.config)
        if set(was) != set(now_pairs):
            differences.append(
                f"the compared pairs were registered as {pairs_text(was)}, are now "
                f"{pairs_text(now_pairs)}"
            )
    if found is not None and found.matrix is not None:
        current = matrix_of(record.model_dump(mode="json")["matrix"], record.cells)
        differences += matrix_changes(found.matrix, current)
    return Registered(path, found, False, differences, problems)


_SESSION_RAN = frozenset(
    {"ok", "failed", "timeout", "max_turns", "resource_limit", "budget_exhausted"}
)


def claude_drift(record: ExperimentRecord, exp_dir: Path) -> str | None:
    """One line when the claude CLI this start found differs from the one the experiment's
    finished runs ran with (counted per version); None when they agree or none has run."""
    start = record.provenance.claude_version
    seen: Counter[str] = Counter()
    matrix = record.matrix
    for condition in matrix.conditions:
        for task in matrix.tasks:
            for replicate in range(1, matrix.replicates + 1):
                run_dir = exp_dir / condition / task / f"r{replicate}"
                data = read_object(run_dir / outcome.NAME, outcome.NAME, [])
                if data is None or data.get("status") not in _SESSION_RAN:
                    continue
                version = data.get("claude_version")
                seen[version if isinstance(version, str) else "unrecorded"] += 1
    if not seen or set(seen) == {start}:
        return None
    finished = ", ".join(f"{v} ({n} run(s))" for v, n in sorted(seen.items()))
    return (
        f"this start's claude CLI is {start or 'unknown'}, the finished runs' {finished}: the "
        "sessions it starts will run another version (the comparison names the mix)"
    )
