"""What an agent session can see of the machine: bubblewrap (`bwrap`) shows it only what it needs.

Design notes:

- Without it a session runs as the calling user and its Bash can read anything that user can: the
  project's `tasks/` (every `reference.html`, the answer key), other runs' answers under
  `results/`, the git history, other checkouts. The workspace being outside the project keeps
  `CLAUDE.md` and commits out of the prompt, but not out of reach.
- Allow-list, not deny-list: copies of the tasks may sit anywhere, so the sandbox starts empty and
  binds in, read-only, the system (`/usr`, `/etc`, ...), Python's prefixes (software the agent's
  Bash may run) and the `claude` installation, plus the two files Claude Code reads at start (the
  appended system prompt and the MCP config, copied to a private per-session folder); writable,
  only the workspace and Claude Code's config folder (in that private folder, discarded after
  the session). Not the run folder, the catalog, the taxonomy or the project checkout: the
  `mllm` server and the model proxy run outside and hold them. `/tmp` is a fresh, empty tmpfs;
  `/dev` and `/proc` are private, and so is the process tree (`--unshare-pid`), so the session
  cannot read other processes' environments or command lines.
- The network: with `agent.network: none` (the default) the sandbox has its own network
  namespace, where only the model proxy and the `mllm` server are reachable, bridged in over
  unix sockets (`bridge.py`); with `open` it shares the machine's. Either way each of the two is
  guarded by its own per-session token. The environment is an allow-list
  (`veriharness.agent.plan.session_environment`): no key, no private address.
- `--die-with-parent`: when `run-agent` ends the session's process group (time limit, interrupt),
  everything inside ends with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

# The environment facts name only programs the sandbox shows, so both read one list.
from veriharness.experiment.environment import SYSTEM_PATHS

__all__ = ["sandboxed", "claude_installation"]

# DNS on systemd machines: /etc/resolv.conf may point here.
_RESOLVER = "/run/systemd/resolve"


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
    readable_files: Iterable[Path] = (),
    workdir: Path,
    home: Path,
    own_network: bool,
) -> list[str]:
    """`command` wrapped in bwrap with only the given paths (and the system) visible, and with
    a network namespace of its own (only loopback) when `own_network`."""
    args = [str(bwrap), "--die-with-parent", "--unshare-pid", "--new-session"]
    if own_network:
        args.append("--unshare-net")
    for path in SYSTEM_PATHS:
        args += _bind_system(Path(path))
    args += ["--ro-bind-try", _RESOLVER, _RESOLVER]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for folder in _outermost(Path(p).resolve() for p in readable):
        args += ["--ro-bind", str(folder), str(folder)]
    for folder in _outermost(Path(p).resolve() for p in writable):
        args += ["--bind", str(folder), str(folder)]
    for file in readable_files:
        args += ["--ro-bind", str(Path(file).resolve()), str(Path(file).resolve())]
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
