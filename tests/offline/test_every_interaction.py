"""The offline agent implements every interaction a task states, end to end: a task with two (a
click and typing into a field) in a copy of the project, its states replayed by the real
`render-reference`; one run through Snakemake (the real claude CLI in its sandbox, the offline
model, `render` replaying both interactions on the answer in Chromium, `score`), no report. The
run is of the condition with B3, where the agent's triggers are live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image

from support.cli import veriharness
from support.pipeline import snakemake
from support.project_copy import copy_project, git
from veriharness.offline.page import StateLayout, build_page
from veriharness.offline.pixel_facts import describe

pytestmark = pytest.mark.slow

TASK = "two-interactions"
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Newsletter</title><style>
body { margin: 0; font: 18px "DejaVu Sans", sans-serif; background: #f4f6fb; color: #1d2433; }
main { padding: 32px 48px; }
h1 { margin: 0 0 24px; font-size: 34px; }
button { font: inherit; padding: 10px 22px; border: 0; border-radius: 6px; background: #2d5be3;
         color: #fff; }
#details { margin-top: 20px; padding: 16px; background: #dfe7fb; }
label { display: block; margin-top: 28px; }
input { font: inherit; margin-top: 8px; padding: 8px; width: 320px; }
#greeting { margin-top: 14px; font-size: 22px; color: #2d5be3; min-height: 28px; }
</style></head><body><main>
<h1>Weekly newsletter</h1>
<button id="more">Show details</button>
<div id="details" hidden>One short e-mail every Monday. No tracking, unsubscribe any time.</div>
<label for="name">Your name</label>
<input id="name" placeholder="Name">
<p id="greeting"></p>
<script>
document.getElementById('more').addEventListener('click', () => {
  document.getElementById('details').hidden = false;
});
document.getElementById('name').addEventListener('input', (event) => {
  document.getElementById('greeting').textContent = 'Welcome, ' + event.target.value + '!';
});
</script>
</main></body></html>
"""
SPEC = {
    "id": TASK,
    "title": "A newsletter sign-up with details and a greeting",
    "kind": "signup_form",
    "description": "A newsletter box: a button that shows details, and a name field that greets.",
    "viewport": {"width": 800, "height": 480},
    "interactions": [
        {"id": "details", "requirement": "Clicking Show details reveals the details box.",
         "action": "click", "trigger": "#more"},
        {"id": "greet", "requirement": "Typing a name into the field shows a greeting.",
         "action": "type", "trigger": "#name", "value": "Ada"},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("every-interaction")
    config = {"experiment": "interactive", "tasks": [TASK], "external_answers": []}
    files = {
        f"tasks/{TASK}/task.yaml": yaml.safe_dump(SPEC, sort_keys=False),
        f"tasks/{TASK}/reference.html": PAGE,
        "config/test.yaml": yaml.safe_dump(config),
    }
    (root / "project").mkdir()
    project = copy_project(root / "project", [], files, "A task with two interactions")
    replayed = veriharness("render-reference", project / "tasks" / TASK, timeout=600)
    assert replayed.returncode == 0, replayed.stderr
    git(project, "add", "-A")
    git(project, "commit", "-qm", "Its reference and replayed states")
    run = Path("results/interactive/b3-present") / TASK / "r1"
    result = snakemake(project, "--cores", "2", str(run / "metrics.json"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return project / run


def test_the_session_ends_ok_with_one_trigger_per_interaction(run: Path) -> None:
    outcome = json.loads((run / "outcome.json").read_text())
    assert outcome["status"] == "ok" and outcome["offline"] is True
    answer = (run / "answer" / "answer.html").read_text()
    for interaction in ("details", "greet"):
        assert answer.count(f' data-interaction="{interaction}"') == 1, interaction


def test_render_replays_both_interactions_on_the_answer(run: Path) -> None:
    states = json.loads((run / "render" / "states.json").read_text())
    found = [(i["id"], i["trigger_matches"], i["acted"]) for i in states["interactions"]]
    assert found == [("details", 1, True), ("greet", 1, True)]
    assert all(i["changed_pixels"] > 0 for i in states["interactions"])


def test_both_interactions_are_implemented_and_scored(run: Path) -> None:
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["interactions_stated"] == 2
    scored = {i["id"]: i for i in metrics["interactions"]}
    assert list(scored) == ["details", "greet"]
    for interaction in scored.values():
        assert interaction["implemented"] is True
        for name in ("state_ssim", "state_text", "region_ssim", "trigger_position"):
            assert interaction[name] is not None, (interaction["id"], name)
    assert metrics["metrics"]["implement_rate"] == 1.0


OTHERS_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><style>
body { margin: 0; font: 20px "DejaVu Sans", sans-serif; background: #fff; color: #222; }
main { padding: 24px 40px; } p, label { margin: 0 0 18px; } [hidden] { display: none; }
label, button, select, input { display: block; }
button, select, input { font: inherit; } #tip:hover { color: #c00; }
</style></head><body><main>
<p id="tip">Hover for a tip</p>
<label>Language <select id="lang"><option value="py">Python</option>
<option value="php">PHP</option></select></label><p id="chosen"></p>
<label>Code <input id="code"></label><p id="sent"></p>
<script>
const on = (id, event, act) => document.getElementById(id).addEventListener(event, act);
const say = (id, text) => { document.getElementById(id).textContent = text; };
on('lang', 'change', (e) => say('chosen', 'You chose ' + e.target.value));
on('code', 'keydown', (e) => { if (e.key === 'Enter') say('sent', 'Code sent'); });
</script></main></body></html>
"""
OTHERS = [
    {"id": "tip", "requirement": "Hovering the tip turns it red.", "action": "hover",
     "trigger": "#tip"},
    {"id": "lang", "requirement": "Choosing PHP says so.", "action": "select", "trigger": "#lang",
     "value": "php"},
    {"id": "code", "requirement": "Enter in the code field sends it.", "action": "key",
     "trigger": "#code", "value": "Enter"},
]  # fmt: skip


def test_the_other_actions_are_wired_where_the_replay_finds_them(tmp_path: Path) -> None:
    """Without a session, the actions the run above does not take (hover, a choice, a key): the
    page the offline agent writes from the offline vision model's layouts of a task's reference
    and after-states, replayed by the real `render --task-dir` in Chromium; each finds its one
    trigger and changes the page."""
    task = tmp_path / "tasks" / "others"
    task.mkdir(parents=True)
    spec = {"id": "others", "title": "Three interactions", "kind": "form",
            "viewport": {"width": 640, "height": 560}, "interactions": OTHERS}  # fmt: skip
    (task / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (task / "reference.html").write_text(OTHERS_PAGE)
    replayed = veriharness("render-reference", task, timeout=600)
    assert replayed.returncode == 0, replayed.stderr

    def layout(name: str) -> dict[str, Any]:
        with Image.open(task / name) as image:
            return describe(image.convert("RGB"))

    states = [
        StateLayout(i["id"], i["action"], layout(f"states/{i['id']}.png"), i.get("value"))
        for i in OTHERS
    ]
    answer = tmp_path / "answer"
    answer.mkdir()
    (answer / "answer.html").write_text(build_page(layout("reference.png"), states=states))
    out = tmp_path / "render"
    rendered = veriharness("render", "--answer-dir", answer, "--reference", task / "reference.png",
                           "--out", out, "--task-dir", task, timeout=600)  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    found = json.loads((out / "states.json").read_text())["interactions"]
    assert [(i["id"], i["trigger_matches"], i["acted"]) for i in found] == [
        (i["id"], 1, True) for i in OTHERS
    ], found
    assert all(i["changed_pixels"] > 0 for i in found), found
