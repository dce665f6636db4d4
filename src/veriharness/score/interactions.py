"""Scores of an interactive or responsive task's run (P-41): each interaction, each extra
viewport, and their run-level summaries.

Reads the task's replayed reference (`states/states.json`, `states/<id>.png`, `<id>_dom.json`,
`viewports/`) and the run's (`render/states.json`, `render/states/`, `render/viewports/`). The
interaction metrics are `metrics.interaction`'s (Interaction2Code's rule and state metrics, CLIP
excepted); the after-state and each viewport are also scored with the existing suite's pixel and
block metrics. A run's summaries (`RUN_METRICS`) are means over the task's interactions or
viewports; as in Interaction2Code, an interaction the answer does not implement counts 0 in the
means of the region metrics (its own row keeps them null: there is no region to compare).
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from veriharness._util.ocr import Box as OcrBox
from veriharness.experiment.config import TaskSpec
from veriharness.experiment.interactions import (
    STATES_RECORD,
    Box,
    ExtraViewport,
    Interaction,
    ReferenceStates,
    state_files,
    viewport_files,
)
from veriharness.runfolder.metrics import InteractionScore, ViewportScore
from veriharness.runfolder.states import (
    STATES,
    AnswerInteraction,
    AnswerStates,
    answer_state_files,
    answer_viewport_files,
)
from veriharness.score.metrics.blocks import block_scores
from veriharness.score.metrics.inputs import InputError, read_dom
from veriharness.score.metrics.interaction import (
    State,
    changed_region,
    compare_states,
    implement_rate,
)
from veriharness.score.metrics.pixels import fit_to_reference, load_rgb, mae, ssim

__all__ = ["RUN_METRICS", "run_metrics", "score_interactions", "score_viewports"]

# The run-level summaries, as metrics.json names them (runs columns metric_<name>).
RUN_METRICS = (
    "implement_rate",
    "state_ssim",
    "state_text",
    "region_ssim",
    "region_text",
    "region_position",
    "viewport_ssim",
    "viewport_block_match",
)
# Summaries in which an interaction the answer does not implement counts 0.
_FLOORED = ("region_ssim", "region_text", "region_position")


def _ocr_box(box: Box | None) -> OcrBox | None:
    return None if box is None else OcrBox(box.x, box.y, box.width, box.height)


def _reference_states(task_dir: Path) -> ReferenceStates:
    path = task_dir / STATES_RECORD
    if not path.is_file():
        raise InputError(f"{path}: file not found; run `veriharness render-reference {task_dir}`")
    return ReferenceStates.model_validate_json(path.read_bytes())


def _answer_states(render_dir: Path) -> AnswerStates:
    path = render_dir / Path(STATES.name).name
    if not path.is_file():
        raise InputError(f"{path}: file not found; render the run with --task-dir")
    return AnswerStates.model_validate_json(path.read_bytes())


def _blocks(reference_dom: Path, answer_dom: Path) -> dict[str, float | None]:
    scores = block_scores(read_dom(reference_dom), read_dom(answer_dom))
    return {
        "block_match": scores.block_match,
        "text_similarity": scores.text_similarity,
        "position": scores.position,
        "color": scores.color,
    }


def _pixels(reference_png: Path, answer_png: Path) -> tuple[float, float]:
    reference = load_rgb(reference_png)
    fitted = fit_to_reference(load_rgb(answer_png), reference.size).image
    return ssim(fitted, reference), mae(fitted, reference)


def _one_interaction(
    interaction: Interaction,
    task_dir: Path,
    render_dir: Path,
    reference: ReferenceStates,
    answer: AnswerInteraction,
) -> InteractionScore:
    recorded = next(s for s in reference.interactions if s.id == interaction.id)
    ref_files, ans_files = state_files(interaction.id), answer_state_files(interaction.id)
    ref_before = Image.open(task_dir / "reference.png").convert("RGB")
    ref_after = Image.open(task_dir / ref_files["png"]).convert("RGB")
    reference_state = State(
        ref_before,
        ref_after,
        _ocr_box(recorded.trigger_box),
        changed_region(ref_before, ref_after),
    )
    before_png = render_dir / ans_files["before"]
    if answer.status != "ok" or not before_png.is_file():
        return InteractionScore(
            id=interaction.id, implemented=False, trigger_matches=answer.trigger_matches
        )
    ans_before = Image.open(before_png).convert("RGB")
    ans_after = Image.open(render_dir / ans_files["png"]).convert("RGB") if answer.acted else None
    found = answer.trigger_matches == 1 and answer.acted
    answer_state = State(
        ans_before,
        ans_after,
        _ocr_box(answer.trigger_box) if found else None,
        None if ans_after is None else changed_region(ans_before, ans_after),
    )
    scores = compare_states(reference_state, answer_state)
    values: dict[str, float | None] = {}
    if ans_after is not None:
        _, values["state_mae"] = _pixels(task_dir / ref_files["png"], render_dir / ans_files["png"])
        blocks = _blocks(task_dir / ref_files["dom"], render_dir / ans_files["dom"])
        values |= {f"state_{name}": value for name, value in blocks.items()}
    return InteractionScore(
        id=interaction.id,
        implemented=scores.implemented,
        trigger_matches=answer.trigger_matches,
        state_ssim=scores.state_ssim,
        state_text=scores.state_text,
        region_ssim=scores.region_ssim,
        region_text=scores.region_text,
        trigger_position=scores.trigger_position,
        region_position=scores.region_position,
        state_mae=values.get("state_mae"),
        state_block_match=values.get("state_block_match"),
        state_text_similarity=values.get("state_text_similarity"),
        state_position=values.get("state_position"),
        state_color=values.get("state_color"),
    )


def score_interactions(task: TaskSpec, task_dir: Path, render_dir: Path) -> list[InteractionScore]:
    """Every interaction of the task, scored on the run's render (none for a task without)."""
    if not task.interactions:
        return []
    reference = _reference_states(task_dir)
    replayed = {a.id: a for a in _answer_states(render_dir).interactions}
    missing = [i.id for i in task.interactions if i.id not in replayed]
    if missing:
        raise InputError(f"{render_dir}/states.json: interactions {missing} were not replayed")
    return [
        _one_interaction(i, task_dir, render_dir, reference, replayed[i.id])
        for i in task.interactions
    ]


