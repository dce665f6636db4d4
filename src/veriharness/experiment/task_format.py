"""The task format's reference page, `docs/task-format.md`.

The page is generated from the pydantic models of `task.yaml` (`experiment.config.TaskSpec` and
the models it holds), the one place a field, its type, its default, its allowed values and its
description (the field's docstring) are written, as the config schema is generated from the
config models. `python -m veriharness.experiment.task_format --write` regenerates the page after
a model changes, and a test fails while the committed page differs from what the models give.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from veriharness.experiment.config import SourceInteraction, TaskSource, TaskSpec, Viewport
from veriharness.experiment.config_schema import generated_file_main
from veriharness.experiment.interactions import ExtraViewport, Interaction
from veriharness.experiment.json_schema import plain_schema

__all__ = ["TASK_FORMAT_FILE", "task_format_markdown"]

TASK_FORMAT_FILE = Path("docs/task-format.md")

# Each model of task.yaml, where it sits in the file.
_SECTIONS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("task.yaml", TaskSpec),
    ("viewport", Viewport),
    ("interactions[]", Interaction),
    ("viewports[]", ExtraViewport),
    ("source", TaskSource),
    ("source.interactions[]", SourceInteraction),
)

_HEAD = """\
<!-- Generated from the pydantic models of task.yaml (TaskSpec in
src/veriharness/experiment/config.py and the models it holds); do not edit.
Regenerate: python -m veriharness.experiment.task_format --write -->

# The task format: `tasks/<id>/task.yaml`

A task is a folder of the experiment's `tasks_dir` (default `tasks/`), named by the task's id:

- `task.yaml` (required): the fields below;
- `reference.png` (required): the reference screenshot at the task's `viewport`, what the agent
  is given;
- `reference.html` and its `assets/` (optional): the reference page; without it the task is
  screenshot-only and gets no block metrics;
- `reference_dom.json` (required with `reference.html`): the reference's DOM facts, written by
  `veriharness render-reference tasks/<id>`, which writes `reference.png` too;
- `states/` and `viewports/` (required with `interactions` or `viewports`): the reference after
  each interaction and at each extra size, written by `render-reference` (docs/decisions.md P-41).

A static task:

```yaml
id: pricing-table
title: Three-plan pricing table
kind: pricing_table
description: >
  A pricing section with a monthly/yearly switch and three plan cards side by side.
viewport: {width: 1280, height: 800}
```

An interactive one adds, for example:

```yaml
interactions:
  - id: billing-monthly
    requirement: >
      Clicking "Monthly" in the billing switch selects it and shows the monthly prices.
    action: click
    trigger: "#billing-monthly"
viewports:
  - {name: phone, width: 390, height: 844}
```

`veriharness check` checks every task of an experiment (and the workflow's start does the same),
naming each mistake with its file, field, value and what is expected. Every model forbids keys it
does not list.
"""


def _type(node: dict[str, Any]) -> str:
    if "enum" in node:
        return "text"
    if "anyOf" in node:
        return " or ".join(_type(option) for option in node["anyOf"])
    kinds = node.get("type")
    names = {
        "string": "text",
        "integer": "whole number",
        "number": "number",
        "boolean": "true/false",
        "null": "null",
        "object": "mapping",
        "array": "list",
    }
    listed = kinds if isinstance(kinds, list) else [kinds]
    words = []
    for kind in listed:
        if kind == "array" and isinstance(node.get("items"), dict):
            items = node["items"]
            below = " (below)" if items.get("properties") else ""
            words.append(f"list of {_type(items).removesuffix(' (below)')}s{below}")
        elif kind == "object" and node.get("properties"):
            words.append("mapping (below)")
        else:
            words.append(names.get(str(kind), str(kind)))
    return " or ".join(words)


def _allowed(node: dict[str, Any]) -> str:
    if "enum" in node:
        return ", ".join(f"`{value}`" for value in node["enum"])
    if "anyOf" in node:
        return "; ".join(a for a in map(_allowed, node["anyOf"]) if a)
    parts = []
    if isinstance(node.get("pattern"), str):
        marks = "`_`, `.` or `-`" if "_." in node["pattern"] else "`_` or `-`"
        parts.append(f"an id: letters, digits, {marks}, starting with a letter or a digit")
    elif node.get("minLength"):
        parts.append("non-empty")
    if "minimum" in node:
        parts.append(f"at least {node['minimum']}")
    if node.get("type") == "null":
        parts.append("only `null`")
    return "; ".join(parts)


def _default(model: type[BaseModel], name: str) -> str:
    field = model.model_fields[name]
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return f"`{json.dumps(value if value != () else [])}`"


def _section(where: str, model: type[BaseModel]) -> list[str]:
    schema = plain_schema(model, {})
    doc = " ".join((model.__doc__ or "").split())
    lines = [f"## `{where}`", ""]
    if where != "task.yaml" and doc:
        lines += [doc.replace("``", "`"), ""]
    lines += [
        "| field | type | default | allowed values | what |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, node in schema.get("properties", {}).items():
        what = " ".join(str(node.get("description") or "").split()).replace("|", "\\|")
        lines.append(
            f"| `{name}` | {_type(node)} | {_default(model, name)} | {_allowed(node)} | {what} |"
        )
    return [*lines, ""]


def task_format_markdown() -> str:
    """The page's text, as committed."""
    lines = [_HEAD]
    for where, model in _SECTIONS:
        lines += _section(where, model)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    return generated_file_main(__doc__, TASK_FORMAT_FILE, task_format_markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
