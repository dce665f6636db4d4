"""Load and resume: an offline matrix through Snakemake, the whole Snakemake process group killed
with SIGKILL part-way, then started again as the README says.

With `--kill snakemake`, only Snakemake's own process is killed: its running sessions go on to
their end without it, as after a crashed login node, and the restart must restore them from
`finished/` rather than pay for them again.

Printed: how many sessions had finished at the kill, which claude / Chromium / model-server
processes of the experiment were still alive 5 s after it, whether the restart met Snakemake's
stale lock, and at the end whether every cell has exactly one row, no finished session ran again
(its outcome.json unchanged), and every run is `ok`.

    python3 bench/resume.py --tasks 6 --replicates 8 --cores 4 --kill-after 20
    python3 bench/resume.py --tasks 6 --replicates 8 --cores 4 --kill-after 20 --kill snakemake
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

import pandas as pd  # noqa: E402

from support.project_copy import copy_project  # noqa: E402
from veriharness._util.programs import find_claude  # noqa: E402

ALL_TASKS = sorted(p.name for p in (ROOT / "tasks").iterdir() if (p / "task.yaml").is_file())


def _snakemake(project: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args, "--configfile", "config/bench.yaml"]


def _env() -> dict[str, str]:
    return {**os.environ, "VERIHARNESS_CLAUDE": str(find_claude())}


def _survivors(marker: str) -> list[str]:
    alive = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text and any(k in text for k in ("claude", "chromium", "veriharness")):
            alive.append(text[:160])
    return alive


def _agents_running(project: Path) -> bool:
    """Whether a `run-agent` started in the project folder still runs."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"run-agent" in cmdline.read_bytes().split(b"\0"):
                if os.readlink(cmdline.parent / "cwd") == str(project):
                    return True
        except OSError:
            continue
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--replicates", type=int, default=8)
    parser.add_argument("--cores", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=4, help="agent_sessions resource")
    parser.add_argument("--kill-after", type=int, default=20, help="finished sessions, then kill")
    parser.add_argument(
        "--kill", choices=("group", "snakemake"), default="group",
        help="SIGKILL Snakemake's whole process group, or Snakemake's own process alone",
    )  # fmt: skip
    args = parser.parse_args()
    tasks = ALL_TASKS[: args.tasks]
    with tempfile.TemporaryDirectory(prefix="vh-bench-resume-") as tmp:
        config = f"tasks: {json.dumps(tasks)}\nreplicates: {args.replicates}\n"
        project = copy_project(Path(tmp), tasks, {"config/bench.yaml": config}, "bench")
        experiment = project / "results" / "example"
        run = _snakemake(project, "all", "--cores", str(args.cores), "--resources")
        run.insert(run.index("--resources") + 1, f"agent_sessions={args.sessions}")
        start = time.monotonic()
        process = subprocess.Popen(
            run, cwd=project, env=_env(), start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        while len(list(experiment.glob("*/*/r*/outcome.json"))) < args.kill_after:
            if process.poll() is not None:
                print("snakemake ended before the kill point")
                return 1
            time.sleep(0.5)
        # A run whose render has started: Snakemake counts its session as finished.
        rendered = experiment.glob("*/*/r*/render/render.json")
        stamps = {p.parent.parent / "outcome.json": 0 for p in rendered}
        stamps = {p: p.stat().st_mtime_ns for p in stamps}
        if args.kill == "group":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
        killed_at = time.monotonic() - start
        time.sleep(5)
        survivors = _survivors(str(project))
        print(f"killed ({args.kill}) after {killed_at:.0f} s with {len(stamps)} sessions rendered")
        print(f"processes alive 5 s after the kill: {len(survivors)}")
        for line in survivors:
            print("  ", line)
        while args.kill == "snakemake" and _agents_running(project):
            time.sleep(1)  # the README: let the orphaned sessions end
        ended = {p: p.read_bytes() for p in experiment.glob("*/*/r*/outcome.json")}
        print(f"sessions ended before the restart: {len(ended)}")
        again = subprocess.run(
            _snakemake(project, "all", "--cores", str(args.cores)),
            cwd=project, env=_env(), capture_output=True, text=True,
        )  # fmt: skip
        locked = "LockException" in again.stderr
        print(f"restart met a stale lock: {locked}")
        if locked:
            subprocess.run(
                _snakemake(project, "--unlock", "--cores", "1", "all"),
                cwd=project, env=_env(), capture_output=True, check=True,
            )  # fmt: skip
            again = subprocess.run(
                _snakemake(project, "all", "--cores", str(args.cores)),
                cwd=project, env=_env(), capture_output=True, text=True,
            )  # fmt: skip
        print(f"restart exit code: {again.returncode}, total {time.monotonic() - start:.0f} s")
        runs = pd.read_csv(experiment / "tables" / "runs.csv")
        cells = len(tasks) * 2 * args.replicates
        keys = runs.groupby(["condition", "task", "replicate"]).size()
        rerun = [str(p) for p, stamp in stamps.items() if p.stat().st_mtime_ns != stamp]
        paid_twice = [str(p) for p, data in ended.items() if p.read_bytes() != data]
        logs = experiment / "logs" / "run_agent"
        restored = sum("restored" in log.read_text() for log in logs.rglob("*.log"))
        sessions = runs[runs["answer_source"] == "session"]
        print(f"session rows {len(sessions)} of {cells} cells ({len(runs)} rows with external)")
        print(f"every cell once: {(keys == 1).all()}")
        print(f"finished sessions run again: {len(rerun)}")
        print(f"ended sessions run again: {len(paid_twice)}; restored from finished/: {restored}")
        print(f"statuses: {runs['status'].value_counts().to_dict()}")
        for row in runs[runs["status"] != "ok"].itertuples():
            print(f"   {row.condition}/{row.task}/r{row.replicate}: {row.status}: {row.reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
