"""`transcript.jsonl`: Claude Code's stream-json, one event a line, as `run-agent` received it.

Not our format: the events are read as the JSON objects they are (a line that is not one is
named and skipped), and the few facts readers ask of them are typed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veriharness.runfolder._files import read_object_lines

__all__ = ["NAME", "has_result", "read_transcript"]

NAME = "transcript.jsonl"


def read_transcript(
    run_dir: Path, errors: list[str], name: str = NAME
) -> list[dict[str, Any]] | None:
    """The transcript's event objects in order; None when the file cannot be read."""
    return read_object_lines(Path(run_dir) / name, name, errors)


def has_result(run_dir: Path) -> bool:
    """Whether the transcript holds its session's closing `result` event."""
    events = read_transcript(run_dir, []) or []
    return any(event.get("type") == "result" for event in events)
