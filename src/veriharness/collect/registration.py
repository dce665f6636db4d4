"""What the comparison says about the analysis registered before the first session
(`preregistration.json`, written by the start check).

`registration_check` reads the registration and sets it beside the analysis, the compared pairs
and the run matrix in force now (the experiment record's): each difference becomes one line that
comparison.md and the report's first screen show before anything else, in the form "the primary
outcome was registered as X before any session; it is now Y, after N sessions". When the
analysis differs, `compare` computes the registered analysis's verdict too and gives it beside
the current one (`registered`). An experiment without a registration, one whose registration
was written after its sessions had started, and an edited registration are said so the same way.
An experiment folder with no experiment record (a table compared on its own) has nothing to set
the registration against and gets no line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from veriharness.experiment.analysis import AnalysisSettings
from veriharness.experiment.record import EXPERIMENT_RECORD, RecordError, read_record
from veriharness.runfolder.preregistration import (
    NAME,
    Preregistration,
    RegisteredAnalysis,
    analysis_changes,
    matrix_changes,
    matrix_of,
    pairs_text,
    read_preregistration,
)

__all__ = ["RegistrationCheck", "registered_pair", "registration_check", "sessions_run"]

# The statuses of a run whose session ran (outcome.json's).
_SESSION_RAN = ("ok", "failed", "timeout", "max_turns", "resource_limit", "budget_exhausted")


@dataclass(frozen=True)
class RegistrationCheck:
    """`lines`: what differs from the registration (shown first; empty when nothing does);
    `note`: the sentence that names the registration when nothing differs; `registered`: the
    registered analysis when it differs from the current one (its verdict is computed beside);
    `problem`: why the registered analysis cannot be computed, if it cannot."""

    lines: list[str] = field(default_factory=list)
    note: str | None = None
    registered: AnalysisSettings | None = None
    registered_pairs: list[tuple[str, str]] | None = None
    problem: str | None = None
    digest: str | None = None


def sessions_run(runs: pd.DataFrame) -> int:
    """How many runs of the table had a session (superseded ones and imported answers aside)."""
    if "outcome_status" not in runs:
        return 0
    current = runs
    if "superseded" in runs:
        current = runs[~runs["superseded"].fillna(False).astype(bool)]
    ran = current["outcome_status"].isin(_SESSION_RAN).fillna(False).astype(bool)
    if "answer_source" in current:
        ran &= current["answer_source"].ne("external").fillna(True).astype(bool)
    return int(ran.sum())


def registration_check(
    exp_dir: Path,
    settings: AnalysisSettings,
    pairs: list[tuple[str, str]],
    runs: pd.DataFrame,
) -> RegistrationCheck:
    """The registration of `exp_dir` set beside `settings`, `pairs` and the matrix of its
    experiment.json, worded (see the module's notes)."""
    record_path = exp_dir / "experiment.json"
    if not record_path.is_file():
        return RegistrationCheck()
    sessions = sessions_run(runs)
    problems: list[str] = []
    found, digest = read_preregistration(exp_dir, problems)
    path = exp_dir / NAME
    if found is None:
        why = "; ".join(problems) or "there is none"
        return RegistrationCheck(
            lines=[
                f"NOT REGISTERED: no analysis was locked before the first session ({path}: "
                f"{why}); the analysis used is the one in experiment.json now, after {sessions} "
                "sessions."
            ]
        )
    if not found.before_sessions or found.analysis is None:
        return RegistrationCheck(
            lines=[
                f"NOT REGISTERED: {path} was written after {found.sessions_found} session(s) had "
                "started (the experiment began before registration existed), so no analysis was "
                f"locked before the first session; the analysis used is the one in "
                f"experiment.json now, after {sessions} sessions."
            ],
            digest=found.digest,
        )
    lines = [f"REGISTRATION: {path}: {p}." for p in problems]
    if digest != found.digest:
        lines.append(
            f"REGISTRATION EDITED: {path} states the digest {found.digest}, but its content's is "
            f"{digest}: it was changed after the start wrote it, so what it says was registered "
            "cannot be trusted."
        )
    lines += _changes(found, settings, pairs, record_path, sessions)
    registered: AnalysisSettings | None = None
    problem = None
    if analysis_changes(found.analysis, RegisteredAnalysis.of(settings)):
        try:
            registered = found.analysis.settings()
        except ValueError as exc:
            problem = f"the registered analysis is not valid now: {exc}"
    registered_pairs = (
        None if found.pairs is None else [(p.baseline, p.treatment) for p in found.pairs]
    )
    note = None
    if not lines:
        note = (
            f"The analysis, the compared pairs and the run matrix are those registered before the "
            f"first session ({NAME}, {found.digest}, {found.created_at})."
        )
    return RegistrationCheck(lines, note, registered, registered_pairs, problem, found.digest)


def _changes(
    found: Preregistration,
    settings: AnalysisSettings,
    pairs: list[tuple[str, str]],
    record_path: Path,
    sessions: int,
) -> list[str]:
    """One line per part that differs from the registration."""
    assert found.analysis is not None
    after = f"after {sessions} sessions"
    lines = [
        f"CHANGED AFTER REGISTRATION: the {what} {_was(what)} registered as {before} before any "
        f"session; {_it(what)} now {now}, {after}."
        for what, before, now in analysis_changes(found.analysis, RegisteredAnalysis.of(settings))
    ]
    if found.pairs is not None:
        was = [(p.baseline, p.treatment) for p in found.pairs]
        if set(was) != set(pairs):
            lines.append(
                f"CHANGED AFTER REGISTRATION: the compared pairs were registered as "
                f"{pairs_text(was)} before any session; they are now {pairs_text(pairs)}, "
                f"{after}."
            )
    if found.matrix is not None:
        try:
            record = read_record(record_path, EXPERIMENT_RECORD)
            current = matrix_of(record.get("matrix") or {}, record.get("cells") or {})
        except (RecordError, ValueError, TypeError, AttributeError) as exc:
            lines.append(f"REGISTRATION: the run matrix now cannot be read ({exc}).")
        else:
            lines += [
                f"CHANGED AFTER REGISTRATION: {line} ({after})."
                for line in matrix_changes(found.matrix, current)
            ]
    if lines:
        lines[0] = lines[0].removesuffix(".") + f" ({NAME}: {found.digest}, {found.created_at})."
    return lines


def _was(what: str) -> str:
    return "were" if what.endswith("s") else "was"


def _it(what: str) -> str:
    return "they are" if what.endswith("s") else "it is"


def registered_pair(check: RegistrationCheck, pair: tuple[str, str]) -> bool:
    """Whether `pair` was among the registered pairs (True when none were recorded)."""
    return check.registered_pairs is None or pair in check.registered_pairs
