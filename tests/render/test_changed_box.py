"""Two different "changed regions" had one name (P-69): the render stage's box of every pixel an
action changed (`changed_box` in `states/states.json` and `render/states.json`: the marked copy,
whether the reference changed) and the score stage's Interaction2Code region (`changed_region`
of `score/metrics/interaction.py`, insertion-aware, what `region_*` compare). Render writes the
new name through the real command, in Chromium; files written before the rename still read."""

from __future__ import annotations

import json
from pathlib import Path

from render.test_states import INTERACTIONS, _answer, _render, _render_reference, _task
from veriharness.experiment.config import load_task
from veriharness.experiment.interactions import Box, ReferenceStates
from veriharness.render import states as render_states
from veriharness.runfolder.states import read_states
from veriharness.score.metrics import interaction as score_interaction

ROOT = Path(__file__).resolve().parents[2]


def test_the_two_definitions_have_two_names() -> None:
    assert "changed_box" in render_states.__all__
    assert not hasattr(render_states, "changed_region")
    assert "changed_region" in score_interaction.__all__
    assert not hasattr(score_interaction, "changed_box")


def test_render_writes_the_box_of_the_changed_pixels_as_changed_box(tmp_path: Path) -> None:
    task = _task(tmp_path, INTERACTIONS[:1])
    assert _render_reference(task).returncode == 0
    [written] = json.loads((task / "states" / "states.json").read_text())["interactions"]
    assert "changed_region" not in written
    assert written["changed_box"]["width"] > 0 and written["changed_pixels"] > 0
    out = tmp_path / "render"
    _render(_answer(tmp_path / "answer", True, True), task, out)
    [replayed] = json.loads((out / "states.json").read_text())["interactions"]
    assert "changed_region" not in replayed
    assert replayed["changed_box"] == written["changed_box"]  # the answer is the reference page


OLD_REFERENCE_STATE = {
    "id": "billing-monthly", "action": "click", "trigger": "#billing-monthly", "value": None,
    "trigger_box": {"x": 529, "y": 142, "width": 92, "height": 32},
    "changed_region": {"x": 529, "y": 142, "width": 539, "height": 230}, "changed_pixels": 8861,
}  # fmt: skip


def test_files_written_before_the_rename_still_read(tmp_path: Path) -> None:
    old = {"kind": "reference_states", "interactions": [OLD_REFERENCE_STATE], "viewports": []}
    states = ReferenceStates.model_validate_json(json.dumps(old))
    assert states.interactions[0].changed_box == Box(x=529, y=142, width=539, height=230)
    # The example tasks' committed states load as check-experiment loads them.
    assert load_task(ROOT / "tasks", "pricing-toggle").interactions

    run = tmp_path / "run"
    (run / "render").mkdir(parents=True)
    box = {"x": 1, "y": 2, "width": 3, "height": 4}
    answer = {"id": "billing-monthly", "status": "ok", "trigger_matches": 1, "acted": True,
              "changed_region": box, "changed_pixels": 12}  # fmt: skip
    (run / "render" / "states.json").write_text(
        json.dumps({"kind": "answer_states", "interactions": [answer], "viewports": []})
    )
    errors: list[str] = []
    read = read_states(run, errors)
    assert errors == [] and read is not None
    assert read.interactions[0].changed_box == Box(x=1, y=2, width=3, height=4)
