"""What an agent session can see of the machine: bubblewrap (`bwrap`) shows it only what it needs.

Design notes:

- Without it a session runs as the calling user and its Bash can read anything that user can: the
  project's `tasks/` (every `reference.html`, the answer key), other runs' answers under
  `results/`, the git history, other checkouts. The workspace being outside the project keeps
  `CLAUDE.md` and commits out of the prompt, but not out of reach.
- Allow-list, not deny-list: copies of the tasks may sit anywhere, so the sandbox starts empty and
  binds in, read-only, the system (`/usr`, `/etc`, ...), Python (its prefixes and the folder the
  `veriharness` package is imported from, for the `mllm` server Claude Code starts), the `claude`
  installation, the catalog and the taxonomy; and, writable, the workspace, the run folder (the
  server writes `mllm_trace.jsonl` there; Claude Code reads the system prompt and MCP config from
  it) and the session's config folder. `/tmp` is a fresh, empty tmpfs; `/dev` and `/proc` are
  private, and so is the process tree (`--unshare-pid`), so the session cannot read other
  processes' environments or command lines.
- The network is shared: the session reaches its model (the offline model on loopback, or a real
  provider) and the `mllm` server its providers. Environment variables are not hidden: what the
  session is given, its Bash sees (docs/decisions.md, P-5).
- `--die-with-parent`: when `run-agent` ends the session's process group (time limit, interrupt),
  everything inside ends with it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import veriharness

__all__ = ["SYSTEM_PATHS", "sandboxed", "python_paths", "claude_installation"]

# Read-only system folders, bound when present (`/bin`, `/lib` are often links into `/usr`).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/opt")
# DNS on systemd machines: /etc/resolv.conf may point here.
_RESOLVER = "/run/systemd/resolve"


def python_paths() -> list[Path]:
    """Where this Python and the `veriharness` package live (the mllm server runs from them)."""
    package_parent = Path(veriharness.__file__).resolve().parents[1]
    return [Path(sys.base_prefix), Path(sys.prefix), package_parent]


def claude_installation(claude: Path) -> Path:
    """The folder to bind for `claude`: its enclosing `node_modules`, else its own folder."""
    real = claude.resolve()
    for folder in real.parents:
        if folder.name == "node_modules":
            return folder
    return real.parent


def sandboxed(
    command: list[str],
    *,
    bwrap: Path,
    readable: Iterable[Path],
    writable: Iterable[Path],
    workdir: Path,
    home: Path,
) -> list[str]:
    """`command` wrapped in bwrap with only the given paths (and the system) visible."""
    args = [str(bwrap), "--die-with-parent", "--unshare-pid", "--new-session"]
    for path in SYSTEM_PATHS:
        args += _bind_system(Path(path))
    args += ["--ro-bind-try", _RESOLVER, _RESOLVER]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for folder in _outermost(Path(p).resolve() for p in readable):
        args += ["--ro-bind", str(folder), str(folder)]
    for folder in _outermost(Path(p).resolve() for p in writable):
        args += ["--bind", str(folder), str(folder)]
    args += ["--setenv", "HOME", str(home), "--chdir", str(workdir), "--"]
    return args + command


def _bind_system(path: Path) -> list[str]:
    if path.is_symlink():  # e.g. /bin -> usr/bin: keep the link, the target is bound anyway
        return ["--symlink", str(path.readlink()), str(path)]
    return ["--ro-bind-try", str(path), str(path)]


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """The paths without those inside another one of them (a bind of the outer one covers them),
    sorted so that parents come before children."""
    unique = sorted(set(paths), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(outer) for outer in kept):
            kept.append(path)
    return kept
