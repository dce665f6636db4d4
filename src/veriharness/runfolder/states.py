"""`render/states.json`: what replaying a task's interactions and viewports on the answer found.

Written by `render` for a task that states interactions or extra viewports (P-41), beside the
captures it lists: `render/states/<id>.png` (the answer after the action), `<id>_before.png`
(just before it), `<id>_dom.json`; `render/viewports/<name>.png` and `<name>_dom.json`. A static
task's render writes none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from veriharness.experiment.interactions import CHANGED_BOX_NAMES, Box
from veriharness.runfolder._files import JsonFile
from veriharness.runfolder.render import Status

__all__ = [
    "STATES",
    "STATES_NAME",
    "AnswerInteraction",
    "AnswerStates",
    "AnswerViewport",
    "answer_state_files",
    "answer_viewport_files",
    "read_states",
]

STATES_NAME = "render/states.json"


class AnswerInteraction(BaseModel):
    """One interaction replayed on the answer: its trigger (`trigger`, the selector the replay
    used) is the one element carrying `data-interaction="<id>"`, or for the task's own reference
    scored as an answer the task's selector. `changed_box` holds every viewport pixel the action
    changed (`changed_region` in a file written before P-69) and `changed_pixels` counts them."""

    id: str
    trigger: str | None = None
    status: Status
    trigger_matches: int | None
    acted: bool
    error: str | None = None
    trigger_box: Box | None = None
    changed_box: Box | None = Field(default=None, validation_alias=CHANGED_BOX_NAMES)
    changed_pixels: int = 0


class AnswerViewport(BaseModel):
    name: str
    width: int
    height: int
    status: Status
    error: str | None = None


class AnswerStates(BaseModel):
    kind: Literal["answer_states"] = "answer_states"
    interactions: list[AnswerInteraction]
    viewports: list[AnswerViewport]


STATES = JsonFile(STATES_NAME, AnswerStates)


def answer_state_files(interaction_id: str) -> dict[str, str]:
    """The render-folder-relative files of one interaction's answer states."""
    return {
        "png": f"states/{interaction_id}.png",
        "before": f"states/{interaction_id}_before.png",
        "dom": f"states/{interaction_id}_dom.json",
    }


def answer_viewport_files(name: str) -> dict[str, str]:
    return {"png": f"viewports/{name}.png", "dom": f"viewports/{name}_dom.json"}


def read_states(run_dir: Path, errors: list[str]) -> AnswerStates | None:
    """The run's replayed states, leniently (`_files`)."""
    return STATES.read(run_dir, errors)
