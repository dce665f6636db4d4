"""The `veriharness` command as a test runs it: a real subprocess of this Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def veriharness(
    *args: str | Path,
    cwd: Path | None = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m veriharness ARGS`; `env` is layered over this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "veriharness", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )
