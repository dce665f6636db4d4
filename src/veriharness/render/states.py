"""Interactions and extra viewports in Chromium: on a task's reference, and on an answer (P-41).

Each interaction is replayed on a fresh page (a fresh context, the same closed network and
dialog guards as every render): the page loads, the action is taken on its trigger with the
page's scripts running, two frames are waited for, then the scripts are switched off and the page
is captured as any render is. On the reference the trigger is the task's selector and every
problem is a refusal naming the task, the interaction and the value: a selector that matches no
element or several, an action that fails, an action that changes no pixel of the viewport. On an
answer the trigger is the element carrying `data-interaction="<id>"` (the task's own selector when
the answer is the task's reference, `triggers="task"`: the reference carries no marks, and the
metric's reference side uses that selector), and the same problems are results, recorded in
`render/states.json`.

`changed_box` is the smallest box holding every pixel that differs between the viewport just
before and just after the action. It decides only whether the reference changed and what its
marked copy shows; the score stage's changed region, which its `region_*` metrics compare, is
Interaction2Code's (`score.metrics.interaction.changed_region`: insertion-aware, on whole
pages), a different box with a different name (P-69).
"""

from __future__ import annotations

import shutil
from io import BytesIO
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw

from veriharness._util import atomic
from veriharness.experiment.interactions import (
    STATES_DIR,
    STATES_RECORD,
    VIEWPORTS_DIR,
    Box,
    ExtraViewport,
    Interaction,
    InteractionState,
    ReferenceStates,
    state_files,
    viewport_files,
)
from veriharness.render.browser import Act, Capture, Renderer, RenderSetupError
from veriharness.runfolder.render import DomRecord, Size, Status
from veriharness.runfolder.states import (
    STATES,
    AnswerInteraction,
    AnswerStates,
    AnswerViewport,
    answer_state_files,
    answer_viewport_files,
)

__all__ = [
    "ReplayProblem",
    "Triggers",
    "UnreplayableInteraction",
    "changed_box",
    "marked_copy",
    "render_answer_states",
    "render_reference_states",
    "replay_on_reference",
]

_TRIGGER_COLOUR = (37, 99, 235)
_CHANGE_COLOUR = (220, 38, 38)
_LINE = 3


def changed_box(before: bytes, after: bytes) -> tuple[Box, int] | None:
    """The box around every pixel that differs between two captures of one size, and how many
    pixels differ; None when none does."""
    with Image.open(BytesIO(before)) as a, Image.open(BytesIO(after)) as b:
        if a.size != b.size:
            raise ValueError(f"captures of different sizes {a.size} and {b.size}")
        first = np.asarray(a.convert("RGB"), dtype=np.int16)
        second = np.asarray(b.convert("RGB"), dtype=np.int16)
    differs = np.any(first != second, axis=2)
    count = int(differs.sum())
    if count == 0:
        return None
    rows, cols = np.nonzero(differs.any(axis=1))[0], np.nonzero(differs.any(axis=0))[0]
    top, left = int(rows[0]), int(cols[0])
    box = Box(x=left, y=top, width=int(cols[-1]) - left + 1, height=int(rows[-1]) - top + 1)
    return box, count


def marked_copy(after: bytes, trigger: Box | None, changed: Box | None) -> bytes:
    """The after-state with the trigger's box (blue) and the changed box (red) outlined."""
    with Image.open(BytesIO(after)) as opened:
        image = opened.convert("RGB")
    draw = ImageDraw.Draw(image)
    for box, colour in ((changed, _CHANGE_COLOUR), (trigger, _TRIGGER_COLOUR)):
        if box is not None and box.width and box.height:
            corners = (box.x, box.y, box.x + box.width - 1, box.y + box.height - 1)
            draw.rectangle(corners, outline=colour, width=_LINE)
    out = BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _act(interaction: Interaction, selector: str) -> Act:
    return Act(selector=selector, action=interaction.action, value=interaction.value)


def _reference_problems(capture: Capture) -> list[str]:
    problems = [f"load failed: {capture.error}"] if capture.status != "ok" else []
    problems += [f"blocked request {b.url}" for b in capture.blocked_requests]
    problems += [f"page error {e}" for e in capture.page_errors]
    problems += [f"console error {e}" for e in capture.console_errors]
    return problems


# What kept an interaction from being replayed on a reference, first that applies.
ReplayProblem = Literal[
    "unclean_replay", "trigger_not_found", "trigger_ambiguous", "action_failed", "no_change"
]


