"""`veriharness compare`: what the treatment condition changed relative to the baseline.

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
- Runs are paired by (task, replicate): the same task and replicate number under both conditions.
  The measures are every ``metric_*`` column of the runs table plus cost, agent turns and CallMLLM
  calls; for each, the difference is treatment minus baseline.
- A pair where either side has no value (a failed run without metrics, an unreadable outcome) is
  excluded from that measure and counted in `n_excluded`; runs without a partner are counted too.
  Nothing is imputed.
- The 95% interval of the mean difference is a percentile bootstrap over pairs: `resamples`
  resamples (default 10,000) drawn with numpy's default generator seeded by `seed`. The same seed
  gives the same interval. With one pair the interval collapses to that pair's difference.
- Wins/ties/losses use the measure's known direction (higher is better for similarity scores,
  lower for error, cost and turns). A measure whose direction is not known (CallMLLM calls, or a
  metric this module has not heard of) gets only the neutral counts `treatment_higher`, `ties`,
  `treatment_lower`, and empty wins/losses rather than a guess.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from veriharness._util import atomic
from veriharness._util.caveats import caveat_lines, run_caveats
from veriharness.experiment.record import EXPERIMENT_RECORD, RecordError, read_record

__all__ = [
    "DEFAULT_RESAMPLES",
    "HIGHER_IS_BETTER",
    "LOWER_IS_BETTER",
    "ComparisonError",
    "measures",
    "eligible_runs",
    "status_counts",
    "bootstrap_ci",
    "compare_conditions",
    "comparison_markdown",
    "comparison_summary",
    "add_arguments",
    "run",
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


def _pair(runs: pd.DataFrame, baseline: str, treatment: str) -> pd.DataFrame:
    cols = _KEYS + ["status"] + measures(runs)
    base = runs.loc[runs["condition"] == baseline, cols]
    treat = runs.loc[runs["condition"] == treatment, cols]
    return base.merge(treat, on=_KEYS, how="outer", suffixes=("_b", "_t"), indicator=True)


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
    """One row per measure: paired mean difference, bootstrap CI, counts. Runs that do not
    belong to the experiment are left out first (`eligible_runs`); they are listed in
    `attrs["left_out"]`."""
    if resamples < 1:
        raise ComparisonError(f"--resamples must be at least 1, got {resamples}")
    _check_conditions(runs, baseline, treatment)
    statuses = status_counts(runs, [baseline, treatment])
    compared = runs[runs["condition"].isin([baseline, treatment])]
    caveats = run_caveats(compared)
    runs, left_out = eligible_runs(runs, cells)
    left_out = left_out[left_out["condition"].isin([baseline, treatment])]
    paired = _pair(runs, baseline, treatment)
    both = paired[paired["_merge"] == "both"]
    rows = []
    for measure in measures(runs):
        b = pd.to_numeric(both[f"{measure}_b"], errors="coerce").astype(float)
        t = pd.to_numeric(both[f"{measure}_t"], errors="coerce").astype(float)
        usable = b.notna() & t.notna()
        diffs = (t - b)[usable].to_numpy()
        low, high = bootstrap_ci(diffs, resamples, seed)
        higher, lower = int((diffs > 0).sum()), int((diffs < 0).sum())
        direction = _direction(measure)
        wins = {"higher": higher, "lower": lower}.get(direction)
        losses = {"higher": lower, "lower": higher}.get(direction)
        rows.append(
            {
                "measure": measure,
                "better": direction,
                "n_pairs": int(usable.sum()),
                "n_excluded": int((~usable).sum()),
                "baseline_mean": float(b[usable].mean()) if usable.any() else np.nan,
                "treatment_mean": float(t[usable].mean()) if usable.any() else np.nan,
                "mean_diff": float(diffs.mean()) if len(diffs) else np.nan,
                "ci_low": low,
                "ci_high": high,
                "wins": wins,
                "ties": int((diffs == 0).sum()),
                "losses": losses,
                "treatment_higher": higher,
                "treatment_lower": lower,
            }
        )
    out = pd.DataFrame(rows)
    out[["wins", "losses"]] = out[["wins", "losses"]].astype("Int64")
    out.attrs.update(
        baseline=baseline,
        treatment=treatment,
        seed=seed,
        resamples=resamples,
        paired=int(len(both)),
        only_baseline=int((paired["_merge"] == "left_only").sum()),
        only_treatment=int((paired["_merge"] == "right_only").sum()),
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


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def comparison_markdown(table: pd.DataFrame) -> str:
    a = table.attrs
    lines = [f"# {a['treatment']} vs {a['baseline']}", ""]
    lines += [f"> **{line}**\n" for line in caveat_lines(a)]
    lines += [
        f"Treatment `{a['treatment']}` minus baseline `{a['baseline']}`, paired by task and "
        f"replicate: {a['paired']} pairs; {a['only_baseline']} baseline and "
        f"{a['only_treatment']} treatment runs have no partner. 95% percentile bootstrap "
        f"intervals from {a['resamples']} resamples (seed {a['seed']}). A pair missing a value "
        "is left out of that measure (`excl.`). Wins count pairs where the treatment is better "
        "in the measure's direction; `?` marks a measure without a known direction.",
        "",
        "| measure | better | n | excl. | baseline | treatment | diff | 95% CI | W/T/L |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
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
            f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}] | {wtl} |"
        )
    lines += _status_lines(a.get("status_counts", {}))
    lines += ["", f"## Runs left out: {len(left_out)}", ""]
    if left_out:
        lines += ["| condition | task | replicate | reason |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {x['condition']} | {x['task']} | {x['replicate']} | {x['reason']} |"
            for x in left_out
        ]
    else:
        lines.append("None: every run of both conditions belongs to this experiment.")
    return "\n".join(lines) + "\n"


def _status_lines(counts: dict[str, dict[str, int]]) -> list[str]:
    """Runs per status and condition; infra_error always has a column, since a rate that differs
    between conditions is itself a confound."""
    if not counts:
        return []
    statuses = sorted({s for per in counts.values() for s in per} | {"infra_error"})
    lines = [
        "",
        "## Run statuses by condition",
        "",
        "| condition | runs | " + " | ".join(statuses) + " |",
        "| --- | --- | " + " | ".join("---" for _ in statuses) + " |",
    ]
    for condition, per in counts.items():
        cells = " | ".join(str(per.get(s, 0)) for s in statuses)
        lines.append(f"| {condition} | {sum(per.values())} | {cells} |")
    return lines


def comparison_summary(table: pd.DataFrame) -> str:
    """comparison.json: the counts and the runs left out, for the report's first screen."""
    attrs = dict(table.attrs)
    attrs["caveats"] = caveat_lines(attrs)
    return json.dumps(attrs, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))


