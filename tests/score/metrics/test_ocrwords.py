"""OCR as scoring uses it: real tesseract on drawn images, the merge of readings, the mask and
the on-disk cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy import ndimage

from veriharness._util import tesseract_cache
from veriharness._util.ocr import Box, OcrWord
from veriharness.score.metrics.ocrpasses import (
    MIN_CONFIDENCE,
    flat_panels,
    ink_images,
    merge_readings,
    plausible_word,
    strokes_removed,
    tesseract_words,
)
from veriharness.score.metrics.ocrwords import (
    OCR_VERSION,
    cached_ocr_words,
    masked,
    ocr_words,
    reference_ocr_words,
)
from veriharness.score.metrics.text import words_of

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


def _sign(path: Path) -> Path:
    image = Image.new("RGB", (360, 60), "white")
    ImageDraw.Draw(image).text(
        (10, 15), "Quiet harbour lights", font=ImageFont.truetype(FONT, 24), fill=0
    )
    image.save(path)
    return path


def test_words_are_read_with_boxes_in_original_pixels(tmp_path: Path) -> None:
    words = ocr_words(Image.open(_sign(tmp_path / "sign.png")))
    assert [w.text for w in words] == ["Quiet", "harbour", "lights"]
    assert all(0 <= w.box.x < 360 and 0 <= w.box.y < 60 for w in words)
    assert 5 <= words[0].box.x <= 20 and words[-1].box.x + words[-1].box.width <= 360


def test_masked_keeps_only_the_boxes() -> None:
    image = Image.new("RGB", (10, 10), (0, 0, 0))
    pixels = np.asarray(masked(image, [(2, 3, 4, 2)]))
    assert (pixels[3:5, 2:6] == 0).all()
    assert pixels.sum() == (100 - 8) * 3 * 255


def test_the_cache_returns_the_same_words_and_ignores_a_different_tesseract(tmp_path: Path) -> None:
    sign = _sign(tmp_path / "sign.png")
    cache = tmp_path / "cache"
    first = cached_ocr_words(sign, cache)
    (entry,) = cache.glob(f"*.{OCR_VERSION}.json")
    assert cached_ocr_words(sign, cache) == first
    stored = json.loads(entry.read_text())
    stored["program"], stored["words"] = "sha256:another-tesseract", []
    entry.write_text(json.dumps(stored))
    assert cached_ocr_words(sign, cache) == first  # stale entry is a miss, and is rewritten
    rewritten = json.loads(entry.read_text())
    assert rewritten["program"] == tesseract_cache.program_identity()
    assert rewritten["tesseract"].startswith("tesseract ")


def _sidebar() -> Image.Image:
    """Grey labels on a dark sidebar, white text on a coloured button, a dot before a heading."""
    image = Image.new("RGB", (420, 120), "white")
    draw = ImageDraw.Draw(image)
    small, heading = ImageFont.truetype(FONT, 14), ImageFont.truetype(FONT, 15)
    draw.rectangle((0, 0, 200, 120), fill=(15, 23, 42))
    draw.text((16, 20), "Orders", font=small, fill=(148, 163, 184))
    draw.text((16, 60), "Reports", font=small, fill=(148, 163, 184))
    draw.rounded_rectangle((230, 20, 400, 56), radius=8, fill=(99, 102, 241))
    draw.text((250, 30), "Save changes", font=small, fill="white")
    draw.ellipse((232, 84, 242, 94), fill=(79, 70, 229))
    draw.text((250, 80), "Backlinks", font=heading, fill=(30, 30, 60))
    return image


def test_the_merged_reading_finds_light_text_the_single_reading_misses() -> None:
    image = _sidebar()
    single = words_of(w.text for w in ocr_words(image))
    merged = words_of(w.text for w in reference_ocr_words(image))
    assert sorted(merged) == ["backlinks", "changes", "orders", "reports", "save"]
    assert "reports" not in single  # what the second reading is for
    assert reference_ocr_words(image) == reference_ocr_words(image)  # deterministic


def test_contrast_image_draws_any_text_dark_on_white() -> None:
    contrast = np.asarray(ink_images(_sidebar())["contrast"])
    assert (contrast[5:15, 5:195] == 255).all()  # dark panel, no text: white
    assert (contrast[5:15, 215:415] == 255).all()  # white page: white
    assert contrast[30:50, 250:390].min() < 60  # white text on the button: dark ink
    assert contrast[60:80, 16:80].min() < 100  # grey text on the dark panel: dark ink


def _word(text: str, box: tuple[int, int, int, int], confidence: float = 95.0) -> OcrWord:
    return OcrWord(text, Box(*box), confidence, (1, 1, 1))


def test_shapes_read_as_characters_are_not_words() -> None:
    assert not plausible_word(_word("e", (0, 0, 10, 10)))  # a filled dot
    assert not plausible_word(_word("O", (0, 0, 17, 17)))  # a radio button
    assert not plausible_word(_word("6", (0, 0, 44, 24)))  # a toggle switch
    assert not plausible_word(_word("oro", (0, 0, 20, 3)))  # a rule
    assert not plausible_word(_word("Orders", (0, 0, 50, 12), MIN_CONFIDENCE - 1))
    for text, box in [("a", (0, 0, 8, 9)), ("I", (0, 0, 3, 12)), ("3", (0, 0, 8, 12))]:
        assert plausible_word(_word(text, box))
    assert plausible_word(_word("$0", (0, 0, 12, 9)))  # wide only because of the sign


def test_merge_keeps_one_reading_per_overlapping_group() -> None:
    grey = [_word("Signin", (100, 10, 50, 15), 80.0), _word("Pricing", (10, 10, 60, 15))]
    contrast = [
        _word("Sign", (100, 10, 30, 15), 96.0),
        _word("in", (135, 10, 15, 15), 95.0),
        _word("Pricing", (11, 10, 60, 15), 90.0),
        _word("Reports", (10, 60, 60, 15), 90.0),  # only this reading saw it
    ]
    merged = merge_readings([grey, contrast])
    assert [w.text for w in merged] == ["Pricing", "Sign", "in", "Reports"]
    assert merged[0].confidence == 95.0  # the grey reading won the Pricing group
    # More text read outweighs a slightly higher confidence on a fragment.
    longer = merge_readings(
        [[_word("ember,", (30, 0, 40, 8), 96.7)], [_word("December,", (10, 0, 64, 11), 96.2)]]
    )
    assert [w.text for w in longer] == ["December,"]


def test_a_tie_goes_to_the_first_reading() -> None:
    first, second = _word("same", (0, 0, 30, 10), 90.0), _word("sane", (0, 0, 30, 10), 90.0)
    assert merge_readings([[first], [second]]) == [first]
    assert merge_readings([[second], [first]]) == [second]


def _struck_through() -> Image.Image:
    """Grey text with a 1 px line through its middle, as CSS line-through draws it, on a dark
    card; and a thick bar, which is not a stroke."""
    image = Image.new("RGB", (420, 110), (30, 41, 59))
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, 14)
    draw.text((20, 20), "Custom domains", font=font, fill=(100, 116, 139))
    left, top, right, bottom = draw.textbbox((20, 20), "Custom domains", font=font)
    middle = (top + bottom) // 2 + 1
    draw.line((left, middle, right, middle), fill=(100, 116, 139), width=1)
    draw.rectangle((20, 70, 300, 80), fill=(226, 232, 240))
    return image


def test_strike_through_lines_are_painted_over_and_glyph_stems_kept() -> None:
    contrast = ink_images(_struck_through())["contrast"]
    before, after = np.asarray(contrast), np.asarray(strokes_removed(contrast))
    stroke_rows = np.flatnonzero((before[:60, 20:120] < 200).all(axis=1))
    assert stroke_rows.size == 1  # the drawing really has a continuous 1 px line
    row = after[stroke_rows[0], 20:120]
    assert (row >= 200).sum() > 30  # the gaps between letters are white again
    assert (row < 200).sum() > 10  # the stems the line crossed are still ink
    others = np.delete(np.arange(40), stroke_rows[0])
    assert (after[others] == before[others]).all()  # nothing but the line changed
    assert (after[70:81, 20:300] == before[70:81, 20:300]).all()  # a thick bar stays


def test_struck_through_words_are_read() -> None:
    image = _struck_through()
    assert "domains" not in words_of(
        w.text for w in tesseract_words(ink_images(image)["contrast"], psm=11)
    )
    assert sorted(words_of(w.text for w in reference_ocr_words(image))) == ["custom", "domains"]


def _toggle() -> Image.Image:
    """A billing switch: a dark bar holding a grey label and a small white pill with dark and
    green text, as on the pricing-table task."""
    image = Image.new("RGB", (420, 90), (15, 23, 42))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((60, 22, 340, 66), radius=22, fill=(30, 41, 59))
    draw.text((84, 36), "Monthly", font=ImageFont.truetype(FONT, 14), fill=(148, 163, 184))
    draw.rounded_rectangle((186, 26, 336, 62), radius=18, fill="white")
    draw.text((206, 36), "Yearly", font=ImageFont.truetype(BOLD, 14), fill=(15, 23, 42))
    draw.text((270, 38), "-20%", font=ImageFont.truetype(BOLD, 12), fill=(22, 163, 74))
    return image


def _sparse_reading(ink: Image.Image) -> list[str]:
    return words_of(
        w.text for w in tesseract_words(strokes_removed(ink), psm=11) if plausible_word(w)
    )


def test_flat_panels_are_the_large_single_colour_areas_not_glyphs() -> None:
    panels = flat_panels(_toggle())
    labels, count = ndimage.label(panels)
    assert count == 3  # page, bar, pill
    assert len({labels[5, 5], labels[44, 70], labels[58, 300]}) == 3
    assert not panels[44, 250]  # inside "Yearly"
    assert (~panels[36:52, 206:262]).sum() > 100  # the glyphs belong to no panel


def test_text_on_a_small_light_panel_inside_a_dark_one_is_read_by_the_panel_reading() -> None:
    image = _toggle()
    # The median background of a small white pill in a dark bar is dark, so the whole pill
    # turns to ink and its text is lost in the contrast reading.
    assert "yearly" not in _sparse_reading(ink_images(image)["contrast"])
    assert {"yearly", "20"} <= set(_sparse_reading(ink_images(image)["panel"]))
    assert sorted(words_of(w.text for w in reference_ocr_words(image))) == [
        "20",
        "monthly",
        "yearly",
    ]


def test_a_screenshot_without_a_flat_panel_is_not_read_a_second_time() -> None:
    noise = np.random.default_rng(7).integers(0, 256, (80, 80, 3), dtype=np.uint8)
    image = Image.fromarray(noise)
    assert not flat_panels(image).any()
    assert list(ink_images(image)) == ["contrast"]


def test_the_same_text_in_slightly_overlapping_boxes_is_one_word() -> None:
    grey = [_word("a", (558, 816, 9, 21), 96.0)]  # an offset box, as tesseract sometimes gives
    contrast = [_word("a", (563, 822, 10, 9), 97.0), _word("thin", (578, 818, 34, 13))]
    assert sorted(w.text for w in merge_readings([grey, contrast])) == ["a", "thin"]
    # Different text overlapping by less than half stays two words.
    near = [[_word("on", (0, 0, 20, 10))], [_word("to", (16, 0, 20, 10))]]
    assert sorted(w.text for w in merge_readings(near)) == ["on", "to"]
