"""The moonshot on SLURM: cluster jobs, planning cost and group start-up for 20,000 runs.

Run: python3 bench/cluster_plan.py [--runs 20000] [--skip-count]

On a clone of the committed project, with `profiles/slurm` and its groups as they are:

1. `cluster jobs`: a dry run of `all` under the profile, its job listing read as it streams: each
   ungrouped job of a rule that is not a `localrule` is one cluster job, each group job one more.
   Target <= 22,000 at 20,000 runs (one per session plus the render/score group jobs).
2. `planning`: the submitting process's dry run (`--quiet`, as bench/dag.py times it) against
   bench/dag.py's bare skeleton at the same number of runs: CPU and wall seconds, peak memory,
   the ratios. Target <= 1.3x. Beside them, a skeleton of the workflow's shape (its five cluster
   rule names, annotation after render, no logs, params or input functions) under the same
   SLURM profile: what Snakemake itself spends on this many jobs with these settings.
3. `group start-up`: what one render/score group job pays before its work: the node's
   `snakemake --target-jobs <the group's jobs> --mode remote` building its DAG (as a dry run).
   Inside a cluster job the run's rules are local rules (workflow/rules/common.smk), so that
   process runs every job of the group itself; no job starts Snakemake again.
4. `start order`, read from the same job listing: the sessions' submission order, which is their
   job priorities' (Snakemake's scheduler submits the ready job of highest priority first;
   docs/decisions.md P-60), against the blocked order of the seed the start chose: whether they
   are the same, the largest running difference between the conditions' counts (the bound: the
   sessions at once, profiles/default's agent_sessions, plus one), and at how many places
   another seed's block order differs.

Partition and account need no real values for a dry run. With SLURM installed but its controller
unreachable, importing the executor plugin waits about 9 s (`scontrol show config`): the script
says whether `scontrol ping` answered, since that wait is in the planning figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import yaml

from veriharness.experiment.start_order import (
    RunKey,
    block_order,
    matrix_runs,
    running_imbalance,
    start_order,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dag import _PEAK, CONDITIONS, SKELETON, SKELETON_HEADER, TASKS, _project_copy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# In the order the job counts are printed.
CLUSTER_RULES = ("run_agent", "render_answer", "score_answer", "annotate_calls")
GROUPED = ("render_answer", "score_answer", "annotate_calls")
# bench/dag.py's skeleton with the workflow's rule names (so profiles/slurm applies to it as it
# is) and its shape per run: annotation beside render and score, ordered after render.
SHAPED_SKELETON = (
    SKELETON_HEADER
    + """localrules: all, report, prepare_run

rule all:
    input: "results/x/report.txt"

rule report:
    input: runs("metrics.json"), runs("inferred_tags.json")
    output: "results/x/report.txt"
    shell: "touch {{output}}"

rule prepare_run:
    input: "tasks/{{task}}/task.yaml"
    output: RUN + "/run.json"
    shell: "touch {{output}}"

rule run_agent:
    input: RUN + "/run.json"
    output: RUN + "/outcome.json"
    shell: "touch {{output}}"

rule render_answer:
    input: RUN + "/outcome.json"
    output: RUN + "/render.json"
    shell: "touch {{output}}"

rule score_answer:
    input: RUN + "/render.json"
    output: RUN + "/metrics.json"
    shell: "touch {{output}}"

rule annotate_calls:
    input: RUN + "/outcome.json", ancient(RUN + "/render.json")
    output: RUN + "/inferred_tags.json"
    shell: "touch {{output}}"
