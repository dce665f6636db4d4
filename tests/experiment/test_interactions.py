"""Interactions and extra viewports in task.yaml: the model, its refusals, and the check that a
task's interactions were replayed on its reference (P-41)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image

from support.interactions import replayed
from veriharness.experiment.config import ConfigError, load_task, read_task_spec
from veriharness.experiment.interactions import (
    ExtraViewport,
    Interaction,
    check_reference_states,
)
from veriharness.runfolder.render import DomRecord, Size

CLICK = {
    "id": "open",
    "requirement": "Clicking Open shows the panel.",
    "action": "click",
    "trigger": "#open",
}


def _task(tmp_path: Path, **extra: Any) -> Path:
    folder = tmp_path / "tasks" / "alpha"
    folder.mkdir(parents=True, exist_ok=True)
    data = {"id": "alpha", "title": "A", "kind": "k", "viewport": {"width": 64, "height": 48}}
    (folder / "task.yaml").write_text(yaml.safe_dump(data | extra))
    Image.new("RGB", (64, 48), "white").save(folder / "reference.png")
    (folder / "reference.html").write_text("<button id=open>Open</button>")
    size = Size(width=64, height=48)
    dom = DomRecord(viewport=size, page=size, texts=[], images=[])
    (folder / "reference_dom.json").write_text(dom.model_dump_json())
    return folder


def test_a_static_task_has_no_interactions_and_keeps_its_null_field(tmp_path: Path) -> None:
    folder = _task(tmp_path, interaction=None)
    spec = load_task(folder.parent, "alpha")
    assert (spec.interactions, spec.viewports, spec.interactive) == ((), (), False)
    assert check_reference_states(folder, "alpha", (), ()) == []


def test_the_old_free_text_field_is_refused_by_name(tmp_path: Path) -> None:
    folder = _task(tmp_path, interaction="Clicking the switch toggles the prices.")
    with pytest.raises(ConfigError, match=r"'interaction' \(value 'Clicking the switch"):
        read_task_spec(folder, "alpha")


def test_an_unknown_field_is_refused_by_name(tmp_path: Path) -> None:
    folder = _task(tmp_path, interactons=[CLICK])
    with pytest.raises(ConfigError, match="interactons: Extra inputs are not permitted"):
        read_task_spec(folder, "alpha")


def test_an_unknown_action_is_refused_naming_task_interaction_and_value(tmp_path: Path) -> None:
    folder = _task(tmp_path, interactions=[CLICK | {"action": "swipe"}])
    with pytest.raises(ConfigError) as refused:
        read_task_spec(folder, "alpha")
    assert "task 'alpha' interaction 'open': unknown action 'swipe'" in str(refused.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"action": "type"}, "action 'type' needs a value"),
        ({"value": "x"}, "action 'click' takes no value \\(got 'x'\\)"),
        ({"trigger": ""}, "interactions.0.trigger"),
        ({"id": "has space"}, "interactions.0.id"),
        ({"requirement": ""}, "interactions.0.requirement"),
    ],
)
def test_a_malformed_interaction_is_refused(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    folder = _task(tmp_path, interactions=[CLICK | change])
    with pytest.raises(ConfigError, match=message):
        read_task_spec(folder, "alpha")


def test_repeated_interaction_ids_and_viewport_names_are_refused(tmp_path: Path) -> None:
    folder = _task(tmp_path, interactions=[CLICK, CLICK | {"trigger": "#other"}])
    with pytest.raises(ConfigError, match=r"interactions repeat the id\(s\) \['open'\]"):
        read_task_spec(folder, "alpha")
    phone = {"name": "phone", "width": 390, "height": 844}
    folder = _task(tmp_path, viewports=[phone, phone | {"width": 360}])
    with pytest.raises(ConfigError, match=r"viewports repeat the name\(s\) \['phone'\]"):
        read_task_spec(folder, "alpha")


def test_an_interaction_not_replayed_on_the_reference_is_refused(tmp_path: Path) -> None:
    folder = _task(tmp_path, interactions=[CLICK])
    with pytest.raises(ConfigError, match=r"task 'alpha': .*states\.json does not exist"):
        load_task(folder.parent, "alpha")
    replayed(folder, [CLICK])
    spec = load_task(folder.parent, "alpha")
    assert spec.interactions == (Interaction(**CLICK),) and spec.interactive
    # task.yaml edited after the replay: the record no longer vouches for the interaction.
    _task(tmp_path, interactions=[CLICK | {"trigger": ".open"}])
    with pytest.raises(ConfigError) as refused:
        load_task(folder.parent, "alpha")
    assert "task 'alpha' interaction 'open': click on '.open' (value None) was not replayed" in str(
        refused.value
    )


def test_a_replayed_interaction_missing_its_state_image_is_refused(tmp_path: Path) -> None:
    folder = _task(tmp_path, interactions=[CLICK])
    replayed(folder, [CLICK])
    (folder / "states" / "open.png").unlink()
    with pytest.raises(ConfigError, match=r"interaction 'open': missing \['states/open.png'\]"):
        load_task(folder.parent, "alpha")


def test_an_extra_viewport_must_be_rendered_from_the_reference(tmp_path: Path) -> None:
    phone = {"name": "phone", "width": 390, "height": 844}
    folder = _task(tmp_path, viewports=[phone])
    replayed(folder, [], [ExtraViewport(**phone | {"width": 360})])
    with pytest.raises(ConfigError, match=r"viewport 'phone' \(390x844\) was not rendered"):
        load_task(folder.parent, "alpha")
    replayed(folder, [], [ExtraViewport(**phone)])
    assert load_task(folder.parent, "alpha").viewports == (ExtraViewport(**phone),)


def test_an_interactive_task_needs_a_reference_page(tmp_path: Path) -> None:
    folder = _task(tmp_path, interactions=[CLICK])
    (folder / "reference.html").unlink()
    with pytest.raises(ConfigError, match="replayed on reference.html"):
        load_task(folder.parent, "alpha")


def test_the_answer_carries_the_trigger_by_its_id() -> None:
    assert Interaction(**CLICK).answer_selector() == '[data-interaction="open"]'
