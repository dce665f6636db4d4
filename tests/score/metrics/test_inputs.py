"""Render-stage files are read whole through runfolder.render, and a bad one is named with its
field and value instead of being scored half-read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veriharness.score.metrics.inputs import InputError, read_dom, read_render

SIZE = {"width": 10, "height": 10}


def _dom_with_text(path: Path, **changed: object) -> Path:
    text = {
        "text": "a", "source": "text", "x": 0, "y": 0, "width": 1, "height": 1,
        "font_size_px": 16, "font_weight": 400, "color": [1, 2, 3], "positioning": "static",
        "pinned": False, **changed,
    }  # fmt: skip
    record = {"kind": "dom", "viewport": SIZE, "page": SIZE, "texts": [text], "images": []}
    path.write_text(json.dumps(record))
    return path


def test_a_wrong_status_names_the_file_field_and_value(tmp_path: Path) -> None:
    path = tmp_path / "render.json"
    path.write_text(json.dumps({"kind": "render", "status": "fine", "viewport": SIZE}))
    with pytest.raises(InputError, match=r"render\.json: status: .*'fine'"):
        read_render(path)


def test_missing_and_unparsable_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_dom(tmp_path / "dom.json")
    (tmp_path / "dom.json").write_text("{")
    with pytest.raises(InputError, match="invalid JSON"):
        read_dom(tmp_path / "dom.json")


def test_a_whole_file_reads_and_a_damaged_field_is_refused_not_dropped(tmp_path: Path) -> None:
    assert read_dom(_dom_with_text(tmp_path / "dom.json")).texts[0].area == 1
    with pytest.raises(InputError, match=r"texts\.0\.font_weight"):
        read_dom(_dom_with_text(tmp_path / "dom.json", font_weight="bold"))


def test_a_text_colour_out_of_shape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"texts\.0\.color"):
        read_dom(_dom_with_text(tmp_path / "dom.json", color=[1, 2]))


def test_a_colour_channel_above_255_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"texts\.0\.color\.2.*256"):
        read_dom(_dom_with_text(tmp_path / "dom.json", color=[1, 2, 256]))
