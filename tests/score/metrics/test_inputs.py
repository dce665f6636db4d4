"""Render-stage files are validated, and a bad one is named with its field and value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veriharness.score.metrics.inputs import DomFacts, InputError, RenderInfo, load_model


def test_a_wrong_status_names_the_file_field_and_value(tmp_path: Path) -> None:
    path = tmp_path / "render.json"
    path.write_text(
        json.dumps({"kind": "render", "status": "fine", "viewport": {"width": 1, "height": 1}})
    )
    with pytest.raises(InputError, match=r"render\.json: status: .*'fine'"):
        load_model(path, RenderInfo)


def test_missing_and_unparsable_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_model(tmp_path / "dom.json", DomFacts)
    (tmp_path / "dom.json").write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        load_model(tmp_path / "dom.json", DomFacts)


def test_a_text_colour_out_of_shape_is_refused(tmp_path: Path) -> None:
    size = {"width": 10, "height": 10}
    text = {"text": "a", "x": 0, "y": 0, "width": 1, "height": 1, "color": [1, 2]}
    path = tmp_path / "dom.json"
    path.write_text(json.dumps({"kind": "dom", "viewport": size, "page": size, "texts": [text]}))
    with pytest.raises(InputError, match=r"texts\.0\.color"):
        load_model(path, DomFacts)


def test_a_colour_channel_above_255_is_refused(tmp_path: Path) -> None:
    size = {"width": 10, "height": 10}
    text = {"text": "a", "x": 0, "y": 0, "width": 1, "height": 1, "color": [1, 2, 256]}
    path = tmp_path / "dom.json"
    path.write_text(json.dumps({"kind": "dom", "viewport": size, "page": size, "texts": [text]}))
    with pytest.raises(InputError, match=r"texts\.0\.color\.2.*256"):
        load_model(path, DomFacts)
