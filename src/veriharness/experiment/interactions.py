"""What a task states beyond its reference image: interactions and extra viewports (P-41).

A task's ``task.yaml`` may list ``interactions`` (each an id, the requirement the agent reads, an
action and the CSS selector of its trigger in ``reference.html``) and ``viewports`` (named extra
sizes for a responsive variant). ``render-reference`` replays each interaction on the reference
and renders each viewport, and records what it found in ``states/states.json``; a task whose
record is missing or was made from other interactions is refused (``check_reference_states``),
so an experiment never starts on a requirement nobody replayed.

Files a task folder gains (all written by ``render-reference``):

- ``states/<id>.png``: the reference after the interaction, at the task's viewport;
- ``states/<id>_marked.png``: the same with the trigger's box (blue) and the changed box (red);
- ``states/<id>_dom.json``: the after-state's DOM facts (the block metrics' input);
- ``viewports/<name>.png`` and ``viewports/<name>_dom.json``: the reference at that viewport;
- ``states/states.json``: the record below. Its ``changed_box`` is the box of every viewport
  pixel the action changed (``render.states.changed_box``); a record written before that name
  (P-69) says ``changed_region`` and reads the same. The score stage's changed region is another
  thing, Interaction2Code's (``score.metrics.interaction.changed_region``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "CHANGED_BOX_NAMES",
    "ACTIONS",
    "ACTIONS_WITH_VALUE",
    "Action",
    "Box",
    "ExtraViewport",
    "Interaction",
    "InteractionState",
    "ReferenceStates",
    "STATES_DIR",
    "STATES_RECORD",
    "VIEWPORTS_DIR",
    "check_reference_states",
    "interactions_text",
    "state_files",
    "viewport_files",
    "viewports_text",
    "workspace_files",
]

ACTIONS = ("click", "hover", "type", "select", "key")
ACTIONS_WITH_VALUE = ("type", "select", "key")
Action = Literal["click", "hover", "type", "select", "key"]
STATES_DIR = "states"
VIEWPORTS_DIR = "viewports"
STATES_RECORD = "states/states.json"
_ID = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"


class Interaction(BaseModel):
    """One explicit interaction requirement. ``value`` is the text typed (``type``), the option
    value chosen (``select``) or the key pressed (``key``, a Playwright key name); ``click`` and
    ``hover`` take none."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    id: str = Field(pattern=_ID)
    """The interaction's id: an answer marks its trigger with data-interaction="<id>"."""
    requirement: str = Field(min_length=1)
    """What the agent is told the page must do, in words."""
    action: Action
    """What is done to the trigger."""
    trigger: str = Field(
        min_length=1,
        description="CSS selector of the trigger in reference.html, as Playwright's locator "
        "reads it (its extensions such as :text-is() included)",
    )
    value: str | None = None
    """The text typed (type), the option value chosen (select) or the key pressed (key, a
    Playwright key name); click and hover take none."""

    @model_validator(mode="after")
    def _value_fits_action(self) -> Interaction:
        if self.action in ACTIONS_WITH_VALUE and not self.value:
            raise ValueError(f"action {self.action!r} needs a value")
        if self.action not in ACTIONS_WITH_VALUE and self.value is not None:
            raise ValueError(f"action {self.action!r} takes no value (got {self.value!r})")
        return self

    def answer_selector(self) -> str:
        """How the evaluation finds the trigger in an answer: the output contract's attribute."""
        return f'[data-interaction="{self.id}"]'


class ExtraViewport(BaseModel):
    """A further named size of a responsive task."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    name: str = Field(pattern=_ID)
    """The size's name (its captures are viewports/<name>.png)."""
    width: int = Field(ge=1)
    """Width in CSS pixels."""
    height: int = Field(ge=1)
    """Height in CSS pixels."""


# A states record's box of the changed pixels, read under its name before P-69 too.
CHANGED_BOX_NAMES = AliasChoices("changed_box", "changed_region")


class Box(BaseModel):
    """A rectangle in page pixels (left, top, width, height)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    x: int
    y: int
    width: int = Field(ge=0)
    height: int = Field(ge=0)


class InteractionState(BaseModel):
    """What replaying one interaction on the reference found."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    action: Action
    trigger: str
    value: str | None
    trigger_box: Box
    changed_box: Box = Field(validation_alias=CHANGED_BOX_NAMES)
    changed_pixels: int = Field(ge=1)

    def replays(self, interaction: Interaction) -> bool:
        return (self.id, self.action, self.trigger, self.value) == (
            interaction.id,
            interaction.action,
            interaction.trigger,
            interaction.value,
        )


