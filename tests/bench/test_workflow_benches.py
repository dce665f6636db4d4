"""The benchmarks that run an offline matrix through Snakemake, sessions, render and score
included, at their smallest size (test_benches.py says why)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.test_benches import Smallest, run_smallest

pytestmark = pytest.mark.slow

WORKFLOW_BENCHES = {
    # One task in both conditions: the smallest matrix with a comparison.
    "harness.py": Smallest(("--replicates", "1", "--tasks", "landing-page"),
                           (r"^median over 2 runs: around the session [\d.]+ s",)),
    # Two sessions, killed once the first has ended, and the restart.
    "resume.py": Smallest(("--tasks", "1", "--replicates", "1", "--cores", "2", "--sessions",
                           "1", "--kill-after", "1"),
                          (r"^every cell once: True$", r"^finished sessions run again: 0$")),
}  # fmt: skip


@pytest.mark.parametrize("script", sorted(WORKFLOW_BENCHES))
def test_a_workflow_benchmark_at_its_smallest_size_prints_its_figures(
    script: str, tmp_path: Path
) -> None:
    run_smallest(script, WORKFLOW_BENCHES[script], tmp_path)
