"""The report's plots: PNG figures (matplotlib, Agg) with an `.rst` caption beside each, which
`snakemake --report` shows under the figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib

from veriharness._util import atomic

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

__all__ = [
    "plot_metrics_by_condition",
    "plot_cost_vs_fidelity",
    "plot_capability_tags",
    "plot_comparison",
]


def _save(fig: Figure, path: Path, caption: str) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    atomic.write_text(path.with_suffix(".rst"), caption + "\n")
    return path


def _metric_columns(runs: pd.DataFrame) -> list[str]:
    return sorted(c for c in runs.columns if c.startswith("metric_"))


def _grid(panels: int, height: float, columns: int = 3) -> tuple[Figure, list[Axes]]:
    """Panels in rows of `columns`, unused cells hidden; axes in reading order."""
    cols = min(columns, panels)
    rows = -(-panels // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(3.6 * cols, height * rows), squeeze=False)
    axes = list(grid.flat)
    for spare in axes[panels:]:
        spare.set_visible(False)
    fig.set_layout_engine("tight")
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


def plot_capability_tags(runs: pd.DataFrame, tags: pd.DataFrame, path: Path) -> Path:
    """Capability tags per started run of each condition, the agent's declared tags and the
    annotator's inferred ones in panels of their own (they answer different questions)."""
    started = runs[~runs["status"].isin(["missing", "not_started"])]
    per_condition = started.groupby("condition").size()
    sources = ("declared", "inferred")
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 1.2 * tags["tag"].nunique() + 4), 3.4))
    for ax, source in zip(axes, sources, strict=True):
        mine = tags[tags["source"] == source] if "source" in tags else tags.iloc[0:0]
        counts = mine.groupby(["tag", "condition"]).size().unstack(fill_value=0)
        counts = counts.reindex(columns=per_condition.index, fill_value=0)
        ax.set_title(f"{source} tags", fontsize=9)
        if counts.empty:
            ax.text(0.5, 0.5, f"no {source} tag", ha="center", transform=ax.transAxes)
        else:
            (counts / per_condition).plot.bar(ax=ax)
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
    fig, axes = plt.subplots(
        len(rows), 1, figsize=(6.4, 0.55 * len(rows) + 0.9), squeeze=False, sharex=False
    )
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