"""
)
ENV = {"VERIHARNESS_SLURM_PARTITION": "bench", "VERIHARNESS_SLURM_ACCOUNT": "bench"}


def _replicates(runs: int) -> int:
    """Replicates giving the nearest whole matrix to `runs` (as bench/dag.py rounds)."""
    return max(1, round(runs / (len(TASKS) * len(CONDITIONS))))


class Sample(NamedTuple):
    wall_s: float
    cpu_s: float
    peak_mib: float


def _measure(command: list[str], cwd: Path) -> Sample:
    """Wall and CPU seconds (user + system, all processes) and peak RSS of one command. On a
    loaded machine wall time mostly measures the others; CPU time much less so."""
    env = {**os.environ, **ENV}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", _PEAK, *command], cwd=cwd, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    _, stderr = process.communicate()
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"failed in {cwd}: {' '.join(command)}\n{stderr.decode()[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    peak_kib = int(stderr.decode().strip().splitlines()[-1].split()[1])
    return Sample(wall, cpu, peak_kib / 1024)


def _snakemake(project: Path, replicates: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--profile", str(project / "profiles" / "slurm"),
            "--config", f"replicates={replicates}", *args]  # fmt: skip


_WILDCARDS = re.compile(r"^    wildcards: condition=(\S+), task=(\S+), replicate=(\d+)$")
_PRIORITY = re.compile(r"^    priority: (\d+)$")


class Listing(NamedTuple):
    counts: dict[str, int]
    sessions: list[tuple[int, RunKey]]  # each run_agent job's priority and run


def count_cluster_jobs(project: Path, replicates: int) -> Listing:
    """Cluster jobs the profile would submit (ungrouped jobs of cluster rules, and group jobs),
    and each session's job priority."""
    counts = {"group jobs": 0, **{rule: 0 for rule in CLUSTER_RULES}}
    sessions: list[tuple[int, RunKey]] = []
    top_level_rule = re.compile(r"^(?:local)?rule (\w+):")
    command = _snakemake(project, replicates, "--dry-run", "all")
    env = {**os.environ, **ENV}
    rule, run = "", None
    with subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as process:  # fmt: skip
        assert process.stdout is not None
        tail: list[str] = []
        for line in process.stdout:
            if line.startswith("[") and "Group job " in line:
                counts["group jobs"] += 1
            elif match := top_level_rule.match(line):
                rule, run = match[1], None
                if not line.startswith("local") and rule in CLUSTER_RULES:
                    counts[rule] += 1
            elif rule == "run_agent" and (found := _WILDCARDS.match(line.rstrip("\n"))):
                run = RunKey(found[1], found[2], int(found[3]))
            elif rule == "run_agent" and run and (found := _PRIORITY.match(line.rstrip("\n"))):
                sessions.append((int(found[1]), run))
            tail = [*tail[-40:], line]
    if process.returncode != 0:
        raise SystemExit("dry run failed:\n" + "".join(tail))
    return Listing(counts, sessions)


def _recorded_seed(project: Path) -> int:
    """The seed the dry run's parse resolved (chosen, none being set), as it wrote it."""
    wrapped = json.loads((project / "results" / "example" / "config.effective.json").read_text())
    return int(wrapped["start_order"]["seed"])


def _sessions_at_once() -> int:
    """profiles/default's cap on concurrent sessions, which the SLURM profile keeps too."""
    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    caps = dict(entry.split("=") for entry in profile["resources"])
    return int(caps["agent_sessions"])


def order_line(sessions: list[tuple[int, RunKey]], replicates: int, seed: int) -> str:
    """How the sessions' submission order (highest priority first) holds to the blocked order."""
    submitted = [run for _, run in sorted(sessions, key=lambda s: -s[0])]
    runs = matrix_runs(CONDITIONS, TASKS, range(1, replicates + 1))
    planned = start_order(runs, seed)
    blocks, other = block_order(planned), block_order(start_order(runs, seed + 1))
    moved = sum(a != b for a, b in zip(blocks, other, strict=True))
    at_once = _sessions_at_once()
    imbalance = running_imbalance([run.condition for run in submitted])
    same = "yes" if submitted == planned else "NO"
    within = "within" if imbalance <= at_once + 1 else "ABOVE"
    return (
        f"start order: {len(submitted):,} sessions submitted in seed {seed}'s blocked order: "
        f"{same}; largest running difference between the conditions' counts {imbalance} "
        f"({within} the sessions at once, {at_once}, plus one); seed {seed + 1}'s block order "
        f"differs at {moved:,} of {len(blocks):,} places"
    )


def _skeleton(folder: Path, text: str, replicates: int) -> Path:
    for task in TASKS:
        (folder / "tasks" / task).mkdir(parents=True)
        (folder / "tasks" / task / "task.yaml").write_text("id: x\n")
    (folder / "Snakefile").write_text(
        text.format(tasks=TASKS, conditions=CONDITIONS, replicates=replicates)
    )
    return folder


