"""Interaction2Code's `action.json`, and its interactions as a task's explicit inputs (P-50).

A published page folder (`<n>/`) holds the screenshots of the page's states (`<k>.png`, with
marked copies) and `action.json`: `link`, `topic`, `framework`, and per interaction, keyed
"1", "2", ..., the states before and after it (`src`, `dst`), the action in words (`action`,
e.g. `click the "Sign up" button`), a `description` of the effect, and its tag and visual types.
It names no element of any HTML file (the set publishes none: the page is saved from `link`).

So the trigger is derived from the action's words: the verb gives the kind (click; hover, also
"move the cursor to"; type, with the typed text quoted first; select, `switch "A" option to "B"
option`), and the first quoted name the element, found in the rendered reference by its exact
text (`:text-is()`, Playwright's CSS extension, the smallest element showing it) or else by an
exact `aria-label`, `title`, `alt` or `placeholder`; for typing, only a form field by its
label attributes; for a select, the select with an option of that text. An entry may instead
give `selector`, used as is. Either way the trigger is kept only when replaying the action on
the reference finds exactly one element and changes the page; anything else is a
`SkippedInteraction` with its reason. An interaction that starts from the state another one
leads to (its `src` is that one's `dst`) is skipped `chained`: every interaction is replayed on
the page as loaded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from veriharness._util.hashing import sha256_file
from veriharness.experiment.config import SourceInteraction
from veriharness.experiment.interactions import Action, Interaction
from veriharness.experiment.task_set import SkippedInteraction
from veriharness.render.browser import Renderer
from veriharness.render.states import UnreplayableInteraction, replay_on_reference
from veriharness.runfolder.render import Size

__all__ = [
    "ACTIONS_FILE",
    "ActionsError",
    "Derived",
    "Imported",
    "PublishedInteraction",
    "derive",
    "import_interactions",
    "read_actions",
]

ACTIONS_FILE = "action.json"
_PAGE_KEYS = {"link", "topic", "framework"}


class ActionsError(ValueError):
    """An action.json that cannot be read; the message names the key and the value."""


class PublishedInteraction(BaseModel):
    """One numbered entry of action.json."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    src: str = Field(pattern=r"^[0-9]+$")
    dst: str = Field(pattern=r"^[0-9]+$")
    action: str | None = None
    description: str | None = None
    tag_type: tuple[str, ...] = Field(default=(), alias="tag type")
    visual_type: tuple[str, ...] = Field(default=(), alias="visual type")
    selector: str | None = Field(default=None, min_length=1)
    """Not published: a trigger selector into the saved page, given by whoever saved it."""


def _state(value: object) -> object:
    # The published files write the state numbers as strings; a number is the same state.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def read_actions(path: Path) -> dict[str, PublishedInteraction]:
    """The interactions of an action.json by key, in numeric order."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ActionsError(f"{path.name} cannot be read: {exc}") from None
    if not isinstance(raw, dict):
        raise ActionsError(f"{path.name} must hold an object (got {type(raw).__name__})")
    entries: dict[str, PublishedInteraction] = {}
    for key, value in raw.items():
        if key in _PAGE_KEYS:
            if value is not None and not isinstance(value, str):
                raise ActionsError(f"{path.name}: {key!r} must be text (got {value!r})")
            continue
        if not key.isdigit():
            raise ActionsError(f"{path.name}: unknown key {key!r} (value {value!r})")
        if not isinstance(value, dict):
            raise ActionsError(f"{path.name}: interaction {key!r} must be an object")
        try:
            entries[key] = PublishedInteraction.model_validate(
                {k: _state(v) if k in ("src", "dst") else v for k, v in value.items()}
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(entry)"
            raise ActionsError(
                f"{path.name}: interaction {key!r}: {where}: {first['msg']} "
                f"(got {first.get('input')!r})"
            ) from None
    return dict(sorted(entries.items(), key=lambda item: int(item[0])))


class Derived(NamedTuple):
    """What an action's words say: the kind, the typed text or chosen option, and the
    candidate selectors, tried in order until one finds an element; `looked_for` says what
    they look for (None for a selector given as is)."""

    action: Action
    value: str | None
    candidates: tuple[str, ...]
    looked_for: str | None


_QUOTED = re.compile(r"[\"“]([^\"“”]+)[\"”]")
_HOVER = ("hover", "move the cursor", "move the cursur", "move the mouse", "mouse over")
_TYPE = ("type", "enter", "input", "fill")
_SELECT = ("switch", "select", "choose", "change")


def _css_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_FIELDS = ':is(input, textarea, [contenteditable=""], [contenteditable="true"])'


def _labels(name: str, attributes: tuple[str, ...]) -> str:
    return ":is(" + ", ".join(f"[{a}={_css_string(name)}]" for a in attributes) + ")"


def _by_name(name: str) -> tuple[tuple[str, ...], str]:
    attributes = ("aria-label", "title", "alt", "placeholder")
    return (
        (f":text-is({_css_string(name)})", _labels(name, attributes)),
        f"shows the text {name!r} or has it as its aria-label, title, alt or placeholder",
    )


def _field(name: str) -> tuple[tuple[str, ...], str]:
    # Text is typed into a field, which shows no text of its own to be found by.
    attributes = ("aria-label", "title", "placeholder")
    return (
        (_FIELDS + _labels(name, attributes),),
        f"is a form field with the aria-label, title or placeholder {name!r}",
    )


def _select(option: str) -> tuple[tuple[str, ...], str]:
    return (
        (f"select:has(option:text-is({_css_string(option)}))",),
        f"is a select with an option {option!r}",
    )


def derive(entry: PublishedInteraction) -> Derived | tuple[str, str]:
    """The action, value and trigger candidates of an entry, or (reason, detail) when its
    words cannot be read as one of the project's actions on a named element."""
    words = " ".join((entry.action or "").split())
    if not words:
        return "no_action_text", "action.json gives no 'action' text to read the action from"
    lower = words.lower()
    quoted = [" ".join(q.split()) for q in _QUOTED.findall(words)]
    quoted = [q for q in quoted if q]
    action: Action
    value: str | None = None
    if lower.startswith("click"):
        action = "click"
    elif lower.startswith(_HOVER):
        action = "hover"
    elif lower.startswith(_TYPE) and len(quoted) >= 2:
        action, value, quoted = "type", quoted[0], quoted[1:]
    elif lower.startswith(_SELECT) and quoted:
        # `switch "A" option to "B" option`: the select showing A, set to B (by its label,
        # which the replay's select_option matches as it matches a value).
        action, value = "select", quoted[-1]
    else:
        return "unsupported_action", (
            f"{words!r} is not read as click, hover, type or select (with the text, field "
            "or options quoted); the project's actions are click, hover, type, select and key"
        )
    if entry.selector is not None:
        return Derived(action, value, (entry.selector,), None)
    if not quoted:
        return "no_trigger_name", (
            f"{words!r} names no element in quotes, so no trigger can be found in the page"
        )
    finders = {"type": _field, "select": _select}
    candidates, looked_for = finders.get(action, _by_name)(quoted[0])
    return Derived(action, value, candidates, looked_for)


