"""Files are written whole or not at all, also when the disk is full."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from veriharness._util import atomic


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB filesystem (tmpfs), so a large write fails with ENOSPC."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_keeps_the_old_content_and_names_the_file(tiny_disk: Path) -> None:
    target = tiny_disk / "metrics.json"
    atomic.write_json(target, {"status": "ok"})
    with pytest.raises(atomic.AtomicWriteError, match=str(target)) as caught:
        atomic.write_text(target, "x" * 200_000)
    assert caught.value.errno == errno.ENOSPC
    assert target.read_text() == '{\n  "status": "ok"\n}\n'
    assert [p.name for p in tiny_disk.iterdir()] == ["metrics.json"]


def test_a_writer_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "table.csv"
    with pytest.raises(ValueError), atomic.replacing(target) as tmp:
        tmp.write_text("half")
        raise ValueError("writer broke")
    assert list(tmp_path.iterdir()) == []


def test_folders_are_made_and_content_replaced(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "run.json"
    atomic.write_text(target, "one")
    atomic.write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["run.json"]
