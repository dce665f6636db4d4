"""Design2Code's block detection on hand-made captures (the agreement with Design2Code's own
figures is in test_design2code.py)."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw

from veriharness.score.metrics.d2cblocks import SHIFT, detect_blocks, recoloured_pixels


def _captures() -> tuple[Image.Image, Image.Image, Image.Image]:
    """A 100 x 50 page with two texts: navy ink at (10..29, 5..14) and teal at (50..89, 30..39);
    recoloured they are (250, 250, 250) and (250, 250, 234); a grey bar (60..99, 0..2) that the
    recolouring does not touch."""
    page = Image.new("RGB", (100, 50), "white")
    first = Image.new("RGB", (100, 50), "white")
    second = Image.new("RGB", (100, 50), "white")
    for image, colours in (
        (page, ((0, 0, 128), (0, 128, 128))),
        (first, ((250, 250, 250), (250, 250, 234))),
        (second, ((44, 44, 44), (44, 44, 28))),
    ):
        draw = ImageDraw.Draw(image)
        draw.rectangle((10, 5, 29, 14), fill=colours[0])
        draw.rectangle((50, 30, 89, 39), fill=colours[1])
        draw.rectangle((60, 0, 99, 2), fill=(128, 128, 128))
    return page, first, second


def test_only_pixels_shifted_by_the_recolouring_count() -> None:
    _, first, second = _captures()
    shifted = recoloured_pixels(first, second)
    assert shifted.sum() == 20 * 10 + 40 * 10
    assert not shifted[0, 70]  # the grey bar is the same in both captures
    assert SHIFT == 50


def test_each_text_gets_the_box_and_original_colour_of_its_pixels() -> None:
    texts = [("  Hello ", (250, 250, 250)), ("", (1, 2, 3)), ("WORLD", (250, 250, 234))]
    hello, world = detect_blocks(*_captures(), texts)
    assert hello.text == "hello" and hello.nodes == (0,)
    assert (hello.x, hello.y, hello.width, hello.height) == pytest.approx((0.1, 0.1, 0.2, 0.2))
    assert hello.color == (0.0, 0.0, 128.0)
    assert world.text == "world" and world.nodes == (2,)
    assert (world.x, world.y, world.width, world.height) == pytest.approx((0.5, 0.6, 0.4, 0.2))
    assert world.color == (0.0, 128.0, 128.0)


def test_a_text_whose_colour_shows_nowhere_is_missed() -> None:
    assert detect_blocks(*_captures(), [("lost", (10, 10, 10))]) == []


def test_captures_of_different_sizes_are_refused() -> None:
    page, first, second = _captures()
    with pytest.raises(ValueError, match="differ in size"):
        detect_blocks(page, first, second.resize((100, 60)), [])