class Imported(NamedTuple):
    interactions: list[Interaction]
    sources: list[SourceInteraction]
    skipped: list[SkippedInteraction]


def _requirement(entry: PublishedInteraction) -> str:
    return " ".join((entry.description or entry.action or "").split())


def _try(
    renderer: Renderer,
    folder: Path,
    task_id: str,
    interaction: Interaction,
    viewport: Size,
) -> UnreplayableInteraction | None:
    try:
        replay_on_reference(renderer, folder, task_id, interaction, viewport)
    except UnreplayableInteraction as refused:
        return refused
    return None


def _found(
    renderer: Renderer,
    folder: Path,
    task_id: str,
    key: str,
    entry: PublishedInteraction,
    derived: Derived,
    viewport: Size,
) -> Interaction | tuple[str, str]:
    """The first candidate that finds one element and changes the page, or why none does."""
    refused: UnreplayableInteraction | None = None
    for trigger in derived.candidates:
        interaction = Interaction(
            id=f"action-{key}",
            requirement=_requirement(entry),
            action=derived.action,
            trigger=trigger,
            value=derived.value,
        )
        refused = _try(renderer, folder, task_id, interaction, viewport)
        if refused is None:
            return interaction
        if refused.problem != "trigger_not_found":
            return refused.problem, refused.detail
    assert refused is not None
    if derived.looked_for is None:
        return refused.problem, refused.detail
    return "trigger_not_found", f"no element of reference.html {derived.looked_for}"


def import_interactions(
    renderer: Renderer,
    folder: Path,
    task_id: str,
    actions: Path,
    source: Path,
    viewport: Size,
) -> Imported:
    """Every interaction of `actions` that replays on `folder`'s reference.html, with where it
    came from; the others with their reasons. `source` is the set's source folder (the
    recorded paths are relative to it)."""
    page = actions.parent
    label = page.relative_to(source).as_posix()
    kept: list[Interaction] = []
    sources: list[SourceInteraction] = []
    skipped: list[SkippedInteraction] = []

    def skip(key: str, reason: str, detail: str) -> None:
        skipped.append(
            SkippedInteraction.model_validate(
                {"page": label, "interaction": key, "reason": reason, "detail": detail}
            )
        )

    entries = read_actions(actions)
    reached_by = {entry.dst: key for key, entry in entries.items()}
    for key, entry in entries.items():
        if reached_by.get(entry.src, key) != key:
            detail = (
                f"starts from state {entry.src}, which interaction {reached_by[entry.src]} leads "
                "to; an interaction is replayed on the page as loaded, not after another"
            )
            skip(key, "chained", detail)
            continue
        before, after = page / f"{entry.src}.png", page / f"{entry.dst}.png"
        absent = [p.name for p in (before, after) if not p.is_file()]
        if absent:
            skip(key, "missing_screenshot", f"no {' or '.join(absent)} in {label}")
            continue
        derived = derive(entry)
        if not isinstance(derived, Derived):
            skip(key, *derived)
            continue
        found = _found(renderer, folder, task_id, key, entry, derived, viewport)
        if not isinstance(found, Interaction):
            skip(key, *found)
            continue
        kept.append(found)
        sources.append(
            SourceInteraction(
                id=found.id,
                key=key,
                action=entry.action,
                before=before.relative_to(source).as_posix(),
                before_sha256=sha256_file(before),
                after=after.relative_to(source).as_posix(),
                after_sha256=sha256_file(after),
            )
        )
    return Imported(kept, sources, skipped)
