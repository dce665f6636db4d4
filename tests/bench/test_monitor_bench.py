"""The monitor's stop benchmark runs at its smallest size, so it does not rot: it prints the
false-stop share of studies without an effect with its interval, and the sessions saved under
the demo's effect, per method."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_stop_benchmark_prints_its_false_stop_share_and_the_sessions_saved() -> None:
    done = subprocess.run(
        [sys.executable, "bench/monitor_stop.py", "--studies", "100", "--tasks", "20",
         "--effect-studies", "10", "--effect-tasks", "40"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for method in ("betting", "betting_wor"):
        null = re.search(rf"\), {method}: (\d+) of 100 studies of 20 tasks stopped: .*95% CI", out)
        assert null is not None, out
        saved = re.search(rf"{method}, 40 tasks: [\d.]+ of 10 studies stopped; .* median", out)
        assert saved is not None, out
