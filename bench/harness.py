"""The harness's own time per run: everything a run costs except the `claude` process itself.

Runs a small offline matrix through Snakemake in a clone of the project, then reads each job's
Snakemake benchmark file and each run's outcome.json (`session_seconds` is the claude process
alone, from start to exit). Prints, per run and as medians:

- around the session: prepare + (run-agent job - claude process) - workspace, offline model,
  MCP config, transcript capture, answer copy (target: median <= 2 s);
- after the session: render + score;
- the claude process itself, for scale.

    python3 bench/harness.py [--replicates 2] [--tasks landing-page,pricing-table]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _seconds(path: Path) -> float:
    with open(path, encoding="utf-8") as handle:
        return float(next(csv.DictReader(handle, delimiter="\t"))["s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument("--tasks", default="landing-page,pricing-table")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="veriharness-bench-harness-"))
    try:
        project = tmp / "project"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(project)], check=True)
        claude = ROOT / ".tools" / "claude" / "node_modules" / ".bin" / "claude"
        env = {**os.environ, "VERIHARNESS_CLAUDE": str(claude)}
        tasks = f"tasks=[{args.tasks}]"
        result = subprocess.run(
            # Sessions only: an external answer set (the default's reference answers) has no
            # session to measure around.
            [sys.executable, "-m", "snakemake", "--cores", "2", "all", "--config", tasks,
             f"replicates={args.replicates}", "external_answers=[]"],
            cwd=project, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if result.returncode != 0:
            raise SystemExit(result.stderr[-3000:])
        experiment = project / "results" / "example"
        around, after, sessions = [], [], []
        for outcome_path in sorted(experiment.glob("*/*/r*/outcome.json")):
            run = outcome_path.parent
            key = Path(*run.relative_to(experiment).parts)
            bench = experiment / "benchmarks"
            outcome = json.loads(outcome_path.read_text())
            session = outcome["session_seconds"]
            agent = _seconds(bench / "run_agent" / f"{key}.tsv")
            prepare = _seconds(bench / "prepare_run" / f"{key}.tsv")
            render = _seconds(bench / "render_answer" / f"{key}.tsv")
            score = _seconds(bench / "score_answer" / f"{key}.tsv")
            around.append(prepare + agent - session)
            after.append(render + score)
            sessions.append(session)
            print(f"{key}: around {around[-1]:5.2f} s  after {after[-1]:5.2f} s  "
                  f"claude {session:5.2f} s")  # fmt: skip
        median = statistics.median
        print(f"median over {len(around)} runs: around the session {median(around):.2f} s "
              f"(target <= 2 s), render+score {median(after):.2f} s, "
              f"claude process {median(sessions):.2f} s")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
