"""Pixel measurements: line pairing with offsets, size, colour and weight; split columns."""

from __future__ import annotations

from offline_images import channel_distance
from PIL import Image, ImageDraw, ImageFont

from veriharness.offline.pixel_facts import compare, describe

FONTS = "/usr/share/fonts/truetype/dejavu/"
LINE = "Harbour weather report"
OTHER = "Winds are calm along the coast"


def _page(
    at: tuple[int, int] = (40, 60),
    size: int = 24,
    bold: bool = False,
    colour: str = "#1f3a93",
) -> Image.Image:
    image = Image.new("RGB", (560, 240), "#ffffff")
    draw = ImageDraw.Draw(image)
    face = ImageFont.truetype(FONTS + ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"), size)
    draw.text(at, LINE, font=face, fill=colour)
    draw.text((40, 160), OTHER, font=ImageFont.truetype(FONTS + "DejaVuSans.ttf", 18), fill="#333")
    return image


def _pair(review: dict, text: str) -> dict:
    (pair,) = [p for p in review["line_offsets"] if p["text"] == text]
    return pair


def test_identical_pages_pair_every_line_with_no_offset() -> None:
    review = compare(_page(), _page())
    assert [p["text"] for p in review["line_offsets"]] == [LINE, OTHER]
    for pair in review["line_offsets"]:
        assert (pair["dx"], pair["dy"]) == (0, 0)
        assert pair["width_ratio"] == pair["height_ratio"] == pair["ink_ratio"] == 1.0
        assert pair["colour_difference"] == 0


def test_offsets_are_the_draft_minus_the_reference() -> None:
    pair = _pair(compare(_page(), _page(at=(52, 53))), LINE)
    assert (pair["dx"], pair["dy"]) == (12, -7)
    assert pair["width_ratio"] == 1.0
    assert _pair(compare(_page(), _page(at=(52, 53))), OTHER)["dy"] == 0


def test_size_colour_and_weight_differences_are_measured() -> None:
    smaller = _pair(compare(_page(size=24), _page(size=20)), LINE)
    assert 1.15 < smaller["width_ratio"] < 1.25  # 24 / 20, up to rounding of ink edges
    recoloured = _pair(compare(_page(), _page(colour="#b03030")), LINE)
    assert recoloured["colour_difference"] == channel_distance(
        recoloured["reference_colour"], recoloured["other_colour"]
    )
    assert recoloured["colour_difference"] > 100
    heavier = _pair(compare(_page(bold=True), _page()), LINE)
    assert heavier["ink_ratio"] > 1.2
    lighter = _pair(compare(_page(), _page(bold=True)), LINE)
    assert lighter["ink_ratio"] < 1 / 1.2


def test_a_line_missing_from_the_draft_is_not_paired() -> None:
    draft = _page()
    ImageDraw.Draw(draft).rectangle((0, 140, 559, 239), fill="#ffffff")
    review = compare(_page(), draft)
    assert [p["text"] for p in review["line_offsets"]] == [LINE]
    assert [line["text"] for line in review["missing_text"]] == [OTHER]


def test_words_far_apart_on_one_baseline_are_separate_lines() -> None:
    image = Image.new("RGB", (640, 120), "#ffffff")
    draw = ImageDraw.Draw(image)
    face = ImageFont.truetype(FONTS + "DejaVuSans.ttf", 18)
    draw.text((40, 40), "Product catalogue", font=face, fill="#000000")
    draw.text((420, 40), "Pricing plans", font=face, fill="#000000")
    lines = describe(image)["text_lines"]
    assert [line["text"] for line in lines] == ["Product catalogue", "Pricing plans"]
    assert lines[1]["box"]["x"] >= 420
    # DejaVu metrics turn ink height back into the size drawn, within a pixel
    assert all(abs(line["font_size_px"] - 18) <= 1.5 for line in lines)