def planning(project: Path, tmp: Path, replicates: int) -> tuple[Sample, Sample, Sample]:
    """`snakemake -n --quiet all` (bench/dag.py's command) of the bare skeleton, of the skeleton
    shaped like the workflow under the SLURM profile, and of the workflow under it."""
    dry = [sys.executable, "-m", "snakemake", "-n", "--quiet", "all"]
    bare = _measure([*dry, "--cores", "4"], _skeleton(tmp / "skeleton", SKELETON, replicates))
    shaped = _skeleton(tmp / "shaped", SHAPED_SKELETON, replicates)
    profiled = _measure([*dry, "--profile", str(project / "profiles" / "slurm")], shaped)
    ours = _measure(_snakemake(project, replicates, "-n", "--quiet", "all"), project)
    return bare, profiled, ours


def _group_runs(size: int) -> list[tuple[str, str, int]]:
    runs = [(c, t, r) for r in range(1, size + 1) for c in CONDITIONS for t in TASKS]
    return runs[:size]


def group_startup(project: Path, replicates: int, size: int) -> Sample:
    """The node's DAG of one whole group (a dry run)."""
    runs = _group_runs(size)
    for condition, task, replicate in runs:
        run = project / "results" / "example" / condition / task / f"r{replicate}"
        run.mkdir(parents=True, exist_ok=True)
        (run / "outcome.json").write_text("{}\n")
    specs = [f"{rule}:condition={c},task={t},replicate={r}" for c, t, r in runs for rule in GROUPED]
    step = ["--force", "--nolock", "--max-inventory-time", "0", "--cores", "1", "--dry-run",
            "--mode", "remote", "--allowed-rules", *GROUPED, "--target-jobs"]  # fmt: skip
    return _measure(_snakemake(project, replicates, *step, *specs), project)


def _slurm_reachable() -> str:
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no ({exc})"
    return "yes" if "UP" in ping.stdout else "no (" + (ping.stdout + ping.stderr).strip() + ")"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--skip-count", action="store_true", help="skip the job listing dry run")
    parser.add_argument("--skip-plan", action="store_true", help="skip the planning comparison")
    args = parser.parse_args()
    replicates = _replicates(args.runs)
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    size = int(profile["group-components"]["render_score"])
    runs = replicates * len(TASKS) * len(CONDITIONS)
    print(f"{runs:,} runs ({len(TASKS)} tasks x {len(CONDITIONS)} conditions x "
          f"{replicates} replicates); render_score groups of {size}; "
          f"SLURM controller reachable: {_slurm_reachable()}; load {os.getloadavg()[0]:.1f}",
          flush=True)  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="veriharness-bench-cluster-"))
    try:
        project = _project_copy(tmp)
        if not args.skip_count:
            start = time.perf_counter()
            counts, sessions = count_cluster_jobs(project, replicates)
            total = sum(counts.values())
            print(f"cluster jobs: {total:,} ({', '.join(f'{k} {v:,}' for k, v in counts.items())})"
                  f"; listing took {time.perf_counter() - start:.0f} s", flush=True)  # fmt: skip
            print(order_line(sessions, replicates, _recorded_seed(project)), flush=True)
        if not args.skip_plan:
            bare, shaped, ours = planning(project, tmp, replicates)
            print(f"planning: skeleton {bare.wall_s:.1f} s wall, {bare.cpu_s:.1f} s CPU, "
                  f"{bare.peak_mib:.0f} MiB | shaped skeleton + profile {shaped.wall_s:.1f} s "
                  f"wall, {shaped.cpu_s:.1f} s CPU, {shaped.peak_mib:.0f} MiB | veriharness + "
                  f"profile {ours.wall_s:.1f} s wall, {ours.cpu_s:.1f} s CPU, "
                  f"{ours.peak_mib:.0f} MiB | veriharness / skeleton: wall "
                  f"{ours.wall_s / bare.wall_s:.2f}, CPU {ours.cpu_s / bare.cpu_s:.2f}, memory "
                  f"{ours.peak_mib / bare.peak_mib:.2f} | veriharness / shaped skeleton + "
                  f"profile: CPU {ours.cpu_s / shaped.cpu_s:.2f}, memory "
                  f"{ours.peak_mib / shaped.peak_mib:.2f} | load {os.getloadavg()[0]:.1f}",
                  flush=True)  # fmt: skip
        group = group_startup(project, replicates, size)
        print(f"group start-up: node DAG of a {size}-run group ({len(GROUPED) * size} jobs) "
              f"{group.wall_s:.2f} s wall, {group.cpu_s:.2f} s CPU, {group.peak_mib:.0f} MiB; "
              f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
