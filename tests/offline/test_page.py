"""The page builder: flow layout from a layout reply, and review findings folded in."""

from __future__ import annotations

import copy

import pytest

from veriharness.offline.page import LayoutError, apply_review, build_page, layout_elements


def _line(text: str, y: int, size: float = 16.0, height: int = 16) -> dict:
    return {
        "text": text,
        "box": {"x": 20, "y": y, "width": 100, "height": height},
        "font_size_px": size,
        "colour": "#000000",
    }


LAYOUT = {
    "width": 400,
    "height": 300,
    "background": "#ffffff",
    # Given out of order: the page must follow reading order.
    "text_lines": [_line("body two", 60), _line("Heading", 10, 32.0, 30), _line("body one", 40)],
    "image_regions": [],
}


def test_lines_are_grouped_into_blocks_in_reading_order() -> None:
    page = build_page(LAYOUT)
    assert page.count("<section>") == 2  # the heading, then the two close body lines
    assert page.index("Heading") < page.index("body one") < page.index("body two")
    assert "margin:10px 0 0 20px" in page  # from the top edge
    assert "margin:4px 0 0 20px" in page  # body two: 60 - (40 + 16)


def test_elements_sorted_top_to_bottom() -> None:
    assert [e.text for e in layout_elements(LAYOUT)] == ["Heading", "body one", "body two"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"width": 0}, "width must be a positive integer, got 0"),
        ({"text_lines": "none"}, "text_lines must be a list"),
        ({"text_lines": [dict(_line("x", 1), colour="red")]}, "text_lines[0].colour"),
        ({"text_lines": [dict(_line("x", 1), font_size_px=0)]}, "text_lines[0].font_size_px"),
        ({"image_regions": [{"box": {"x": 1}, "colour": "#000000"}]}, "image_regions[0].box.y"),
    ],
)
def test_bad_layouts_name_the_field(change: dict, message: str) -> None:
    with pytest.raises(LayoutError) as error:
        build_page({**LAYOUT, **change})
    assert message in str(error.value)


def test_review_adds_missing_lines_and_fixes_colours_without_touching_the_input() -> None:
    before = copy.deepcopy(LAYOUT)
    review = {
        "missing_text": [_line("body three", 80), _line("Body One", 40)],  # 2nd already present
        "colour_shifts": [
            {"text": "heading", "reference_colour": "#aa0000", "draft_colour": "#000000"}
        ],
        "background_shift": {"reference_colour": "#eeeeee", "draft_colour": "#ffffff"},
    }
    fixed = apply_review(LAYOUT, review)
    assert LAYOUT == before
    assert [line["text"] for line in fixed["text_lines"]] == [
        "body two",
        "Heading",
        "body one",
        "body three",
    ]
    assert fixed["text_lines"][1]["colour"] == "#aa0000"
    assert fixed["background"] == "#eeeeee"
    assert apply_review(LAYOUT, {"missing_text": [], "colour_shifts": []}) == LAYOUT
