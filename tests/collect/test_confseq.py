"""The betting confidence sequence against the published implementation's own figures, and the
properties the monitor relies on (monotone capitals, exact ends, the finite population's
logic)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veriharness.collect.confseq import log_capitals, rejected, running_interval

# Figures of confseq 0.0.11 (github.com/gostevehoward/confseq, tag v0.0.11, commit
# 29c07072322a1defd623f6a957177e0173d32914): `confseq.betting.hedged_cs(x, alpha, N,
# breaks=1000, running_intersection=True)`, its (l_t, u_t) at t = 5, 10, 20, 40, 60, rounded to
# 4 decimals, for the two sequences below (run under NumPy 1.26: the release does not import
# under NumPy 2). Its interval is read off a grid of 1/1000 and widened by one step; ours is
# found by bisection, so it lies inside theirs and within a step of it.
PUBLISHED = {
    ("smooth", 0.05, None): {
        5: (0.139, 0.898),
        10: (0.281, 0.798),
        20: (0.379, 0.717),
        40: (0.441, 0.662),
        60: (0.463, 0.639),
    },
    ("smooth", 0.05, 80): {
        5: (0.15, 0.895),
        10: (0.298, 0.787),
        20: (0.402, 0.701),
        40: (0.471, 0.637),
        60: (0.501, 0.606),
    },
    ("smooth", 0.1, None): {
        5: (0.172, 0.861),
        10: (0.314, 0.773),
        20: (0.403, 0.698),
        40: (0.455, 0.651),
        60: (0.473, 0.63),
    },
    ("smooth", 0.1, 80): {
        5: (0.183, 0.859),
        10: (0.329, 0.763),
        20: (0.423, 0.684),
        40: (0.481, 0.629),
        60: (0.506, 0.601),
    },
    ("coins30", 0.05, None): {
        5: (0.0, 0.905),
        10: (0.005, 0.683),
        20: (0.07, 0.609),
        40: (0.118, 0.52),
        60: (0.139, 0.477),
    },
    ("coins30", 0.05, 80): {
        5: (0.025, 0.899),
        10: (0.0375, 0.667),
        20: (0.089, 0.574),
        40: (0.15, 0.467),
        60: (0.225, 0.408),
    },
    ("coins30", 0.1, None): {
        5: (0.0, 0.857),
        10: (0.029, 0.636),
        20: (0.088, 0.579),
        40: (0.133, 0.499),
        60: (0.151, 0.461),
    },
    ("coins30", 0.1, 80): {
        5: (0.025, 0.854),
        10: (0.04, 0.621),
        20: (0.108, 0.547),
        40: (0.161, 0.452),
        60: (0.225, 0.399),
    },
}
_STEP = 1 / 1000
_ROUNDED = 5e-5


def _sequence(name: str) -> np.ndarray:
    """Values in [0, 1] from a formula, so the figures need no random generator."""
    i = np.arange(1, 61)
    if name == "smooth":
        return np.round(0.55 + 0.3 * np.sin(1.3 * i) + 0.12 * np.cos(0.7 * i), 3)
    return ((i * (math.sqrt(5) - 1) / 2) % 1 < 0.3).astype(float)


@pytest.mark.parametrize("case", sorted(PUBLISHED, key=str), ids=str)
def test_the_sequence_agrees_with_the_published_implementation(
    case: tuple[str, float, int | None],
) -> None:
    name, alpha, population = case
    x = _sequence(name)
    for t, (low, high) in PUBLISHED[case].items():
        ours = running_interval(x[:t], alpha, population)
        assert low - _ROUNDED <= ours[0] <= low + _STEP + _ROUNDED, (t, ours, low)
        assert high - _STEP - _ROUNDED <= ours[1] <= high + _ROUNDED, (t, ours, high)


def test_each_capital_is_monotone_in_the_candidate_mean() -> None:
    rng = np.random.default_rng(3)
    m = np.linspace(0, 1, 201)
    for population in (None, 150):
        x = rng.beta(2, 5, size=(4, 60))
        up, down = log_capitals(x, m, 0.05, population)
        assert np.all(np.diff(up, axis=-1) <= 1e-12)  # K+ falls as m rises
        assert np.all(np.diff(down, axis=-1) >= -1e-12)  # K- rises


def test_the_ends_are_where_the_capitals_cross_the_level() -> None:
    x = _sequence("smooth")[:30]
    low, high = running_interval(x, 0.05)
    up, down = rejected(x, np.array([low - 1e-6, low + 1e-6, high - 1e-6, high + 1e-6]), 0.05)
    assert up[-1].tolist() == [True, False, False, False]
    assert down[-1].tolist() == [False, False, False, True]


def test_without_replacement_the_whole_population_gives_its_mean_exactly() -> None:
    x = _sequence("coins30")[:40]
    low, high = running_interval(x, 0.05, population=40)
    assert low == pytest.approx(x.mean(), abs=1e-9) and high == pytest.approx(x.mean(), abs=1e-9)
    # Before the end, what the values seen already rule out is out: with 30 of 40 seen, the
    # mean is at least their sum over 40 and at most that plus the 10 unseen at 1.
    low, high = running_interval(x[:30], 0.05, population=40)
    assert low >= x[:30].sum() / 40 - 1e-9 and high <= (x[:30].sum() + 10) / 40 + 1e-9


def test_more_values_than_the_population_is_refused() -> None:
    with pytest.raises(ValueError, match="population of 3"):
        running_interval(np.zeros(4), 0.05, population=3)
