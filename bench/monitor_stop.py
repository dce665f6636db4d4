"""The monitor's stop, simulated on the project's own code path: how often it stops a study that
has no effect (at most alpha, whatever the number of looks), and how many sessions it saves one
whose treatment is as much better as the README demo's.

Run: python3 bench/monitor_stop.py [--studies 10000] [--tasks 200] [--effect-studies 1000]
     [--effect-tasks 200 1000] [--alpha 0.05]

Each simulated study is a runs table like collect's: tasks x two conditions x --replicates runs,
each run `ok` with an SSIM score or `failed` (no answer; the intention-to-treat floor, 0). The
paired task differences come from `compare.task_difference_series` (the comparison's ITT rules)
over one table holding every study's runs, and the running answer from the monitor's own
`track_answers`, with a look after every task in a random order of the study's tasks (the start
order). A study stops at the first look at which its answer is known.

What the runs are like: each task has a baseline level drawn from the nine per-task baselines of
the README demo's comparison (SSIM 0.735 to 0.918) plus N(0, 0.03); a run scores its task's
level plus N(0, --run-sd) (clipped to [0, 1]), and fails with probability --failure (both
conditions alike). No effect: both conditions are drawn alike, so every task difference is
symmetric about 0. The demo's effect: a treatment run's level is raised by one of the demo's nine
per-task differences (mean 0.0236; per task 0.010 to 0.044), drawn per task.

Printed: per method, the share of --studies null studies that stopped with its exact (Clopper-
Pearson) 95% interval, against alpha (for betting_wor, whose answer is the mean over the study's
own tasks, "no effect" means that mean is exactly 0: each study's second half of tasks mirrors
its first with the conditions swapped); and per method and study size, the share of
--effect-studies studies that stopped and the median (and quartiles) of the share of sessions
saved, 1 - (tasks looked at when known) / tasks (no session under way at the stop: the upper
bound by the sessions running at once).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from veriharness.collect.compare import task_difference_series  # noqa: E402
from veriharness.collect.monitor import track_answers  # noqa: E402
from veriharness.experiment.analysis import AnalysisSettings  # noqa: E402

__all__ = ["main", "simulated_differences"]

# The README demo's comparison (docs/images/report-first-screen.png): per task, b3-absent's SSIM
# and b3-present's minus it.
DEMO_BASELINES = (0.735, 0.8607, 0.8705, 0.8679, 0.856, 0.856, 0.8898, 0.9183, 0.8037)
DEMO_DIFFERENCES = (0.03325, 0.01025, 0.04371, 0.03794, 0.01757, 0.01757, 0.01589, 0.01706, 0.01913)
MEASURE = "metric_ssim"
_CHUNK_ROWS = 400_000  # runs per table handed to the comparison's code at once


def _runs_table(
    rng: np.random.Generator,
    studies: int,
    tasks: int,
    replicates: int,
    effect: bool,
    run_sd: float,
    failure: float,
    first: int,
    mirrored: bool = False,
) -> pd.DataFrame:
    """The runs of `studies` studies (numbered from `first`) as collect's runs table has them."""
    shape = (studies, tasks)
    level = rng.choice(DEMO_BASELINES, size=shape) + rng.normal(0, 0.03, shape)
    lift = rng.choice(DEMO_DIFFERENCES, size=shape) if effect else np.zeros(shape)
    frames = []
    study_ids = np.arange(first, first + studies)
    names = np.char.add(
        np.char.add("s", np.char.zfill(study_ids.astype(str), 6))[:, None],
        np.char.add("-t", np.char.zfill(np.arange(tasks).astype(str), 5))[None, :],
    )
    drawn = {}
    for condition, shift in (("baseline", 0.0), ("treatment", 1.0)):
        for replicate in range(1, replicates + 1):
            score = np.clip(level + shift * lift + rng.normal(0, run_sd, shape), 0.0, 1.0)
            drawn[condition, replicate] = np.where(rng.random(shape) < failure, np.nan, score)
    if mirrored:
        # The second half of each study's tasks are the first half with the conditions swapped:
        # the study's own mean difference is then exactly 0 (the null of the finite population).
        half = tasks // 2
        for replicate in range(1, replicates + 1):
            b, t = drawn["baseline", replicate], drawn["treatment", replicate]
            b[:, half : 2 * half], t[:, half : 2 * half] = t[:, :half], b[:, :half]
    for (condition, replicate), score in drawn.items():
        frames.append(
            pd.DataFrame(
                {
                    "condition": condition,
                    "task": names.ravel(),
                    "replicate": replicate,
                    "status": np.where(np.isnan(score), "failed", "ok").ravel(),
                    MEASURE: score.ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def simulated_differences(
    studies: int,
    tasks: int,
    effect: bool,
    seed: int,
    replicates: int = 1,
    run_sd: float = 0.03,
    failure: float = 0.03,
    mirrored: bool = False,
) -> np.ndarray:
    """(studies, tasks) paired ITT task differences, each study's tasks in a random order;
    `mirrored`: each study's second half of tasks mirrors its first (mean difference 0)."""
    rng = np.random.default_rng(seed)
    settings = AnalysisSettings()
    per_chunk = max(1, _CHUNK_ROWS // (2 * replicates * tasks))
    rows = []
    for first in range(0, studies, per_chunk):
        size = min(per_chunk, studies - first)
        runs = _runs_table(rng, size, tasks, replicates, effect, run_sd, failure, first, mirrored)
        found = task_difference_series(runs, "baseline", "treatment", MEASURE, settings)
        rows.append(found.sort_index().to_numpy(float).reshape(size, tasks))
    diffs = np.concatenate(rows)
    order = np.argsort(rng.random(diffs.shape), axis=1)  # each study's start order
    return np.take_along_axis(diffs, order, axis=1)


def _known_after(diffs: np.ndarray, alpha: float, method: str) -> np.ndarray:
    population = diffs.shape[1] if method == "betting_wor" else None
    out = []
    for start in range(0, len(diffs), 500):  # bounded memory: (500, tasks, 1) capitals
        chunk = diffs[start : start + 500]
        out.append(track_answers(chunk, MEASURE, alpha, None, population).known_after)
    return np.concatenate(out)


def _share_interval(hits: int, total: int) -> tuple[float, float]:
    low = stats.beta.ppf(0.025, hits, total - hits + 1) if hits else 0.0
    high = stats.beta.ppf(0.975, hits + 1, total - hits) if hits < total else 1.0
    return float(low), float(high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=10_000, help="null studies")
    parser.add_argument("--tasks", type=int, default=200, help="tasks of a null study")
    parser.add_argument("--effect-studies", type=int, default=1000)
    parser.add_argument("--effect-tasks", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--replicates", type=int, default=1)
    parser.add_argument("--run-sd", type=float, default=0.03)
    parser.add_argument("--failure", type=float, default=0.03)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(
        f"runs: {args.replicates} replicate(s) per task and condition, run sd {args.run_sd}, "
        f"failure {args.failure}; alpha {args.alpha}; a look after every task"
    )
    began = time.perf_counter()
    # No effect: for betting, both conditions drawn alike (the mean over a population of tasks
    # is 0); for betting_wor, whose answer is the mean over the study's own tasks, those tasks'
    # mean difference is exactly 0 (mirrored halves).
    for method, mirrored in (("betting", False), ("betting_wor", True)):
        null = simulated_differences(
            args.studies, args.tasks, False, args.seed, args.replicates, args.run_sd,
            args.failure, mirrored,
        )  # fmt: skip
        stopped = int((_known_after(null, args.alpha, method) > 0).sum())
        low, high = _share_interval(stopped, args.studies)
        which = "the study's tasks' mean difference exactly 0" if mirrored else "alike"
        print(
            f"no effect ({which}), {method}: {stopped} of {args.studies} studies of "
            f"{args.tasks} tasks stopped: {stopped / args.studies:.4f} [95% CI {low:.4f}, "
            f"{high:.4f}] (alpha {args.alpha})"
        )
    for tasks in args.effect_tasks if args.effect_studies > 0 else ():
        diffs = simulated_differences(args.effect_studies, tasks, True, args.seed + tasks,
                                      args.replicates, args.run_sd, args.failure)  # fmt: skip
        for method in ("betting", "betting_wor"):
            after = _known_after(diffs, args.alpha, method)
            saved = np.where(after > 0, 1 - after / tasks, 0.0)
            q1, median, q3 = np.percentile(saved, [25, 50, 75])
            print(
                f"demo's effect (mean difference {diffs.mean():.4f}), {method}, {tasks} tasks: "
                f"{(after > 0).mean():.3f} of {args.effect_studies} studies stopped; share of "
                f"sessions saved: median {median:.3f} [quartiles {q1:.3f}, {q3:.3f}]"
            )
    print(f"wall: {time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
