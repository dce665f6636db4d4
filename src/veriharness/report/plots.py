"""The report's plots: PNG figures (matplotlib, Agg) with an `.rst` caption beside each, which
`snakemake --report` shows under the figure.

Figures are drawn on an Agg canvas of their own, without pyplot and without pandas' plotting
(which imports pyplot): their import and figure bookkeeping cost each `report` CPU for nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from veriharness._util import atomic

__all__ = [
    "plot_metrics_by_condition",
    "plot_cost_vs_fidelity",
    "plot_capability_tags",
    "plot_comparison",
    "plot_trajectory",
]


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path, caption: str) -> Path:
    fig.tight_layout()
    # tight_layout leaves a placeholder layout engine, and savefig draws a figure that has any
    # engine once more before drawing it for the file.
    fig.set_layout_engine(None)
    fig.savefig(path, dpi=110)
    atomic.write_text(path.with_suffix(".rst"), caption + "\n")
    return path


def _metric_columns(runs: pd.DataFrame) -> list[str]:
    return sorted(c for c in runs.columns if c.startswith("metric_"))


def _grid(panels: int, height: float, columns: int = 3) -> tuple[Figure, list[Axes]]:
    """Panels in rows of `columns`, unused cells hidden; axes in reading order."""
    cols = min(columns, panels)
    rows = -(-panels // cols)
    fig = _figure(3.6 * cols, height * rows)
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for spare in axes[panels:]:
        spare.set_visible(False)
    return fig, axes[:panels]


def plot_metrics_by_condition(runs: pd.DataFrame, path: Path) -> Path:
    metrics = _metric_columns(runs) or ["cost_usd"]
    conditions = sorted(runs["condition"].unique())
    fig, axes = _grid(len(metrics), height=3.4)
    for ax, metric in zip(axes, metrics, strict=False):
        values = runs[["condition", "task", metric]].dropna()
        per_task = values.groupby(["task", "condition"])[metric].mean().unstack()
        grid = per_task.reindex(columns=conditions).to_numpy(float, na_value=np.nan)
        # Every task's line in one artist, the tasks apart by a NaN: one artist per task cost
        # about 5 ms each to draw, minutes for 1,000 tasks and eight metrics.
        gaps = np.full((len(grid), 1), np.nan)
        xs = np.tile(np.append(np.arange(len(conditions), dtype=float), np.nan), len(grid))
        ax.plot(xs, np.hstack([grid, gaps]).ravel(), color="0.6", lw=0.8, marker="o", ms=3)
        means = values.groupby("condition")[metric].mean().reindex(conditions)
        ax.plot(
            range(len(conditions)),
            means.to_numpy(float, na_value=np.nan),
            "D",
            color="C3",
            ms=8,
            label="mean",
        )
        ax.set_xticks(range(len(conditions)), conditions, rotation=20)
        ax.set_title(metric.removeprefix("metric_"))
    axes[0].legend(fontsize=8)
    return _save(
        fig,
        path,
        "Each metric by condition. Grey lines join the same task (mean over "
        "replicates) across conditions; red diamonds are condition means. Runs without "
        "a value are left out.",
    )


def plot_cost_vs_fidelity(runs: pd.DataFrame, path: Path) -> Path:
    metrics = _metric_columns(runs) or ["turns"]
    fig, axes = _grid(len(metrics), height=3.2)
    for ax, metric in zip(axes, metrics, strict=False):
        for i, (condition, group) in enumerate(runs.groupby("condition")):
            data = group[["cost_usd", metric]].dropna()
            ax.scatter(data["cost_usd"], data[metric], s=10, color=f"C{i}", label=condition)
        ax.set_xlabel("agent cost (USD)")
        ax.set_title(metric.removeprefix("metric_"))
    axes[0].legend(fontsize=8)
    return _save(
        fig,
        path,
        "Agent cost against each fidelity metric, one point per run, coloured by condition.",
    )


def _bars(ax: Axes, table: pd.DataFrame) -> None:
    """What `table.plot.bar(ax=ax)` draws: per row a group of bars, one per column, 0.5 wide in
    all, a legend titled with the columns' name."""
    width = 0.5 / len(table.columns)
    left = np.arange(len(table)) - 0.25
    for i, column in enumerate(table.columns):
        heights = table[column].fillna(0).to_numpy(float)
        ax.bar(left + (i + 0.5) * width, heights, width, color=f"C{i}", label=str(column))
    ax.set_xlim(left[0] - 0.25, left[-1] + 0.75)
    ax.set_xticks(np.arange(len(table)), [str(t) for t in table.index], rotation=90)
    if table.index.name is not None:
        ax.set_xlabel(str(table.index.name))
    ax.legend(loc="best", title=table.columns.name)


def plot_capability_tags(runs: pd.DataFrame, tags: pd.DataFrame, path: Path) -> Path:
    """Capability tags per started run of each condition, the agent's declared tags and the
    annotator's inferred ones in panels of their own (they answer different questions)."""
    started = runs[~runs["status"].isin(["missing", "not_started"])]
    per_condition = started.groupby("condition").size()
    sources = ("declared", "inferred")
    fig = _figure(max(8.0, 1.2 * tags["tag"].nunique() + 4), 3.4)
    axes = fig.subplots(1, 2)
    for ax, source in zip(axes, sources, strict=True):
        mine = tags[tags["source"] == source] if "source" in tags else tags.iloc[0:0]
        counts = mine.groupby(["tag", "condition"]).size().unstack(fill_value=0)
        counts = counts.reindex(columns=per_condition.index, fill_value=0)
        ax.set_title(f"{source} tags", fontsize=9)
        if counts.empty:
            ax.text(0.5, 0.5, f"no {source} tag", ha="center", transform=ax.transAxes)
        else:
            _bars(ax, counts / per_condition)
            ax.set_ylabel(f"{source} per started run")
    return _save(
        fig,
        path,
        "Capability tags of CallMLLM calls per started run of each condition: left, the tags "
        "the agent declared on its calls; right, the tags the annotator inferred (a call with two "
        "tags counts once for each).",
    )


