"""The added cost of scoring a session's answer snapshots, per snapshot, against one final
render + score of the run's answer.

Run: python3 bench/trajectory_cost.py [--snapshots 5] [--task landing-page] [--repeats 3]

A run folder is made with --snapshots versions of the task's reference page (each with one
more paragraph appended, so every version differs and is scored), captured by run-agent's own
`AnswerSnapshots`. The baseline is what the workflow does for the final answer: one
`veriharness render` and one `veriharness score` process, each browser and process its own.
The trajectory is one `veriharness score-trajectory` process over every snapshot (one browser
for all). Both are timed in wall and CPU seconds (this process's children); the script prints
the medians and the per-snapshot ratio (target: at most 1.0). The last snapshot is the run's
answer, which score-trajectory takes from the final render and score (`reused_final`), so the
ratio is per snapshot it rendered and scored itself; it also prints the figure per snapshot.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from veriharness.agent.snapshots import AnswerSnapshots  # noqa: E402

__all__ = ["main"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(*args: str | Path) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "veriharness", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"veriharness {args[0]} failed: {done.stderr.strip()}")
    return time.perf_counter() - wall, _children_cpu() - cpu


def _run_folder(base: Path, task: Path, count: int) -> Path:
    workspace, run_dir = base / "workspace", base / "run"
    workspace.mkdir()
    run_dir.mkdir()
    if (task / "assets").is_dir():
        shutil.copytree(task / "assets", workspace / "assets")
    page = (task / "reference.html").read_text()
    snapshots = AnswerSnapshots(workspace, run_dir, max_count=count, max_mib=20)
    for n in range(1, count + 1):
        extra = "".join(f"<p>revision {k}</p>" for k in range(n - 1))
        (workspace / "answer.html").write_text(page.replace("</body>", extra + "</body>"))
        snapshots.at_request(n, b"{}")
    shutil.copytree(workspace, run_dir / "answer")
    return run_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=5)
    parser.add_argument("--task", default="landing-page")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    task = ROOT / "tasks" / args.task
    final: list[tuple[float, float]] = []
    trajectory: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = _run_folder(Path(tmp), task, args.snapshots)
        for _ in range(args.repeats):
            answer, render_dir = run_dir / "answer", run_dir / "render"
            render = _timed("render", "--answer-dir", answer, "--reference",
                            task / "reference.png", "--out", render_dir)  # fmt: skip
            score = _timed("score", "--render-dir", render_dir, "--answer-dir", answer,
                           "--task-dir", task, "--out-dir", run_dir)  # fmt: skip
            final.append((render[0] + score[0], render[1] + score[1]))
            trajectory.append(_timed("score-trajectory", "--run-dir", run_dir, "--task-dir", task))
        scores = json.loads((run_dir / "trajectory.json").read_text())["snapshots"]
        reused = sum(bool(s.get("reused_final")) for s in scores)
    wall = statistics.median(w for w, _ in final), statistics.median(w for w, _ in trajectory)
    cpu = statistics.median(c for _, c in final), statistics.median(c for _, c in trajectory)
    n = args.snapshots
    own = max(n - reused, 1)
    print(f"task {args.task}, {n} snapshots ({reused} the answer's own render and score, "
          f"{n - reused} rendered and scored), median of {args.repeats}")  # fmt: skip
    print(f"final render + score:  {wall[0]:.2f} s wall, {cpu[0]:.2f} CPU-s")
    print(f"score-trajectory:      {wall[1]:.2f} s wall, {cpu[1]:.2f} CPU-s "
          f"({wall[1] / n:.2f} s, {cpu[1] / n:.2f} CPU-s per snapshot)")  # fmt: skip
    print(f"per snapshot / final: {wall[1] / own / wall[0]:.2f} wall, "
          f"{cpu[1] / own / cpu[0]:.2f} CPU per snapshot rendered (target <= 1.0); "
          f"{wall[1] / n / wall[0]:.2f} wall, "
          f"{cpu[1] / n / cpu[0]:.2f} CPU per snapshot")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