class UnreplayableInteraction(RenderSetupError):
    """An interaction the reference refuses; `problem` says which kind of refusal."""

    def __init__(self, named: str, problem: ReplayProblem, detail: str):
        super().__init__(f"{named}: {detail}")
        self.problem: ReplayProblem = problem
        self.detail = detail


def _replay_problem(capture: Capture, trigger: str) -> tuple[ReplayProblem, str] | None:
    """The kind of the first problem and every problem's words; None when the replay is clean."""
    problems = _reference_problems(capture)
    kind: ReplayProblem | None = "unclean_replay" if problems else None
    result = capture.act
    if result is None or capture.viewport_png is None:
        problems.append("no capture")
        kind = kind or "unclean_replay"
    elif result.trigger_matches is None:
        problems.append(f"the trigger could not be looked up: {result.error}")
        kind = kind or "unclean_replay"
    elif result.trigger_matches != 1:
        problems.append(
            f"trigger selector {trigger!r} matches {result.trigger_matches} elements "
            "in reference.html; it must match exactly one"
        )
        kind = kind or ("trigger_not_found" if result.trigger_matches == 0 else "trigger_ambiguous")
    elif not result.acted:
        problems.append(f"the action failed: {result.error}")
        kind = kind or "action_failed"
    return None if kind is None else (kind, "; ".join(problems))


def replay_on_reference(
    renderer: Renderer, task_dir: Path, task_id: str, interaction: Interaction, viewport: Size
) -> tuple[InteractionState, Capture]:
    """Replay one interaction on the task's reference.html and say what it changed; raises
    `UnreplayableInteraction` (naming the task, the interaction and the value) when it cannot."""
    html = task_dir / "reference.html"
    capture = renderer.capture(html, task_dir, viewport, _act(interaction, interaction.trigger))
    named = (
        f"task {task_id!r} interaction {interaction.id!r} ({interaction.action} on "
        f"{interaction.trigger!r}, value {interaction.value!r})"
    )
    result = capture.act
    problem = _replay_problem(capture, interaction.trigger)
    if problem is not None:
        raise UnreplayableInteraction(named, *problem)
    assert result is not None and result.before_png is not None and capture.viewport_png
    changed = changed_box(result.before_png, capture.viewport_png)
    if changed is None:
        raise UnreplayableInteraction(
            named, "no_change", "the action changes nothing on the reference"
        )
    box, count = changed
    state = InteractionState(
        id=interaction.id,
        action=interaction.action,
        trigger=interaction.trigger,
        value=interaction.value,
        trigger_box=result.trigger_box or Box(x=0, y=0, width=0, height=0),
        changed_box=box,
        changed_pixels=count,
    )
    return state, capture


def _render_viewport(
    renderer: Renderer, html: Path, root: Path, viewport: ExtraViewport
) -> Capture:
    return renderer.capture(html, root, Size(width=viewport.width, height=viewport.height))


def render_reference_states(
    renderer: Renderer,
    task_dir: Path,
    task_id: str,
    interactions: tuple[Interaction, ...],
    viewports: tuple[ExtraViewport, ...],
    viewport: Size,
) -> ReferenceStates:
    """Replay every interaction and render every extra viewport of a task's reference; write
    `states/` and `viewports/` afresh once all are clean (nothing is written on a refusal)."""
    files: dict[str, bytes | str] = {}
    states = []
    for interaction in interactions:
        state, capture = replay_on_reference(renderer, task_dir, task_id, interaction, viewport)
        names = state_files(interaction.id)
        assert capture.viewport_png is not None
        files[names["png"]] = capture.viewport_png
        files[names["marked"]] = marked_copy(
            capture.viewport_png, state.trigger_box, state.changed_box
        )
        files[names["dom"]] = capture.dom.model_dump_json(indent=1) + "\n"
        states.append(state)
    for extra in viewports:
        capture = _render_viewport(renderer, task_dir / "reference.html", task_dir, extra)
        problems = _reference_problems(capture)
        if problems or capture.viewport_png is None:
            raise RenderSetupError(
                f"task {task_id!r} viewport {extra.name!r} ({extra.width}x{extra.height}): "
                + "; ".join(problems or ["no capture"])
            )
        names = viewport_files(extra.name)
        files[names["png"]] = capture.viewport_png
        files[names["dom"]] = capture.dom.model_dump_json(indent=1) + "\n"
    record = ReferenceStates(interactions=tuple(states), viewports=viewports)
    for folder in (STATES_DIR, VIEWPORTS_DIR):
        if (task_dir / folder).exists():
            shutil.rmtree(task_dir / folder)  # files of interactions no longer stated
    if interactions or viewports:
        files[STATES_RECORD] = record.model_dump_json(indent=1) + "\n"
    for relative, content in files.items():
        _write(task_dir / relative, content)
    return record


