"""Secret values taken out of text before it is written to a run folder.

An agent session holds no key or private address (they stay with `run-agent`, the model proxy
and the `mllm` server, outside its sandbox), only its own per-session tokens. As a second line
of defence, and for the tokens, the writers of the transcript, Claude Code's stderr, the server
logs and the CallMLLM trace replace each known secret value with `[redacted:<NAME>]`, naming the
variable it came from: records, tables and report pages are all built from those files. Values
shorter than `MIN_SECRET_CHARS` are not treated as secrets: replacing them would mangle ordinary
text and they protect nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from veriharness._util import atomic

__all__ = ["MIN_SECRET_CHARS", "Redactor"]

MIN_SECRET_CHARS = 8


class Redactor:
    """Replaces the values of `secrets` (name -> value) in text, longest value first."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        pairs = {value: name for name, value in secrets.items() if len(value) >= MIN_SECRET_CHARS}
        self._pairs = sorted(pairs.items(), key=lambda pair: -len(pair[0]))

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __call__(self, text: str) -> str:
        for value, name in self._pairs:
            if value in text:
                text = text.replace(value, f"[redacted:{name}]")
        return text

    def rewrite(self, path: Path) -> None:
        """Redact a file in place (for files another process wrote)."""
        if not self or not path.is_file():
            return
        text = path.read_text(encoding="utf-8", errors="replace")
        redacted = self(text)
        if redacted != text:
            atomic.write_text(path, redacted)
