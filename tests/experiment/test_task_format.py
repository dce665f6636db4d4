"""docs/task-format.md is generated from the task models and kept in step with them."""

from __future__ import annotations

from support.cli import ROOT
from veriharness.experiment.config import TaskSpec
from veriharness.experiment.task_format import TASK_FORMAT_FILE, task_format_markdown


def test_the_committed_task_format_page_is_the_one_the_models_generate() -> None:
    committed = (ROOT / TASK_FORMAT_FILE).read_text(encoding="utf-8")
    assert committed == task_format_markdown(), (
        "docs/task-format.md is stale: python -m veriharness.experiment.task_format --write"
    )


def test_the_page_names_every_field_its_default_and_allowed_values() -> None:
    page = task_format_markdown()
    for name in TaskSpec.model_fields:
        assert f"| `{name}` |" in page
    assert "| `action` | text | required | `click`, `hover`, `type`, `select`, `key` |" in page
    assert "| `width` | whole number | required | at least 1 |" in page
    assert "written `{width: 1280, height: 800}`" in page
    assert '| `description` | text | `""` |' in page
