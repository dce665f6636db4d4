"""`veriharness compare`: did a treatment condition change the result, relative to its baseline?

Design notes:

- Intention to treat (`populations`): every run assigned to either condition counts, with a
  stated value when it left no scored answer (the measure's floor); only runs that failed for
  reasons not of the agent's doing are excluded, each listed with its reason and counted per
  condition. The per-protocol analysis (runs with a scored answer) is computed beside it as a
  sensitivity analysis. Each condition's count of runs per status is reported too: an
  infrastructure-error rate that differs between conditions is itself a confound.
- Declared outcomes (`experiment.analysis`, recorded in experiment.json before any session): the
  primary family, Holm-corrected on its own, carries the verdict; the secondary family has its
  own correction; process measures (cost, turns, CallMLLM calls, tokens, time) get intervals but
  no p-value, since the treatment changes them by construction. Audit flag rates are compared in
  a family of their own.
- Several (baseline, treatment) pairs may be compared at once; each is computed on its own and
  gets its own section. `comparisons_table` stacks them for comparison.csv.
- The unit of a pair is the task: each side's value is the mean over that task's counted
  replicates, so replicates never count as independent tasks. `n_runs_b`/`n_runs_t` count the
  runs behind the means and `n_floor_b`/`n_floor_t` those valued at the floor. A task with a side
  but no value (a measure the scorer could not compute for it) is counted in `n_excluded`; a task
  a measure does not apply to (an interaction measure of a task that states none) in
  `n_not_applicable`.
- The 95% interval of the mean difference is a percentile bootstrap over tasks: `resamples`
  resamples drawn with numpy's default generator seeded by `seed`.
- `p_value` is a two-sided sign-flip permutation test of the mean difference (exact over all
  2^n sign patterns up to `_EXACT_UP_TO` tasks, else `resamples` random patterns with the +1
  correction). With n tasks no p can be below 2/2^n; the design limits of each family are
  stated beside the verdict (`experiment.analysis.design_limits`).
- Every row counts the tasks where the treatment is higher, tied and lower (one notation for
  every family) beside the direction that is better for the measure, where one is known;
  comparison.csv keeps wins/ties/losses in that direction too.
- comparison.md shows a measure's intention-to-treat and per-protocol rows once when they are
  identical (every counted run had a scored answer), saying so, and defines every abbreviation
  under the method paragraph; a per-task table of each primary outcome sets each task's
  difference beside the task's ceiling (the reference set's value, `CEILING_SET`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from veriharness._util import atomic
from veriharness.collect.caveats import caveat_lines, run_caveats, scoring_line
from veriharness.collect.populations import PopulationError, populations
from veriharness.collect.registration import RegistrationCheck, registered_pair
from veriharness.experiment.analysis import (
    AUDIT_FLAGS,
    FIDELITY_MEASURES,
    PROCESS_MEASURES,
    PROCESS_PER_PRIMARY,
    AnalysisSettings,
    design_limits,
)
from veriharness.experiment.record import EXPERIMENT_RECORD, RecordError, read_record

__all__ = [
    "DEFAULT_RESAMPLES",
    "ComparisonError",
    "status_counts",
    "bootstrap_ci",
    "sign_flip_p",
    "holm",
    "compare_conditions",
    "compare_pairs",
    "comparisons_table",
    "comparison_markdown",
    "comparison_summary",
    "comparisons_markdown",
    "verdict",
    "add_registered_verdicts",
    "recorded_analysis",
    "task_difference_series",
    "task_differences",
    "write_comparison",
    "CEILING_SET",
    "SAME",
    "shown_rows",
]

# The external answer set whose values are each task's ceiling: each task's own reference.html.
CEILING_SET = "external:reference"

DEFAULT_RESAMPLES = 10_000
_BOOTSTRAP_CELLS = 20_000_000  # resample matrix cells per chunk (~160 MB of float64)
_EXACT_UP_TO = 16  # tasks; 2^16 sign patterns are cheaper than 10,000 random ones of 16
# The families of a pair's table, in the order comparison.md shows them.
FAMILIES = ("primary", "secondary", "audit", "process")


class ComparisonError(ValueError):
    """The comparison cannot be made as asked (unknown condition, bad parameter)."""


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


def _measure_row(
    measure: str,
    better: str,
    sides: tuple[pd.DataFrame, pd.DataFrame],
    seed: int,
    resamples: int,
    test: bool,
) -> dict[str, object]:
    """One measure of one population: `sides` are the baseline's and the treatment's runs."""
    (b, b_count, b_floor), (t, t_count, t_floor) = (_by_task(side, measure) for side in sides)
    both = b.index.intersection(t.index)
    b, t = b.loc[both], t.loc[both]
    usable = b.notna() & t.notna()
    applies = _applies(measure, sides, both)
    diffs = (t - b)[usable].to_numpy(float)
    low, high = bootstrap_ci(diffs, resamples, seed)
    higher, lower = int((diffs > 0).sum()), int((diffs < 0).sum())
    keep = usable[usable].index
    return {
        "measure": measure,
        "better": better,
        "n_pairs": int(usable.sum()),
        "n_excluded": int((~usable & applies).sum()),
        "n_not_applicable": int((~applies).sum()),
        "n_runs_b": int(b_count.loc[keep].sum()),
        "n_runs_t": int(t_count.loc[keep].sum()),
        "n_floor_b": int(b_floor.loc[keep].sum()),
        "n_floor_t": int(t_floor.loc[keep].sum()),
        "baseline_mean": float(b[usable].mean()) if usable.any() else np.nan,
        "treatment_mean": float(t[usable].mean()) if usable.any() else np.nan,
        "mean_diff": float(diffs.mean()) if len(diffs) else np.nan,
        "ci_low": low,
        "ci_high": high,
        "p_value": sign_flip_p(diffs, resamples, seed) if test else np.nan,
        "wins": {"higher": higher, "lower": lower}.get(better),
        "ties": int((diffs == 0).sum()),
        "losses": {"higher": lower, "lower": higher}.get(better),
        "treatment_higher": higher,
        "treatment_lower": lower,
    }


def _applies(measure: str, sides: tuple[pd.DataFrame, pd.DataFrame], tasks: pd.Index) -> pd.Series:
    """Per task of `tasks`: whether `measure` applies to it (a measure of interactions or
    viewports only to a task that states some, as its runs' count column says)."""
    spec = FIDELITY_MEASURES.get(measure)
    when = None if spec is None else spec.applies_when
    if when is None:
        return pd.Series(True, index=tasks)
    stated = pd.concat([side[["task", when]] for side in sides if when in side])
    counts = pd.to_numeric(stated[when], errors="coerce").fillna(0).groupby(stated["task"]).max()
    return counts.reindex(tasks, fill_value=0).gt(0)


def _by_task(runs: pd.DataFrame, measure: str) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Per task: the mean of `measure` over the runs that have a value, how many have one, and
    how many of those were valued at the floor."""
    values = pd.to_numeric(runs[measure], errors="coerce").astype(float)
    floor = (
        runs["valued_as"].ne("scored")
        if "valued_as" in runs
        else pd.Series(False, index=runs.index)
    )
    frame = pd.DataFrame({"task": runs["task"], "v": values, "f": floor & values.notna()})
    grouped = frame.groupby("task")
    return grouped["v"].mean(), grouped["v"].count(), grouped["f"].sum()


def _family_measures(settings: AnalysisSettings, runs: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(family, measure, better) for every measure the pair reports. A declared outcome the runs
    table lacks is refused; the default secondary family is every other metric it has."""
    declared = [*settings.primary, *(settings.secondary or ())]
    missing = [m for m in declared if m not in runs]
    if missing:
        raise ComparisonError(
            f"the runs table has no column for declared outcome(s) {missing} (analysis.primary / "
            "analysis.secondary in experiment.json)"
        )
    secondary = settings.secondary_present(runs.columns)
    out: list[tuple[str, str, str]] = [
        ("primary", m, FIDELITY_MEASURES[m].better) for m in settings.primary
    ]
    out += [("secondary", m, FIDELITY_MEASURES[m].better) for m in secondary]
    out += [("audit", f"audit_{f}", "lower") for f in AUDIT_FLAGS if f"audit_{f}" in runs]
    out += [("process", m, better) for m, better in PROCESS_MEASURES.items() if m in runs]
    for primary in settings.primary:
        for prefix in PROCESS_PER_PRIMARY:
            name = prefix + primary.removeprefix("metric_")
            if name in runs:
                out.append(("process", name, FIDELITY_MEASURES[primary].better))
    return out


def _population_rows(
    runs: pd.DataFrame,
    population: str,
    conditions: tuple[str, str],
    measures: list[tuple[str, str, str]],
    seed: int,
    resamples: int,
) -> list[dict[str, object]]:
    sides = tuple(
        runs[runs["condition"] == c].astype({m: "float" for _, m, _ in measures})
        for c in conditions
    )
    return [
        {
            "population": population,
            "family": family,
            **_measure_row(measure, better, sides, seed, resamples, family != "process"),
        }
        for family, measure, better in measures
    ]


def compare_conditions(
    runs: pd.DataFrame,
    baseline: str,
    treatment: str,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    cells: dict[str, dict[str, str]] | None = None,
    settings: AnalysisSettings | None = None,
) -> pd.DataFrame:
    """One row per population (ITT, per-protocol) and measure: paired mean difference over tasks,
    bootstrap CI, p-values (Holm within each family of each population), counts. The excluded
    runs, the design limits and the verdict are in `attrs`."""
    settings = settings or AnalysisSettings()
    if resamples < 1:
        raise ComparisonError(f"--resamples must be at least 1, got {resamples}")
    _check_conditions(runs, baseline, treatment)
    mine = runs[runs["condition"].isin([baseline, treatment])]
    try:
        pops = populations(mine, settings, cells)
    except PopulationError as exc:
        raise ComparisonError(str(exc)) from exc
    measures = _family_measures(settings, mine)
    # Audit rates and process measures describe every counted run; per-protocol is a
    # sensitivity analysis of the outcomes only.
    outcomes = [m for m in measures if m[0] in ("primary", "secondary")]
    pair = (baseline, treatment)
    rows = _population_rows(pops.itt, "itt", pair, measures, seed, resamples)
    rows += _population_rows(pops.per_protocol, "per_protocol", pair, outcomes, seed, resamples)
    out = pd.DataFrame(rows)
    out[["wins", "losses"]] = out[["wins", "losses"]].astype("Int64")
    out["p_holm"] = np.nan
    for _, group in out[out["family"] != "process"].groupby(["population", "family"]):
        out.loc[group.index, "p_holm"] = holm(group["p_value"].to_numpy(float))
    tasks = _paired_tasks(pops.itt, baseline, treatment)
    limits = [
        design_limits(family, sum(m[0] == family for m in outcomes), tasks, settings.alpha)
        for family in ("primary", "secondary")
        if any(m[0] == family for m in outcomes)
    ]
    out.attrs.update(
        baseline=baseline,
        treatment=treatment,
        seed=seed,
        resamples=resamples,
        alpha=settings.alpha,
        primary=list(settings.primary),
        floor_flags=list(settings.floor_flags),
        paired=tasks,
        runs_counted={c: int((pops.itt["condition"] == c).sum()) for c in (baseline, treatment)},
        runs_per_protocol={
            c: int((pops.per_protocol["condition"] == c).sum()) for c in (baseline, treatment)
        },
        left_out=pops.excluded.to_dict("records"),
        excluded_counts=_excluded_counts(pops.excluded, (baseline, treatment)),
        status_counts=status_counts(runs, [baseline, treatment]),
        design=[lim._asdict() for lim in limits],
        **run_caveats(mine),
    )
    out.attrs["verdict"] = verdict(out)
    out.attrs["per_task"] = _per_task(pops.itt, runs, pair, list(settings.primary))
    return out


def _number_or_none(value: object) -> float | None:
    number = float(value)  # type: ignore[arg-type]
    return None if np.isnan(number) else number


def _per_task(
    itt: pd.DataFrame, runs: pd.DataFrame, pair: tuple[str, str], measures: list[str]
) -> list[dict[str, object]]:
    """Per primary outcome and task: each side's mean (ITT), the difference, and the task's
    ceiling (`CEILING_SET`'s value; None without it)."""
    reference = runs[runs["condition"] == CEILING_SET]
    out: list[dict[str, object]] = []
    for measure in measures:
        b, _, _ = _by_task(itt[itt["condition"] == pair[0]], measure)
        t, _, _ = _by_task(itt[itt["condition"] == pair[1]], measure)
        ceiling = (
            _by_task(reference, measure)[0] if measure in reference else pd.Series(dtype=float)
        )
        for task in sorted(b.index.union(t.index)):
            values = [s.get(task, np.nan) for s in (b, t, ceiling)]
            out.append(
                {
                    "measure": measure,
                    "task": str(task),
                    "baseline": _number_or_none(values[0]),
                    "treatment": _number_or_none(values[1]),
                    "diff": _number_or_none(values[1] - values[0]),
                    "ceiling": _number_or_none(values[2]),
                }
            )
    return out


def task_difference_series(
    runs: pd.DataFrame,
    baseline: str,
    treatment: str,
    measure: str,
    settings: AnalysisSettings,
    cells: dict[str, dict[str, str]] | None = None,
) -> pd.Series:
    """The paired task differences (treatment minus baseline) of `measure` in the ITT
    population, as the comparison computes them, indexed by task (the tasks with a pair)."""
    _check_conditions(runs, baseline, treatment)
    itt = populations(runs[runs["condition"].isin([baseline, treatment])], settings, cells).itt
    if measure not in itt:
        raise ComparisonError(f"the runs table has no column {measure!r}")
    b, _, _ = _by_task(itt[itt["condition"] == baseline], measure)
    t, _, _ = _by_task(itt[itt["condition"] == treatment], measure)
    both = b.index.intersection(t.index)
    return (t.loc[both] - b.loc[both]).dropna().astype(float)


def task_differences(
    runs: pd.DataFrame,
    baseline: str,
    treatment: str,
    measure: str,
    settings: AnalysisSettings,
    cells: dict[str, dict[str, str]] | None = None,
) -> np.ndarray:
    """`task_difference_series`'s values."""
    found = task_difference_series(runs, baseline, treatment, measure, settings, cells)
    return np.asarray(found.to_numpy(float))


def _paired_tasks(itt: pd.DataFrame, baseline: str, treatment: str) -> int:
    b = set(itt.loc[itt["condition"] == baseline, "task"])
    t = set(itt.loc[itt["condition"] == treatment, "task"])
    return len(b & t)


def _excluded_counts(
    excluded: pd.DataFrame, conditions: tuple[str, str]
) -> dict[str, dict[str, int]]:
    """Condition -> why runs were excluded (`populations`' cause) -> runs."""
    out: dict[str, dict[str, int]] = {c: {} for c in conditions}
    for row in excluded.itertuples():
        per = out.setdefault(str(row.condition), {})
        per[str(row.cause)] = per.get(str(row.cause), 0) + 1
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


def verdict(table: pd.DataFrame) -> list[str]:
    """One plain sentence per primary outcome (ITT, per-protocol beside it), then one per family
    whose design cannot reach alpha."""
    a = table.attrs
    alpha = a["alpha"]
    lines = []
    primary = table[table["family"] == "primary"].set_index(["population", "measure"])
    for measure in a["primary"]:
        itt, pp = primary.loc[("itt", measure)], primary.loc[("per_protocol", measure)]
        shown = bool(itt.p_holm <= alpha) if not pd.isna(itt.p_holm) else False
        direction = "higher" if itt.mean_diff > 0 else "lower"
        head = (
            f"`{a['treatment']}` {'changed' if shown else 'did not detectably change'} {measure} "
            f"relative to `{a['baseline']}`"
        )
        facts = (
            f"ITT difference {_fmt(itt.mean_diff)} [95% CI {_fmt(itt.ci_low)}, "
            f"{_fmt(itt.ci_high)}], p(Holm) {_fmt_p(itt.p_holm)} over {itt.n_pairs} tasks"
        )
        if shown:
            head += f" ({direction}: {facts}, at alpha {alpha:g})"
        else:
            head += f" at alpha {alpha:g} ({facts}); this is not evidence of no effect"
        sens = (
            f"per-protocol {_fmt(pp.mean_diff)} [{_fmt(pp.ci_low)}, {_fmt(pp.ci_high)}], "
            f"p(Holm) {_fmt_p(pp.p_holm)} over {pp.n_pairs} tasks"
        )
        lines.append(f"{head}. Sensitivity: {sens}.")
    for lim in a["design"]:
        if not lim["reachable"]:
            lines.append(
                f"This design cannot reach alpha {alpha:g} in the {lim['family']} family: with "
                f"{lim['tasks']} paired tasks the smallest possible p is {lim['smallest_p']:.4g}, "
                f"so with {lim['outcomes']} outcome(s) the smallest p(Holm) is "
                f"{lim['smallest_p_holm']:.4g}; at least {lim['tasks_needed']} tasks are needed."
            )
    return lines


def compare_pairs(
    runs: pd.DataFrame,
    pairs: list[tuple[str, str]],
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    cells: dict[str, dict[str, str]] | None = None,
    settings: AnalysisSettings | None = None,
) -> list[pd.DataFrame]:
    """`compare_conditions` for each (baseline, treatment) pair, in the order given."""
    if not pairs:
        raise ComparisonError("no pair to compare: give --baseline/--treatment or --pair")
    repeated = sorted({p for p in pairs if pairs.count(p) > 1})
    if repeated:
        raise ComparisonError(f"pairs listed more than once: {repeated}")
    return [compare_conditions(runs, b, t, seed, resamples, cells, settings) for b, t in pairs]


def add_registered_verdicts(
    tables: list[pd.DataFrame],
    runs: pd.DataFrame,
    check: RegistrationCheck,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    cells: dict[str, dict[str, str]] | None = None,
) -> None:
    """Each pair's verdict under the analysis registered before the first session, when the
    analysis in force differs from it (`registered_verdict` in the pair's attrs, with its
    primary outcome(s)); or why there is none."""
    if check.registered is None and check.problem is None:
        return
    for table in tables:
        a = table.attrs
        pair = (a["baseline"], a["treatment"])
        lines: list[str]
        if check.registered is None:
            lines = [f"No registered verdict: {check.problem}."]
        else:
            try:
                registered = compare_conditions(
                    runs, *pair, seed, resamples, cells, check.registered
                )
            except ComparisonError as exc:
                lines = [f"No registered verdict: {exc}."]
            else:
                lines = list(registered.attrs["verdict"])
            if not registered_pair(check, pair):
                lines.append("This pair was not among the registered pairs.")
        a["registered_verdict"] = lines
        a["registered_primary"] = (
            list(check.registered.primary) if check.registered is not None else []
        )


def comparisons_table(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """The pairs' tables stacked, each row naming its pair (comparison.csv)."""
    stacked = [
        t.assign(baseline=t.attrs["baseline"], treatment=t.attrs["treatment"]) for t in tables
    ]
    out = pd.concat(stacked, ignore_index=True)
    return out[["baseline", "treatment", *[c for c in out.columns if c not in _PAIR_COLUMNS]]]


_PAIR_COLUMNS = ("baseline", "treatment")
_FAMILY_TITLES = {
    "primary": "Primary outcome(s): Holm over this family",
    "secondary": "Secondary outcomes: Holm over this family",
    "audit": "Audit flag rates (share of runs flagged): Holm over this family",
    "process": "What the agent did (descriptive: intervals, no test)",
}


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# The columns of a row that decide whether its ITT and per-protocol figures are the same.
_FIGURES = (
    "n_pairs", "n_excluded", "n_not_applicable", "n_floor_b", "n_floor_t", "baseline_mean",
    "treatment_mean", "mean_diff", "ci_low", "ci_high", "p_value", "p_holm", "ties",
    "treatment_higher", "treatment_lower",
)  # fmt: skip
SAME = "itt = pp"  # a row standing for identical ITT and per-protocol rows


def _same_figures(a: pd.Series, b: pd.Series) -> bool:
    return all(
        (pd.isna(a[c]) and pd.isna(b[c])) or (not pd.isna(a[c]) and a[c] == b[c]) for c in _FIGURES
    )


def shown_rows(rows: pd.DataFrame) -> tuple[list[tuple[str, pd.Series]], bool]:
    """(population label, row) in measure order, ITT then per-protocol, one row labelled
    `SAME` where the two are identical; and whether any row was merged."""
    shown: list[tuple[str, pd.Series]] = []
    merged = False
    for _, group in rows.groupby("measure", sort=False):
        by = {str(r["population"]): r for _, r in group.iterrows()}
        itt, pp = by.get("itt"), by.get("per_protocol")
        if itt is not None and pp is not None and _same_figures(itt, pp):
            shown.append((SAME, itt))
            merged = True
        else:
            shown += [(name, r) for name, r in by.items()]
    return shown, merged


def _measure_lines(table: pd.DataFrame, family: str) -> list[str]:
    rows, merged = shown_rows(table[table["family"] == family])
    lines = [
        "| measure | population | n | excl. | n/a | floor b/t | baseline | treatment | diff "
        "| 95% CI | p | p (Holm) | higher/tie/lower | better |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for population, r in rows:
        better = r["better"] if r["better"] in ("higher", "lower") else "–"
        lines.append(
            f"| {r['measure']} | {population} | {r['n_pairs']} | {r['n_excluded']} | "
            f"{r['n_not_applicable']} | {r['n_floor_b']}/{r['n_floor_t']} | "
            f"{_fmt(r['baseline_mean'])} | {_fmt(r['treatment_mean'])} | {_fmt(r['mean_diff'])} "
            f"| [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] | {_fmt_p(r['p_value'])} | "
            f"{_fmt_p(r['p_holm'])} | {r['treatment_higher']}/{r['ties']}/{r['treatment_lower']} "
            f"| {better} |"
        )
    if merged:
        lines += [
            "",
            f"`{SAME}`: the intention-to-treat and per-protocol figures of this measure are "
            "identical (every counted run had a scored answer, none flagged), so they are shown "
            "once.",
        ]
    return lines


def _legend(a: dict[str, Any]) -> list[str]:
    """Every column name and abbreviation of the tables, defined once."""
    return [
        "",
        "Reading the tables:",
        "",
        "- `itt`: intention to treat; `per_protocol` (pp): only runs with a scored answer; "
        f"`{SAME}`: both identical, shown once.",
        "- `n`: tasks with a value on both sides (the unit: each side the mean over the task's "
        "runs); `excl.`: tasks where one side has no value; `n/a`: tasks the measure does not "
        "apply to (an interaction or viewport measure of a task that states none).",
        "- `floor b/t`: runs of the baseline / treatment valued at the measure's floor (no scored "
        "answer, or flagged).",
        f"- `baseline`, `treatment`: the means over tasks (`{a['baseline']}`, "
        f"`{a['treatment']}`); `diff`: treatment minus baseline; `95% CI`: its 95% bootstrap "
        "interval.",
        "- `p`: two-sided sign-flip permutation test; `p (Holm)`: Holm-adjusted within the "
        "table's family and population; `–`: not tested (process measures) or no value.",
        "- `higher/tie/lower`: tasks where the treatment's value is above, equal to, below the "
        "baseline's; `better`: the direction that is better for the measure (`–`: none is "
        "known).",
        f"- `ceiling`: the task's own reference scored as an answer (`{CEILING_SET}`), what a "
        "perfect answer reaches on that task.",
    ]


def _per_task_lines(a: dict[str, Any], head: str) -> list[str]:
    """Each primary outcome's per-task differences, the ceiling beside them."""
    rows = a.get("per_task") or []
    lines: list[str] = []
    for measure in dict.fromkeys(str(r["measure"]) for r in rows):
        lines += [
            "",
            f"{head}# Per task: {measure} (ITT), with each task's ceiling",
            "",
            "| task | baseline | treatment | diff | ceiling |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {r['task']} | {_fmt(r['baseline'])} | {_fmt(r['treatment'])} | "
            f"{_fmt(r['diff'])} | {_fmt(r['ceiling'])} |"
            for r in rows
            if r["measure"] == measure
        ]
    return lines


def comparison_markdown(table: pd.DataFrame, level: int = 1) -> str:
    """One pair's section; `level` is its heading's depth (2 inside a document of several)."""
    a = table.attrs
    head = "#" * level
    counted = a["runs_counted"]
    lines = [
        f"{head} {a['treatment']} vs {a['baseline']}",
        "",
        *[f"> **{line}**\n" for line in caveat_lines(a)],
        f"{head}# Verdict",
        "",
        *[f"- {line}" for line in a["verdict"]],
        "",
        *_registered_lines(a),
        f"Treatment `{a['treatment']}` minus baseline `{a['baseline']}`, paired by task (each side "
        f"the mean over the task's runs): {a['paired']} tasks. Intention to treat (`itt`): every "
        f"run of a condition counts ({counted[a['baseline']]} baseline, "
        f"{counted[a['treatment']]} treatment runs), a run without a scored answer, or flagged "
        f"for {', '.join(a['floor_flags']) or 'nothing'}, at the measure's floor (`floor b/t`); "
        "per-protocol (`per_protocol`): only runs with a scored answer, a sensitivity analysis. "
        f"95% percentile bootstrap intervals from {a['resamples']} resamples (seed {a['seed']}); "
        "`p` is a two-sided sign-flip permutation test; `p (Holm)` is adjusted within its family "
        "and population. docs/metrics.md gives the rules. " + scoring_line(a),
        *_legend(a),
    ]
    for family in FAMILIES:
        if (table["family"] == family).any():
            lines += ["", f"{head}# {_FAMILY_TITLES[family]}", "", *_measure_lines(table, family)]
        if family == "primary":
            lines += _per_task_lines(a, head)
    lines += _status_lines(a.get("status_counts", {}), head)
    left_out = a.get("left_out", [])
    lines += ["", f"{head}# Runs excluded: {len(left_out)} (not the agent's doing)", ""]
    if left_out:
        lines += [
            "| condition | task | replicate | status | reason |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {x['condition']} | {x['task']} | {x['replicate']} | {x.get('status')} "
            f"| {x['reason']} |"
            for x in left_out
        ]
    else:
        lines.append("None: every run of both conditions counts.")
    return "\n".join(lines) + "\n"


def _registered_lines(a: dict[str, Any]) -> list[str]:
    """The registered analysis's verdict, beside the current one (when they differ)."""
    lines = a.get("registered_verdict")
    if not lines:
        return []
    primary = ", ".join(f"`{m}`" for m in a.get("registered_primary") or []) or "–"
    return [
        f"Under the analysis registered before the first session (primary {primary}):",
        "",
        *[f"- {line}" for line in lines],
        "",
    ]


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


def comparison_summary(tables: list[pd.DataFrame], check: RegistrationCheck | None = None) -> str:
    """comparison.json, for the report's first screen: what differs from the registered
    analysis (`registration`, shown first) or the sentence naming the registration
    (`registration_note`), each pair's verdict (and the registered analysis's), counts and
    design limits, and the caveats and excluded runs over all pairs (each once)."""
    pairs = [dict(t.attrs) | {"caveats": caveat_lines(t.attrs)} for t in tables]
    caveats = list(dict.fromkeys(c for p in pairs for c in p["caveats"]))
    seen: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        for run in pair.get("left_out", []):
            seen.setdefault(json.dumps(run, sort_keys=True, default=str), run)
    check = check or RegistrationCheck()
    summary = {
        "registration": check.lines,
        "registration_note": check.note,
        "pairs": pairs,
        "caveats": caveats,
        "left_out": list(seen.values()),
    }
    return json.dumps(
        summary, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v)
    )


def _fmt_p(value: float) -> str:
    if np.isnan(value):
        return "–"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _registration_head(check: RegistrationCheck, tables: list[pd.DataFrame]) -> str:
    """What differs from the registered analysis, first; the registration's name otherwise."""
    if not check.lines:
        return f"{check.note}\n\n" if check.note else ""
    beside = (
        " The registered analysis's verdict is given beside the current one under each pair's "
        "verdict."
        if any(t.attrs.get("registered_verdict") for t in tables)
        else ""
    )
    quoted = [f"> **{line}**" for line in check.lines]
    if beside:
        quoted.append(f">{beside}")
    return "\n>\n".join(quoted) + "\n\n"


def comparisons_markdown(tables: list[pd.DataFrame], check: RegistrationCheck | None = None) -> str:
    """comparison.md: what differs from the registered analysis first, then one section per
    pair (a single pair keeps its own top-level heading)."""
    first = _registration_head(check or RegistrationCheck(), tables)
    if len(tables) == 1:
        return first + comparison_markdown(tables[0])
    names = ", ".join(f"`{t.attrs['treatment']}` vs `{t.attrs['baseline']}`" for t in tables)
    head = f"# Comparisons\n\n{len(tables)} pairs, each on its own: {names}.\n\n"
    return first + head + "\n".join(comparison_markdown(t, level=2) for t in tables)


def recorded_analysis(path: Path) -> tuple[dict[str, dict[str, str]] | None, AnalysisSettings]:
    """From experiment.json: condition -> task -> identity hash (None without a record), and the
    analysis declared before the sessions ran (the defaults for a record made before the
    `analysis` section existed; comparison.md then says so through its verdict's settings)."""
    if not path.is_file():
        return None, AnalysisSettings()
    try:
        record = read_record(path, EXPERIMENT_RECORD)
    except RecordError as exc:
        raise ComparisonError(f"cannot read the experiment's record: {exc}") from exc
    cells = record.get("cells")
    if not isinstance(cells, dict) or not all(isinstance(v, dict) for v in cells.values()):
        raise ComparisonError(f"{path}: field 'cells' must map condition -> task -> hash")
    declared = (record.get("config") or {}).get("analysis")
    try:
        settings = AnalysisSettings.model_validate(declared or {})
    except ValueError as exc:
        raise ComparisonError(f"{path}: config.analysis: {exc}") from exc
    return cells, settings


def write_comparison(
    exp_dir: Path, tables: list[pd.DataFrame], check: RegistrationCheck | None = None
) -> Path:
    """comparison.csv, comparison.md and comparison.json into `exp_dir`; returns the CSV."""
    csv = exp_dir / "comparison.csv"
    with atomic.replacing(csv) as tmp:
        comparisons_table(tables).to_csv(tmp, index=False)
    atomic.write_text(exp_dir / "comparison.md", comparisons_markdown(tables, check))
    atomic.write_text(exp_dir / "comparison.json", comparison_summary(tables, check))
    return csv
