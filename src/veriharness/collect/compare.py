"""`veriharness compare`: what each treatment condition changed relative to its baseline.

Design notes:

- Only runs that belong to the experiment are compared. Left out, each with its reason (listed
  in comparison.md and counted in comparison.csv's attributes): a run outside the experiment's
  matrix (a folder left from an earlier configuration), a run whose identity hash differs from
  the one experiment.json gives its cell (a run of an older definition that was not redone), and
  a run whose status is `failed` (the session itself broke: the CLI crashed, or CallMLLM was not
  connected), `infra_error` (the infrastructure failed the session: provider unreachable, sandbox
  or model server down) or `render_failed` / `score_failed` / `collect_failed` (the answer could
  not be measured). Sessions that hit their turn or time limit stay in: those are outcomes of
  the condition. Each condition's count of runs per status is reported beside the comparison:
  an infrastructure-error rate that differs between conditions is itself a confound.
- Several (baseline, treatment) pairs may be compared at once; each is computed on its own and
  gets its own table section. `compare_pairs` runs them, `comparisons_table` stacks them for
  comparison.csv with `baseline` and `treatment` columns.
- The unit of a pair is the task: each side's value is the mean over that task's replicates that
  have a value, so replicates never count as independent tasks. The measures are every
  ``metric_*`` column of the runs table plus cost, agent turns and CallMLLM calls; for each, the
  difference is treatment minus baseline. `n_runs_b`/`n_runs_t` count the runs behind the means.
- A task where either side has no value (failed runs without metrics, an unreadable outcome) is
  excluded from that measure and counted in `n_excluded`; tasks without a partner are counted too.
  Nothing is imputed.
- The 95% interval of the mean difference is a percentile bootstrap over tasks: `resamples`
  resamples (default 10,000) drawn with numpy's default generator seeded by `seed`. The same seed
  gives the same interval. With one task the interval collapses to that task's difference.
- `p_value` is a two-sided sign-flip permutation test of the mean difference (exact over all
  2^n sign patterns up to `_EXACT_UP_TO` tasks, else `resamples` random patterns from the same
  seed, with the +1 correction); `p_holm` is Holm's step-down adjustment across the measures of
  one pair. docs/metrics.md says why this test.
- Wins/ties/losses use the measure's known direction (higher is better for similarity scores,
  lower for error, cost and turns). A measure whose direction is not known (CallMLLM calls, or a
  metric this module has not heard of) gets only the neutral counts `treatment_higher`, `ties`,
  `treatment_lower`, and empty wins/losses rather than a guess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from veriharness._util import atomic
from veriharness.collect.caveats import caveat_lines, run_caveats
from veriharness.experiment.record import EXPERIMENT_RECORD, RecordError, read_record

__all__ = [
    "DEFAULT_RESAMPLES",
    "HIGHER_IS_BETTER",
    "LOWER_IS_BETTER",
    "ComparisonError",
    "measures",
    "eligible_runs",
    "status_counts",
    "task_means",
    "bootstrap_ci",
    "sign_flip_p",
    "holm",
    "compare_conditions",
    "compare_pairs",
    "comparisons_table",
    "comparison_markdown",
    "comparison_summary",
    "comparisons_markdown",
    "recorded_cells",
    "write_comparison",
]

DEFAULT_RESAMPLES = 10_000
HIGHER_IS_BETTER = frozenset(
    {
        "metric_ssim",
        "metric_ocr_word_precision",
        "metric_ocr_word_recall",
        "metric_ocr_word_f1",
        "metric_block_match",
        "metric_text_similarity",
        "metric_position",
        "metric_color",
    }
)
LOWER_IS_BETTER = frozenset({"metric_mae", "cost_usd", "turns"})
_KEYS = ["task", "replicate"]
# Runs that measure no outcome of their condition: the session or a later stage broke.
_LEFT_OUT_STATUSES = ("failed", "infra_error", "render_failed", "score_failed", "collect_failed")
_BOOTSTRAP_CELLS = 20_000_000  # resample matrix cells per chunk (~160 MB of float64)
_EXACT_UP_TO = 16  # tasks; 2^16 sign patterns are cheaper than 10,000 random ones of 16


class ComparisonError(ValueError):
    """The comparison cannot be made as asked (unknown condition, bad parameter)."""


def measures(runs: pd.DataFrame) -> list[str]:
    metrics = sorted(c for c in runs.columns if c.startswith("metric_"))
    return metrics + [c for c in ("cost_usd", "turns", "mllm_calls") if c in runs.columns]


def eligible_runs(
    runs: pd.DataFrame, cells: dict[str, dict[str, str]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs a comparison may use, and the others with a `reason` column (see the module
    notes). `cells` maps condition -> task -> identity hash, as experiment.json records it."""
    # Checked from the least to the most basic reason; a later one replaces an earlier one.
    reason = pd.Series(pd.NA, index=runs.index, dtype="object")
    if "status" in runs:
        detail = runs["reason"].fillna("") if "reason" in runs else ""
        for status in _LEFT_OUT_STATUSES:
            reason = reason.mask(runs["status"] == status, f"status {status}: " + detail)
        budget = runs["stopped_by"] == "budget" if "stopped_by" in runs else runs["status"] == ""
        reason = reason.mask(
            runs["status"] == "budget_exhausted", "ended by the spending cap (budget_exhausted)"
        )
        reason = reason.mask(
            (runs["status"] == "not_started") & budget.fillna(False).astype(bool),
            "not started: the spending cap was reached",
        )
    if "superseded" in runs:
        superseded = runs["superseded"].fillna(False).astype(bool)
        reason = reason.mask(superseded, "superseded (moved aside when its run was redone)")
    if cells is not None and "identity_hash" in runs:
        expected = pd.Series(
            [cells.get(c, {}).get(t) for c, t in zip(runs["condition"], runs["task"], strict=True)],
            index=runs.index,
            dtype="object",
        )
        stale = runs["identity_hash"].notna() & expected.notna()
        stale &= runs["identity_hash"] != expected
        reason = reason.mask(
            stale, "identity_hash differs from experiment.json (a run of an older definition)"
        )
    if "in_matrix" in runs:
        outside = runs["in_matrix"].fillna(True) == False  # noqa: E712 - a nullable column
        reason = reason.mask(outside, "not in the experiment's matrix")
    left_out = runs.loc[reason.notna(), ["condition", *_KEYS]].assign(reason=reason.dropna())
    return runs.loc[reason.isna()], left_out.reset_index(drop=True)


