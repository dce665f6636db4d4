"""What an interactive or responsive task's agent receives (P-41): the interactive task module in
place of the static one, resolved to the task's requirements and image paths, the same in every
condition; the images copied into its workspace; static tasks untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from experiment.test_config import ROOT, make_project
from support.cli import veriharness
from support.interactions import replayed
from veriharness.agent.plan import _task_images
from veriharness.agent.workspace import create_workspace
from veriharness.experiment.config import ConditionSpec, ConfigError, ExperimentConfig, load_task
from veriharness.experiment.definition import cell_identity, cell_modules, load_definition
from veriharness.experiment.interactions import ExtraViewport

INTERACTIVE = "b2-image-to-code-interactive-v0.1"
OPEN = {
    "id": "open",
    "requirement": "Clicking Open shows\n  the panel.",
    "action": "click",
    "trigger": "#open",
}
SEARCH = {
    "id": "search",
    "requirement": "Typing shows matches.",
    "action": "type",
    "trigger": "input",
    "value": "ada",
}
PHONE = {"name": "phone", "width": 390, "height": 844}


def _project(tmp_path: Path) -> Path:
    root = make_project(tmp_path, commit=False)
    shutil.copy(ROOT / "prompts" / f"{INTERACTIVE}.md", root / "prompts")
    folder = root / "tasks" / "alpha"
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    spec |= {"interactions": [OPEN, SEARCH], "viewports": [PHONE]}
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    replayed(folder, [OPEN, SEARCH], [ExtraViewport(**PHONE)])
    return root


def _modules(identity: dict[str, object]) -> list[str]:
    prompts = identity["prompts"]
    assert isinstance(prompts, dict)
    return [m["id"] for m in prompts["modules"]]


def test_an_interactive_task_gets_the_interactive_module_resolved(tmp_path: Path) -> None:
    defn = load_definition(ExperimentConfig(allow_uncommitted=True), _project(tmp_path))
    absent, absent_prompt = cell_identity(defn, "b3-absent", "alpha")
    present, present_prompt = cell_identity(defn, "b3-present", "alpha")
    assert _modules(absent)[1] == INTERACTIVE and _modules(present)[1] == INTERACTIVE
    text = absent_prompt.text
    assert (
        "- `open` (click): Clicking Open shows the panel. After-state: `states/open.png`; "
        "marked copy: `states/open_marked.png`."
    ) in text
    assert "- `search` (type 'ada'): Typing shows matches." in text
    assert "- `phone`: 390 x 844 pixels, shown in `viewports/phone.png`." in text
    assert 'data-interaction="<id>"' in text and "{{" not in text
    # The conditions still differ by exactly the B3 block.
    assert present_prompt.text.startswith(absent_prompt.text.rstrip("\n"))
    b2 = next(m for m in absent_prompt.modules if m.id == INTERACTIVE)
    assert isinstance(b2.value, dict) and set(b2.value) == {
        "REFERENCE_IMAGE_PATH",
        "INTERACTIONS",
        "VIEWPORTS",
    }
    # A static task of the same experiment keeps the frozen module.
    static, _ = cell_identity(defn, "b3-absent", "beta")
    assert _modules(static)[1] == "b2-image-to-code-v0.1"


def test_a_task_with_viewports_only_says_none_for_interactions(tmp_path: Path) -> None:
    root = _project(tmp_path)
    folder = root / "tasks" / "alpha"
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    del spec["interactions"]
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    defn = load_definition(ExperimentConfig(allow_uncommitted=True), root)
    _, prompt = cell_identity(defn, "b3-absent", "alpha")
    assert "blue and the area that changed in red):\n\nNone.\n" in prompt.text


def test_a_condition_without_a_static_task_module_cannot_run_an_interactive_task(
    tmp_path: Path,
) -> None:
    task = load_task(_project(tmp_path) / "tasks", "alpha")
    condition = ConditionSpec(id="own", description="d", modules=("b1-callmllm-v0.1", "b2-mine"))
    with pytest.raises(ConfigError, match="condition 'own' lists no task module"):
        cell_modules(condition, task)


def test_the_workspace_gets_the_state_images_but_not_their_dom(tmp_path: Path) -> None:
    folder = _project(tmp_path) / "tasks" / "alpha"
    images = _task_images(folder)
    assert sorted(images) == [
        "states/open.png",
        "states/open_marked.png",
        "states/search.png",
        "states/search_marked.png",
        "viewports/phone.png",
    ]
    project = tmp_path / "project"
    workspace = create_workspace(
        tmp_path / "ws", project, folder / "reference.png", "c-alpha-r1", images=images
    )
    found = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*.*"))
    assert found == ["reference.png", *sorted(images)]
    assert _task_images(project / "tasks" / "beta") == {}


def test_check_experiment_refuses_an_interaction_that_was_not_replayed(tmp_path: Path) -> None:
    root = _project(tmp_path)
    folder = root / "tasks" / "alpha"
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    spec["interactions"][0]["trigger"] = "#elsewhere"
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    done = veriharness(
        "check-experiment", "--config", root / "config" / "config.yaml", "--project-root", root,
        "--out", tmp_path / "experiment.json", "--allow-uncommitted", timeout=300,
    )  # fmt: skip
    assert done.returncode != 0 and not (tmp_path / "experiment.json").exists()
    assert (
        "task 'alpha' interaction 'open': click on '#elsewhere' (value None) was not replayed"
        in done.stderr
    )