def _recorded_cells(path: Path) -> dict[str, dict[str, str]] | None:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment-dir", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--baseline", required=True, help="baseline condition id")
    parser.add_argument("--treatment", required=True, help="treatment condition id")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument(
        "--resamples", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples"
    )
    parser.add_argument("--runs", type=Path, help="runs table (default <exp>/tables/runs.parquet)")


def run(args: argparse.Namespace) -> int:
    runs_path = args.runs or args.experiment_dir / "tables" / "runs.parquet"
    if not runs_path.is_file():
        print(f"compare: {runs_path} not found; run `veriharness collect` first", file=sys.stderr)
        return 2
    try:
        table = compare_conditions(
            pd.read_parquet(runs_path),
            args.baseline,
            args.treatment,
            args.seed,
            args.resamples,
            cells=_recorded_cells(args.experiment_dir / "experiment.json"),
        )
    except ComparisonError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    csv = args.experiment_dir / "comparison.csv"
    with atomic.replacing(csv) as tmp:
        table.to_csv(tmp, index=False)
    atomic.write_text(args.experiment_dir / "comparison.md", comparison_markdown(table))
    atomic.write_text(args.experiment_dir / "comparison.json", comparison_summary(table))
    print(
        f"compare: {len(table)} measures, {table.attrs['paired']} pairs, "
        f"{len(table.attrs['left_out'])} runs left out -> {csv}"
    )
    return 0
