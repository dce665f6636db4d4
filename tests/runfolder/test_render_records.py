"""render/render.json and render/dom.json through their run-folder module."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.runfolder.render import (
    DOM,
    RENDER,
    DomRecord,
    ImageBox,
    RenderRecord,
    Size,
    TextBox,
    Timings,
    read_dom,
    read_render,
)


def _render() -> RenderRecord:
    return RenderRecord(
        status="ok",
        viewport=Size(width=800, height=600),
        page=Size(width=800, height=900),
        full_page=True,
        timings=Timings(load_ms=10.0, capture_ms=5.0),
        blocked_requests=[],
        console_errors=[],
        page_errors=[],
        error=None,
        answer_sha256="sha256:00",
    )


def _dom() -> DomRecord:
    text = TextBox(
        text="Hello", source="text", x=1, y=2, width=30, height=10, font_size_px=12,
        font_weight=400, color=(0, 0, 0), positioning="static", pinned=False,
    )  # fmt: skip
    image = ImageBox(
        kind="img", src="assets/a.png", x=0, y=0, width=5, height=5, natural_width=5,
        natural_height=5,
    )  # fmt: skip
    return DomRecord(
        viewport=Size(width=800, height=600),
        page=Size(width=800, height=900),
        texts=[text],
        images=[image],
    )


def test_what_render_wrote_reads_back_equal(tmp_path: Path) -> None:
    (tmp_path / "render").mkdir()
    RENDER.write(tmp_path, _render())
    DOM.write(tmp_path, _dom())
    errors: list[str] = []
    assert read_render(tmp_path, errors) == _render()
    assert read_dom(tmp_path, errors) == _dom()
    assert errors == []


def test_a_field_of_the_wrong_type_is_dropped_and_named(tmp_path: Path) -> None:
    (tmp_path / "render").mkdir()
    render = _render().model_dump(mode="json")
    render["dialogs_dismissed"] = "two"
    (tmp_path / "render" / "render.json").write_text(json.dumps(render))
    dom = _dom().model_dump(mode="json")
    dom["texts"][0]["x"] = "left"
    (tmp_path / "render" / "dom.json").write_text(json.dumps(dom))
    errors: list[str] = []
    read = read_render(tmp_path, errors)
    assert read is not None and read.dialogs_dismissed == 0
    facts = read_dom(tmp_path, errors)
    assert facts is not None and facts.texts == []  # the box without its x goes, not the file
    assert errors[0].startswith("render/render.json: dialogs_dismissed: ")
    assert errors[1].startswith("render/dom.json: texts.0.x: ")
    assert errors[2] == "render/dom.json: texts.0: dropped (x: Field required)"


def test_absent_and_broken_files_are_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_render(tmp_path, errors) is None
    (tmp_path / "render").mkdir()
    (tmp_path / "render" / "dom.json").write_text("{")
    assert read_dom(tmp_path, errors) is None
    assert errors[0] == "render/render.json: absent"
    assert errors[1].startswith("render/dom.json: invalid JSON")
