"""The page builder: flow layout from a layout reply, and review findings folded in."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from veriharness.offline.page import (
    LayoutError,
    apply_line_offsets,
    apply_review,
    build_page,
    layout_elements,
)


def _line(text: str, y: int, size: float = 16.0, height: int = 16) -> dict:
    return {
        "text": text,
        "box": {"x": 20, "y": y, "width": 100, "height": height},
        "font_size_px": size,
        "colour": "#000000",
    }


LAYOUT: dict[str, Any] = {
    "width": 400,
    "height": 300,
    "background": "#ffffff",
    # Given out of order: the page must follow reading order.
    "text_lines": [_line("body two", 60), _line("Heading", 10, 32.0, 30), _line("body one", 40)],
    "image_regions": [],
}


def test_lines_stack_in_reading_order_with_margins_from_the_boxes() -> None:
    page = build_page(LAYOUT)
    assert page.index("Heading") < page.index("body one") < page.index("body two")
    # The heading's 32 px line box (centred on its 30 px ink at y=10) overlaps body one by a
    # pixel, so the two are stacked in one block with a negative margin rather than pushed.
    assert '<div class="stack" style="margin-top:9px;height:47px">' in page
    assert "margin:-1px 0 0 20px" in page
    assert "margin:4px 0 0 20px" in page  # body two: 60 - (40 + 16)
    assert "absolute" not in page and '"DejaVu Sans"' in page


def test_side_by_side_elements_become_columns_of_a_row() -> None:
    left = _line("left column", 40)
    right = dict(_line("right column", 44), box={"x": 300, "y": 44, "width": 80, "height": 16})
    page = build_page({**LAYOUT, "text_lines": [right, left]})
    row = page.index('class="row" style="margin-top:40px;height:20px"')
    assert row < page.index("left column") < page.index("right column")
    assert 'class="column" style="margin-left:20px;width:100px"' in page
    assert 'class="column" style="margin-left:180px;width:80px"' in page  # 300 - (20 + 100)
    assert "margin:4px 0 0 0px" in page  # right column: 44 - 40 inside its row


def test_regions_hold_the_elements_they_enclose() -> None:
    inside = dict(_line("Buy now", 108), box={"x": 30, "y": 108, "width": 60, "height": 14})
    region = {"box": {"x": 20, "y": 100, "width": 100, "height": 30}, "colour": "#4f46e5"}
    page = build_page({**LAYOUT, "text_lines": [inside], "image_regions": [region]})
    opening = page.index('<div class="figure" style="margin:100px 0 0 20px;width:100px;height:30px')
    assert opening < page.index("Buy now") < page.index("</div>", opening)
    assert "margin:7px 0 0 10px;font-size:16px;line-height:16px" in page  # centred on the ink


def test_line_height_is_never_below_the_font_size() -> None:
    small_ink = dict(_line("NEW: SYNC", 50, size=12.3, height=9))
    page = build_page({**LAYOUT, "text_lines": [small_ink]})
    # a 13 px line box centred on the 9 px ink box: its top is 2 px above the ink
    assert "margin:48px 0 0 20px;font-size:12.3px;line-height:13px;height:13px" in page


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
        ({"text_lines": [dict(_line("x", 1), nudge_y=1.5)]}, "text_lines[0].nudge_y must be an"),
        ({"text_lines": [dict(_line("x", 1), font_weight="900")]}, "text_lines[0].font_weight"),
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


def _offset(text: str, y: int, **measured: object) -> dict:
    base = {
        "text": text,
        "other_text": text,
        "reference_box": {"x": 20, "y": y, "width": 100, "height": 16},
        "dx": 0,
        "dy": 0,
        "width_ratio": 1.0,
        "reference_colour": "#000000",
        "other_colour": "#000000",
        "colour_difference": 0,
        "ink_ratio": 1.0,
    }
    return {**base, **measured}


def test_measured_offsets_become_nudges_sizes_and_colours() -> None:
    offsets = [
        _offset("body one", 40, dx=3, dy=-2.4, width_ratio=1.25),
        _offset(
            "body two",
            60,
            reference_colour="#203040",
            other_colour="#405060",
            colour_difference=32,
        ),
    ]
    fixed = apply_line_offsets(LAYOUT, offsets)
    heading, one, two = fixed["text_lines"][1], fixed["text_lines"][2], fixed["text_lines"][0]
    assert heading == LAYOUT["text_lines"][1]  # not measured: left alone
    assert (one["nudge_x"], one["nudge_y"], one["font_size_px"]) == (-3, 2, 20.0)
    assert two["colour"] == "#000000" and "nudge_x" not in two  # moved by -#202020, kept >= 0
    page = build_page(fixed)
    # 20 px box centred on the ink (40 - 2), nudged down 2: top 40, one px under the heading
    assert "margin:-1px 0 0 17px;font-size:20px;line-height:20px;height:20px" in page


def test_colour_correction_moves_by_the_measured_difference() -> None:
    layout = {**LAYOUT, "text_lines": [dict(_line("body one", 40), colour="#808080")]}
    drawn = _offset("body one", 40, reference_colour="#604020", other_colour="#706050")
    fixed = apply_line_offsets(layout, [dict(drawn, colour_difference=48)])
    assert fixed["text_lines"][0]["colour"] == "#706050"  # 0x80 + (0x60-0x70), ...
    small = apply_line_offsets(layout, [dict(drawn, colour_difference=8)])
    assert small["text_lines"][0]["colour"] == "#808080"


def test_heavier_reference_strokes_make_the_line_bold_without_double_widening() -> None:
    fixed = apply_line_offsets(LAYOUT, [_offset("Heading", 10, ink_ratio=1.4, width_ratio=1.13)])
    heading = fixed["text_lines"][1]
    # the 13 % the draft lacked is what bold adds, so the size stays
    assert heading["font_weight"] == "bold" and heading["font_size_px"] == 32.0
    assert "font-weight:bold" in build_page(fixed)
    back = apply_line_offsets(fixed, [_offset("Heading", 10, ink_ratio=0.7)])
    assert back["text_lines"][1]["font_weight"] == "normal"


def test_pairs_that_read_differently_or_match_no_line_are_not_acted_on() -> None:
    offsets = [
        _offset("body one", 40, other_text="BB body one", dx=-53),
        _offset("body three", 80, dx=5),
        _offset("body two", 61, dx=5),  # the layout's line is at y=60: a different line
    ]
    assert apply_line_offsets(LAYOUT, offsets) == LAYOUT


def test_review_applies_offsets_and_leaves_measured_colours_to_them() -> None:
    review = {
        "missing_text": [],
        "colour_shifts": [
            {"text": "body one", "reference_colour": "#ff0000", "draft_colour": "#000000"}
        ],
        "line_offsets": [_offset("body one", 40, dy=3)],
    }
    fixed = apply_review(LAYOUT, review)
    one = fixed["text_lines"][2]
    assert one["nudge_y"] == -3 and one["colour"] == "#000000"


def test_lines_measured_in_place_leave_the_layout_unchanged() -> None:
    in_place = [_offset("body one", 40, dx=0.4, dy=-0.5), _offset("Heading", 10, width_ratio=1.02)]
    assert apply_line_offsets(LAYOUT, in_place) == LAYOUT
