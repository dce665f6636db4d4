"""`run.json`: the run record `prepare` writes (identity, provenance, execution).

The model is the experiment's `RunRecord` (the record belongs to the experiment definition, which
this package may read); this module gives it its place in the run folder.
"""

from __future__ import annotations

from pathlib import Path

from veriharness.experiment.record import RunRecord
from veriharness.runfolder._files import JsonFile

__all__ = ["NAME", "RUN_RECORD", "RunRecord", "read_run_record"]

NAME = "run.json"

RUN_RECORD = JsonFile(NAME, RunRecord)


def read_run_record(run_dir: Path, errors: list[str]) -> RunRecord | None:
    """The run's record, leniently (`_files`)."""
    return RUN_RECORD.read(run_dir, errors)
