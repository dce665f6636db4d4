"""Where the external programs are: the pinned Claude Code CLI, Chromium, tesseract and bwrap.

Each `find_*` returns an absolute path or raises `MissingTool` with what is missing and how to get
it; nothing silently falls back to a different version of a program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

__all__ = [
    "CLAUDE_CODE_VERSION",
    "MissingTool",
    "project_root",
    "find_claude",
    "claude_version",
    "find_chromium",
    "find_bwrap",
    "find_tesseract",
    "external_programs",
]

# Keep equal to [tool.veriharness] claude-code-version in pyproject.toml (a test checks it).
CLAUDE_CODE_VERSION = "2.1.328"

_SETUP_HINT = "run ./setup.sh in the VeriHarness checkout"


class MissingTool(RuntimeError):
    """An external program the pipeline needs is not installed or has the wrong version."""


def project_root(start: Path | None = None) -> Path:
    """The checkout that holds `pyproject.toml` and `Snakefile`, searched upwards from `start`
    (default: the working directory, then this file's location)."""
    candidates = [start or Path.cwd(), Path(__file__).resolve().parent]
    for origin in candidates:
        for folder in [origin.resolve(), *origin.resolve().parents]:
            if (folder / "Snakefile").is_file() and (folder / "pyproject.toml").is_file():
                return folder
    raise MissingTool(
        "cannot find the VeriHarness checkout (a folder with Snakefile and pyproject.toml) "
        f"above {candidates[0]}"
    )


def find_claude(explicit: str | None = None) -> Path:
    """The pinned `claude`: an explicit path, else $VERIHARNESS_CLAUDE, else .tools/claude."""
    raw = explicit or os.environ.get("VERIHARNESS_CLAUDE")
    if raw:
        path = Path(raw).expanduser()
    else:
        path = project_root() / ".tools" / "claude" / "node_modules" / ".bin" / "claude"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise MissingTool(
            f"Claude Code CLI not found at {path}: {_SETUP_HINT} "
            f"(it installs @anthropic-ai/claude-code@{CLAUDE_CODE_VERSION} under .tools/claude)"
        )
    version = claude_version(path)
    if version != CLAUDE_CODE_VERSION:
        raise MissingTool(
            f"Claude Code CLI at {path} is version {version!r}, the project pins "
            f"{CLAUDE_CODE_VERSION!r}: {_SETUP_HINT}"
        )
    return path.resolve()


@cache  # one process asks once: finding the CLI checks its version, and records repeat it
def claude_version(path: Path) -> str:
    out = subprocess.run(
        [str(path), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    return out.stdout.strip().split(" ")[0] if out.returncode == 0 else ""


def find_chromium(explicit: str | None = None) -> Path:
    """Chromium: an explicit path, else $VERIHARNESS_CHROMIUM, else Debian's `chromium`."""
    raw = explicit or os.environ.get("VERIHARNESS_CHROMIUM")
    found = Path(raw) if raw else _which("chromium", "chromium-browser")
    if found is None or not found.is_file():
        raise MissingTool(
            f"Chromium not found{f' at {raw}' if raw else ''}: {_SETUP_HINT} "
            "(Debian package 'chromium'), or set VERIHARNESS_CHROMIUM to a Chromium binary"
        )
    return found


def find_bwrap() -> Path:
    found = _which("bwrap")
    if found is None:
        raise MissingTool(
            f"bwrap (bubblewrap) not found: {_SETUP_HINT} (Debian package 'bubblewrap'). It "
            "sandboxes each agent session; to run sessions without it, set agent.isolation: "
            "none (hashed into every run's identity)"
        )
    return found


def find_tesseract() -> Path:
    found = _which("tesseract")
    if found is None:
        raise MissingTool(
            f"tesseract not found: {_SETUP_HINT} (Debian package 'tesseract-ocr'; "
            "with conda: conda install -c conda-forge tesseract)"
        )
    return found


def _which(*names: str) -> Path | None:
    for name in names:
        hit = shutil.which(name)
        if hit:
            return Path(hit)
    return None


def external_programs() -> list[tuple[str, Path | MissingTool]]:
    """Each external program by name, with its path or what is missing."""
    found: list[tuple[str, Path | MissingTool]] = []
    for label, finder in (
        ("claude", find_claude),
        ("chromium", find_chromium),
        ("tesseract", find_tesseract),
        ("bwrap", find_bwrap),
    ):
        try:
            found.append((label, finder()))
        except MissingTool as missing:
            found.append((label, missing))
    return found