def task_means(runs: pd.DataFrame, condition: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per task of `condition`: the mean of each measure over the replicates that have a value,
    and how many runs have a value (both indexed by task)."""
    cols = measures(runs)
    values = runs.loc[runs["condition"] == condition, ["task", *cols]]
    values = values.assign(**{c: pd.to_numeric(values[c], errors="coerce") for c in cols})
    grouped = values.astype({c: float for c in cols}).groupby("task")
    return grouped[cols].mean(), grouped[cols].count()


def _check_conditions(runs: pd.DataFrame, baseline: str, treatment: str) -> None:
    conditions = sorted(runs["condition"].dropna().unique())
    for flag, name in (("--baseline", baseline), ("--treatment", treatment)):
        if name not in conditions:
            raise ComparisonError(f"{flag} {name!r} is not a condition of these runs {conditions}")
    if baseline == treatment:
        raise ComparisonError(f"--baseline and --treatment are both {baseline!r}")


def bootstrap_ci(
    diffs: np.ndarray, resamples: int, seed: int, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `diffs`."""
    n = len(diffs)
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, _BOOTSTRAP_CELLS // n)
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        means[start : start + size] = diffs[rng.integers(0, n, size=(size, n))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def sign_flip_p(diffs: np.ndarray, resamples: int, seed: int) -> float:
    """Two-sided sign-flip permutation p-value of the mean of paired differences.

    Under the null of no effect each difference is as likely negative as positive; the p-value is
    the share of sign patterns whose mean is at least as far from 0 as the observed one. Exact up
    to `_EXACT_UP_TO` differences, else Monte Carlo with the +1 correction (never 0)."""
    n = len(diffs)
    if n == 0:
        return float("nan")
    observed = abs(float(diffs.mean()))
    if observed == 0.0:
        return 1.0
    cutoff = observed * (1 - 1e-9)  # ties with the observed mean, up to rounding, count
    if n <= _EXACT_UP_TO:
        patterns = np.arange(2**n)[:, None] >> np.arange(n) & 1
        means = ((1 - 2 * patterns) @ diffs) / n
        return float(np.mean(np.abs(means) >= cutoff))
    rng = np.random.default_rng([seed, 1])  # a stream of its own, apart from the bootstrap's
    hits = 0
    chunk = max(1, _BOOTSTRAP_CELLS // n)
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        signs = rng.integers(0, 2, size=(size, n)) * 2 - 1
        hits += int(np.sum(np.abs(signs @ diffs) / n >= cutoff))
    return (hits + 1) / (resamples + 1)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values; NaN (no test) stays NaN and does not count."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    if m == 0:
        return out
    order = valid[np.argsort(p[valid], kind="stable")]
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(1.0, stepped)
    return out


def _direction(measure: str) -> str:
    if measure in HIGHER_IS_BETTER:
        return "higher"
    if measure in LOWER_IS_BETTER:
        return "lower"
    return "unknown"


def compare_conditions(
    runs: pd.DataFrame,
    baseline: str,
    treatment: str,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    cells: dict[str, dict[str, str]] | None = None,
) -> pd.DataFrame:
    """One row per measure: paired mean difference over tasks, bootstrap CI, p-values, counts.
    Runs that do not belong to the experiment are left out first (`eligible_runs`); they are
    listed in `attrs["left_out"]`."""
    if resamples < 1:
        raise ComparisonError(f"--resamples must be at least 1, got {resamples}")
    _check_conditions(runs, baseline, treatment)
    statuses = status_counts(runs, [baseline, treatment])
    compared = runs[runs["condition"].isin([baseline, treatment])]
    caveats = run_caveats(compared)
    runs, left_out = eligible_runs(runs, cells)
    left_out = left_out[left_out["condition"].isin([baseline, treatment])]
    base_means, base_counts = task_means(runs, baseline)
    treat_means, treat_counts = task_means(runs, treatment)
    both = base_means.index.intersection(treat_means.index).sort_values()
    rows = [
        _measure_row(
            measure,
            base_means.loc[both, measure],
            treat_means.loc[both, measure],
            (base_counts.loc[both, measure], treat_counts.loc[both, measure]),
            seed,
            resamples,
        )
        for measure in measures(runs)
    ]
    out = pd.DataFrame(rows)
    out[["wins", "losses"]] = out[["wins", "losses"]].astype("Int64")
    out["p_holm"] = holm(out["p_value"].to_numpy(float)) if len(out) else []
    out.attrs.update(
        baseline=baseline,
        treatment=treatment,
        seed=seed,
        resamples=resamples,
        paired=int(len(both)),
        only_baseline=int(len(base_means.index.difference(treat_means.index))),
        only_treatment=int(len(treat_means.index.difference(base_means.index))),
        left_out=left_out.to_dict("records"),
        status_counts=statuses,
        **caveats,
    )
    return out


def status_counts(runs: pd.DataFrame, conditions: list[str]) -> dict[str, dict[str, int]]:
    """Condition -> status -> number of runs, before any run is left out."""
    if "status" not in runs:
        return {}
    mine = runs[runs["condition"].isin(conditions)]
    counts = mine.groupby(["condition", "status"], observed=True).size()
    result: dict[str, dict[str, int]] = {c: {} for c in conditions}
    for (condition, status), n in counts.items():
        result[str(condition)][str(status)] = int(n)
    return result


def _measure_row(
    measure: str,
    b: pd.Series,
    t: pd.Series,
    counts: tuple[pd.Series, pd.Series],
    seed: int,
    resamples: int,
) -> dict[str, object]:
    usable = b.notna() & t.notna()
    diffs = (t - b)[usable].to_numpy()
    low, high = bootstrap_ci(diffs, resamples, seed)
    higher, lower = int((diffs > 0).sum()), int((diffs < 0).sum())
    direction = _direction(measure)
    return {
        "measure": measure,
        "better": direction,
        "n_pairs": int(usable.sum()),
        "n_excluded": int((~usable).sum()),
        "n_runs_b": int(counts[0][usable].sum()),
        "n_runs_t": int(counts[1][usable].sum()),
        "baseline_mean": float(b[usable].mean()) if usable.any() else np.nan,
        "treatment_mean": float(t[usable].mean()) if usable.any() else np.nan,
        "mean_diff": float(diffs.mean()) if len(diffs) else np.nan,
        "ci_low": low,
        "ci_high": high,
        "p_value": sign_flip_p(diffs, resamples, seed),
        "wins": {"higher": higher, "lower": lower}.get(direction),
        "ties": int((diffs == 0).sum()),
        "losses": {"higher": lower, "lower": higher}.get(direction),
        "treatment_higher": higher,
        "treatment_lower": lower,
    }


def compare_pairs(
    runs: pd.DataFrame,
    pairs: list[tuple[str, str]],
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    cells: dict[str, dict[str, str]] | None = None,
) -> list[pd.DataFrame]:
    """`compare_conditions` for each (baseline, treatment) pair, in the order given."""
    if not pairs:
        raise ComparisonError("no pair to compare: give --baseline/--treatment or --pair")
    repeated = sorted({p for p in pairs if pairs.count(p) > 1})
    if repeated:
        raise ComparisonError(f"pairs listed more than once: {repeated}")
    return [compare_conditions(runs, b, t, seed, resamples, cells) for b, t in pairs]


def comparisons_table(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """The pairs' tables stacked, each row naming its pair (comparison.csv)."""
    stacked = [
        t.assign(baseline=t.attrs["baseline"], treatment=t.attrs["treatment"]) for t in tables
    ]
    out = pd.concat(stacked, ignore_index=True)
    return out[["baseline", "treatment", *[c for c in out.columns if c not in _PAIR_COLUMNS]]]


_PAIR_COLUMNS = ("baseline", "treatment")


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def comparison_markdown(table: pd.DataFrame, level: int = 1) -> str:
    """One pair's section; `level` is its heading's depth (2 inside a document of several)."""
    a = table.attrs
    head = "#" * level
    lines = [
        f"{head} {a['treatment']} vs {a['baseline']}",
        "",
        *[f"> **{line}**\n" for line in caveat_lines(a)],
        f"Treatment `{a['treatment']}` minus baseline `{a['baseline']}`, paired by task (each "
        f"side the mean over the task's replicates): {a['paired']} tasks; {a['only_baseline']} "
        f"baseline and {a['only_treatment']} treatment tasks have no partner. 95% percentile "
        f"bootstrap intervals from {a['resamples']} resamples (seed {a['seed']}); `p` is a "
        "two-sided sign-flip permutation test, `p (Holm)` adjusted across this pair's measures. "
        "A task missing a value is left out of that measure (`excl.`). Wins count tasks where "
        "the treatment is better in the measure's direction; `?` marks a measure without a "
        "known direction.",
        "",
        "| measure | better | n | excl. | baseline | treatment | diff | 95% CI | p | p (Holm) "
        "| W/T/L |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    left_out = a.get("left_out", [])
    for r in table.itertuples():
        wtl = (
            f"{r.wins}/{r.ties}/{r.losses}"
            if r.better != "unknown"
            else f"? (higher {r.treatment_higher}, tie {r.ties}, lower {r.treatment_lower})"
        )
        lines.append(
            f"| {r.measure} | {r.better} | {r.n_pairs} | {r.n_excluded} | "
            f"{_fmt(r.baseline_mean)} | {_fmt(r.treatment_mean)} | {_fmt(r.mean_diff)} | "
            f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}] | {_fmt_p(r.p_value)} | "
            f"{_fmt_p(r.p_holm)} | {wtl} |"
        )
    lines += _status_lines(a.get("status_counts", {}), head)
    lines += ["", f"{head}# Runs left out: {len(left_out)}", ""]
    if left_out:
        lines += ["| condition | task | replicate | reason |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {x['condition']} | {x['task']} | {x['replicate']} | {x['reason']} |"
            for x in left_out
        ]
    else:
        lines.append("None: every run of both conditions belongs to this experiment.")
    return "\n".join(lines) + "\n"


def _status_lines(counts: dict[str, dict[str, int]], head: str = "#") -> list[str]:
    """Runs per status and condition; infra_error always has a column, since a rate that differs
    between conditions is itself a confound."""
    if not counts:
        return []
    statuses = sorted({s for per in counts.values() for s in per} | {"infra_error"})
    lines = [
        "",
        f"{head}# Run statuses by condition",
        "",
        "| condition | runs | " + " | ".join(statuses) + " |",
        "| --- | --- | " + " | ".join("---" for _ in statuses) + " |",
    ]
    for condition, per in counts.items():
        cells = " | ".join(str(per.get(s, 0)) for s in statuses)
        lines.append(f"| {condition} | {sum(per.values())} | {cells} |")
    return lines


def comparison_summary(tables: list[pd.DataFrame]) -> str:
    """comparison.json, for the report's first screen: each pair's counts, and the caveats and
    runs left out over all pairs (each once)."""
    pairs = [dict(t.attrs) | {"caveats": caveat_lines(t.attrs)} for t in tables]
    caveats = list(dict.fromkeys(c for p in pairs for c in p["caveats"]))
    seen: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        for run in pair.get("left_out", []):
            seen.setdefault(json.dumps(run, sort_keys=True, default=str), run)
    summary = {"pairs": pairs, "caveats": caveats, "left_out": list(seen.values())}
    return json.dumps(
        summary, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v)
    )


def _fmt_p(value: float) -> str:
    if np.isnan(value):
        return "–"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def comparisons_markdown(tables: list[pd.DataFrame]) -> str:
    """comparison.md: one section per pair (a single pair keeps its own top-level heading)."""
    if len(tables) == 1:
        return comparison_markdown(tables[0])
    names = ", ".join(f"`{t.attrs['treatment']}` vs `{t.attrs['baseline']}`" for t in tables)
    head = f"# Comparisons\n\n{len(tables)} pairs, each on its own: {names}.\n\n"
    return head + "\n".join(comparison_markdown(t, level=2) for t in tables)


def recorded_cells(path: Path) -> dict[str, dict[str, str]] | None:
    """Condition -> task -> identity hash from experiment.json; None when there is none."""
    if not path.is_file():
        return None
    try:
        cells = read_record(path, EXPERIMENT_RECORD).get("cells")
    except RecordError as exc:
        raise ComparisonError(f"cannot read the experiment's cells: {exc}") from exc
    if not isinstance(cells, dict) or not all(isinstance(v, dict) for v in cells.values()):
        raise ComparisonError(f"{path}: field 'cells' must map condition -> task -> hash")
    return cells


def write_comparison(exp_dir: Path, tables: list[pd.DataFrame]) -> Path:
    """comparison.csv, comparison.md and comparison.json into `exp_dir`; returns the CSV."""
    csv = exp_dir / "comparison.csv"
    with atomic.replacing(csv) as tmp:
        comparisons_table(tables).to_csv(tmp, index=False)
    atomic.write_text(exp_dir / "comparison.md", comparisons_markdown(tables))
    atomic.write_text(exp_dir / "comparison.json", comparison_summary(tables))
    return csv
