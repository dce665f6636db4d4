"""How long Snakemake takes to plan a large matrix with our workflow, against a bare skeleton.

Both dry-run (`snakemake -n all`) the same number of runs with four rules per run (prepare, agent,
render, score) plus the experiment-level rules. The skeleton has no config validation, no input
functions and no files to list: its time is the floor Snakemake itself needs. Prints seconds, peak
memory and the ratio (target <= 1.5 at 10,000 runs).

    python3 bench/dag.py [--runs 10000] [--runs 1000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = sorted(p.parent.name for p in (ROOT / "tasks").glob("*/task.yaml"))
CONDITIONS = ["b3-absent", "b3-present"]

# What both skeletons share: the matrix, the wildcards and the run paths.
SKELETON_HEADER = """
TASKS = {tasks!r}
CONDITIONS = {conditions!r}
REPS = list(range(1, {replicates} + 1))
RUN = "results/x/{{condition}}/{{task}}/r{{replicate}}"

wildcard_constraints:
    condition="[A-Za-z0-9][A-Za-z0-9_.-]*",
    task="[A-Za-z0-9][A-Za-z0-9_.-]*",
    replicate=r"\\d+",

def runs(name):
    return expand(RUN + "/" + name, condition=CONDITIONS, task=TASKS, replicate=REPS)

"""

SKELETON = (
    SKELETON_HEADER
    + """rule all:
    input: "results/x/report.txt"

rule report:
    input: runs("metrics.json")
    output: "results/x/report.txt"
    shell: "touch {{output}}"

rule prepare:
    input: "tasks/{{task}}/task.yaml"
    output: RUN + "/run.json"
    shell: "touch {{output}}"

rule agent:
    input: RUN + "/run.json"
    output: RUN + "/outcome.json"
    shell: "touch {{output}}"

rule render:
    input: RUN + "/outcome.json"
    output: RUN + "/render.json"
    shell: "touch {{output}}"

rule score:
    input: RUN + "/render.json"
    output: RUN + "/metrics.json"
    shell: "touch {{output}}"
"""
)


def _project_copy(tmp: Path) -> Path:
    """A clone of the committed project, so the experiment check sees a clean repository."""
    copy = tmp / "project"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(copy)], check=True)
    return copy


_PEAK = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
    "print('PEAK', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(code)"
)


def _dry_run(cwd: Path, *args: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one snakemake dry run, in its own wrapper process."""
    command = [sys.executable, "-m", "snakemake", "-n", "--quiet", "all", "--cores", "4", *args]
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", _PEAK, *command], cwd=cwd, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"snakemake failed in {cwd}:\n{result.stderr[-3000:]}")
    peak_kib = int(result.stderr.strip().splitlines()[-1].split()[1])
    return seconds, peak_kib / 1024


def measure(runs: int, project: Path, tmp: Path) -> None:
    replicates = max(1, round(runs / (len(TASKS) * len(CONDITIONS))))
    actual = replicates * len(TASKS) * len(CONDITIONS)
    skeleton = tmp / f"skeleton-{actual}"
    (skeleton / "tasks").mkdir(parents=True)
    for task in TASKS:
        (skeleton / "tasks" / task).mkdir()
        (skeleton / "tasks" / task / "task.yaml").write_text("id: x\n")
    (skeleton / "Snakefile").write_text(
        SKELETON.format(tasks=TASKS, conditions=CONDITIONS, replicates=replicates)
    )
    bare_s, bare_mb = _dry_run(skeleton)
    ours_s, ours_mb = _dry_run(project, "--config", f"replicates={replicates}")
    print(
        f"{actual:>6} runs  skeleton {bare_s:6.2f} s {bare_mb:6.0f} MiB  |  "
        f"veriharness {ours_s:6.2f} s {ours_mb:6.0f} MiB  |  ratio {ours_s / bare_s:4.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, action="append", help="matrix sizes (repeatable)")
    args = parser.parse_args()
    sizes = args.runs or [1000, 10000]
    tmp = Path(tempfile.mkdtemp(prefix="veriharness-bench-dag-"))
    try:
        project = _project_copy(tmp)
        print(f"{len(TASKS)} tasks x {len(CONDITIONS)} conditions; dry run of `all`, 4 cores")
        for runs in sizes:
            measure(runs, project, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
