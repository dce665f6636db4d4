"""Where a record came from: git state, package and tool versions, host and time.

Everything here is recorded and never hashed: it helps people find the exact code and inputs
behind a result, while the identity hash stays a function of the inputs' bytes alone.

The uncommitted check asks the real ``git status`` about the experiment's inputs (prompts,
conditions, tasks, taxonomy, catalog and config files). Untracked files count as uncommitted. A
project that is not a git repository has, by definition, nothing committed: that is refused the
same way unless uncommitted inputs are allowed.
"""

from __future__ import annotations

import platform
import socket
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from veriharness._util.harness import HarnessVersion, harness_version
from veriharness._util.programs import MissingTool, claude_version, find_claude

__all__ = [
    "ALLOW_UNCOMMITTED",
    "UncommittedChanges",
    "GitState",
    "Provenance",
    "PACKAGES",
    "git_state",
    "require_committed",
    "package_versions",
    "claude_version_or_error",
    "collect_provenance",
    "require_committed_harness",
]

PACKAGES = (
    "veriharness",
    "snakemake",
    "mcp",
    "pydantic",
    "httpx",
    "pillow",
    "playwright",
    "jsonschema",
    "pyyaml",
)


class UncommittedChanges(RuntimeError):
    """Experiment inputs differ from the last commit and that was not explicitly allowed."""


class GitState(BaseModel):
    model_config = ConfigDict(frozen=True)
    is_repository: bool
    commit: str | None
    dirty_files: tuple[str, ...]
    error: str | None = None


class Provenance(BaseModel):
    """Recorded, never hashed."""

    model_config = ConfigDict(frozen=True)
    created_at: str
    hostname: str
    python: str
    git_commit: str | None
    git_dirty_files: tuple[str, ...]
    uncommitted_changes: bool
    packages: dict[str, str | None]
    claude_version: str | None
    claude_version_error: str | None
    resolved_models: dict[str, str | None]
    harness: HarnessVersion | None = None


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=False, timeout=60
    )


def git_state(root: Path, inputs: list[str]) -> GitState:
    """The commit of ``root`` and which of ``inputs`` (paths relative to it) are uncommitted."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return GitState(
            is_repository=False,
            commit=None,
            dirty_files=tuple(inputs),
            error=top.stderr.strip() or "not a git repository",
        )
    head = _git(root, "rev-parse", "HEAD")
    commit = head.stdout.strip() if head.returncode == 0 else None
    # Ignored files count too: an input git ignores is as unrecorded as an untracked one.
    status = _git(
        root,
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignored=matching",
        "--",
        *inputs,
    )
    if status.returncode != 0:
        return GitState(
            is_repository=True,
            commit=commit,
            dirty_files=tuple(inputs),
            error=status.stderr.strip(),
        )
    return GitState(is_repository=True, commit=commit, dirty_files=_parse_porcelain(status.stdout))


def _parse_porcelain(text: str) -> tuple[str, ...]:
    entries = text.split("\0")
    files: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        if len(entry) > 3:
            files.append(entry[3:])
            if entry[0] in "RC":  # a rename or copy is followed by its source path
                i += 1
        i += 1
    return tuple(sorted(set(files)))


# Every way to allow it, each as it is typed where it works.
ALLOW_UNCOMMITTED = (
    "run anyway with `--config allow_uncommitted=true` on the snakemake command line "
    "(`--allow-uncommitted` for a veriharness verb, or `allow_uncommitted: true` in the config "
    "file); the records then say so"
)


def require_committed(state: GitState, allow_uncommitted: bool) -> bool:
    """Refuse uncommitted inputs unless allowed; return whether there were any."""
    dirty = bool(state.dirty_files) or not state.is_repository or state.error is not None
    if dirty and not allow_uncommitted:
        if not state.is_repository:
            reason = (
                f"the project is not a git repository ({state.error}). Make it one and commit "
                "its inputs (git init, git add, git commit)"
            )
        elif state.error:
            reason = f"git status failed: {state.error}"
        else:
            reason = "uncommitted changes in " + ", ".join(state.dirty_files)
            reason += ". Commit them (git add, then git commit)"
        raise UncommittedChanges(f"refusing to start: {reason}, or {ALLOW_UNCOMMITTED}")
    return dirty


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def claude_version_or_error() -> tuple[str | None, str | None]:
    """The pinned CLI's version, or the reason it could not be found (never raises)."""
    try:
        path = find_claude()
    except MissingTool as missing:
        return None, str(missing)
    try:
        return claude_version(path) or None, None
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"{type(error).__name__}: {error}"


def require_committed_harness(harness: HarnessVersion, offline: bool, allow: bool) -> None:
    """Refuse a non-offline experiment run by VeriHarness code with uncommitted changes, unless
    allowed: its results could not be traced to the code that made them."""
    if harness.git_dirty and not offline and not allow:
        files = ", ".join(harness.git_dirty_files) or "(git status failed)"
        raise UncommittedChanges(
            f"refusing to start: the VeriHarness code in {harness.source_path} has uncommitted "
            f"changes ({files}). Commit them, or {ALLOW_UNCOMMITTED}"
        )


def collect_provenance(
    state: GitState,
    uncommitted: bool,
    resolved_models: dict[str, str | None],
    harness: HarnessVersion | None = None,
) -> Provenance:
    version, error = claude_version_or_error()
    return Provenance(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        hostname=socket.gethostname(),
        python=platform.python_version(),
        git_commit=state.commit,
        git_dirty_files=state.dirty_files,
        uncommitted_changes=uncommitted,
        packages=package_versions(),
        claude_version=version,
        claude_version_error=error,
        resolved_models=resolved_models,
        harness=harness or harness_version(),
    )
