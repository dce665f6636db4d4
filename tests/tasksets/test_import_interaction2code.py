"""`veriharness import-tasks interaction2code` on a fixture in the published layout, through
real Chromium: each page's action.json interactions become the task's explicit interactions,
replayed on the saved page; what cannot be is listed with its reason; `check-experiment` takes
the set."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from PIL import Image

from support.cli import veriharness
from tasksets.published_layouts import I2C_REMOTE_URL, I2C_SCREENSHOT, write_interaction2code
from tasksets.set_checks import check_set, hashed_files, read_manifest, run_import, sha256_of
from veriharness.experiment.config import load_task
from veriharness.experiment.interactions import ReferenceStates
from veriharness.tasksets.interaction2code import Derived, PublishedInteraction, derive

TYPED_FIELD = (
    ':is(input, textarea, [contenteditable=""], [contenteditable="true"])'
    ':is([aria-label="Search"], [title="Search"], [placeholder="Search"])'
)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("i2c")
    source, dest = write_interaction2code(base / "dataset"), base / "sets" / "i2c-sample"
    options = ("--width", "800", "--height", "500")
    return run_import("interaction2code", source, dest, *options), source, dest


def test_pages_with_a_replayable_interaction_become_tasks(imported) -> None:
    proc, _, dest = imported
    assert proc.returncode == 1, proc.stderr
    assert "2 of 5 page(s) imported" in proc.stdout
    assert "3 skipped (1 no_interactions, 1 no_page_html, 1 remote_resources)" in proc.stdout
    assert (
        "5 interaction(s) imported; 7 skipped (1 chained, 2 no_change, 1 trigger_ambiguous, "
        "2 trigger_not_found, 1 unsupported_action)"
    ) in proc.stdout
    manifest = read_manifest(dest)
    assert manifest["tasks"] == ["1", "2"]
    skipped = {s["page"]: (s["reason"], s["detail"]) for s in manifest["skipped"]}
    assert skipped["3"] == ("remote_resources", f"loads {I2C_REMOTE_URL}")
    assert skipped["4"][0] == "no_page_html" and "link" in skipped["4"][1]
    assert skipped["5"] == (
        "no_interactions",
        "none of its interactions replays on the saved page (1: no_change)",
    )
    assert sorted(p.name for p in dest.iterdir()) == ["1", "2", "manifest.yaml"]


def test_every_interaction_left_out_is_listed_with_its_reason(imported) -> None:
    proc, _, dest = imported
    listed = {
        (s["page"], s["interaction"]): (s["reason"], s["detail"])
        for s in read_manifest(dest)["skipped_interactions"]
    }
    assert {key: reason for key, (reason, _) in listed.items()} == {
        ("1", "3"): "trigger_not_found",
        ("1", "4"): "unsupported_action",
        ("1", "5"): "no_change",
        ("2", "2"): "trigger_ambiguous",
        ("2", "4"): "trigger_not_found",
        ("2", "6"): "chained",
        ("5", "1"): "no_change",
    }
    assert listed[("2", "6")][1] == (
        "starts from state 9, which interaction 5 leads to; an interaction is replayed on the "
        "page as loaded, not after another"
    )
    assert "'Newsletter'" in listed[("1", "3")][1]
    assert "'Drag the progress bar'" in listed[("1", "4")][1]
    assert ':text-is("More")\' matches 2 elements' in listed[("2", "2")][1]
    assert "trigger selector '#filters' matches 0 elements" in listed[("2", "4")][1]
    assert listed[("1", "5")][1] == "the action changes nothing on the reference"
    for (page, key), (reason, _) in listed.items():
        assert f"skipped interaction {key} of {page}: {reason}" in proc.stderr


def test_the_interactions_are_explicit_inputs_replayed_on_the_saved_page(imported) -> None:
    _, source, dest = imported
    first, second = load_task(dest, "1"), load_task(dest, "2")
    assert [(i.id, i.action, i.trigger, i.value) for i in first.interactions] == [
        ("action-1", "click", ':text-is("Dark mode")', None),
        ("action-2", "hover", ':text-is("Pricing")', None),
    ]
    assert [(i.id, i.action, i.trigger, i.value) for i in second.interactions] == [
        # Not the page's heading "Search": text is typed into a field, found by its placeholder.
        ("action-1", "type", TYPED_FIELD, "hello"),
        # The action's words name no element; the entry's own selector is used as is.
        ("action-3", "click", "#go", None),
        ("action-5", "select", 'select:has(option:text-is("Python"))', "PHP"),
    ]
    assert first.interactions[0].requirement == "the page turns dark"
    # The published screenshots' size is no viewport (they were taken at several device scales).
    assert (first.viewport.width, first.viewport.height) == (800, 500) != I2C_SCREENSHOT
    states = ReferenceStates.model_validate_json((dest / "1/states/states.json").read_text())
    assert [s.id for s in states.interactions] == ["action-1", "action-2"]
    with (
        Image.open(dest / "1/reference.png") as before,
        Image.open(dest / "1/states/action-1.png") as after,
    ):
        # The click turned the page dark.
        assert before.size == after.size == (800, 500)
        assert before.convert("RGB").getpixel((700, 450)) == (255, 255, 255)
        assert after.convert("RGB").getpixel((700, 450)) == (34, 34, 34)
    assert (dest / "1" / "site.css").read_bytes() == (source / "1" / "site.css").read_bytes()
    assert (dest / "2/reference.html").read_bytes() == (source / "2/page.html").read_bytes()


def test_the_manifest_and_tasks_record_the_source_files_by_sha256(imported) -> None:
    _, source, dest = imported
    manifest = read_manifest(dest)
    assert manifest["files"] == hashed_files(dest)
    used = {
        "1": ["0.png", "1.png", "2.png", "3.png", "action.json", "index.html", "site.css"],
        "2": ["0.png", "1.png", "4.png", "5.png", "8.png", "9.png", "action.json", "page.html"],
    }
    assert manifest["source_files"] == {
        f"{page}/{name}": sha256_of(source / page / name)
        for page, names in used.items()
        for name in names
    }
    task = yaml.safe_load((dest / "2" / "task.yaml").read_text())["source"]
    assert task["actions"] == "2/action.json"
    assert task["actions_sha256"] == sha256_of(source / "2" / "action.json")
    assert [(i["id"], i["key"], i["before"], i["after"]) for i in task["interactions"]] == [
        ("action-1", "1", "2/0.png", "2/1.png"),
        ("action-3", "3", "2/4.png", "2/5.png"),
        ("action-5", "5", "2/8.png", "2/9.png"),
    ]
    assert task["interactions"][1]["after_sha256"] == sha256_of(source / "2" / "5.png")


def test_check_experiment_takes_the_interactive_set_and_refuses_a_changed_state(
    imported, tmp_path: Path
) -> None:
    dest = tmp_path / "i2c-sample"
    shutil.copytree(imported[2], dest)
    code, stderr, record = check_set(tmp_path, dest)
    assert code == 0, stderr
    assert record is not None and record["task_ids"] == ["1", "2"]
    assert record["task_set"]["source_layout"] == "interaction2code"
    assert record["task_set"]["files_verified"] == len(hashed_files(dest))

    # An after-state the agent is shown, replaced after the import.
    shutil.copyfile(dest / "2" / "reference.png", dest / "2" / "states" / "action-3.png")
    code, stderr, record = check_set(tmp_path, dest)
    assert code == 2 and record is None
    assert "changed since import: 2/states/action-3.png" in stderr


def test_a_source_that_is_not_a_folder_of_pages_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "flat"
    source.mkdir()
    (source / "1.html").write_text("<h1>Flat</h1>")
    proc = veriharness("import-tasks", "interaction2code", source, tmp_path / "out")
    assert proc.returncode == 2
    assert f"source {source} holds no page folder (layout interaction2code)" in proc.stderr


@pytest.mark.parametrize(
    ("words", "selector", "expected"),
    [
        ('click on the "登录" button', None, ("click", None, ':text-is("登录")')),
        ('move the cursor to the "Nigeria" tag', None, ("hover", None, ':text-is("Nigeria")')),
        ("type “Ada” in the “Name” field", None, ("type", "Ada", ":is(input, textarea")),
        ("click to the play button", "video", ("click", None, "video")),
        ("click to the play button", None, "no_trigger_name"),
        ('switch "Python" option to "PHP" option', None, ("select", "PHP", "select:has(")),
        ("Drag the progress bar", None, "unsupported_action"),
        ("", None, "no_action_text"),
    ],
)
def test_the_action_words_give_the_kind_and_the_trigger(
    words: str, selector: str | None, expected: tuple[str, str | None, str] | str
) -> None:
    entry = PublishedInteraction.model_validate(
        {"src": "0", "dst": "1", "action": words, "selector": selector}
    )
    derived = derive(entry)
    if isinstance(expected, str):
        assert not isinstance(derived, Derived) and derived[0] == expected
    else:
        assert isinstance(derived, Derived)
        kind, value, start = expected
        assert (derived.action, derived.value) == (kind, value)
        assert derived.candidates[0].startswith(start)


def test_a_bad_action_json_skips_its_page_naming_the_key(tmp_path: Path) -> None:
    source = write_interaction2code(tmp_path / "dataset")
    actions = source / "1" / "action.json"
    entries = json.loads(actions.read_text())
    entries["2"]["src"] = "before"
    actions.write_text(json.dumps(entries))
    for page in ("2", "3", "4", "5"):
        shutil.rmtree(source / page)
    proc = run_import("interaction2code", source, tmp_path / "set")
    assert proc.returncode == 2
    assert (
        "skipped 1: bad_action_json: action.json: interaction '2': src: String should match "
        "pattern '^[0-9]+$' (got 'before')"
    ) in proc.stderr
