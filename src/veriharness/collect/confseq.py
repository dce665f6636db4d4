"""Betting confidence sequences for the mean of bounded values (Waudby-Smith & Ramdas, "Estimating
means of bounded random variables by betting", JRSS-B 86(1), 2024).

For values x_1, x_2, ... in [0, 1] and a candidate mean m, a bettor who bets a predictable
fraction lambda_i of its capital on x_i exceeding m grows its capital
K+_t(m) = prod_{i<=t} (1 + lambda_i (x_i - m)), and one betting on the opposite side
K-_t(m) = prod (1 - lambda_i (x_i - m)). If m is the mean, both are nonnegative martingales, so by
Ville's inequality the chance that max(theta K+, (1 - theta) K-) ever reaches 1/alpha is at most
alpha: the m it has not reached form a (1 - alpha) confidence sequence, valid at every number of
observations at once, however the observer decided when to look or to stop. This module computes
the paper's hedged capital process with its predictable plug-in bets (section 4: theta = 1/2,
lambda_t = sqrt(2 log(2 / alpha) / (sigma_{t-1}^2 t log(1 + t))) from a regularised running
variance, truncated at c / m and c / (1 - m), c = 1/2), and the version for sampling without
replacement from a finite population of N values (section 6), where the bet is on x_t against
the mean the values not yet seen must have, (N m - S_{t-1}) / (N - t + 1), and a candidate that
the values seen so far already rule out is rejected outright.

Both capitals are monotone in m (K+ nonincreasing, K- nondecreasing: each factor is, and the
without-replacement mean grows with m), so each set is an interval and its ends are found by
bisection, not read off a grid; whether a point (0, a margin) is outside it is an exact
evaluation of the two capitals there. The running intersection (a point once rejected stays
rejected) is the sequence reported, as the paper recommends; it is valid too.

The implementation is the project's own; `tests/collect/test_confseq.py` checks it against the
published implementation's figures (confseq 0.0.11, `hedged_cs`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "THETA",
    "TRUNCATION",
    "bets",
    "log_capitals",
    "rejected",
    "running_interval",
]

THETA = 0.5  # the share of the capital on "the mean is above m"; the error is split evenly
TRUNCATION = 0.5  # c: no bet risks more than half the capital on one value
_PRIOR_MEAN, _PRIOR_VARIANCE = 0.5, 0.25  # one fake observation, as the paper's plug-in has
_REFINE_POINTS = 65  # candidates per bisection round
_REFINE_ROUNDS = 6  # 64^6: ends found to about 1e-11 of the unit range

Array = NDArray[np.float64]


def bets(x: Array, alpha: float) -> Array:
    """The predictable plug-in bets lambda_t (before the truncation, which depends on m), for
    each row of `x` (shape (..., T)); each side gets alpha / 2, so both share these bets."""
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    means = np.minimum((_PRIOR_MEAN + np.cumsum(x, axis=-1)) / (t + 1), 1.0)
    spread = (_PRIOR_VARIANCE + np.cumsum((x - means) ** 2, axis=-1)) / (t + 1)
    before = np.concatenate(
        [np.full(x.shape[:-1] + (1,), _PRIOR_VARIANCE), spread[..., :-1]], axis=-1
    )
    level = np.log(1.0 / (alpha * THETA))
    return np.asarray(np.sqrt(2.0 * level / (t * np.log1p(t) * before)))


def log_capitals(x: Array, m: Array, alpha: float, population: int | None = None) -> tuple[
    Array, Array
]:  # fmt: skip
    """The running maxima, over the observations so far, of log(theta K+_t(m)) and
    log((1 - theta) K-_t(m)), for each row of `x` (shape (..., T), values in [0, 1]) and each
    candidate of `m` (shape (K,)): arrays of shape (..., T, K). With `population` (N) the values
    are a sample without replacement from N values; a candidate they rule out is +inf from then
    on (on the side that rules it out: too low for K+, too high for K-)."""
    lam = bets(x, alpha)[..., :, None]
    xs = x[..., :, None]
    if population is None:
        mu = np.broadcast_to(m, xs.shape[:-1] + m.shape)
    else:
        t = np.arange(1, x.shape[-1] + 1, dtype=float)[:, None]
        before = np.cumsum(x, axis=-1)[..., :, None] - xs  # S_{t-1}
        mu = (population * m - before) / (population - t + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.minimum(lam, TRUNCATION / mu)
        down = np.minimum(lam, TRUNCATION / (1.0 - mu))
        log_up = np.log(THETA) + np.cumsum(np.log1p(up * (xs - mu)), axis=-2)
        log_down = np.log(1.0 - THETA) + np.cumsum(np.log1p(-down * (xs - mu)), axis=-2)
    if population is not None:
        seen = np.cumsum(x, axis=-1)[..., :, None]
        t = np.arange(1, x.shape[-1] + 1, dtype=float)[:, None]
        too_low = np.maximum.accumulate(population * m < seen - 1e-12, axis=-2)
        too_high = np.maximum.accumulate(population * m > seen + (population - t) + 1e-12, axis=-2)
        log_up = np.where(too_low, np.inf, log_up)
        log_down = np.where(too_high, np.inf, log_down)
    # A factor is never below 1 - c > 0 for a possible candidate; NaN only where one is not.
    log_up = np.nan_to_num(log_up, nan=np.inf)
    log_down = np.nan_to_num(log_down, nan=np.inf)
    return np.maximum.accumulate(log_up, axis=-2), np.maximum.accumulate(log_down, axis=-2)


def rejected(
    x: Array, m: Array, alpha: float, population: int | None = None
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """For each row of `x`, each observation count t and each candidate of `m`: whether the
    running sequence has ruled the candidate out from below (the mean is above it) and from
    above (the mean is below it). Shapes (..., T, K)."""
    up, down = log_capitals(x, m, alpha, population)
    level = np.log(1.0 / alpha)
    return up >= level, down >= level


def _end(x: Array, alpha: float, population: int | None, lower: bool) -> float:
    """One end of the running interval after all of `x` (one sequence), by bisection on the
    monotone side: the lowest candidate K+ has not rejected, or the highest K- has not."""
    a, b = 0.0, 1.0
    for _ in range(_REFINE_ROUNDS):
        grid = np.linspace(a, b, _REFINE_POINTS)
        up, down = rejected(x, grid, alpha, population)
        out = up[-1] if lower else down[-1]
        kept = np.flatnonzero(~out)
        if not len(kept):
            return b if lower else a  # every candidate of the span is out
        i = kept[0] if lower else kept[-1]
        if lower:
            if i == 0:
                return a
            a, b = grid[i - 1], grid[i]
        else:
            if i == len(grid) - 1:
                return b
            a, b = grid[i], grid[i + 1]
    # The span holds the end: report its outer side, so the interval shown contains the set.
    return a if lower else b


def running_interval(x: Array, alpha: float, population: int | None = None) -> tuple[float, float]:
    """The running (1 - alpha) confidence sequence for the mean after all of `x` (one sequence
    of values in [0, 1]): (low, high) in [0, 1], low > high when it is empty (the intersection
    of the intervals so far has closed: a rare event, at most alpha's chance, or values that
    are not in [0, 1], or an order that is not random)."""
    values = np.asarray(x, dtype=float)
    if values.ndim != 1 or not len(values):
        raise ValueError("running_interval needs one non-empty sequence of values")
    if population is not None and len(values) > population:
        raise ValueError(f"{len(values)} values drawn from a population of {population}")
    return _end(values, alpha, population, True), _end(values, alpha, population, False)