class ReferenceStates(BaseModel):
    """``states/states.json``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["reference_states"] = "reference_states"
    interactions: tuple[InteractionState, ...] = ()
    viewports: tuple[ExtraViewport, ...] = ()


def state_files(interaction_id: str) -> dict[str, str]:
    """The task-relative files of one interaction's reference after-state."""
    return {
        "png": f"{STATES_DIR}/{interaction_id}.png",
        "marked": f"{STATES_DIR}/{interaction_id}_marked.png",
        "dom": f"{STATES_DIR}/{interaction_id}_dom.json",
    }


def viewport_files(name: str) -> dict[str, str]:
    return {"png": f"{VIEWPORTS_DIR}/{name}.png", "dom": f"{VIEWPORTS_DIR}/{name}_dom.json"}


def _read_states(folder: Path) -> ReferenceStates | str:
    path = folder / STATES_RECORD
    if not path.is_file():
        return f"{path} does not exist"
    try:
        return ReferenceStates.model_validate_json(path.read_bytes())
    except ValidationError as error:
        return f"{path} is not a reference-states record: {error.errors()[0]['msg']}"


def check_reference_states(
    folder: Path,
    task_id: str,
    interactions: tuple[Interaction, ...],
    viewports: tuple[ExtraViewport, ...],
) -> list[str]:
    """Problems that keep a task's interactions or viewports from being evaluated: each names
    the task, the interaction or viewport and the value. Empty for a static task."""
    if not interactions and not viewports:
        return []
    rerender = f"; replay it with `veriharness render-reference {folder}`"
    states = _read_states(folder)
    if isinstance(states, str):
        return [f"task {task_id!r}: {states}{rerender}"]
    recorded = {s.id: s for s in states.interactions}
    problems = []
    for interaction in interactions:
        state = recorded.get(interaction.id)
        if state is None or not state.replays(interaction):
            problems.append(
                f"task {task_id!r} interaction {interaction.id!r}: {interaction.action} on "
                f"{interaction.trigger!r} (value {interaction.value!r}) was not replayed on the "
                f"reference{rerender}"
            )
            continue
        missing = [f for f in state_files(interaction.id).values() if not (folder / f).is_file()]
        if missing:
            problems.append(
                f"task {task_id!r} interaction {interaction.id!r}: missing {missing}{rerender}"
            )
    shown = set(states.viewports)
    for viewport in viewports:
        files = viewport_files(viewport.name).values()
        if viewport not in shown or not all((folder / f).is_file() for f in files):
            problems.append(
                f"task {task_id!r} viewport {viewport.name!r} ({viewport.width}x"
                f"{viewport.height}) was not rendered from the reference{rerender}"
            )
    return problems


def workspace_files(
    interactions: tuple[Interaction, ...], viewports: tuple[ExtraViewport, ...]
) -> tuple[str, ...]:
    """The task-relative images a session's workspace gets, under the same relative paths: each
    interaction's after-state and its marked copy, each extra viewport's screenshot (never the
    DOM facts, which would tell the answer)."""
    files = []
    for interaction in interactions:
        names = state_files(interaction.id)
        files += [names["png"], names["marked"]]
    files += [viewport_files(viewport.name)["png"] for viewport in viewports]
    return tuple(files)


def _action_text(interaction: Interaction) -> str:
    if interaction.value is None:
        return interaction.action
    return f"{interaction.action} {interaction.value!r}"


def interactions_text(interactions: tuple[Interaction, ...]) -> str:
    """The `{{INTERACTIONS}}` value: one line per interaction, or "None."."""
    lines = []
    for interaction in interactions:
        names = state_files(interaction.id)
        requirement = " ".join(interaction.requirement.split())
        lines.append(
            f"- `{interaction.id}` ({_action_text(interaction)}): {requirement} After-state: "
            f"`{names['png']}`; marked copy: `{names['marked']}`."
        )
    return "\n".join(lines) or "None."


def viewports_text(viewports: tuple[ExtraViewport, ...]) -> str:
    """The `{{VIEWPORTS}}` value: one line per extra viewport, or "None."."""
    lines = [
        f"- `{v.name}`: {v.width} x {v.height} pixels, shown in `{viewport_files(v.name)['png']}`."
        for v in viewports
    ]
    return "\n".join(lines) or "None."
