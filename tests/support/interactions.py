"""A task folder as `render-reference` leaves it for interactions and viewports, without a
browser (for tests of what reads the record)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veriharness.experiment.interactions import (
    Box,
    Interaction,
    InteractionState,
    ReferenceStates,
    state_files,
    viewport_files,
)


def replayed(folder: Path, interactions: list[dict[str, Any]], viewports: Any = ()) -> None:
    """What render-reference leaves for these interactions (the files' contents do not matter
    to the check)."""
    states = []
    for item in interactions:
        spec = Interaction(**item)
        states.append(
            InteractionState(
                id=spec.id,
                action=spec.action,
                trigger=spec.trigger,
                value=spec.value,
                trigger_box=Box(x=0, y=0, width=10, height=10),
                changed_box=Box(x=0, y=0, width=20, height=20),
                changed_pixels=400,
            )
        )
        for name in state_files(spec.id).values():
            (folder / name).parent.mkdir(exist_ok=True)
            (folder / name).write_bytes(b"x")
    for viewport in viewports:
        for name in viewport_files(viewport.name).values():
            (folder / name).parent.mkdir(exist_ok=True)
            (folder / name).write_bytes(b"x")
    record = ReferenceStates(interactions=tuple(states), viewports=tuple(viewports))
    (folder / "states").mkdir(exist_ok=True)
    (folder / "states" / "states.json").write_text(record.model_dump_json())
