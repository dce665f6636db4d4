"""The trajectory benchmarks run at their smallest size, so neither rots: each prints its
figures and the ratio it is read for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _bench(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_per_snapshot_cost_benchmark_prints_its_ratio() -> None:
    out = _bench("bench/trajectory_cost.py", "--snapshots", "2", "--repeats", "1")
    assert "2 snapshots" in out and "per snapshot / final:" in out


def test_the_collect_benchmark_prints_its_ratio(tmp_path: Path) -> None:
    out = _bench("bench/collect_trajectory.py", "--runs", "4", "--repeats", "1",
                 "--work", str(tmp_path))  # fmt: skip
    assert "runs: 4, snapshots per run: up to 10" in out and "ratio:" in out
