"""What a cluster job pays to start: Snakemake re-parsing the workflow and building its DAG.

Run: python3 bench/startup.py [--runs 1000 10000] [--repeats 3] [--work DIR] [--markdown FILE]

On SLURM every job starts `snakemake` again on its node, parses the Snakefile (config validation,
task listing, input functions) and builds the DAG for its one target before running the verb; a
matrix of 10,000 runs pays that 40,000 times. This script measures it on a copy of the project
with configs of --runs runs (many replicates of five example tasks, two conditions):

- `one run`: `snakemake --dry-run <one run's metrics.json>`, the DAG of one run's chain of jobs;
- `job step`: what the SLURM executor launches inside the job (`--target-jobs score_answer:…
  --allowed-rules score_answer --force --nolock --max-inventory-time 0`), as a dry run;
- `all`: `snakemake --dry-run all`, the whole matrix, which only the submitting process pays.

Each is a fresh process; the script prints the median wall seconds over --repeats, the peak
resident memory (from wait4), and the ratio between the largest and the smallest matrix.
Target: one run and job step <= 2 s at 10,000 runs, and a ratio close to 1 (start-up must not
grow with the matrix).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["article", "dashboard-chart", "landing-page", "pricing-table", "settings-page"]
CONDITIONS = ["b3-absent", "b3-present"]
PROJECT_PARTS = ["Snakefile", "pyproject.toml", "workflow", "config", "prompts", "conditions",
                 "tasks"]  # fmt: skip
EXPERIMENT = "startup-bench"


class Sample(NamedTuple):
    seconds: float
    peak_mib: float


class Row(NamedTuple):
    runs: int
    what: str
    seconds: float
    peak_mib: float


def copy_project(work: Path) -> Path:
    project = work / "project"
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    for name in PROJECT_PARTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name)
        else:
            shutil.copy2(source, project / name)
    return project


def write_config(project: Path, work: Path, runs: int) -> Path:
    per_replicate = len(TASKS) * len(CONDITIONS)
    if runs % per_replicate:
        raise SystemExit(f"--runs {runs}: must be a multiple of {per_replicate} "
                         f"({len(TASKS)} tasks x {len(CONDITIONS)} conditions)")  # fmt: skip
    path = project / "config" / f"bench-{runs}.yaml"
    path.write_text(
        f"experiment: {EXPERIMENT}\n"
        f"tasks: [{', '.join(TASKS)}]\n"
        f"conditions: [{', '.join(CONDITIONS)}]\n"
        f"replicates: {runs // per_replicate}\n"
        f"execution:\n  results_dir: {work / f'results-{runs}'}\n"
    )
    return path


def timed(command: list[str], cwd: Path) -> Sample:
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        tail = output.decode(errors="replace")[-3000:]
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{tail}")
    return Sample(elapsed, usage.ru_maxrss / 1024)


def commands(config: Path, work: Path, runs: int) -> dict[str, list[str]]:
    snakemake = [sys.executable, "-m", "snakemake", "--configfile", str(config), "--cores", "1"]
    run = f"{work / f'results-{runs}'}/{EXPERIMENT}/{CONDITIONS[0]}/{TASKS[0]}/r1"
    job = f"score_answer:condition={CONDITIONS[0]},task={TASKS[0]},replicate=1"
    return {
        "one run": [*snakemake, "--dry-run", f"{run}/metrics.json"],
        "job step": [
            *snakemake,
            "--dry-run",
            "--target-jobs",
            job,
            "--allowed-rules",
            "score_answer",
            "--force",
            "--nolock",
            "--max-inventory-time",
            "0",
        ],  # fmt: skip
        "all": [*snakemake, "--dry-run", "all"],
    }


def stage_job_inputs(work: Path, runs: int) -> None:
    """A job step starts only once its inputs exist; stand-ins for the one scored run's."""
    run = work / f"results-{runs}" / EXPERIMENT / CONDITIONS[0] / TASKS[0] / "r1"
    (run / "answer").mkdir(parents=True, exist_ok=True)
    (run / "answer" / "answer.html").write_text("<!doctype html>\n")
    (run / "render").mkdir(exist_ok=True)
    for name in ("render.png", "dom.json", "render.json"):
        (run / "render" / name).write_bytes(b"")


def measure(project: Path, work: Path, runs: int, repeats: int) -> list[Row]:
    config = write_config(project, work, runs)
    stage_job_inputs(work, runs)
    rows = []
    for what, command in commands(config, work, runs).items():
        times = repeats if what != "all" else 1
        samples = [timed(command, project) for _ in range(times)]
        rows.append(Row(runs, what, statistics.median(s.seconds for s in samples),
                        max(s.peak_mib for s in samples)))  # fmt: skip
        print(f"{runs:>6} runs  {what:<9} {rows[-1].seconds:7.2f} s  {rows[-1].peak_mib:6.0f} MiB",
              flush=True)  # fmt: skip
    return rows


def baseline(project: Path) -> float:
    """Python + Snakemake import and argument parsing alone, without a workflow."""
    return timed([sys.executable, "-m", "snakemake", "--version"], project).seconds


def markdown(rows: list[Row], floor: float, sizes: list[int]) -> str:
    lines = ["| runs | what | seconds | peak MiB |", "| ---: | --- | ---: | ---: |"]
    lines += [f"| {r.runs:,} | {r.what} | {r.seconds:.2f} | {r.peak_mib:.0f} |" for r in rows]
    lines += ["", f"`snakemake --version` alone: {floor:.2f} s.", ""]
    small, large = min(sizes), max(sizes)
    by_key = {(r.runs, r.what): r.seconds for r in rows}
    for what in ("one run", "job step", "all"):
        ratio = by_key[(large, what)] / by_key[(small, what)]
        lines.append(f"- {what}: {large:,} / {small:,} runs = {ratio:.2f}x")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="scratch folder (default: a new temp folder, removed afterwards)",
    )
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    owned = args.work is None
    work = Path(tempfile.mkdtemp(prefix="vh-startup-")) if owned else args.work.resolve()
    try:
        project = copy_project(work)
        floor = baseline(project)
        rows = [row for runs in args.runs for row in measure(project, work, runs, args.repeats)]
        table = markdown(rows, floor, args.runs)
        print("\n" + table)
        if args.markdown:
            args.markdown.write_text(table)
    finally:
        if owned:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
