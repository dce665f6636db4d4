"""`veriharness power`: how many tasks a study needs, estimated from a pilot before paying for it.

The pilot's paired task differences of one outcome (intention to treat, as `compare` computes
them) give the shape and spread of the differences a real study will see. The verb centres them,
adds the effect the researcher names, draws studies of n tasks from that distribution (with
replacement), and counts how often the sign-flip test rejects at alpha / m (m: the size of the
outcome's declared family; Holm's smallest adjusted p is m times the smallest p, so this is the
power of the family's best-placed outcome). The answer is the smallest n whose power reaches the
target.

The test inside the simulation is the one `compare` runs: exact over all sign patterns up to
`_EXACT_UP_TO` tasks; beyond, its normal approximation (the sign-flip statistic sum(s_i d_i) has
mean 0 and variance sum(d_i^2) under the null), which keeps 2,000 simulated studies of 200 tasks
to a fraction of a second. Power at the answer is printed with its Monte Carlo standard error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from veriharness.collect.compare import ComparisonError, recorded_analysis, task_differences

__all__ = ["PowerEstimate", "PowerError", "required_tasks", "power_at", "add_arguments", "run"]

Sampler = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]

_EXACT_UP_TO = 12  # 4,096 patterns x the simulated studies stay small
DEFAULT_SIMS = 2000


class PowerError(ValueError):
    """The estimate cannot be made as asked (too small a pilot, a bad parameter)."""


class PowerEstimate(NamedTuple):
    tasks: int | None  # None: not reached within max_tasks
    power: float  # at `tasks` (or at max_tasks when not reached)
    standard_error: float
    alpha_per_outcome: float


def _sign_flip_rejects(samples: np.ndarray, alpha: float) -> np.ndarray:
    """For each row (one simulated study's task differences): does the two-sided sign-flip
    test of the mean reject at `alpha`?"""
    _, n = samples.shape
    if n <= _EXACT_UP_TO:
        patterns = 1 - 2 * (np.arange(2**n)[:, None] >> np.arange(n) & 1)
        sums = patterns @ samples.T  # patterns x studies
        observed = np.abs(samples.sum(axis=1))
        p = np.mean(np.abs(sums) >= observed * (1 - 1e-9), axis=0)
        p[observed == 0] = 1.0
        return np.asarray(p <= alpha)
    spread = np.sqrt((samples**2).sum(axis=1))
    z = np.abs(samples.sum(axis=1)) / np.where(spread > 0, spread, np.inf)
    return np.asarray(2 * stats.norm.sf(z) <= alpha)


def power_at(sample: Sampler, tasks: int, alpha: float, sims: int, seed: int) -> float:
    rng = np.random.default_rng([seed, tasks])
    return float(_sign_flip_rejects(sample(rng, (sims, tasks)), alpha).mean())


def required_tasks(
    sample: Sampler,
    alpha: float,
    target: float = 0.8,
    family: int = 1,
    sims: int = DEFAULT_SIMS,
    seed: int = 0,
    max_tasks: int = 2000,
) -> PowerEstimate:
    """The smallest number of tasks whose simulated power reaches `target` (doubling, then
    bisection; power grows with the task count up to Monte Carlo noise)."""
    per_outcome = alpha / family
    low, high = 1, 2
    while power_at(sample, high, per_outcome, sims, seed) < target:
        low, high = high, high * 2
        if high > max_tasks:
            reached = power_at(sample, max_tasks, per_outcome, sims, seed)
            if reached < target:
                return PowerEstimate(None, reached, _se(reached, sims), per_outcome)
            high = max_tasks
            break
    while high - low > 1:
        middle = (low + high) // 2
        if power_at(sample, middle, per_outcome, sims, seed) >= target:
            high = middle
        else:
            low = middle
    reached = power_at(sample, high, per_outcome, sims, seed)
    return PowerEstimate(high, reached, _se(reached, sims), per_outcome)


def _se(power: float, sims: int) -> float:
    return math.sqrt(max(power * (1 - power), 1e-12) / sims)


def pilot_sampler(differences: np.ndarray, effect: float) -> Sampler:
    """Draws from the pilot's differences, centred, shifted by `effect`."""
    centred = differences - differences.mean()

    def sample(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        return np.asarray(centred[rng.integers(0, len(centred), size=shape)] + effect)

    return sample


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment-dir", type=Path, required=True, help="a finished pilot")
    parser.add_argument("--baseline", required=True, help="baseline condition id")
    parser.add_argument("--treatment", required=True, help="treatment condition id")
    parser.add_argument(
        "--effect",
        type=float,
        required=True,
        help="the difference (treatment minus baseline, in the measure's units) to detect",
    )
    parser.add_argument("--measure", help="the outcome (default: the first declared primary)")
    parser.add_argument("--power", type=float, default=0.8, help="target power (default 0.8)")
    parser.add_argument("--alpha", type=float, help="default: the pilot's declared alpha")
    parser.add_argument("--sims", type=int, default=DEFAULT_SIMS, help="simulated studies per n")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    parser.add_argument("--max-tasks", type=int, default=2000, help="largest study considered")


def _check(args: argparse.Namespace) -> None:
    if not 0 < args.power < 1:
        raise PowerError(f"--power must be between 0 and 1, got {args.power}")
    if args.alpha is not None and not 0 < args.alpha < 1:
        raise PowerError(f"--alpha must be between 0 and 1, got {args.alpha}")
    if args.effect == 0:
        raise PowerError("--effect must not be 0: no study has power against no effect")
    if args.sims < 100:
        raise PowerError(f"--sims must be at least 100, got {args.sims}")


def run(args: argparse.Namespace) -> int:
    runs_path = args.experiment_dir / "tables" / "runs.parquet"
    if not runs_path.is_file():
        print(f"power: {runs_path} not found; run `veriharness collect` first", file=sys.stderr)
        return 2
    try:
        _check(args)
        cells, settings = recorded_analysis(args.experiment_dir / "experiment.json")
        measure = args.measure or settings.primary[0]
        family = settings.primary if measure in settings.primary else settings.secondary_measures
        alpha = args.alpha if args.alpha is not None else settings.alpha
        diffs = task_differences(
            pd.read_parquet(runs_path), args.baseline, args.treatment, measure, settings, cells
        )
        if len(diffs) < 2:
            raise PowerError(f"the pilot has {len(diffs)} paired task(s) for {measure}; need 2+")
        estimate = required_tasks(
            pilot_sampler(diffs, args.effect),
            alpha,
            args.power,
            max(len(family), 1),
            args.sims,
            args.seed,
            args.max_tasks,
        )
    except (ComparisonError, PowerError) as exc:
        print(f"power: {exc}", file=sys.stderr)
        return 2
    result = {
        "measure": measure,
        "pilot_tasks": int(len(diffs)),
        "pilot_mean_difference": float(diffs.mean()),
        "pilot_sd_difference": float(diffs.std(ddof=1)),
        "effect": args.effect,
        "alpha": alpha,
        "family_size": max(len(family), 1),
        **estimate._asdict(),
        "target_power": args.power,
    }
    print(json.dumps(result))
    if estimate.tasks is None:
        print(
            f"power: {args.max_tasks} tasks reach only power {estimate.power:.3f} for an effect "
            f"of {args.effect:g} on {measure}",
            file=sys.stderr,
        )
        return 1
    return 0
