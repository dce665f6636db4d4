"""`veriharness power`: the tasks a study needs, from a pilot's paired differences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from support.cli import veriharness
from veriharness.collect.power import pilot_sampler, required_tasks


def _t_test_tasks(effect: float, sd: float, alpha: float = 0.05, target: float = 0.8) -> int:
    """The textbook answer: the paired t-test's exact power from the noncentral t."""
    for n in range(2, 10_000):
        critical = stats.t.ppf(1 - alpha / 2, n - 1)
        shift = effect * np.sqrt(n) / sd
        power = stats.nct.sf(critical, n - 1, shift) + stats.nct.cdf(-critical, n - 1, shift)
        if power >= target:
            return n
    raise AssertionError("unreachable")


def _planted(effect: float, sd: float, tasks: int, seed: int = 0) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=tasks)
    return np.asarray(effect + sd * (z - z.mean()) / z.std(ddof=1))


@pytest.mark.parametrize(("effect", "sd"), [(0.03, 0.06), (0.02, 0.05), (0.05, 0.05), (0.1, 0.08)])
def test_the_required_task_count_of_a_planted_effect_is_recovered(effect: float, sd: float) -> None:
    truth = _t_test_tasks(effect, sd)
    estimate = required_tasks(pilot_sampler(_planted(effect, sd, 150), effect), alpha=0.05)
    assert estimate.tasks is not None
    assert abs(estimate.tasks - truth) <= 0.2 * truth, (estimate, truth)
    assert estimate.power >= 0.8 and estimate.standard_error < 0.01


def test_a_family_of_outcomes_needs_more_tasks_and_a_tiny_effect_is_said_unreachable() -> None:
    diffs = _planted(0.03, 0.06, 150)
    one = required_tasks(pilot_sampler(diffs, 0.03), alpha=0.05)
    eight = required_tasks(pilot_sampler(diffs, 0.03), alpha=0.05, family=8)
    assert eight.alpha_per_outcome == pytest.approx(0.05 / 8)
    assert one.tasks is not None and eight.tasks is not None and eight.tasks > 1.5 * one.tasks
    hopeless = required_tasks(pilot_sampler(diffs, 0.0001), alpha=0.05, max_tasks=64)
    assert hopeless.tasks is None and hopeless.power < 0.8


def _pilot(tmp_path: Path, diffs: np.ndarray) -> Path:
    exp = tmp_path / "results" / "pilot"
    (exp / "tables").mkdir(parents=True)
    rng = np.random.default_rng(7)
    base = rng.uniform(0.4, 0.7, size=len(diffs))
    rows = [
        {"condition": c, "task": f"t{i:03d}", "replicate": 1, "status": "ok", "metric_ssim": v}
        for i in range(len(diffs))
        for c, v in (("base", base[i]), ("treat", base[i] + diffs[i]))
    ]
    pd.DataFrame(rows).to_parquet(exp / "tables" / "runs.parquet")
    return exp


def test_the_power_verb_reads_a_pilot_and_names_its_answer(tmp_path: Path) -> None:
    exp = _pilot(tmp_path, _planted(0.04, 0.06, 120))
    args = ["power", "--experiment-dir", str(exp), "--baseline", "base", "--treatment", "treat"]
    done = veriharness(*args, "--effect", "0.03", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    truth = _t_test_tasks(0.03, 0.06)
    assert result["measure"] == "metric_ssim" and result["pilot_tasks"] == 120
    assert result["pilot_mean_difference"] == pytest.approx(0.04)
    assert abs(result["tasks"] - truth) <= 0.2 * truth, (result, truth)

    assert veriharness(*args, "--effect", "0").returncode == 2
    bad = veriharness(*args, "--effect", "0.03", "--power", "1.5")
    assert bad.returncode == 2 and "--power must be between 0 and 1, got 1.5" in bad.stderr
    unknown = veriharness(*args, "--effect", "0.03", "--measure", "metric_mae")
    assert unknown.returncode == 2 and "no column 'metric_mae'" in unknown.stderr
    far = veriharness(*args, "--effect", "0.0001", "--max-tasks", "50")
    assert far.returncode == 1 and "50 tasks reach only power" in far.stderr


def test_the_power_verb_answers_in_a_sentence(tmp_path: Path) -> None:
    exp = _pilot(tmp_path, _planted(0.04, 0.06, 40))
    args = ["power", "--experiment-dir", str(exp), "--baseline", "base", "--treatment", "treat"]
    done = veriharness(*args, "--effect", "0.03")
    assert done.returncode == 0, done.stderr
    figures = json.loads(veriharness(*args, "--effect", "0.03", "--json").stdout)
    first = done.stdout.splitlines()[0]
    assert first == (
        "To detect a difference of 0.03 in metric_ssim (treat minus base) with power 0.8 at "
        f"alpha 0.05, a study needs {figures['tasks']} tasks (simulated power "
        f"{figures['power']:.3f} ± {figures['standard_error']:.3f})."
    )
    assert "the pilot's 40 paired task differences" in done.stdout
    far = veriharness(*args, "--effect", "0.0001", "--max-tasks", "50")
    assert far.returncode == 1 and "even 50 tasks are not enough" in far.stdout
