"""`veriharness compare`: paired differences, bootstrap intervals, counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness.collect import compare
from veriharness.experiment.analysis import AUDIT_FLAGS, AnalysisSettings

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


def _row(table: pd.DataFrame, measure: str, population: str = "itt") -> pd.Series:
    rows = table[(table["measure"] == measure) & (table["population"] == population)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_differences_are_paired_by_task_over_replicate_means_and_an_unscored_run_is_floored() -> (
    None
):
    runs = _runs(
        [
            ("A", "t1", 1, 0.5, 1.0),
            ("B", "t1", 1, 0.7, 0.5),
            ("A", "t1", 2, 0.4, 1.0),
            ("B", "t1", 2, 0.4, 2.0),
            ("A", "t2", 1, 0.9, 1.0),
            ("B", "t2", 1, None, 1.0),  # an ok run whose answer has no score: an empty page
            ("A", "t3", 1, 0.2, 1.0),
        ]
    )
    table = compare.compare_conditions(runs, "A", "B", resamples=200)
    ssim = _row(table, "metric_ssim")
    # t1: replicate means 0.45 (A) and 0.55 (B); t2: B at the floor 0; t3 has no B run.
    assert (ssim.n_pairs, ssim.n_excluded, ssim.n_floor_t) == (2, 0, 1)
    assert (ssim.n_runs_b, ssim.n_runs_t) == (3, 3)
    assert ssim.mean_diff == pytest.approx((0.1 - 0.9) / 2)
    assert (ssim.wins, ssim.ties, ssim.losses) == (1, 0, 1)
    pp = _row(table, "metric_ssim", "per_protocol")
    assert (pp.n_pairs, pp.mean_diff) == (1, pytest.approx(0.1))
    cost = _row(table, "cost_usd")
    assert cost.family == "process" and np.isnan(cost.p_value) and np.isnan(cost.p_holm)
    assert cost.n_pairs == 2 and cost.mean_diff == pytest.approx(0.25 / 2)
    assert (cost.wins, cost.ties, cost.losses) == (0, 1, 1)  # lower cost is the better direction
    calls = _row(table, "mllm_calls")
    assert calls.better == "unknown" and pd.isna(calls.wins) and calls.ties == 2
    assert table.attrs["paired"] == 2


def test_a_condition_whose_failures_were_dropped_would_look_better_and_itt_does_not_let_it() -> (
    None
):
    """Planted: the treatment's answers score higher when it gives one, but half its sessions
    fail (the agent's doing) and leave none. Dropping them would favour it; ITT must not."""
    rows: list[tuple[str, str, int, float | None, float]] = []
    for i in range(10):
        rows.append(("base", f"t{i}", 1, 0.60, 1.0))
        rows.append(("treat", f"t{i}", 1, 0.70 if i % 2 else None, 1.0))
    runs = _runs(rows)
    runs["reason"] = ""
    failed = (runs.condition == "treat") & runs.metric_ssim.isna()
    runs.loc[failed, ["status", "reason"]] = ["failed", "agent status failed: prompt is too long"]
    # Not the agent's doing: one retried-out provider failure and one run the cap stopped.
    runs.loc[(runs.condition == "base") & (runs.task == "t2"), "status"] = "infra_error"
    runs.loc[(runs.condition == "treat") & (runs.task == "t4"), "status"] = "budget_exhausted"

    table = compare.compare_conditions(runs, "base", "treat", resamples=500)
    pp, itt = _row(table, "metric_ssim", "per_protocol"), _row(table, "metric_ssim")
    assert pp.mean_diff == pytest.approx(0.10) and pp.wins == pp.n_pairs == 5
    assert itt.mean_diff == pytest.approx((5 * 0.10 - 3 * 0.60) / 8)
    assert itt.n_pairs == 8 and itt.n_floor_t == 3 and itt.losses == 3
    assert table.attrs["runs_counted"] == {"base": 9, "treat": 9}
    excluded = {(x["condition"], x["task"]): x["status"] for x in table.attrs["left_out"]}
    assert excluded == {("base", "t2"): "infra_error", ("treat", "t4"): "budget_exhausted"}
    assert table.attrs["excluded_counts"] == {
        "base": {"infra_error": 1},
        "treat": {"budget_exhausted": 1},
    }
    verdict = " ".join(table.attrs["verdict"])
    assert "`treat` did not detectably change metric_ssim" in verdict
    assert "per-protocol 0.1 [" in verdict


@pytest.mark.parametrize(
    ("status", "step", "counted"),
    [
        ("ok", None, True),
        ("failed", None, True),
        ("timeout", None, True),
        ("max_turns", None, True),
        ("missing_answer", None, True),
        ("render_failed", "load", True),
        ("render_failed", "memory", True),
        ("render_failed", "browser", False),
        ("render_failed", "internal", False),
        ("infra_error", None, False),
        ("budget_exhausted", None, False),
        ("not_started", None, False),
        ("score_failed", None, False),
        ("collect_failed", None, False),
        ("missing", None, False),
    ],
)
def test_each_status_falls_on_its_declared_side(
    status: str, step: str | None, counted: bool
) -> None:
    runs = _runs([("A", "t1", 1, 0.5, 1.0), ("B", "t1", 1, 0.9, 1.0)])
    runs["render_failed_step"] = [None, step]
    runs.loc[1, "status"] = status
    if status != "ok":
        runs.loc[1, "metric_ssim"] = None
    table = compare.compare_conditions(runs, "A", "B", resamples=50)
    assert table.attrs["runs_counted"]["B"] == int(counted)
    assert len(table.attrs["left_out"]) == int(not counted)
    if counted and status != "ok":
        assert _row(table, "metric_ssim").treatment_mean == 0.0  # the floor


def test_a_status_without_a_rule_is_refused_by_name() -> None:
    runs = _runs([("A", "t1", 1, 0.5, 1.0), ("B", "t1", 1, 0.9, 1.0)])
    runs.loc[1, "status"] = "quarantined"
    with pytest.raises(compare.ComparisonError, match=r"\['quarantined'\] have no analysis rule"):
        compare.compare_conditions(runs, "A", "B", resamples=50)


def test_a_flagged_answer_scores_the_floor_and_flag_rates_are_compared() -> None:
    runs = _runs([(c, f"t{i}", 1, 0.5 if c == "A" else 0.95, 1.0) for c in "AB" for i in range(4)])
    runs["metric_mae"] = 0.1
    for flag in AUDIT_FLAGS:
        runs[f"audit_{flag}"] = False
    pasted = (runs.condition == "B") & runs.task.isin(["t0", "t1"])
    runs.loc[pasted, "audit_screenshot_substitution"] = True
    runs.loc[runs.condition == "B", "audit_low_text_volume"] = True  # not a rule: scored as is

    table = compare.compare_conditions(runs, "A", "B", resamples=200)
    ssim, mae = _row(table, "metric_ssim"), _row(table, "metric_mae")
    assert ssim.treatment_mean == pytest.approx((0 + 0 + 0.95 + 0.95) / 4) and ssim.n_floor_t == 2
    assert mae.treatment_mean == pytest.approx((1 + 1 + 0.1 + 0.1) / 4)
    flag = _row(table, "audit_screenshot_substitution")
    assert flag.family == "audit" and flag.treatment_mean == 0.5 and flag.baseline_mean == 0.0
    assert not np.isnan(flag.p_holm)
    unfloored = compare.compare_conditions(
        runs, "A", "B", resamples=200, settings=AnalysisSettings(floor_flags=())
    )
    assert _row(unfloored, "metric_ssim").treatment_mean == pytest.approx(0.95)


def test_holm_runs_within_each_declared_family_and_the_design_limit_is_stated() -> None:
    runs = _runs(
        [
            (c, f"t{i}", 1, 0.5 + (0.1 if c == "B" else 0) + i / 100, 1.0)
            for c in "AB"
            for i in range(6)
        ]
    )
    for name in ("metric_mae", "metric_ocr_word_f1", "metric_block_match", "metric_color"):
        runs[name] = runs["metric_ssim"] if name != "metric_mae" else 1 - runs["metric_ssim"]
    table = compare.compare_conditions(runs, "A", "B", resamples=200)
    itt = table[table.population == "itt"].set_index("measure")
    # Six tasks, all in one direction: p = 2/64 for every measure.
    assert itt.loc["metric_ssim"].p_value == pytest.approx(2 / 64)
    assert itt.loc["metric_ssim"].p_holm == pytest.approx(2 / 64)  # a family of one
    assert itt.loc["metric_mae"].p_holm == pytest.approx(4 * 2 / 64)  # four secondary measures
    verdict = table.attrs["verdict"]
    assert verdict[0].startswith(
        "`B` changed metric_ssim relative to `A` (higher: ITT difference 0.1"
    )
    settings = AnalysisSettings(secondary=("metric_mae", "metric_ocr_word_f1", "metric_color"))
    four = compare.compare_conditions(runs, "A", "B", resamples=200, settings=settings)
    assert any(
        "cannot reach alpha 0.05 in the secondary family: with 6 paired tasks the smallest "
        "possible p is 0.03125, so with 3 outcome(s) the smallest p(Holm) is 0.09375; at least "
        "7 tasks are needed." in line
        for line in four.attrs["verdict"]
    )
    md = compare.comparison_markdown(four)
    assert md.index("## Verdict") < md.index("## Primary outcome(s)") < md.index("## Secondary")


def test_bootstrap_interval_agrees_with_scipy_percentile_bootstrap() -> None:
    from scipy import stats  # here, not at the top: every xdist worker imports this file

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
    table = pd.read_csv(exp.exp_dir / "comparison.csv")
    table = table[table.population == "itt"].set_index("measure")
    ssim = table.loc["metric_ssim"]
    # 12 tasks; the treatment run that never started leaves task-003 one replicate, not a gap.
    assert ssim.n_pairs == 12 and ssim.n_excluded == 0
    assert (ssim.n_runs_b, ssim.n_runs_t) == (24, 23)
    assert ssim.ci_low > 0.02 and ssim.ci_high < 0.08 and ssim.wins == 12
    assert set(table.index) >= {"metric_mae", "metric_ocr_word_f1", "cost_usd", "turns"}
    md = (exp.exp_dir / "comparison.md").read_text()
    assert "2000 resamples (seed 4)" in md and "| metric_ssim | itt = pp | 12 | 0 | 0 | 0/0 |" in md


def test_compare_without_collected_tables_says_what_to_run(tmp_path) -> None:
    proc = _cmd("compare", "--experiment-dir", str(tmp_path), "--baseline", "a", "--treatment", "b")
    assert proc.returncode == 2 and "run `veriharness collect` first" in proc.stderr


def test_runs_outside_the_experiment_or_of_an_older_definition_are_excluded_with_their_reason() -> (
    None
):
    runs = _runs(
        [
            ("A", "t1", 1, 0.5, 1.0),
            ("B", "t1", 1, 0.7, 1.0),
            ("A", "t2", 1, 0.5, 1.0),
            ("B", "t2", 1, 0.9, 1.0),  # stale: an older definition
            ("A", "t3", 1, 0.5, 1.0),
            ("B", "t3", 1, 0.1, 1.0),  # superseded
            ("A", "t1", 2, 0.5, 1.0),  # left from a config with two replicates
            ("B", "t1", 2, 0.9, 1.0),
            ("A", "t4", 1, 0.5, 1.0),
            ("B", "t4", 1, 0.6, 1.0),  # hit its turn limit: counts, scored
        ]
    )
    runs["identity_hash"] = [f"h-{c}-{t}" for c, t in zip(runs.condition, runs.task, strict=True)]
    runs.loc[3, "identity_hash"] = "h-old"
    runs["superseded"] = [False] * 5 + [True] + [False] * 4
    runs.loc[9, "status"] = "max_turns"
    runs["in_matrix"] = pd.array([True] * 6 + [False, False] + [True, True], dtype="boolean")
    cells = {c: {t: f"h-{c}-{t}" for t in ("t1", "t2", "t3", "t4")} for c in ("A", "B")}

    table = compare.compare_conditions(runs, "A", "B", resamples=200, cells=cells)
    ssim = _row(table, "metric_ssim")
    assert ssim.n_pairs == 2  # t1 r1 and t4 r1
    assert ssim.mean_diff == pytest.approx((0.2 + 0.1) / 2)
    reasons = {
        (x["task"], x["replicate"], x["condition"]): x["reason"] for x in table.attrs["left_out"]
    }
    assert reasons == {
        ("t2", 1, "B"): "identity_hash differs from experiment.json (a run of an older definition)",
        ("t3", 1, "B"): "superseded (moved aside when its run was redone)",
        ("t1", 2, "A"): "not in the experiment's matrix",
        ("t1", 2, "B"): "not in the experiment's matrix",
    }
    md = compare.comparison_markdown(table)
    assert (
        "## Runs excluded: 4 (not the agent's doing)" in md
        and "| B | t2 | 1 | ok | identity_hash differs" in md
    )
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
    assert "1 runs excluded" in done.stdout
    md = (exp.exp_dir / "comparison.md").read_text()
    assert "| treat | task-001 | 1 | ok | identity_hash differs from experiment.json" in md
    table = pd.read_csv(exp.exp_dir / "comparison.csv")
    assert _row(table, "metric_ssim").n_pairs == 2

    (exp.exp_dir / "experiment.json").write_text(
        json.dumps({"kind": "experiment_record", "cells": ["not", "a", "map"]})
    )
    bad = _cmd(*args, "--treatment", "treat")
    assert bad.returncode == 2 and "field 'cells' must map condition" in bad.stderr


def test_infra_errors_and_our_stage_crashes_are_excluded_and_counted_per_condition() -> None:
    runs = _runs([(c, f"t{i}", 1, 0.5 + i / 10, 1.0) for c in ("A", "B") for i in range(1, 6)])
    runs["reason"] = ""
    planted = {
        ("B", "t1"): ("infra_error", "agent status infra_error: HTTP 529"),
        ("B", "t2"): ("infra_error", "agent status infra_error: claude was killed by SIGKILL"),
        ("A", "t3"): ("render_failed", "render_failed: browser: the browser stopped"),
        ("B", "t4"): ("score_failed", "score_failed: render.json: status: bad"),
    }
    runs["render_failed_step"] = None
    for (condition, task), (status, reason) in planted.items():
        where = (runs.condition == condition) & (runs.task == task)
        runs.loc[where, ["status", "reason", "metric_ssim"]] = [status, reason, None]
    runs.loc[(runs.condition == "A") & (runs.task == "t3"), "render_failed_step"] = "browser"

    table = compare.compare_conditions(runs, "A", "B", resamples=100)
    assert _row(table, "metric_ssim").n_pairs == 1  # only t5 has both sides
    excluded = {(x["condition"], x["task"]): x["reason"] for x in table.attrs["left_out"]}
    assert excluded == {
        ("B", "t1"): "infra_error: the infrastructure failed the session (after its retries); "
        "agent status infra_error: HTTP 529",
        ("B", "t2"): "infra_error: the infrastructure failed the session (after its retries); "
        "agent status infra_error: claude was killed by SIGKILL",
        (
            "A",
            "t3",
        ): "render_failed in the renderer itself; render_failed: browser: the browser stopped",
        (
            "B",
            "t4",
        ): "score_failed: the score stage crashed; score_failed: render.json: status: bad",
    }
    assert table.attrs["excluded_counts"] == {
        "A": {"render_failed (the renderer's)": 1},
        "B": {"infra_error": 2, "score_failed": 1},
    }
    assert table.attrs["status_counts"] == {
        "A": {"ok": 4, "render_failed": 1},
        "B": {"ok": 2, "infra_error": 2, "score_failed": 1},
    }
    md = compare.comparison_markdown(table)
    assert "| condition | runs | infra_error | ok | render_failed | score_failed |" in md
    assert "| A | 5 | 0 | 4 | 1 | 0 |" in md and "| B | 5 | 2 | 2 | 0 | 1 |" in md


def test_sign_flip_p_is_exact_for_few_tasks_and_agrees_with_scipy_for_many() -> None:
    from scipy import stats

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
    assert list(table.columns[:5]) == ["baseline", "treatment", "population", "family", "measure"]
    itt = table[table.population == "itt"]
    pairs = {k: g.set_index("measure") for k, g in itt.groupby(["baseline", "treatment"])}
    assert set(pairs) == {("base", "treat"), ("base", "same")}
    effect, null = pairs[("base", "treat")], pairs[("base", "same")]
    for measure in ("metric_ssim", "metric_mae", "metric_ocr_word_f1"):
        # 14 tasks all in the effect's direction: the exact p is 2 / 2^14.
        assert effect.loc[measure].p_value < 0.001, measure
        assert effect.loc[measure].p_holm < 0.01, measure
        assert null.loc[measure].p_holm > 0.05, measure
        assert null.loc[measure].ci_low < 0 < null.loc[measure].ci_high, measure
    for pair in pairs.values():
        tested = pair[pair.family != "process"]
        assert (tested.p_holm >= tested.p_value).all() and tested.p_holm.max() <= 1
        assert (pair.n_pairs <= 14).all()
    md = (exp.exp_dir / "comparison.md").read_text()
    assert md.startswith("# Comparisons\n") and "2 pairs" in md
    assert "## treat vs base" in md and "## same vs base" in md
    assert md.count("### Runs excluded: 0") == 2 and "| p | p (Holm) |" in md

    repeated = _cmd(*args, "--pair", "base", "same", "--pair", "base", "same")
    assert repeated.returncode == 2 and "pairs listed more than once" in repeated.stderr
    lonely = _cmd(*args, "--baseline", "base")
    assert lonely.returncode == 2 and "--baseline needs its partner" in lonely.stderr
    nothing = _cmd(*args)
    assert nothing.returncode == 2 and "no pair to compare" in nothing.stderr


def test_the_compare_command_uses_the_outcomes_experiment_json_declared(tmp_path: Path) -> None:
    import json

    exp = write_experiment(tmp_path / "results", tasks=4, replicates=1)
    assert _cmd("collect", "--experiment-dir", str(exp.exp_dir)).returncode == 0
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet")
    cells: dict[str, dict[str, str]] = {}
    for row in runs.itertuples():
        cells.setdefault(row.condition, {})[row.task] = row.identity_hash
    record = {"kind": "experiment_record", "cells": cells, "config": {}}
    args = ["compare", "--experiment-dir", str(exp.exp_dir), "--pair", "base", "treat"]

    record["config"] = {"analysis": {"primary": ["metric_mae"], "secondary": ["metric_ssim"]}}
    (exp.exp_dir / "experiment.json").write_text(json.dumps(record))
    done = _cmd(*args, "--resamples", "100")
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(exp.exp_dir / "comparison.csv")
    families = table[table.population == "itt"].set_index("measure").family
    assert (families["metric_mae"], families["metric_ssim"]) == ("primary", "secondary")
    assert "metric_ocr_word_f1" not in families.index  # declared families only
    assert "did not detectably change metric_mae" in done.stdout

    record["config"] = {"analysis": {"primary": ["metric_beauty"]}}
    (exp.exp_dir / "experiment.json").write_text(json.dumps(record))
    bad = _cmd(*args)
    assert bad.returncode == 2
    assert (
        "config.analysis" in bad.stderr
        and "'metric_beauty' is not a fidelity measure" in bad.stderr
    )

    record["config"] = {"analysis": {"primary": ["metric_color"]}}
    (exp.exp_dir / "experiment.json").write_text(json.dumps(record))
    absent = _cmd(*args)
    assert (
        absent.returncode == 2
        and "no column for declared outcome(s) ['metric_color']" in absent.stderr
    )


def test_through_collect_and_compare_a_condition_that_fails_more_cannot_look_better(
    tmp_path: Path,
) -> None:
    """Run folders as the stages leave them: the treatment scores higher whenever it answers,
    but four of its twelve sessions left no answer. Dropping those would call it better; the
    intention-to-treat verdict does not, and the only exclusion is the run never started."""
    missing = {("treat", f"task-{i:03d}", 1): "missing_answer" for i in (1, 4, 7, 10)}
    exp = write_experiment(
        tmp_path / "results",
        tasks=12,
        effects={"treat": 0.05},
        faults={**missing, ("base", "task-002", 1): "not_started"},
    )
    assert _cmd("collect", "--experiment-dir", str(exp.exp_dir)).returncode == 0
    done = _cmd("compare", "--experiment-dir", str(exp.exp_dir), "--pair", "base", "treat")
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(exp.exp_dir / "comparison.csv")
    itt, pp = _row(table, "metric_ssim"), _row(table, "metric_ssim", "per_protocol")
    # Dropped failures: seven better answers, significant on their own.
    assert pp.mean_diff > 0.04 and pp.wins == pp.n_pairs == 7 and pp.p_holm < 0.05
    assert itt.mean_diff < 0 and itt.n_floor_t == 4 and itt.n_pairs == 11 and itt.p_holm > 0.05
    assert "`treat` did not detectably change metric_ssim" in done.stdout
    md = (exp.exp_dir / "comparison.md").read_text()
    assert "## Runs excluded: 1 (not the agent's doing)" in md
    assert "| base | task-002 | 1 | not_started |" in md


def test_a_task_an_interaction_measure_does_not_apply_to_is_not_applicable_not_excluded() -> None:
    rows = [
        # (condition, task, interactions stated, Implement Rate)
        ("A", "static", 0, None),
        ("B", "static", 0, None),
        ("A", "tabs", 1, 0.0),
        ("B", "tabs", 1, 1.0),
        ("A", "toggle", 2, 0.5),
        ("B", "toggle", 2, None),  # stated, yet no value: excluded
    ]
    runs = _runs([(c, t, 1, 0.5, 1.0) for c, t, _, _ in rows]).assign(
        interactions_stated=[n for *_, n, _ in rows],
        metric_implement_rate=[v for *_, v in rows],
    )
    table = compare.compare_conditions(runs, "A", "B", resamples=200)
    rate = _row(table, "metric_implement_rate")
    assert (rate.n_pairs, rate.n_excluded, rate.n_not_applicable) == (1, 1, 1)
    ssim = _row(table, "metric_ssim")
    assert (ssim.n_pairs, ssim.n_excluded, ssim.n_not_applicable) == (3, 0, 0)
    text = compare.comparison_markdown(table)
    assert "| excl. | n/a |" in text and "| metric_implement_rate | itt = pp | 1 | 1 | 1 |" in text
