"""Interactions replayed in Debian's Chromium through the `veriharness` command: on a task's
reference (`render-reference`, which refuses what it cannot replay) and on an answer (`render
--task-dir`, which records what it found). Real pages, real files, real clicks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image

from support.cli import veriharness
from veriharness.experiment.config import load_task
from veriharness.experiment.interactions import ReferenceStates
from veriharness.render.states import changed_box
from veriharness.runfolder.states import AnswerStates

# A switch that shows the yearly price when clicked; the hover box turns red under the mouse.
PAGE = """<!DOCTYPE html><html><head><style>
body { margin: 0; font: 16px sans-serif; background: #fff; }
button { margin: 20px; padding: 8px 16px; }
#price { margin: 20px; font-size: 40px; }
.hint { width: 80px; height: 40px; margin: 20px; background: #ccc; }
.hint:hover { background: #c00; }
</style></head><body>
<button {attr_yearly}>Yearly</button><button class="also">Other</button>
<p id="price">$30</p>
<div class="hint" {attr_hover}></div>
<input {attr_name} placeholder="Name">
<script>
const yearly = document.querySelector('{yearly}');
if (yearly) yearly.addEventListener('click',
  () => { document.getElementById('price').textContent = '$300'; });
</script></body></html>"""

INTERACTIONS = [
    {"id": "yearly", "requirement": "Clicking Yearly shows the yearly price.",
     "action": "click", "trigger": "#yearly"},
    {"id": "hint", "requirement": "Hovering the grey box turns it red.",
     "action": "hover", "trigger": ".hint"},
    {"id": "name", "requirement": "Typing into the field shows the text.",
     "action": "type", "trigger": "input", "value": "Ada"},
]  # fmt: skip
VIEWPORTS = [{"name": "narrow", "width": 200, "height": 300}]


def _reference_page() -> str:
    return (
        PAGE.replace("{attr_yearly}", 'id="yearly"')
        .replace("{attr_hover}", "")
        .replace("{attr_name}", "")
        .replace("{yearly}", "#yearly")
    )


def _task(root: Path, interactions: list[dict[str, Any]], viewports: Any = ()) -> Path:
    folder = root / "tasks" / "switch"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "id": "switch",
        "title": "A price switch",
        "kind": "pricing_table",
        "viewport": {"width": 400, "height": 300},
        "interactions": interactions,
        "viewports": list(viewports),
    }
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    (folder / "reference.html").write_text(_reference_page())
    return folder


def _render_reference(folder: Path) -> subprocess.CompletedProcess[str]:
    return veriharness("render-reference", folder, timeout=600)


def test_render_reference_replays_each_interaction_and_viewport(tmp_path: Path) -> None:
    folder = _task(tmp_path, INTERACTIONS, VIEWPORTS)
    result = _render_reference(folder)
    assert result.returncode == 0, result.stderr
    record = ReferenceStates.model_validate_json((folder / "states/states.json").read_text())
    assert [s.id for s in record.interactions] == ["yearly", "hint", "name"]
    by_id = {s.id: s for s in record.interactions}
    # The click changed the price below the button (and not the button: no focus ring), the
    # hover the box, typing the field.
    price, button = by_id["yearly"].changed_box, by_id["yearly"].trigger_box
    assert price.y > button.y + button.height
    assert by_id["hint"].changed_box == by_id["hint"].trigger_box
    assert by_id["name"].changed_box.y >= by_id["name"].trigger_box.y
    with Image.open(folder / "states/hint.png") as after:
        box = by_id["hint"].trigger_box
        assert after.convert("RGB").getpixel((box.x + 40, box.y + 20)) == (204, 0, 0)
    with Image.open(folder / "reference.png") as before:
        assert before.convert("RGB").getpixel((box.x + 40, box.y + 20)) == (204, 204, 204)
    with Image.open(folder / "states/yearly_marked.png") as marked:
        trigger = by_id["yearly"].trigger_box
        assert marked.convert("RGB").getpixel((trigger.x, trigger.y + 5)) == (37, 99, 235)
    with Image.open(folder / "viewports/narrow.png") as narrow:
        assert narrow.size == (200, 300)
    # What check-experiment reads: the task loads with its replayed interactions.
    assert len(load_task(folder.parent, "switch").interactions) == 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"trigger": "#missing"}, "trigger selector '#missing' matches 0 elements"),
        ({"trigger": "button"}, "trigger selector 'button' matches 2 elements"),
        ({"trigger": ".also"}, "the action changes nothing on the reference"),
        ({"trigger": "p[", "id": "bad"}, "interaction 'bad' (click on 'p['"),
    ],
)
def test_render_reference_refuses_an_interaction_naming_it(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    folder = _task(tmp_path, [INTERACTIONS[0] | change])
    result = _render_reference(folder)
    assert result.returncode == 2
    name = change.get("id", "yearly")
    assert f"task 'switch' interaction '{name}'" in result.stderr
    assert message in result.stderr, result.stderr
    assert not (folder / "states").exists() and not (folder / "reference.png").exists()


def _answer(folder: Path, marked: bool, works: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    html = (
        PAGE.replace("{attr_yearly}", 'data-interaction="yearly"' if marked else "")
        .replace("{attr_hover}", 'data-interaction="hint"' if marked else "")
        .replace("{attr_name}", 'data-interaction="name"' if marked else "")
        .replace("{yearly}", "[data-interaction=yearly]" if works else "#nothing")
    )
    (folder / "answer.html").write_text(html)
    return folder


def _render(answer: Path, task: Path, out: Path) -> AnswerStates:
    result = veriharness(
        "render",
        "--answer-dir",
        answer,
        "--reference",
        task / "reference.png",
        "--out",
        out,
        "--task-dir",
        task,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "render.json").read_text())["status"] == "ok"
    return AnswerStates.model_validate_json((out / "states.json").read_text())


def test_render_replays_the_interactions_on_the_answer(tmp_path: Path) -> None:
    task = _task(tmp_path, INTERACTIONS, VIEWPORTS)
    assert _render_reference(task).returncode == 0
    good = _render(_answer(tmp_path / "good", True, True), task, tmp_path / "good-render")
    assert [(i.id, i.trigger_matches, i.acted) for i in good.interactions] == [
        ("yearly", 1, True),
        ("hint", 1, True),
        ("name", 1, True),
    ]
    assert all(i.changed_pixels > 0 for i in good.interactions)
    # The answer is the reference's page with the contract's attribute: same after-states.
    for state in ("yearly", "hint", "name"):
        after = (tmp_path / f"good-render/states/{state}.png").read_bytes()
        assert changed_box((task / f"states/{state}.png").read_bytes(), after) is None
    assert [(v.name, v.status) for v in good.viewports] == [("narrow", "ok")]
    with Image.open(tmp_path / "good-render/viewports/narrow.png") as narrow:
        assert narrow.size == (200, 300)

    unmarked = _render(_answer(tmp_path / "plain", False, True), task, tmp_path / "plain-render")
    assert [(i.trigger_matches, i.acted) for i in unmarked.interactions] == [(0, False)] * 3
    assert [i.changed_pixels for i in unmarked.interactions] == [0, 0, 0]

    dead = _render(_answer(tmp_path / "dead", True, False), task, tmp_path / "dead-render")
    yearly = dead.interactions[0]
    assert (yearly.trigger_matches, yearly.acted, yearly.changed_pixels) == (1, True, 0)
