"""What the comparison of conditions declares before any session runs, and what a design can show.

The experiment's `analysis` section names the outcomes: the primary family (Holm's correction
runs over it alone), the secondary family (its own correction), and the audit flags whose answers
are scored at each measure's floor because the score would not measure the page (a pasted
screenshot gains SSIM). Process measures (turns, CallMLLM calls, cost, tokens, time) describe what
the agent did; they are reported with intervals and never enter a hypothesis family, since a
verification policy changes them by construction.

The section is analysis only: it is written into experiment.json at the start and is not part of
any run's identity, so declaring outcomes never reruns a session.

The design figures are those of the paired sign-flip test over tasks (docs/metrics.md): with n
tasks the smallest two-sided p any result can have is 2/2^n, so a family of m outcomes needs
m * 2/2^n <= alpha before anything can be significant. Replicates do not change this: the unit is
the task.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "AnalysisSettings",
    "DesignLimits",
    "FIDELITY_MEASURES",
    "Measure",
    "MonitorSettings",
    "PROCESS_MEASURES",
    "PROCESS_PER_PRIMARY",
    "RULE_FLAGS",
    "AUDIT_FLAGS",
    "design_limits",
    "applicable",
    "design_warnings",
    "measured_tasks",
    "monitor_key",
    "smallest_p",
]


class Measure(NamedTuple):
    """A fidelity measure of the runs table: which direction is better, and the value an answer
    that cannot be measured gets in the intention-to-treat analysis (the worst the measure can
    be)."""

    better: Literal["higher", "lower"]
    floor: float
    # The runs column that must be above 0 for the measure to apply to a run (a task's count
    # of interactions or viewports); None: every run.
    applies_when: str | None = None
    # The least and the most a run's value can be, by the metric's definition: the monitor's
    # confidence sequence needs bounded values (an SSIM index is a correlation, so -1 to 1).
    bounds: tuple[float, float] = (0.0, 1.0)


# Every metric the scorer writes, as runs-table columns (score's METRIC_NAMES derive from it).
FIDELITY_MEASURES: dict[str, Measure] = {
    "metric_ssim": Measure("higher", 0.0, bounds=(-1.0, 1.0)),
    "metric_mae": Measure("lower", 1.0),
    "metric_ocr_word_precision": Measure("higher", 0.0),
    "metric_ocr_word_recall": Measure("higher", 0.0),
    "metric_ocr_word_f1": Measure("higher", 0.0),
    "metric_block_match": Measure("higher", 0.0),
    "metric_text_similarity": Measure("higher", 0.0),
    "metric_position": Measure("higher", 0.0),
    "metric_color": Measure("higher", 0.0),
    # An interactive or responsive task's (P-41): null for a task that states none.
    "metric_implement_rate": Measure("higher", 0.0, "interactions_stated"),
    "metric_state_ssim": Measure("higher", 0.0, "interactions_stated", (-1.0, 1.0)),
    "metric_state_text": Measure("higher", 0.0, "interactions_stated"),
    "metric_region_ssim": Measure("higher", 0.0, "interactions_stated", (-1.0, 1.0)),
    "metric_region_text": Measure("higher", 0.0, "interactions_stated"),
    "metric_region_position": Measure("higher", 0.0, "interactions_stated"),
    "metric_viewport_ssim": Measure("higher", 0.0, "viewports_stated", (-1.0, 1.0)),
    "metric_viewport_block_match": Measure("higher", 0.0, "viewports_stated"),
}
# What the agent did, with the direction a reader would call better where there is one.
PROCESS_MEASURES: dict[str, Literal["higher", "lower", "unknown"]] = {
    "cost_usd": "lower",
    "turns": "lower",
    "mllm_calls": "unknown",
    "input_tokens": "unknown",
    "output_tokens": "unknown",
    "wall_seconds": "unknown",
    # The answer over the session (the trajectory table): how often it changed, and after how
    # many of the CallMLLM calls made while there was one.
    "answer_revisions": "unknown",
    "calls_followed_by_change": "unknown",
}
# Per declared primary outcome metric_<name>: the fidelity gained from the answer's first
# version to its last (gain_<name>) and the mean change after a call (call_change_<name>).
PROCESS_PER_PRIMARY = ("gain_", "call_change_")
# The audit's flags (score's FLAGS are these), and those that break a rule of the task.
AUDIT_FLAGS = (
    "remote_dependencies",
    "files_outside_assets",
    "screenshot_substitution",
    "text_in_images",
    "absolute_pinning",
    "low_text_volume",
    "oversized_images",
)
RULE_FLAGS = (
    "screenshot_substitution",
    "text_in_images",
    "remote_dependencies",
    "absolute_pinning",
)

DEFAULT_PRIMARY = ("metric_ssim",)
DEFAULT_ALPHA = 0.05


class MonitorSettings(BaseModel):
    """`analysis.monitor`: the running answer of the primary outcome while the study runs, and
    whether to stop starting sessions once it is known (collect/monitor.py, docs/metrics.md).
    Analysis only; not hashed."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    method: Literal["betting", "betting_wor"] = "betting"
    """The confidence sequence of the mean paired task difference: betting (the tasks a sample
    of a larger population of tasks) or betting_wor (the mean over exactly this study's tasks,
    drawn without replacement: narrower near the end; every task must be paired). Both are
    Waudby-Smith and Ramdas's hedged betting sequences."""
    alpha: float | None = Field(default=None, gt=0.0, lt=1.0)
    """The chance, at most, that the sequence ever excludes the true difference (split evenly
    over the primary outcomes); null: analysis.alpha."""
    margin: float | None = Field(default=None, gt=0.0)
    """The smallest difference worth knowing, in the outcome's units: once the sequence lies
    inside (-margin, margin), the answer is known to be smaller than that. null: none."""
    stop: bool = False
    """true: once every primary outcome's answer is known (the sequence excludes 0 or lies
    inside the margin), no new session starts; the runs not started are not_started with reason
    stopped_early, and setting false and running again finishes them. false: monitor and
    report only."""


