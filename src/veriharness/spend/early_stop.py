"""The monitor's stop, as a session's start sees it: `results/<experiment>/monitor/stop.json`.

The monitor (`collect/monitor.py`, run after each task's last score) writes this file once the
running answer of every primary outcome is known, and removes it when, under the settings of a
later look, it is not. It says under which settings the answer was reached (`monitor_key`: the
method, alpha, margin, primary outcomes and compared pairs). `run-agent` reads it before a
session, as it asks the spending gate: with `analysis.monitor.stop: true` and a stop reached
under its own settings, the session does not start and the run is `not_started` with reason
`stopped_early`, listed among the stopped runs, so that setting `stop: false` and starting the
workflow again runs exactly those (`ledger.requeue_stopped`). A stop reached under other
settings does not apply: the next look decides again.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from veriharness._util import atomic

__all__ = ["EARLY_STOP_NAME", "EarlyStop", "clear_early_stop", "early_stop_for", "write_early_stop"]

EARLY_STOP_NAME = "monitor/stop.json"


class EarlyStop(BaseModel):
    """Why no new session starts: the running answer is known."""

    model_config = ConfigDict(extra="forbid")
    time: str
    key: dict[str, JsonValue]  # the monitor_key (experiment/analysis.py) it was reached under
    tasks: int  # tasks in the monitor's sequence when it was reached
    message: str  # what is known, and how to go on


def _path(experiment_dir: Path) -> Path:
    return Path(experiment_dir) / EARLY_STOP_NAME


def write_early_stop(experiment_dir: Path, stop: EarlyStop) -> None:
    atomic.write_text(_path(experiment_dir), stop.model_dump_json(indent=2) + "\n")


def clear_early_stop(experiment_dir: Path) -> None:
    _path(experiment_dir).unlink(missing_ok=True)


def early_stop_for(experiment_dir: Path, key: dict[str, JsonValue]) -> EarlyStop | None:
    """The stop that applies to a session of these monitor settings, if any. A file that cannot
    be read is named on stderr and stops nothing (the monitor rewrites it at its next look)."""
    path = _path(experiment_dir)
    try:
        stop = EarlyStop.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as error:
        print(f"{path}: unreadable, so it stops no session: {error}", file=sys.stderr)
        return None
    return stop if stop.key == key else None
