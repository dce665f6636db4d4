"""OCR as scoring uses it: real tesseract on a drawn image, the mask, and the on-disk cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from veriharness.metrics.ocrwords import OCR_VERSION, cached_ocr_words, masked, ocr_words

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


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
    stored["tesseract"], stored["words"] = "tesseract 0.0", []
    entry.write_text(json.dumps(stored))
    assert cached_ocr_words(sign, cache) == first  # stale entry is a miss, and is rewritten
    assert json.loads(entry.read_text())["tesseract"] != "tesseract 0.0"
