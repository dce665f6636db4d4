"""One clean workspace per run, outside the project tree and outside any git repository.

Claude Code sends the model any `CLAUDE.md` above its working directory and the recent commits of
an enclosing git repository. A workspace inside the checkout would leak the project's own notes and
history into every session, so `create_workspace` refuses any root that has a `.git` or a
`CLAUDE.md` at or above it, and any root inside the project.

Where the machine allows it (root), a workspace is a tmpfs of the session's disk limit
(`limited_folder`), so a session that fills it gets "no space left" at the limit instead of
filling the machine's disk; `remove_workspace` unmounts it (copying its files out first when the
workspace is to be kept).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from veriharness._util.containment import mount_tmpfs, unmount

__all__ = [
    "WorkspaceError",
    "REFERENCE_NAME",
    "ANSWER_ENTRYPOINT",
    "ASSETS_DIR",
    "check_workspace_root",
    "create_workspace",
    "limited_folder",
    "copy_answer",
    "remove_workspace",
]

REFERENCE_NAME = "reference.png"
ANSWER_ENTRYPOINT = "answer.html"
ASSETS_DIR = "assets"


class WorkspaceError(RuntimeError):
    """A workspace root that would contaminate the session, or a workspace that cannot be made."""


def check_workspace_root(root: Path, project: Path) -> Path:
    root = root.expanduser().resolve()
    project = project.resolve()
    if root == project or project in root.parents:
        raise WorkspaceError(f"workspace_root {root} is inside the project tree {project}")
    for folder in [root, *root.parents]:
        for marker in (".git", "CLAUDE.md"):
            if (folder / marker).exists():
                raise WorkspaceError(
                    f"workspace_root {root} lies under {folder / marker}; Claude Code would send "
                    "it to the model. Choose a root outside any repository."
                )
    return root


def create_workspace(
    root: Path | None,
    project: Path,
    reference: Path,
    label: str,
    disk_mib: int | None = None,
    images: Mapping[str, Path] | None = None,
) -> Path:
    """A fresh folder holding only the reference image (and an interactive task's state
    `images`, by workspace-relative name), named after the run for debugging; a tmpfs of
    `disk_mib` where the machine allows it."""
    base = check_workspace_root(Path(root) if root else Path(tempfile.gettempdir()), project)
    base.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in label)
    workspace = Path(tempfile.mkdtemp(prefix=f"veriharness-{safe}-", dir=base))
    limited_folder(workspace, disk_mib)
    shutil.copyfile(reference, workspace / REFERENCE_NAME)
    for name, source in (images or {}).items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, workspace / name)
    return workspace


def limited_folder(folder: Path, disk_mib: int | None) -> bool:
    """Make the empty `folder` a tmpfs of `disk_mib` MiB; False when none was asked for or the
    machine refuses (not root). The caller records which."""
    if disk_mib is None:
        return False
    try:
        mount_tmpfs(folder, disk_mib)
    except OSError:
        return False
    return True


def copy_answer(workspace: Path, answer_dir: Path) -> list[str]:
    """Copy `answer.html` and `assets/` into `answer_dir` (made anew), regular files and folders
    only; returns the symbolic links it refused, relative to the workspace. A link is never
    followed: the copy runs outside the sandbox, where a link the agent made could point at
    any file of the machine (a task's reference.html). Other files the agent left (drafts,
    screenshots) stay behind with the workspace."""
    if answer_dir.exists():
        shutil.rmtree(answer_dir)
    answer_dir.mkdir(parents=True)
    refused: list[str] = []
    entry = workspace / ANSWER_ENTRYPOINT
    if entry.is_symlink():
        refused.append(ANSWER_ENTRYPOINT)
    elif entry.is_file():
        shutil.copyfile(entry, answer_dir / ANSWER_ENTRYPOINT)
    assets = workspace / ASSETS_DIR
    if assets.is_symlink():
        refused.append(ASSETS_DIR)
    elif assets.is_dir():

        def links(folder: str, names: list[str]) -> list[str]:
            found = [n for n in names if (Path(folder) / n).is_symlink()]
            refused.extend(str((Path(folder) / n).relative_to(workspace)) for n in found)
            return found

        shutil.copytree(assets, answer_dir / ASSETS_DIR, ignore=links)
    return sorted(refused)


def remove_workspace(workspace: Path, keep: bool = False) -> None:
    """Unmount the workspace if it is a tmpfs, and delete it, unless `keep`: then its files stay
    where they were, copied off the tmpfs first."""
    if os.path.ismount(workspace):
        kept = Path(tempfile.mkdtemp(prefix=".kept-", dir=workspace.parent)) if keep else None
        if kept is not None:
            shutil.copytree(workspace, kept, symlinks=True, dirs_exist_ok=True)
        unmount(workspace)
        if kept is not None:
            workspace.rmdir()
            kept.rename(workspace)
    if not keep:
        shutil.rmtree(workspace, ignore_errors=True)
