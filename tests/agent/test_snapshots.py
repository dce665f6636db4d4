"""The answer snapshots run-agent takes of a workspace: a version kept only when it changed,
links never followed, the bounds kept and named, and the session's end captured."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from veriharness.agent.snapshots import AnswerSnapshots, conversation_facts
from veriharness.runfolder.snapshots import (
    SNAPSHOT_INDEX,
    SnapshotTampered,
    answer_digest,
    blob_path,
    materialize,
    read_snapshots,
)


def _body(*tools: str) -> bytes:
    turns = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": name}]}
        for i, name in enumerate(tools)
    ]
    return json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "go"}, *turns]}
    ).encode()


def _index(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in SNAPSHOT_INDEX.path(run_dir).read_text().splitlines()]


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    workspace, run_dir = tmp_path / "ws", tmp_path / "run"
    workspace.mkdir()
    run_dir.mkdir()
    return workspace, run_dir


def test_a_version_is_kept_only_when_the_answer_changed(folders: tuple[Path, Path]) -> None:
    workspace, run_dir = folders
    snaps = AnswerSnapshots(workspace, run_dir, max_count=10, max_mib=1)
    snaps.at_request(1, _body())  # nothing written yet: nothing kept
    (workspace / "answer.html").write_text("<p>one</p>")
    snaps.at_request(2, _body("Write"))
    snaps.at_request(3, _body("Write", "Bash"))  # unchanged
    (workspace / "assets").mkdir()
    (workspace / "assets" / "a.png").write_bytes(b"png")
    snaps.at_request(4, _body("Write", "Bash", "mcp__mllm__call", "Write"))
    entries = read_snapshots(run_dir, [])
    assert [(e.n, e.request_seq, e.tool_uses) for e in entries] == [(1, 2, 1), (2, 4, 4)]
    assert entries[1].tool_uses_since == ["Bash", "mcp__mllm__call", "Write"]
    assert entries[1].turn == 4
    assert set(entries[1].files) == {"answer.html", "assets/a.png"}
    assert entries[1].answer_digest == answer_digest(entries[1].files)
    out = run_dir / "laid-out"
    materialize(run_dir, entries[1], out)
    assert (out / "assets" / "a.png").read_bytes() == b"png"


def test_links_are_never_followed_and_are_named(folders: tuple[Path, Path]) -> None:
    workspace, run_dir = folders
    secret = workspace.parent / "secret.txt"
    secret.write_text("key")
    (workspace / "answer.html").write_text("<p>x</p>")
    (workspace / "assets").mkdir()
    (workspace / "assets" / "leak.txt").symlink_to(secret)
    (workspace / "assets" / "dir").symlink_to(workspace.parent)
    AnswerSnapshots(workspace, run_dir, 10, 1).at_request(1, _body())
    (entry,) = read_snapshots(run_dir, [])
    assert entry.refused_links == ["assets/dir", "assets/leak.txt"]
    assert set(entry.files) == {"answer.html"}
    assert not any(b.read_bytes() == b"key" for b in (run_dir / "snapshots" / "blobs").iterdir())


def test_a_linked_answer_html_is_refused(folders: tuple[Path, Path]) -> None:
    workspace, run_dir = folders
    (workspace / "real.html").write_text("<p>x</p>")
    os.symlink(workspace / "real.html", workspace / "answer.html")
    snaps = AnswerSnapshots(workspace, run_dir, 10, 1)
    snaps.at_request(1, _body())
    assert not SNAPSHOT_INDEX.path(run_dir).exists()  # no answer of its own: nothing to keep


def test_the_bounds_are_kept_and_named_once(folders: tuple[Path, Path]) -> None:
    workspace, run_dir = folders
    snaps = AnswerSnapshots(workspace, run_dir, max_count=2, max_mib=0.001)  # 1,048 bytes
    for seq in range(1, 5):
        (workspace / "answer.html").write_text(f"<p>{seq}</p>")
        snaps.at_request(seq, _body())
    (workspace / "answer.html").write_text("x" * 2000)
    snaps.at_end(workspace)
    lines = _index(run_dir)
    assert [line["n"] for line in lines] == [1, 2, None, None]
    assert lines[2]["skipped"] == "execution.snapshots.max_count 2 reached"
    assert "passes 1048 bytes at answer.html" in str(lines[3]["skipped"])


def test_the_session_end_is_captured_when_it_differs(folders: tuple[Path, Path]) -> None:
    workspace, run_dir = folders
    snaps = AnswerSnapshots(workspace, run_dir, 0, 1)  # no snapshot at requests at all
    (workspace / "answer.html").write_text("<p>final</p>")
    snaps.at_request(1, _body())
    snaps.at_end(workspace)
    snaps.at_end(workspace)  # the same answer again: nothing new
    entries = read_snapshots(run_dir, [])
    assert [(e.n, e.at) for e in entries] == [(1, "session_end")]
    assert _index(run_dir)[0]["skipped"] == "execution.snapshots.max_count 0 reached"


def test_a_kept_file_that_lost_its_digest_is_named(folders: tuple[Path, Path]) -> None:
    workspace, run_dir = folders
    (workspace / "answer.html").write_text("<p>x</p>")
    AnswerSnapshots(workspace, run_dir, 10, 1).at_request(1, _body())
    (entry,) = read_snapshots(run_dir, [])
    blob_path(run_dir, entry.files["answer.html"]).write_text("<p>forged</p>")
    with pytest.raises(SnapshotTampered, match="no longer have the digest"):
        materialize(run_dir, entry, run_dir / "out")


def test_conversation_facts_count_turns_and_tool_uses() -> None:
    facts = conversation_facts(_body("Write", "Bash"))
    assert (facts.turn, facts.tool_names) == (2, ["Write", "Bash"])
    assert conversation_facts(b"not json").tool_names is None


def test_a_damaged_index_line_is_named_and_the_others_are_read(
    folders: tuple[Path, Path],
) -> None:
    workspace, run_dir = folders
    snaps = AnswerSnapshots(workspace, run_dir, 10, 1)
    for seq in (1, 2):
        (workspace / "answer.html").write_text(f"<p>{seq}</p>")
        snaps.at_request(seq, _body())
    index = SNAPSHOT_INDEX.path(run_dir)
    first, second = index.read_text().splitlines()
    damaged = second.replace('"bytes":8', '"bytes":"eight"')
    assert damaged != second
    index.write_text(f"{first}\nnot json\n{damaged}\n")
    errors: list[str] = []
    entries = read_snapshots(run_dir, errors)
    assert [(e.n, e.bytes) for e in entries] == [(1, 8), (2, 0)]  # the bad field dropped
    assert len(errors) == 2 and any("bytes" in e for e in errors), errors
