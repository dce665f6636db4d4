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
to a fraction of a second. Power at the answer is printed with its Monte Carlo standard error:
as a sentence (`power_sentence`), or with `--json` as one JSON object.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from scipy import stats

__all__ = [
    "DEFAULT_SIMS",
    "PowerEstimate",
    "PowerError",
    "check_power_arguments",
    "pilot_sampler",
    "power_at",
    "power_sentence",
    "required_tasks",
]

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


def check_power_arguments(power: float, alpha: float | None, effect: float, sims: int) -> None:
    """Refuse, by name, a request no estimate can answer."""
    if not 0 < power < 1:
        raise PowerError(f"--power must be between 0 and 1, got {power}")
    if alpha is not None and not 0 < alpha < 1:
        raise PowerError(f"--alpha must be between 0 and 1, got {alpha}")
    if effect == 0:
        raise PowerError("--effect must not be 0: no study has power against no effect")
    if sims < 100:
        raise PowerError(f"--sims must be at least 100, got {sims}")


def power_sentence(result: dict[str, Any], max_tasks: int) -> str:
    """The estimate as the answer to the researcher's question, in one paragraph."""
    family = result["family_size"]
    per = (
        f"alpha {result['alpha']:g}"
        if family == 1
        else f"alpha {result['alpha']:g} over a family of {family} outcomes "
        f"({result['alpha_per_outcome']:.3g} per outcome, Holm's strictest step)"
    )
    question = (
        f"To detect a difference of {result['effect']:g} in {result['measure']} "
        f"({result['treatment']} minus {result['baseline']}) with power "
        f"{result['target_power']:g} at {per}"
    )
    reached = f"power {result['power']:.3f} ± {result['standard_error']:.3f}"
    if result["tasks"] is None:
        answer = f"even {max_tasks} tasks are not enough (they reach {reached})"
    else:
        answer = f"a study needs {result['tasks']} tasks (simulated {reached})"
    pilot = (
        f"Estimated from the pilot's {result['pilot_tasks']} paired task differences (mean "
        f"{result['pilot_mean_difference']:.4g}, SD {result['pilot_sd_difference']:.4g}), "
        "centred and shifted to the effect; replicates do not count as tasks. --json prints "
        "the figures for machines."
    )
    return f"{question}, {answer}.\n{pilot}"
