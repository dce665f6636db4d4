"""Workspaces are made only where nothing of the project or a repository can leak in."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from veriharness.agent.workspace import (
    WorkspaceError,
    check_workspace_root,
    copy_answer,
    create_workspace,
    remove_workspace,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def reference(tmp_path: Path) -> Path:
    path = tmp_path / "ref.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\nnot-really")
    return path


def test_root_inside_the_project_is_refused(project: Path) -> None:
    with pytest.raises(WorkspaceError, match="inside the project tree"):
        check_workspace_root(project / "ws", project)


def test_root_under_a_git_repository_is_refused(tmp_path: Path, project: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with pytest.raises(WorkspaceError, match=r"\.git"):
        check_workspace_root(repo / "deep" / "ws", project)


def test_root_under_a_claude_md_is_refused(tmp_path: Path, project: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "CLAUDE.md").write_text("private notes")
    with pytest.raises(WorkspaceError, match="CLAUDE.md"):
        check_workspace_root(tmp_path / "notes" / "ws", project)


def test_workspace_holds_only_the_reference(tmp_path: Path, project: Path, reference: Path) -> None:
    workspace = create_workspace(tmp_path / "wsroot", project, reference, "cond/task/r1")
    assert [p.name for p in workspace.iterdir()] == ["reference.png"]
    assert (workspace / "reference.png").read_bytes() == reference.read_bytes()
    assert workspace.parent == (tmp_path / "wsroot").resolve()
    assert "/" not in workspace.name


def test_copy_answer_keeps_entrypoint_and_assets_only(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "assets").mkdir(parents=True)
    (workspace / "answer.html").write_text("<p>hi</p>")
    (workspace / "assets" / "logo.svg").write_text("<svg/>")
    (workspace / "draft.png").write_bytes(b"draft")
    answer = tmp_path / "run" / "answer"
    answer.mkdir(parents=True)
    (answer / "stale.html").write_text("old")
    assert copy_answer(workspace, answer) == []
    assert sorted(str(p.relative_to(answer)) for p in answer.rglob("*")) == [
        "answer.html",
        "assets",
        "assets/logo.svg",
    ]


def test_copy_answer_without_entrypoint_reports_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    answer = tmp_path / "answer"
    assert copy_answer(workspace, answer) == []
    assert answer.is_dir() and not any(answer.iterdir())


def test_copy_answer_never_follows_a_link_the_agent_made(tmp_path: Path) -> None:
    """The copy runs outside the sandbox: a link to a task's reference.html would otherwise
    copy the answer key into the run folder."""
    secret = tmp_path / "tasks" / "landing-page" / "reference.html"
    secret.parent.mkdir(parents=True)
    secret.write_text("<p>the answer key</p>")
    workspace = tmp_path / "ws"
    (workspace / "assets" / "img").mkdir(parents=True)
    (workspace / "answer.html").symlink_to(secret)
    (workspace / "assets" / "img" / "key.html").symlink_to(secret)
    (workspace / "assets" / "up").symlink_to(secret.parent)
    (workspace / "assets" / "logo.svg").write_text("<svg/>")
    answer = tmp_path / "run" / "answer"
    refused = copy_answer(workspace, answer)
    assert refused == ["answer.html", "assets/img/key.html", "assets/up"]
    copied = sorted(str(p.relative_to(answer)) for p in answer.rglob("*"))
    assert copied == ["assets", "assets/img", "assets/logo.svg"]
    assert "answer key" not in "".join(p.read_text() for p in answer.rglob("*") if p.is_file())


def test_a_limited_workspace_is_a_tmpfs_of_its_size_and_is_unmounted_after(
    tmp_path: Path, project: Path, reference: Path
) -> None:
    root = tmp_path / "ws"
    workspace = create_workspace(root, project, reference, "c-t-r1", disk_mib=8)
    assert os.path.ismount(workspace) and (workspace / "reference.png").exists()
    assert os.statvfs(workspace).f_blocks * os.statvfs(workspace).f_frsize == 8 << 20
    remove_workspace(workspace)
    assert not workspace.exists() and str(workspace) not in Path("/proc/self/mounts").read_text()


def test_a_workspace_a_dying_process_still_holds_is_removed(
    tmp_path: Path, project: Path, reference: Path
) -> None:
    # A session process that outlives the kill for a moment (a loaded machine) holds the tmpfs
    # as its working folder: the workspace goes all the same, and the tmpfs with the process.
    workspace = create_workspace(tmp_path / "ws", project, reference, "c-t-r1", disk_mib=8)
    holder = subprocess.Popen(["sleep", "30"], cwd=workspace)
    try:
        remove_workspace(workspace)
        assert not workspace.exists()
        assert str(workspace) not in Path("/proc/self/mounts").read_text()
        assert holder.poll() is None, "the holder ended early: the test proved nothing"
    finally:
        holder.kill()
        holder.wait()


def test_a_kept_limited_workspace_keeps_the_agents_files_off_the_tmpfs(
    tmp_path: Path, project: Path, reference: Path
) -> None:
    workspace = create_workspace(tmp_path / "ws", project, reference, "c-t-r1", disk_mib=8)
    (workspace / "checks").mkdir()
    (workspace / "checks" / "render.png").write_bytes(b"draft")
    (workspace / "link").symlink_to("checks/render.png")
    remove_workspace(workspace, keep=True)
    assert not os.path.ismount(workspace)
    assert (workspace / "checks" / "render.png").read_bytes() == b"draft"
    assert (workspace / "link").is_symlink() and (workspace / "reference.png").exists()
    assert sorted(p.name for p in workspace.parent.iterdir()) == [workspace.name]
