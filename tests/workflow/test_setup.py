"""setup.sh on a machine where it cannot install system packages says what is missing and how
to get it, and changes nothing."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _shim(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_without_root_it_names_the_missing_packages_and_stops(tmp_path: Path) -> None:
    shims = tmp_path / "bin"
    shims.mkdir()
    _shim(shims, "id", "echo 1000\n")
    # Pretend chromium and tesseract-ocr are not installed; everything else is.
    _shim(
        shims,
        "dpkg-query",
        "for last; do :; done\n"
        'case "$last" in chromium|tesseract-ocr) exit 1 ;; esac\n'
        "echo 'install ok installed'\n",
    )
    result = subprocess.run(
        ["bash", str(ROOT / "setup.sh")],
        env={**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "missing: chromium tesseract-ocr" in result.stderr
    assert "apt-get install chromium tesseract-ocr" in result.stderr
    assert "conda install -c conda-forge tesseract" in result.stderr
    assert "VERIHARNESS_CHROMIUM" in result.stderr
    assert "installing" not in result.stdout


def test_unknown_option_is_refused() -> None:
    result = subprocess.run(
        ["bash", str(ROOT / "setup.sh"), "--tests"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "unknown option '--tests'" in result.stderr