def monitor_key(settings: AnalysisSettings, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """What a monitor's answer was reached under: its method, alpha and margin, the primary
    outcomes and the compared pairs. A stop recorded under another key does not apply."""
    monitor = settings.monitor or MonitorSettings()
    return {
        "method": monitor.method,
        "alpha": monitor.alpha if monitor.alpha is not None else settings.alpha,
        "margin": monitor.margin,
        "primary": list(settings.primary),
        "pairs": [list(pair) for pair in pairs],
    }


class AnalysisSettings(BaseModel):
    """The config's `analysis` section (analysis only; not hashed)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    primary: tuple[str, ...] = Field(default=DEFAULT_PRIMARY, min_length=1)
    """The primary outcome(s): runs-table metric columns (metric_<name>). Holm's correction runs
    over these alone, and the verdict is theirs."""
    secondary: tuple[str, ...] | None = None
    """Secondary outcomes, corrected as a family of their own; null: every other metric."""
    floor_flags: tuple[str, ...] = RULE_FLAGS
    """Audit flags whose runs are scored at each measure's floor in both analyses (the score
    would reward breaking the task's rules); [] scores them as measured."""
    alpha: float = Field(default=DEFAULT_ALPHA, gt=0.0, lt=1.0)
    """The family-wise error rate the verdict and the design check use."""
    monitor: MonitorSettings | None = None
    """The running answer of the primary outcome as tasks complete (a confidence sequence valid
    at every look), and whether it stops the study once known; null: no monitoring."""

    @field_validator("primary", "secondary")
    @classmethod
    def _known_measures(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for name in value or ():
            if name not in FIDELITY_MEASURES:
                raise ValueError(
                    f"{name!r} is not a fidelity measure; choose from {sorted(FIDELITY_MEASURES)}"
                )
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"lists a measure twice: {list(value)}")
        return value

    @field_validator("floor_flags")
    @classmethod
    def _known_flags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in AUDIT_FLAGS:
                raise ValueError(f"{name!r} is not an audit flag; choose from {list(AUDIT_FLAGS)}")
        return value

    @model_validator(mode="after")
    def _families_apart(self) -> AnalysisSettings:
        both = sorted(set(self.primary) & set(self.secondary or ()))
        if both:
            raise ValueError(f"analysis.secondary repeats primary outcome(s) {both}")
        return self

    @model_validator(mode="after")
    def _margin_within_range(self) -> AnalysisSettings:
        margin = self.monitor.margin if self.monitor is not None else None
        if margin is None:
            return self
        for name in self.primary:
            low, high = FIDELITY_MEASURES[name].bounds
            if margin >= high - low:
                raise ValueError(
                    f"analysis.monitor.margin {margin:g} is not below the range of {name} "
                    f"({high - low:g}: its values lie in [{low:g}, {high:g}]); give a smaller "
                    "margin or null"
                )
        return self

    @property
    def secondary_measures(self) -> tuple[str, ...]:
        if self.secondary is not None:
            return self.secondary
        return tuple(m for m in FIDELITY_MEASURES if m not in self.primary)

    def secondary_present(self, columns: Collection[str]) -> tuple[str, ...]:
        """The secondary family as a comparison corrects it: the measures `columns` (a runs
        table's) has; a measure no run has a value column for is not in it."""
        return tuple(m for m in self.secondary_measures if m in columns)


def smallest_p(tasks: int) -> float:
    """The smallest two-sided p the exact sign-flip test can give with `tasks` paired tasks."""
    return 1.0 if tasks < 1 else min(1.0, 2.0 / 2.0**tasks)


class DesignLimits(NamedTuple):
    family: str
    outcomes: int
    tasks: int
    smallest_p: float
    smallest_p_holm: float
    reachable: bool  # whether any result could have p(Holm) <= alpha
    tasks_needed: int  # the fewest tasks with which it could


def design_limits(family: str, outcomes: int, tasks: int, alpha: float) -> DesignLimits:
    """What the design can show at best for a family of `outcomes` tested over `tasks` tasks."""
    best = smallest_p(tasks)
    best_holm = min(1.0, outcomes * best)
    # m * 2^(1-n) <= alpha  <=>  n >= 1 + log2(m / alpha)
    needed = max(1, math.ceil(1 + math.log2(max(outcomes, 1) / alpha) - 1e-12))
    return DesignLimits(family, outcomes, tasks, best, best_holm, best_holm <= alpha, needed)


def applicable(measures: Iterable[str], stated: Mapping[str, int]) -> tuple[str, ...]:
    """The measures that apply to at least one task: one whose `applies_when` names a count
    (`interactions_stated`, `viewports_stated`) that no task has is not measured at all, so it
    has no column in the runs table and no place in its family's correction."""
    return tuple(
        m
        for m in measures
        if (when := FIDELITY_MEASURES[m].applies_when) is None or stated.get(when, 0) > 0
    )


def measured_tasks(measure: str, tasks: int, stated: Mapping[str, int]) -> int:
    """How many of `tasks` tasks `measure` has a value for."""
    when = FIDELITY_MEASURES[measure].applies_when
    return tasks if when is None else min(tasks, stated.get(when, 0))


def design_warnings(settings: AnalysisSettings, tasks: int, stated: Mapping[str, int]) -> list[str]:
    """One line per declared family that cannot reach alpha with `tasks` paired tasks, of which
    `stated[count]` state interactions or viewports (a family's best case is its measure with
    the most tasks); and one per declared outcome that no task can measure."""
    lines = [
        f"the declared outcome {m} applies to none of the {tasks} task(s): no task states "
        f"{str(FIDELITY_MEASURES[m].applies_when).removesuffix('_stated')}, so it will have no "
        "value"
        for m in (*settings.primary, *(settings.secondary or ()))
        if not applicable((m,), stated)
    ]
    families = {
        "primary": applicable(settings.primary, stated),
        "secondary": applicable(settings.secondary_measures, stated),
    }
    for family, measures in families.items():
        outcomes = len(measures)
        most = max((measured_tasks(m, tasks, stated) for m in measures), default=tasks)
        lim = design_limits(family, outcomes, most, settings.alpha)
        if outcomes and not lim.reachable:
            lines.append(
                f"the {family} family ({outcomes} outcome(s)) cannot reach alpha "
                f"{settings.alpha:g} with {most} task(s): the smallest possible p is "
                f"{lim.smallest_p:.4g} and the smallest p(Holm) {lim.smallest_p_holm:.4g}; it "
                f"needs at least {lim.tasks_needed} tasks (replicates do not help: the unit is the "
                "task)"
            )
    return lines
