"""The CallMLLM trace: one JSON line per event, appended and flushed as it happens.

Events are told apart by ``event``. A call that reaches the model writes ``mllm_call_started``
and then either ``mllm_call_completed`` or ``mllm_call_failed``; a request refused before any
model call writes only ``mllm_call_rejected``. Inputs are recorded by digest, region and size,
never by their bytes (no base64; the bytes attached are kept beside the trace, in
``call_images/``, by that digest: ``mllm/call_images.py``); provider settings appear only as
their hash, so neither a key nor a base URL can reach the file. The events' models are in
`runfolder/mllm_trace.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from veriharness.runfolder.mllm_trace import CallCompleted, CallFailed, CallRejected, CallStarted

__all__ = ["TraceWriter", "now"]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class TraceWriter:
    """Appends events to one JSONL file; safe to share between concurrent calls."""

    def __init__(self, path: Path, redact: Callable[[str], str] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._redact = redact or (lambda text: text)
        self._lock = threading.Lock()
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the server

    def write(self, event: CallStarted | CallCompleted | CallFailed | CallRejected) -> None:
        line = self._redact(event.model_dump_json(by_alias=True)) + "\n"
        with self._lock:
            self._handle.write(line)
            self._handle.flush()

    def close(self) -> None:
        self._handle.close()