def plot_comparison(table: pd.DataFrame, baseline: str, treatment: str, path: Path) -> Path:
    """One pair of comparison.csv: each measure's mean paired difference with its bootstrap
    interval, on the measure's own scale (one row per measure)."""
    rows = table.reset_index(drop=True)
    fig = _figure(6.4, 0.55 * len(rows) + 0.9)
    axes = fig.subplots(len(rows), 1, squeeze=False, sharex=False)
    for ax, r in zip(axes[:, 0], rows.itertuples(), strict=True):
        if np.isfinite(r.mean_diff):
            low, high = r.mean_diff - r.ci_low, r.ci_high - r.mean_diff
            ax.errorbar([r.mean_diff], [0], xerr=[[low], [high]], fmt="o", color="C0", capsize=3)
        ax.axvline(0, color="0.5", lw=0.8)
        ax.set_yticks([])
        p_holm = "–" if np.isnan(r.p_holm) else f"{r.p_holm:.3g}"
        ax.set_ylabel(
            f"{r.measure.removeprefix('metric_')}\np(Holm) {p_holm}",
            rotation=0,
            ha="right",
            va="center",
            fontsize=7,
        )
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"{treatment} minus {baseline}", fontsize=9)
    return _save(
        fig,
        path,
        f"{treatment} minus {baseline}, paired by task (replicate means): the mean difference of "
        "each measure with its 95% bootstrap interval, each on its own scale; the grey line is "
        "no difference. Intention to treat: every run counts, an unscored or rule-flagged answer "
        "at the measure's floor. p(Holm) is the sign-flip permutation p-value adjusted within the "
        "measure's family (primary, secondary); process measures are not tested.",
    )


def _quartiles(table: pd.DataFrame, by: str, metric: str) -> pd.DataFrame:
    grouped = table.groupby(by)[metric]
    return pd.DataFrame(
        {
            "q1": grouped.quantile(0.25),
            "median": grouped.median(),
            "q3": grouped.quantile(0.75),
            "runs": grouped.size(),
        }  # fmt: skip
    )


def _over_time(runs: pd.DataFrame, metric: str, grid: np.ndarray) -> np.ndarray:
    """Each run's metric as a step function of the session's seconds (a version holds until the
    next one), sampled on `grid`: one row per run, NaN before its first version."""
    out = np.full((runs["run"].nunique(), len(grid)), np.nan)
    for row, (_, run) in enumerate(runs.sort_values("seconds").groupby("run", sort=False)):
        times, values = run["seconds"].to_numpy(float), run[metric].to_numpy(float)
        at = np.searchsorted(times, grid, side="right") - 1
        out[row] = np.where(at >= 0, values[np.clip(at, 0, None)], np.nan)
    return out


def plot_trajectory(trajectory: pd.DataFrame, metric: str, path: Path) -> Path | None:
    """The answer's fidelity over the session per condition: by version (median and
    interquartile range of the runs that reached it) and by time (each run's value held until its
    next version; median and interquartile range). None when no snapshot was scored."""
    column = f"metric_{metric.removeprefix('metric_')}"
    if column not in trajectory or trajectory[column].dropna().empty:
        return None
    scored = trajectory.dropna(subset=[column]).assign(
        run=lambda t: t["condition"].astype(str) + "/" + t["task"].astype(str) + "/"
        + t["replicate"].astype(str),
        version=lambda t: t["snapshot"].astype(int),
    )  # fmt: skip
    fig = _figure(10.0, 3.6)
    by_version, by_time = fig.subplots(1, 2)
    grid = np.linspace(0.0, float(scored["seconds"].max()) or 1.0, 60)
    for i, (condition, group) in enumerate(scored.groupby("condition", sort=True)):
        colour = f"C{i}"
        q = _quartiles(group, "version", column)
        by_version.plot(q.index, q["median"], "o-", color=colour, label=f"{condition}")
        by_version.fill_between(q.index, q["q1"], q["q3"], color=colour, alpha=0.2)
        values = _over_time(group, column, grid)
        reached = np.isfinite(values).any(axis=0)
        with np.errstate(all="ignore"):
            low, mid, high = (np.nanpercentile(values[:, reached], p, axis=0) for p in (25, 50, 75))
        by_time.plot(grid[reached], mid, color=colour, label=f"{condition}")
        by_time.fill_between(grid[reached], low, high, color=colour, alpha=0.2)
    by_version.set_xlabel("version of the answer (1 = first written)")
    by_version.set_ylabel(column.removeprefix("metric_"))
    by_version.xaxis.get_major_locator().set_params(integer=True)
    by_time.set_xlabel("seconds since the session started")
    by_version.legend(fontsize=8)
    return _save(
        fig,
        path,
        f"The answer's {column.removeprefix('metric_')} over the session, per condition "
        "(trajectory table: every version the session left, scored alone). Left: by version, "
        "the median of the runs that reached it, the band their interquartile range. Right: by "
        "time, each run's value held from one version to the next; the median and interquartile "
        "range of the runs that had written an answer by then.",
    )
