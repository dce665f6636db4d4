"""Benchmark `veriharness collect` on synthetic experiments of 1,000 and 10,000 runs.

Run: python3 bench/collect.py [--work DIR] [--sizes 1000 10000] [--jobs N]

The experiments are generated once under --work (kept between runs; delete the folder to
regenerate). Each size is collected by the real command in a subprocess; the script prints wall
time, the peak resident memory of the whole process tree (sampled from /proc every 50 ms), table
sizes, and the time ratio between the largest and the smallest size. Targets: 10k runs in <= 60 s,
<= 2 GB, growth close to linear (ratio close to the size ratio).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.synthetic_runs import write_experiment  # noqa: E402


def _tree_rss_kib(pid: int) -> int:
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(
                next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS"))
            )
            for task in Path(f"/proc/{current}/task").iterdir():
                stack.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, StopIteration, ValueError):
            continue
    return total


def _experiment(work: Path, size: int) -> Path:
    results = work / f"runs-{size}" / "results"
    exp_dir = results / "bench"
    marker = exp_dir / ".complete"
    if not marker.exists():
        tasks = size // 10
        started = time.perf_counter()
        faults = {("base", "task-000", 1): "timeout", ("treat", "task-001", 2): "not_started"}
        exp = write_experiment(results, "bench", ("base", "treat"), tasks, 5, seed=7, faults=faults)
        exp.write_expected(work / f"runs-{size}" / "expected.json")
        marker.touch()
        print(f"generated {size} runs in {time.perf_counter() - started:.1f} s")
    return exp_dir


def _collect(exp_dir: Path, jobs: int | None) -> tuple[float, int]:
    cmd = [
        sys.executable,
        "-m",
        "veriharness",
        "collect",
        "--experiment-dir",
        str(exp_dir),
        "--expected",
        str(exp_dir.parent.parent / "expected.json"),
    ]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss_kib(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, err = proc.communicate()
    elapsed = time.perf_counter() - started
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"collect failed ({proc.returncode}):\n{err}")
    return elapsed, peak[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/veriharness-bench-collect"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()
    figures = {}
    for size in args.sizes:
        exp_dir = _experiment(args.work, size)
        elapsed, peak_kib = _collect(exp_dir, args.jobs)
        tables = exp_dir / "tables"
        rows = {
            name: len(__import__("pandas").read_parquet(tables / f"{name}.parquet"))
            for name in ("runs", "agent_tool_calls", "mllm_calls", "capability_tags")
        }
        input_mb = sum(f.stat().st_size for f in exp_dir.rglob("*.jsonl")) / 1e6
        figures[size] = {
            "seconds": round(elapsed, 2),
            "peak_mib": round(peak_kib / 1024),
            "jsonl_mb": round(input_mb),
            **rows,
        }
        print(
            f"{size:>6} runs: {elapsed:6.2f} s, peak {peak_kib / 1024:7.0f} MiB, "
            f"{input_mb:.0f} MB of jsonl, rows {rows}"
        )
    small, large = min(figures), max(figures)
    if small != large:
        ratio = figures[large]["seconds"] / figures[small]["seconds"]
        print(f"time ratio {large}/{small}: {ratio:.2f} (size ratio {large / small:.0f})")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
