"""`veriharness compare`: paired differences, bootstrap intervals, counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness.collect import compare

ROOT = Path(__file__).resolve().parents[2]


def _runs(rows: list[tuple[str, str, int, float | None, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "condition": c,
                "task": t,
                "replicate": r,
                "status": "ok",
                "metric_ssim": s,
                "cost_usd": cost,
                "turns": 10,
                "mllm_calls": 2,
            }
            for c, t, r, s, cost in rows
        ]
    )


_cmd = veriharness


def test_differences_are_paired_by_task_over_replicate_means_and_missing_values_excluded() -> None:
    runs = _runs(
        [
            ("A", "t1", 1, 0.5, 1.0),
            ("B", "t1", 1, 0.7, 0.5),
            ("A", "t1", 2, 0.4, 1.0),
            ("B", "t1", 2, 0.4, 2.0),
            ("A", "t2", 1, 0.9, 1.0),
            ("B", "t2", 1, None, 1.0),
            ("A", "t3", 1, 0.2, 1.0),
        ]
    )
    table = compare.compare_conditions(runs, "A", "B", resamples=200).set_index("measure")
    ssim = table.loc["metric_ssim"]
    # t1: replicate means 0.45 (A) and 0.55 (B); t2 has no B value; t3 has no B run.
    assert (ssim.n_pairs, ssim.n_excluded) == (1, 1)
    assert (ssim.n_runs_b, ssim.n_runs_t) == (2, 2)
    assert ssim.mean_diff == pytest.approx(0.1)
    assert (ssim.wins, ssim.ties, ssim.losses) == (1, 0, 0)
    cost = table.loc["cost_usd"]
    assert cost.n_pairs == 2 and cost.mean_diff == pytest.approx(0.25 / 2)
    assert (cost.wins, cost.ties, cost.losses) == (0, 1, 1)  # lower cost is the better direction
    calls = table.loc["mllm_calls"]
    assert calls.better == "unknown" and pd.isna(calls.wins) and calls.ties == 2
    assert table.attrs["only_baseline"] == 1 and table.attrs["only_treatment"] == 0


def test_bootstrap_interval_agrees_with_scipy_percentile_bootstrap() -> None:
    diffs = np.random.default_rng(5).normal(0.3, 1.0, size=60)
    low, high = compare.bootstrap_ci(diffs, 10_000, seed=1)
    ref = stats.bootstrap(
        (diffs,), np.mean, n_resamples=10_000, method="percentile", random_state=2
    ).confidence_interval
    width = ref.high - ref.low
    assert abs(low - ref.low) < 0.05 * width and abs(high - ref.high) < 0.05 * width
    assert low < diffs.mean() < high


def test_bootstrap_is_reproducible_from_its_seed_and_degenerates_for_constant_differences() -> None:
    diffs = np.array([0.1, -0.3, 0.25, 0.4, 0.0])
    assert compare.bootstrap_ci(diffs, 500, 9) == compare.bootstrap_ci(diffs, 500, 9)
    assert compare.bootstrap_ci(diffs, 500, 9) != compare.bootstrap_ci(diffs, 500, 10)
    assert compare.bootstrap_ci(np.full(7, 0.2), 300, 0) == pytest.approx((0.2, 0.2))
    assert all(np.isnan(compare.bootstrap_ci(np.array([]), 300, 0)))


def test_unknown_condition_and_bad_resamples_are_named() -> None:
    runs = _runs([("A", "t1", 1, 0.5, 1.0), ("B", "t1", 1, 0.6, 1.0)])
    with pytest.raises(compare.ComparisonError, match=r"--treatment 'C' is not a condition"):
        compare.compare_conditions(runs, "A", "C")
    with pytest.raises(compare.ComparisonError, match="--resamples must be at least 1, got -3"):
        compare.compare_conditions(runs, "A", "B", resamples=-3)


def test_compare_command_on_collected_runs_finds_the_planted_effect(tmp_path) -> None:
    exp = write_experiment(
        tmp_path / "results",
        tasks=12,
        replicates=2,
        effects={"treat": 0.05},
        faults={("treat", "task-003", 1): "not_started"},
    )
    assert _cmd("collect", "--experiment-dir", str(exp.exp_dir)).returncode == 0
    args = [
        "compare",
        "--experiment-dir",
        str(exp.exp_dir),
        "--baseline",
        "base",
        "--treatment",
        "treat",
        "--seed",
        "4",
        "--resamples",
        "2000",
    ]
    first = _cmd(*args)
    assert first.returncode == 0, first.stderr
    csv = (exp.exp_dir / "comparison.csv").read_text()
    assert _cmd(*args).returncode == 0 and (exp.exp_dir / "comparison.csv").read_text() == csv
    table = pd.read_csv(exp.exp_dir / "comparison.csv").set_index("measure")
    ssim = table.loc["metric_ssim"]
    # 12 tasks; the treatment run that never started leaves task-003 one replicate, not a gap.
    assert ssim.n_pairs == 12 and ssim.n_excluded == 0
    assert (ssim.n_runs_b, ssim.n_runs_t) == (24, 23)
    assert ssim.ci_low > 0.02 and ssim.ci_high < 0.08 and ssim.wins == 12
    assert set(table.index) >= {"metric_mae", "metric_ocr_word_f1", "cost_usd", "turns"}
    md = (exp.exp_dir / "comparison.md").read_text()
    assert "2000 resamples (seed 4)" in md and "| metric_ssim | higher | 12 | 0 |" in md


def test_compare_without_collected_tables_says_what_to_run(tmp_path) -> None:
    proc = _cmd("compare", "--experiment-dir", str(tmp_path), "--baseline", "a", "--treatment", "b")
    assert proc.returncode == 2 and "run `veriharness collect` first" in proc.stderr


def test_runs_outside_the_experiment_or_failed_are_left_out_with_their_reason() -> None:
    runs = _runs(
        [
            ("A", "t1", 1, 0.5, 1.0),
            ("B", "t1", 1, 0.7, 1.0),
            ("A", "t2", 1, 0.5, 1.0),
            ("B", "t2", 1, 0.9, 1.0),  # stale: an older definition
            ("A", "t3", 1, 0.5, 1.0),
            ("B", "t3", 1, 0.1, 1.0),  # failed session
            ("A", "t1", 2, 0.5, 1.0),  # left from a config with two replicates
            ("B", "t1", 2, 0.9, 1.0),
            ("A", "t4", 1, 0.5, 1.0),
            ("B", "t4", 1, 0.6, 1.0),  # hit its turn limit: stays in
        ]
    )
    runs["identity_hash"] = [f"h-{c}-{t}" for c, t in zip(runs.condition, runs.task, strict=True)]
    runs.loc[3, "identity_hash"] = "h-old"
    runs.loc[5, ["status"]] = "failed"
    runs["reason"] = ""
    runs.loc[5, "reason"] = "agent status failed: the mllm MCP server did not connect"
    runs.loc[9, "status"] = "max_turns"
    runs["in_matrix"] = pd.array([True] * 6 + [False, False] + [True, True], dtype="boolean")
    cells = {c: {t: f"h-{c}-{t}" for t in ("t1", "t2", "t3", "t4")} for c in ("A", "B")}

    table = compare.compare_conditions(runs, "A", "B", resamples=200, cells=cells)
    ssim = table.set_index("measure").loc["metric_ssim"]
    assert ssim.n_pairs == 2  # t1 r1 and t4 r1
    assert ssim.mean_diff == pytest.approx((0.2 + 0.1) / 2)
    assert table.attrs["only_baseline"] == 2  # t2 and t3 lost their treatment run
    left_out = table.attrs["left_out"]
    reasons = {(x["task"], x["replicate"], x["condition"]): x["reason"] for x in left_out}
    assert reasons == {
        ("t2", 1, "B"): "identity_hash differs from experiment.json (a run of an older definition)",
        ("t3", 1, "B"): "status failed: agent status failed: the mllm MCP server did not connect",
        ("t1", 2, "A"): "not in the experiment's matrix",
        ("t1", 2, "B"): "not in the experiment's matrix",
    }
    md = compare.comparison_markdown(table)
    assert "## Runs left out: 4" in md and "| B | t2 | 1 | identity_hash differs" in md
    # Without experiment.json's cells there is no identity check.
    unchecked = compare.compare_conditions(runs, "A", "B", resamples=200)
    assert len(unchecked.attrs["left_out"]) == 3


def test_compare_command_leaves_out_a_run_of_an_older_definition(tmp_path) -> None:
    import json

    exp = write_experiment(tmp_path / "results", tasks=3, replicates=1)
    assert _cmd("collect", "--experiment-dir", str(exp.exp_dir)).returncode == 0
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet")
    cells: dict[str, dict[str, str]] = {}
    for row in runs.itertuples():
        cells.setdefault(row.condition, {})[row.task] = row.identity_hash
    cells["treat"]["task-001"] = "sha256:" + "0" * 64
    (exp.exp_dir / "experiment.json").write_text(
        json.dumps({"kind": "experiment_record", "cells": cells})
    )
    args = ["compare", "--experiment-dir", str(exp.exp_dir), "--baseline", "base"]
    done = _cmd(*args, "--treatment", "treat", "--resamples", "100")
    assert done.returncode == 0, done.stderr
    assert "1 runs left out" in done.stdout
    md = (exp.exp_dir / "comparison.md").read_text()
    assert "| treat | task-001 | 1 | identity_hash differs from experiment.json" in md
    table = pd.read_csv(exp.exp_dir / "comparison.csv").set_index("measure")
    assert table.loc["metric_ssim"].n_pairs == 2

    (exp.exp_dir / "experiment.json").write_text(
        json.dumps({"kind": "experiment_record", "cells": ["not", "a", "map"]})
    )
    bad = _cmd(*args, "--treatment", "treat")
    assert bad.returncode == 2 and "field 'cells' must map condition" in bad.stderr


def test_infra_errors_and_unmeasured_runs_are_left_out_and_counted_per_condition() -> None:
    runs = _runs([(c, f"t{i}", 1, 0.5 + i / 10, 1.0) for c in ("A", "B") for i in range(1, 6)])
    runs["reason"] = ""
    planted = {
        ("B", "t1"): ("infra_error", "agent status infra_error: HTTP 529"),
        ("B", "t2"): ("infra_error", "agent status infra_error: claude was killed by SIGKILL"),
        ("A", "t3"): ("render_failed", "render_failed: load: did not finish loading"),
        ("B", "t4"): ("score_failed", "score_failed: render.json: status: bad"),
    }
    for (condition, task), (status, reason) in planted.items():
        where = (runs.condition == condition) & (runs.task == task)
        runs.loc[where, ["status", "reason"]] = [status, reason]

    table = compare.compare_conditions(runs, "A", "B", resamples=100)
    assert table.set_index("measure").loc["metric_ssim"].n_pairs == 1  # only t5 is left whole
    left_out = {(x["condition"], x["task"]): x["reason"] for x in table.attrs["left_out"]}
    assert left_out == {k: f"status {s}: {r}" for k, (s, r) in planted.items()}
    assert table.attrs["status_counts"] == {
        "A": {"ok": 4, "render_failed": 1},
        "B": {"ok": 2, "infra_error": 2, "score_failed": 1},
    }
    md = compare.comparison_markdown(table)
    assert "| condition | runs | infra_error | ok | render_failed | score_failed |" in md
    assert "| A | 5 | 0 | 4 | 1 | 0 |" in md and "| B | 5 | 2 | 2 | 0 | 1 |" in md


def test_sign_flip_p_is_exact_for_few_tasks_and_agrees_with_scipy_for_many() -> None:
    diffs = np.array([0.3, 0.1, 0.2, -0.05, 0.25, 0.15])
    # exact: of 64 sign patterns, those with |mean| >= observed
    ref = stats.permutation_test(
        (diffs,), np.mean, permutation_type="samples", n_resamples=np.inf
    ).pvalue
    assert compare.sign_flip_p(diffs, 1000, 0) == pytest.approx(ref)
    assert compare.sign_flip_p(np.array([0.2]), 1000, 0) == 1.0  # one task cannot reject
    assert compare.sign_flip_p(np.zeros(5), 1000, 0) == 1.0
    assert np.isnan(compare.sign_flip_p(np.array([]), 1000, 0))
    many = np.random.default_rng(3).normal(0.15, 1.0, size=80)
    ref = stats.permutation_test(
        (many,), np.mean, permutation_type="samples", n_resamples=20_000, random_state=1
    ).pvalue
    mine = compare.sign_flip_p(many, 20_000, seed=2)
    assert abs(mine - ref) < 0.02 and mine == compare.sign_flip_p(many, 20_000, seed=2)


def test_holm_adjusts_step_down_keeps_order_and_skips_missing() -> None:
    adjusted = compare.holm(np.array([0.01, 0.04, np.nan, 0.03, 0.5]))
    # sorted 0.01, 0.03, 0.04, 0.5 with m = 4: 0.04, 0.09, max(0.09, 0.08), max(.., 0.5)
    assert adjusted[[0, 3, 1, 4]] == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert np.isnan(adjusted[2])
    assert compare.holm(np.array([0.6, 0.7])) == pytest.approx([1.0, 1.0])


def test_two_pairs_over_three_conditions_each_get_their_comparison_and_p_values(
    tmp_path: Path,
) -> None:
    exp = write_experiment(
        tmp_path / "results",
        conditions=("base", "treat", "same"),
        tasks=14,
        replicates=2,
        effects={"treat": 0.06, "same": 0.0},
    )
    assert _cmd("collect", "--experiment-dir", str(exp.exp_dir)).returncode == 0
    args = ["compare", "--experiment-dir", str(exp.exp_dir), "--resamples", "4000"]
    done = _cmd(*args, "--pair", "base", "treat", "--pair", "base", "same")
    assert done.returncode == 0, done.stderr
    assert "treat vs base" in done.stdout and "same vs base" in done.stdout
    table = pd.read_csv(exp.exp_dir / "comparison.csv")
    assert list(table.columns[:3]) == ["baseline", "treatment", "measure"]
    pairs = {k: g.set_index("measure") for k, g in table.groupby(["baseline", "treatment"])}
    assert set(pairs) == {("base", "treat"), ("base", "same")}
    effect, null = pairs[("base", "treat")], pairs[("base", "same")]
    for measure in ("metric_ssim", "metric_mae", "metric_ocr_word_f1"):
        # 14 tasks all in the effect's direction: the exact p is 2 / 2^14.
        assert effect.loc[measure].p_value < 0.001, measure
        assert effect.loc[measure].p_holm < 0.01, measure
        assert null.loc[measure].p_holm > 0.05, measure
        assert null.loc[measure].ci_low < 0 < null.loc[measure].ci_high, measure
    for pair in pairs.values():
        assert (pair.p_holm >= pair.p_value).all() and pair.p_holm.max() <= 1
        assert (pair.n_pairs <= 14).all()
    md = (exp.exp_dir / "comparison.md").read_text()
    assert md.startswith("# Comparisons\n") and "2 pairs" in md
    assert "## treat vs base" in md and "## same vs base" in md
    assert md.count("### Runs left out: 0") == 2 and "| p | p (Holm) |" in md

    repeated = _cmd(*args, "--pair", "base", "same", "--pair", "base", "same")
    assert repeated.returncode == 2 and "pairs listed more than once" in repeated.stderr
    lonely = _cmd(*args, "--baseline", "base")
    assert lonely.returncode == 2 and "--baseline needs its partner" in lonely.stderr
    nothing = _cmd(*args)
    assert nothing.returncode == 2 and "no pair to compare" in nothing.stderr