def _write(path: Path, content: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        atomic.write_bytes(path, content)
    else:
        atomic.write_text(path, content)


def _white(size: Size) -> bytes:
    out = BytesIO()
    Image.new("RGB", (size.width, size.height), "white").save(out, format="PNG")
    return out.getvalue()


# How an answer's triggers are found: the output contract's marks, or the task's selectors (the
# task's reference scored as an answer).
Triggers = Literal["marks", "task"]


def _answer_trigger(interaction: Interaction, triggers: Triggers) -> str:
    return interaction.trigger if triggers == "task" else interaction.answer_selector()


def _replay_on_answer(
    renderer: Renderer,
    answer: Path,
    answer_dir: Path,
    interaction: Interaction,
    viewport: Size,
    trigger: str,
) -> tuple[AnswerInteraction, dict[str, bytes | str]]:
    capture = renderer.capture(answer, answer_dir, viewport, _act(interaction, trigger))
    result = capture.act
    after = capture.viewport_png or _white(viewport)
    before = result.before_png if result is not None and result.before_png else after
    changed = changed_box(before, after) if result is not None and result.acted else None
    record = AnswerInteraction(
        id=interaction.id,
        trigger=trigger,
        status=capture.status,
        trigger_matches=None if result is None else result.trigger_matches,
        acted=result is not None and result.acted,
        error=capture.error if result is None or result.error is None else result.error,
        trigger_box=None if result is None else result.trigger_box,
        changed_box=None if changed is None else changed[0],
        changed_pixels=0 if changed is None else changed[1],
    )
    names = answer_state_files(interaction.id)
    files: dict[str, bytes | str] = {
        names["png"]: after,
        names["before"]: before,
        names["dom"]: capture.dom.model_dump_json(indent=1) + "\n",
    }
    return record, files


def render_answer_states(
    renderer: Renderer | None,
    answer: Path,
    answer_dir: Path,
    interactions: tuple[Interaction, ...],
    viewports: tuple[ExtraViewport, ...],
    viewport: Size,
    out: Path,
    triggers: Triggers = "marks",
) -> AnswerStates:
    """Replay every interaction and render every extra viewport of the answer into `out`
    (a render folder), each trigger found as `triggers` says; `renderer` None means the answer
    has nothing to load (missing or empty): every state is then recorded as not reached, with
    white captures."""
    files: dict[str, bytes | str] = {}
    replayed = []
    for interaction in interactions:
        trigger = _answer_trigger(interaction, triggers)
        if renderer is None:
            replayed.append(
                AnswerInteraction(
                    id=interaction.id,
                    trigger=trigger,
                    status="error",
                    trigger_matches=None,
                    acted=False,
                    error="no answer to load",
                )  # fmt: skip
            )
            continue
        replay, made = _replay_on_answer(
            renderer, answer, answer_dir, interaction, viewport, trigger
        )
        replayed.append(replay)
        files |= made
    shown = []
    for extra in viewports:
        size = Size(width=extra.width, height=extra.height)
        names = answer_viewport_files(extra.name)
        status: Status
        error: str | None
        if renderer is None:
            capture_png = _white(size)
            dom = DomRecord(viewport=size, page=size, texts=[], images=[])
            status, error = "error", "no answer to load"
        else:
            capture = _render_viewport(renderer, answer, answer_dir, extra)
            capture_png, dom = capture.viewport_png or _white(size), capture.dom
            status, error = capture.status, capture.error
        files[names["png"]] = capture_png
        files[names["dom"]] = dom.model_dump_json(indent=1) + "\n"
        shown.append(AnswerViewport(name=extra.name, width=extra.width, height=extra.height,
                                    status=status, error=error))  # fmt: skip
    for folder in ("states", "viewports"):
        if (out / folder).exists():
            shutil.rmtree(out / folder)
    for relative, content in files.items():
        _write(out / relative, content)
    states = AnswerStates(interactions=replayed, viewports=shown)
    # The render folder is `render/` of a run folder, where the run folder's reader finds it.
    atomic.write_json(out / Path(STATES.name).name, states.model_dump(mode="json"))
    return states
