"""The design check before money is spent: a family counts only the measures some task has."""

from __future__ import annotations

from veriharness.experiment.analysis import AnalysisSettings, applicable, design_warnings

STATIC = {"interactions_stated": 0, "viewports_stated": 0}


def test_a_static_design_counts_only_the_static_secondary_measures() -> None:
    lines = design_warnings(AnalysisSettings(), 2, STATIC)
    assert any(line.startswith("the secondary family (8 outcome(s))") for line in lines), lines


def test_tasks_that_state_interactions_add_their_measures_to_the_secondary_family() -> None:
    lines = design_warnings(AnalysisSettings(), 2, {"interactions_stated": 1})
    assert any(line.startswith("the secondary family (14 outcome(s))") for line in lines), lines
    both = {"interactions_stated": 1, "viewports_stated": 1}
    assert len(applicable(AnalysisSettings().secondary_measures, both)) == 16


def test_a_family_of_interaction_measures_is_judged_on_the_tasks_that_state_interactions() -> None:
    settings = AnalysisSettings(primary=("metric_state_ssim",), secondary=())
    # 12 tasks could reach 0.05 with one outcome; the 3 that state interactions cannot.
    lines = design_warnings(settings, 12, {"interactions_stated": 3})
    assert lines == [
        "the primary family (1 outcome(s)) cannot reach alpha 0.05 with 3 task(s): the smallest "
        "possible p is 0.25 and the smallest p(Holm) 0.25; it needs at least 6 tasks (replicates "
        "do not help: the unit is the task)"
    ]
    assert design_warnings(settings, 12, {"interactions_stated": 12}) == []


def test_a_declared_outcome_no_task_can_measure_is_named() -> None:
    settings = AnalysisSettings(secondary=("metric_viewport_ssim",))
    lines = design_warnings(settings, 12, STATIC)
    assert lines[0] == (
        "the declared outcome metric_viewport_ssim applies to none of the 12 task(s): no task "
        "states viewports, so it will have no value"
    )
