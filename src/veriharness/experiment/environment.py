"""Environment facts: what a session's machine really offers, as values of the facts module.

Design notes:

- The facts module (``prompts/env-facts-v<N>.md``, slot ``env``) holds the words; this module
  gives its placeholders their values for one cell: the Chromium that `find_chromium` finds (the
  program the render stage uses too), the task's viewport, and the session's network setting.
  The values enter the resolved prompt, so they are part of the cell's identity: a run told
  another program path or another network is another run.
- Only what the session can use is stated. Under ``agent.isolation: bwrap`` the sandbox shows the
  system folders below and nothing else of the machine's software outside Python's prefixes, so a
  Chromium outside them is refused here rather than named to a session that cannot run it.
- The viewport is the task's, and must equal the reference image's size: the render stage
  captures at that size (D-0017), and a fact that disagrees with it would mislead.
- Values are computed only when a module asks for them (`PromptValues` is a lazy mapping), so a
  condition without the facts module never needs Chromium at prepare time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Literal

from PIL import Image
from pydantic import BaseModel, ConfigDict

from veriharness._util.programs import MissingTool, find_chromium
from veriharness.experiment.config import AgentSettings, TaskSpec
from veriharness.experiment.prompts import PromptError

__all__ = [
    "SYSTEM_PATHS",
    "NETWORK_VALUES",
    "FACT_NAMES",
    "CHROMIUM_PLACEHOLDER",
    "EnvironmentFacts",
    "PromptValues",
    "software_paths",
    "sandbox_shows",
    "environment_facts",
]

# Read-only system folders the sandbox binds when present (`/bin`, `/lib` are often links into
# `/usr`); agent.isolation uses this list to build the sandbox.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc", "/opt")

# The value of {{NETWORK}} per agent.network: what a command run in the session can reach.
NETWORK_VALUES: dict[Literal["none", "open"], str] = {
    "none": "none; commands run in this session cannot reach the internet or another machine",
    "open": "the machine's own network, not restricted by the harness",
}
FACT_NAMES = ("CHROMIUM", "VIEWPORT_WIDTH", "VIEWPORT_HEIGHT", "NETWORK")
CHROMIUM_PLACEHOLDER = FACT_NAMES[0]


class EnvironmentFacts(BaseModel):
    """The facts of one cell, one field per placeholder of the facts module."""

    model_config = ConfigDict(frozen=True)
    chromium: str
    viewport_width: int
    viewport_height: int
    network: Literal["none", "open"]

    def values(self) -> dict[str, str]:
        return {
            "CHROMIUM": self.chromium,
            "VIEWPORT_WIDTH": str(self.viewport_width),
            "VIEWPORT_HEIGHT": str(self.viewport_height),
            "NETWORK": NETWORK_VALUES[self.network],
        }


class PromptValues(Mapping[str, str]):
    """Placeholder values: `fixed` ones, and the environment facts, computed on first use."""

    def __init__(self, fixed: Mapping[str, str], facts: Callable[[], EnvironmentFacts]) -> None:
        self._fixed = dict(fixed)
        self._facts = facts
        self._resolved: dict[str, str] | None = None

    def __getitem__(self, name: str) -> str:
        if name in self._fixed:
            return self._fixed[name]
        if name in FACT_NAMES:
            if self._resolved is None:
                self._resolved = self._facts().values()
            return self._resolved[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter([*self._fixed, *FACT_NAMES])

    def __len__(self) -> int:
        return len(self._fixed) + len(FACT_NAMES)

    def __contains__(self, name: object) -> bool:
        return name in self._fixed or name in FACT_NAMES


def software_paths(project: Path) -> list[Path]:
    """Python's prefixes, for programs the agent may run; none that lies in the project."""
    project = project.resolve()
    prefixes = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    return sorted(p for p in prefixes if p != project and project not in p.parents)


def sandbox_shows(path: Path, project: Path) -> bool:
    """Whether the session's sandbox shows `path` (as given and as its links resolve)."""
    roots = [Path(p) for p in SYSTEM_PATHS] + software_paths(project)
    return all(
        any(candidate.is_relative_to(root) for root in roots)
        for candidate in (path.absolute(), path.resolve())
    )


def environment_facts(
    agent: AgentSettings, task: TaskSpec, task_dir: Path, project: Path
) -> EnvironmentFacts:
    """The facts of a cell; a PromptError names the placeholder that cannot be given a true
    value, and why."""
    try:
        chromium = find_chromium()
    except MissingTool as missing:
        raise PromptError(
            f"environment fact {{{{CHROMIUM}}}} cannot be resolved: {missing}"
        ) from None
    if agent.isolation == "bwrap" and not sandbox_shows(chromium, project):
        raise PromptError(
            f"environment fact {{{{CHROMIUM}}}} cannot be resolved: Chromium at {chromium} "
            f"(really {chromium.resolve()}) is outside what a session's sandbox shows "
            f"({', '.join(SYSTEM_PATHS)} and Python's prefixes); point VERIHARNESS_CHROMIUM at a "
            "Chromium under one of them, or run sessions with agent.isolation: none"
        )
    reference = task_dir / "reference.png"
    with Image.open(reference) as image:
        size = image.size
    viewport = (task.viewport.width, task.viewport.height)
    if size != viewport:
        raise PromptError(
            f"environment facts {{{{VIEWPORT_WIDTH}}}}, {{{{VIEWPORT_HEIGHT}}}} cannot be "
            f"resolved: task {task.id!r} has viewport {viewport[0]}x{viewport[1]} in "
            f"{task_dir / 'task.yaml'}, but its reference.png is {size[0]}x{size[1]}; the "
            "answer is rendered at the reference's size, so the two must agree"
        )
    return EnvironmentFacts(
        chromium=str(chromium),
        viewport_width=viewport[0],
        viewport_height=viewport[1],
        network=agent.network,
    )
