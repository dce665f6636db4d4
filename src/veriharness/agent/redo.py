"""The runs a researcher names for `veriharness redo-session`: a condition, a task, a replicate,
or any of them together, within one experiment folder.

Only the sessions' conditions are named (an `external:<name>` answer set had no session), and
only folders holding a finished session are picked; a name that matches no folder is refused
with the names there are, so a typo never passes as "nothing to redo".
"""

from __future__ import annotations

import re
from pathlib import Path

from veriharness.agent.attempts import not_redoable

__all__ = ["RedoSelectionError", "named_runs"]

_REPLICATE = re.compile(r"r(\d+)")
_EXTERNAL = "external:"


class RedoSelectionError(ValueError):
    """A condition, task or replicate named no run folder with a finished session."""


def _run_folders(experiment_dir: Path) -> list[Path]:
    """Every `<condition>/<task>/r<k>` folder with a run.json, sessions' conditions only."""
    found = []
    for run_json in experiment_dir.glob("*/*/r*/run.json"):
        run = run_json.parent
        if _REPLICATE.fullmatch(run.name) and not run.parents[1].name.startswith(_EXTERNAL):
            found.append(run)
    return sorted(found)


def _refuse(field: str, value: str, present: set[str], where: Path) -> RedoSelectionError:
    listed = ", ".join(sorted(present)) or "none"
    return RedoSelectionError(
        f"{field} {value!r}: no run folder of that {field} under {where} (there: {listed})"
    )


def named_runs(
    experiment_dir: Path,
    condition: str | None = None,
    task: str | None = None,
    replicate: int | None = None,
) -> list[Path]:
    """The run folders of `experiment_dir` matching every name given whose session finished
    (a run whose session is already aside, or never ran, has nothing to redo)."""
    experiment_dir = Path(experiment_dir)
    if not (experiment_dir / "experiment.json").is_file():
        raise RedoSelectionError(
            f"--experiment-dir {str(experiment_dir)!r}: no experiment.json, so it is not an "
            "experiment folder (results/<experiment>)"
        )
    runs = _run_folders(experiment_dir)
    if condition is not None:
        if condition.startswith(_EXTERNAL):
            raise RedoSelectionError(
                f"condition {condition!r}: an external answer set has no session to redo"
            )
        present = {run.parents[1].name for run in runs}
        runs = [run for run in runs if run.parents[1].name == condition]
        if not runs:
            raise _refuse("condition", condition, present, experiment_dir)
    if task is not None:
        present = {run.parent.name for run in runs}
        runs = [run for run in runs if run.parent.name == task]
        if not runs:
            raise _refuse("task", task, present, experiment_dir)
    if replicate is not None:
        present = {run.name.removeprefix("r") for run in runs}
        runs = [run for run in runs if run.name == f"r{replicate}"]
        if not runs:
            raise _refuse("replicate", str(replicate), present, experiment_dir)
    return [run for run in runs if not_redoable(run) is None]
