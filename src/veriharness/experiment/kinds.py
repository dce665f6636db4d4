"""The `kind` of each record file: the field every reader checks before it trusts the file
(`record.read_record`)."""

from __future__ import annotations

from typing import Final

__all__ = ["RUN_RECORD", "EXPERIMENT_RECORD", "EFFECTIVE_CONFIG"]

RUN_RECORD: Final = "run_record"
EXPERIMENT_RECORD: Final = "experiment_record"
EFFECTIVE_CONFIG: Final = "effective_config"
