"""The benchmarks that run real `claude` sessions (offline model), at their smallest size: one
session, or one per kind the benchmark compares (test_benches.py says why, and runs the rest;
the ones that run whole workflows are in test_workflow_benches.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.test_benches import Smallest, run_smallest

pytestmark = pytest.mark.slow

SESSION_BENCHES = {
    # One recorded session, its 8 requests replayed 5 times each (the fewest for a p95).
    "agent_proxy.py": Smallest(("--rounds", "5", "--events", "2"),
                               (r"^\| offline model \| 40 \|", r"^\| stream stub \(2 events")),
    "concurrency.py": Smallest(("--sessions", "1", "--concurrency", "1", "--latency", "0.5"),
                               (r'^\{"concurrency": 1, "sessions": 1, "wall_s": [\d.]+, '
                                r'"ideal_s": [\d.]+, "ratio": [\d.]+',
                                r'"statuses": "ok"\}$')),
    "containment.py": Smallest(("--rounds", "1", "--sessions", "1"),
                               (r"^added start-up / session:\s+[\d.]+$",
                                r"^session none / open:\s+[\d.]+$")),
    "rate_limits.py": Smallest(("--sessions", "1", "--fixed", "1", "--rpm", "100", "--tpm",
                                "100000", "--runs", "paced"),
                               (r"^paced\s+sessions\s+1 .* outcomes \{'ok': 1\}$",)),
}  # fmt: skip


@pytest.mark.parametrize("script", sorted(SESSION_BENCHES))
def test_a_session_benchmark_at_its_smallest_size_prints_its_figures(
    script: str, tmp_path: Path
) -> None:
    run_smallest(script, SESSION_BENCHES[script], tmp_path)
