"""Temporary: `agent/session.py`'s last import of the old run-file readers. Its split (issue 22,
rooms) reads the trace through `runfolder`; the lead removes this module at merge."""

from veriharness.runfolder._files import read_object_lines as read_jsonl

__all__ = ["read_jsonl"]
