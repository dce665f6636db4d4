"""Benchmark `veriharness collect` (and with --report, `veriharness report`) on synthetic
experiments of 1,000 and 10,000 runs.

Run: python3 bench/collect.py [--work DIR] [--sizes 1000 10000] [--jobs N] [--report]

The experiments are generated once under --work (kept between runs; delete the folder to
regenerate). Each size is collected by the real command in a subprocess; the script prints wall
time, the peak resident memory of the whole process tree (sampled from /proc every 50 ms), table
sizes, and the time ratio between the largest and the smallest size. Targets: 10k runs in <= 60 s,
<= 2 GB, growth close to linear (ratio close to the size ratio).

With --report the experiments also carry a reference.png per task and a render.png per run at
--image-size (default 1280x800, a desktop page), and after collect the real `report` command runs
on them; the script prints its wall time, peak memory, runs per second, and the report size.
Target: report at 10k runs within about a minute of collect.
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


def _experiment(work: Path, size: int, image_size: tuple[int, int] | None) -> Path:
    name = f"runs-{size}" if image_size is None else f"runs-{size}-img{image_size[0]}"
    results = work / name / "results"
    exp_dir = results / "bench"
    marker = exp_dir / ".complete"
    if not marker.exists():
        tasks = size // 10
        started = time.perf_counter()
        faults = {("base", "task-000", 1): "timeout", ("treat", "task-001", 2): "not_started"}
        exp = write_experiment(
            results,
            "bench",
            ("base", "treat"),
            tasks,
            5,
            seed=7,
            faults=faults,
            images=image_size is not None,
            image_size=image_size or (64, 48),
        )
        exp.write_expected(work / name / "expected.json")
        marker.touch()
        print(f"generated {size} runs in {time.perf_counter() - started:.1f} s")
    return exp_dir


def _timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of the process tree of `cmd`."""
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
        raise SystemExit(f"{cmd[3]} failed ({proc.returncode}):\n{err}")
    return elapsed, peak[0]


def _jobs(jobs: int | None) -> list[str]:
    return ["--jobs", str(jobs)] if jobs else []


def _collect(exp_dir: Path, jobs: int | None) -> tuple[float, int]:
    expected = exp_dir.parent.parent / "expected.json"
    return _timed(
        [sys.executable, "-m", "veriharness", "collect", "--experiment-dir", str(exp_dir)]
        + ["--expected", str(expected), *_jobs(jobs)]
    )


def _report(exp_dir: Path, jobs: int | None) -> tuple[float, int, float]:
    out = exp_dir / "report"
    elapsed, peak = _timed(
        [sys.executable, "-m", "veriharness", "report", "--experiment-dir", str(exp_dir)]
        + ["--out", str(out), "--tasks-dir", str(exp_dir.parent.parent / "tasks"), *_jobs(jobs)]
    )
    size_mb = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6
    return elapsed, peak, size_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/veriharness-bench-collect"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--report", action="store_true", help="also time `veriharness report`")
    parser.add_argument("--image-size", type=int, nargs=2, default=[1280, 800], metavar=("W", "H"))
    args = parser.parse_args()
    image_size = tuple(args.image_size) if args.report else None
    figures = {}
    for size in args.sizes:
        exp_dir = _experiment(args.work, size, image_size)
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
            "runs_per_s": round(size / elapsed),
            **rows,
        }
        print(
            f"{size:>6} runs: collect {elapsed:6.2f} s ({size / elapsed:.0f} runs/s), "
            f"peak {peak_kib / 1024:7.0f} MiB, {input_mb:.0f} MB of jsonl, rows {rows}"
        )
        if args.report:
            seconds, peak, out_mb = _report(exp_dir, args.jobs)
            figures[size].update(
                report_seconds=round(seconds, 2),
                report_peak_mib=round(peak / 1024),
                report_runs_per_s=round(size / seconds),
                report_mb=round(out_mb),
            )
            print(
                f"{size:>6} runs: report  {seconds:6.2f} s ({size / seconds:.0f} runs/s), "
                f"peak {peak / 1024:7.0f} MiB, {out_mb:.0f} MB written"
            )
    small, large = min(figures), max(figures)
    if small != large:
        for key in ("seconds", "report_seconds"):
            if key in figures[large]:
                ratio = figures[large][key] / figures[small][key]
                print(f"{key} ratio {large}/{small}: {ratio:.2f} (size ratio {large / small:.0f})")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