def _one_viewport(extra: ExtraViewport, task_dir: Path, render_dir: Path) -> ViewportScore:
    ref, ans = viewport_files(extra.name), answer_viewport_files(extra.name)
    similarity, error = _pixels(task_dir / ref["png"], render_dir / ans["png"])
    blocks = _blocks(task_dir / ref["dom"], render_dir / ans["dom"])
    return ViewportScore(
        name=extra.name,
        width=extra.width,
        height=extra.height,
        ssim=similarity,
        mae=error,
        **blocks,
    )


def score_viewports(task: TaskSpec, task_dir: Path, render_dir: Path) -> list[ViewportScore]:
    """Every extra viewport of the task, scored on the run's render there."""
    if not task.viewports:
        return []
    shown = {v.name: v for v in _answer_states(render_dir).viewports}
    scores = []
    for extra in task.viewports:
        state = shown.get(extra.name)
        if state is None:
            raise InputError(f"{render_dir}/states.json: viewport {extra.name!r} was not rendered")
        if state.status != "ok":
            scores.append(ViewportScore(name=extra.name, width=extra.width, height=extra.height))
        else:
            scores.append(_one_viewport(extra, task_dir, render_dir))
    return scores


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def run_metrics(
    interactions: list[InteractionScore], viewports: list[ViewportScore]
) -> dict[str, float | None]:
    """The run-level summaries (`RUN_METRICS`); None where the task states no interaction (or
    viewport)."""
    values: dict[str, float | None] = dict.fromkeys(RUN_METRICS)
    if interactions:
        values["implement_rate"] = implement_rate([i.implemented for i in interactions])
        for name in ("state_ssim", "state_text", *_FLOORED):
            column = [getattr(i, name) for i in interactions]
            if name in _FLOORED:
                column = [0.0 if v is None else v for v in column]
            values[name] = _mean(column)
    if viewports:
        values["viewport_ssim"] = _mean([v.ssim for v in viewports])
        values["viewport_block_match"] = _mean([v.block_match for v in viewports])
    return values
