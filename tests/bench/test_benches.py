"""Every benchmark under bench/ runs at its smallest size, so none rots unseen: each must end
with exit status 0 and print the figures it is read for (docs/benchmarks.md, P-68). Those that
run real sessions are in test_session_benches.py, those that run whole workflows in
test_workflow_benches.py, and some have a test file of their own here (the trajectory
benchmarks). A new script under bench/ fails `test_every_benchmark_runs_at_its_smallest_size`
until it is given its smallest run in tests/bench/."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
WORK = "{work}"  # replaced by the test's own folder

pytestmark = pytest.mark.slow


class Smallest(NamedTuple):
    """A benchmark's smallest run: its arguments, and lines its output must hold (regexes)."""

    args: tuple[str, ...]
    prints: tuple[str, ...]


SMALLEST = {
    "blocks.py": Smallest(("--sizes", "10"),
                          (r"^stored pairs: 28, total", r"^\s+10\s+[\d.]+ s\s+[\d.]+ s\s+\d+$")),
    "cluster_plan.py": Smallest(("--runs", "18"),
                                (r"^cluster jobs: 20 \(group jobs 2, run_agent 18",
                                 r"^planning: skeleton .* veriharness / skeleton: wall [\d.]+",
                                 r"^group start-up: node DAG of a 20-run group",
                                 r"^start order: 18 sessions submitted in seed \d+'s blocked "
                                 r"order: yes; largest running difference between the "
                                 r"conditions' counts 1 \(within")),
    "collect.py": Smallest(("--sizes", "10", "--work", WORK),
                           (r"^\s+10 runs: collect\s+[\d.]+ s",)),
    "dag.py": Smallest(("--runs", "18"), (r"^\s+18 runs\s+skeleton .* ratio [\d.]+$",)),
    "guard_idle.py": Smallest(("--processes", "2", "--seconds", "1", "--captures", "1"),
                              (r"^idle renderer \(this process\): [\d.]+ CPU-s per second",
                               r"^one capture of a plain page")),
    "mllm_overhead.py": Smallest(("--calls", "20", "--no-region"),
                                 (r"^\| flat full \| [\d.]+ \|", r"^\| photo full \| [\d.]+ \|",
                                  r"^MCP round trip, refused call on the real server over")),
    "render_memory.py": Smallest(("--answers", "plain page"),
                                 (r'^\{"answer": "plain page", "wall_s": [\d.]+, "peak_pss_mb": '
                                  r'\d+, "status": "ok"',)),
    "render_score.py": Smallest(("--repeats", "1", "--tasks", "settings-tabs"),
                                (r"^ratio shared / per page: [\d.]+$",)),
    "scale.py": Smallest(("--tasks", "1", "--conditions", "2", "--replicates", "1",
                          "--work", WORK),
                         (r'^\{"runs": 2, "collect": \[', r"^ browser: index.html")),
    "spend_ledger.py": Smallest(("--writers", "2", "--trials", "1", "--charges", "20"),
                                (r"^\s+2 \| +[\d.-]+ \|", r"^uncontended: \d+ charges/s")),
    "startup.py": Smallest(("--runs", "10", "--repeats", "1", "--work", WORK),
                           (r"^- one run: 10 / 10 runs = [\d.]+x$",
                            r"^- job step: 10 / 10 runs = [\d.]+x$")),
    "status.py": Smallest(("--runs", "10", "--ledger-lines", "10", "--work", WORK),
                          (r"^veriharness status \(subprocess\): [\d.]+ s",)),
    # The suite's own CPU over one quick test of this suite, without xdist.
    "suite_cpu.py": Smallest(("--", "tests/bench/test_benches.py::test_tables_to_compare",
                              "-n", "0", "-q", "-p", "no:cacheprovider"),
                             (r"^pytest exit code 0; wall [\d.]+ s; the machine busy",)),
    "tables_equal.py": Smallest((f"{WORK}/before", f"{WORK}/after"),
                                (r"^runs.csv: bytes equal$", r"^runs.parquet: frame equal",
                                 r"^identical$")),
}  # fmt: skip


def run_smallest(script: str, smallest: Smallest, work: Path) -> str:
    """Run bench/<script> at its smallest size; its output, after checking what it prints."""
    args = [a.replace(WORK, str(work)) for a in smallest.args]
    done = subprocess.run([sys.executable, f"bench/{script}", *args], cwd=ROOT,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, f"bench/{script} {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    for pattern in smallest.prints:
        assert re.search(pattern, done.stdout, re.MULTILINE), (pattern, done.stdout)
    return done.stdout


def test_tables_to_compare(tmp_path: Path) -> None:
    """Two `tables/` folders as collect writes them (CSV and parquet), for tables_equal.py."""
    frame = pd.DataFrame({"run": ["c/t/r1"], "score": [0.5]})
    for name in ("before", "after"):
        (tmp_path / name).mkdir()
        frame.to_csv(tmp_path / name / "runs.csv", index=False)
        frame.to_parquet(tmp_path / name / "runs.parquet")
    assert (tmp_path / "before" / "runs.csv").read_bytes() == frame.to_csv(index=False).encode()


@pytest.mark.parametrize("script", sorted(SMALLEST))
def test_a_benchmark_at_its_smallest_size_prints_its_figures(script: str, tmp_path: Path) -> None:
    if script == "tables_equal.py":
        test_tables_to_compare(tmp_path)
    run_smallest(script, SMALLEST[script], tmp_path)


def test_every_benchmark_runs_at_its_smallest_size() -> None:
    from bench.test_session_benches import SESSION_BENCHES
    from bench.test_workflow_benches import WORKFLOW_BENCHES

    # Tests of their own elsewhere in tests/bench/ run a script as "bench/<name>.py".
    others = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    named = re.findall(r'"bench/(\w+\.py)"', others)
    covered = {*SMALLEST, *SESSION_BENCHES, *WORKFLOW_BENCHES, *named}
    scripts = {p.name for p in (ROOT / "bench").glob("*.py")}
    assert scripts - covered == set(), "bench scripts without a smallest run in tests/bench/"
    assert covered - scripts == set(), "tests/bench/ names scripts bench/ does not have"
