"""What the trajectory tables add to `veriharness collect`: the same synthetic experiment
collected without answer snapshots and with about --snapshots of them per run.

Run: python3 bench/collect_trajectory.py [--work DIR] [--runs 20000] [--snapshots 10]

Both experiments are generated once under --work (kept between runs; delete the folder to
regenerate) with the same seed, so their runs, transcripts and traces are identical and only
snapshots/index.jsonl and trajectory.json differ. Each is collected by the real command in a
subprocess, --repeats times alternately; the script prints the median wall times and their
ratio (target: at most 1.3 at 20,000 runs with 10 snapshots each).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.synthetic_runs import write_experiment  # noqa: E402

__all__ = ["main"]


def _experiment(work: Path, runs: int, snapshots: int) -> Path:
    results = work / f"{runs}-{snapshots}" / "results"
    exp_dir = results / "exp"
    if not exp_dir.is_dir():
        tasks = max(runs // 2, 1)
        write_experiment(results, tasks=tasks, seed=7, snapshots=snapshots)
        (exp_dir / "experiment.json").unlink(missing_ok=True)
    return exp_dir


def _collect(exp_dir: Path) -> float:
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "veriharness", "collect", "--experiment-dir", str(exp_dir)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"collect failed on {exp_dir}: {done.stderr.strip()}")
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/veriharness-bench-trajectory"))
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--snapshots", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    plain = _experiment(args.work, args.runs, 0)
    with_snapshots = _experiment(args.work, args.runs, args.snapshots)
    times: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(args.repeats):
        times["without"].append(_collect(plain))
        times["with"].append(_collect(with_snapshots))
    without, with_ = (statistics.median(times[k]) for k in ("without", "with"))
    rows = sum(1 for _ in (with_snapshots / "tables" / "trajectory.csv").open()) - 1
    print(f"runs: {args.runs}, snapshots per run: up to {args.snapshots} ({rows} trajectory rows)")
    every = {k: ", ".join(f"{t:.2f}" for t in v) for k, v in times.items()}
    median = f"median of {args.repeats}"
    print(f"collect without snapshots: {without:.2f} s ({median}: {every['without']})")
    print(f"collect with snapshots:    {with_:.2f} s ({every['with']})")
    print(f"ratio: {with_ / without:.2f} (target <= 1.3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
