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
