"""OCR as scoring uses it: one quick reading for the audit, a merged multi-pass reading for
reference images, and an on-disk cache of the latter.

`ocr_words` is the single reading the audit's text-in-images check uses on masked renders:
tesseract on a 2x Lanczos-upscaled greyscale image. Rendered UI text is small (12-16 px) and
often light grey; on the pricing-table reference, recall of the page's own DOM words rose from
0.73 to 0.84 (precision 0.92 to 1.0) going from 1x to 2x, for about 1.3x the time.

`reference_ocr_words` is what the OCR word metrics compare an answer against. It merges three
readings (`metrics.ocrpasses`) so that light, small and light-on-colour text is read too; with glued
words split in the metric (`metrics.text.split_glued`), a task's own reference page scores an OCR
word F1 of 0.99 to 1.0 against itself, where the single reading gave 0.81 to 0.99. It costs about
three times the CPU of a single reading (the readings run in parallel), paid once per reference
image thanks to the cache. Word boxes are in original pixels.

`masked` keeps only given rectangles of an image (the rest painted white) so that text in images
can be read without paying for OCR of the whole page.

The cache holds the words of one image per file, named by the image's digest and `OCR_VERSION`,
which changes whenever the preprocessing or the merge does; tesseract's identity (its version
text and language data, `_util.tesseract_cache.program_identity`) is stored in the file and a
different one is a cache miss.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from PIL import Image, ImageDraw

from veriharness._util import atomic, tesseract_cache
from veriharness._util.hashing import sha256_file
from veriharness._util.ocr import Box, OcrWord, read_words
from veriharness.score.metrics.ocrpasses import multipass_words
from veriharness.score.versions import OCR_VERSION

__all__ = [
    "OCR_VERSION",
    "UPSCALE",
    "ocr_words",
    "reference_ocr_words",
    "cached_ocr_words",
    "machine_words_cache",
    "masked",
]

UPSCALE = 2


def ocr_words(image: Image.Image) -> list[OcrWord]:
    """Words of an image read at UPSCALE times its size, boxes in the image's own pixels."""
    grey = image.convert("L")
    big = grey.resize((grey.width * UPSCALE, grey.height * UPSCALE), Image.Resampling.LANCZOS)
    return [
        OcrWord(
            w.text,
            Box(*(round(v / UPSCALE) for v in w.box)),
            w.confidence,
            w.line_key,
        )
        for w in read_words(big)
    ]


def reference_ocr_words(image: Image.Image) -> list[OcrWord]:
    """Words of a reference screenshot: the merged grey and contrast readings."""
    return multipass_words(image)


def masked(image: Image.Image, boxes: Iterable[tuple[float, float, float, float]]) -> Image.Image:
    """A copy of `image` that is white except inside the (x, y, width, height) boxes."""
    mask = Image.new("L", image.size, 0)
    draw = ImageDraw.Draw(mask)
    for x, y, width, height in boxes:
        draw.rectangle((x, y, x + width - 1, y + height - 1), fill=255)
    white = Image.new("RGB", image.size, (255, 255, 255))
    return Image.composite(image.convert("RGB"), white, mask)


def machine_words_cache() -> Path:
    """Where the reference words are kept unless a folder is named: beside tesseract's own
    cache (P-54), so every experiment on this machine reads a reference once."""
    return tesseract_cache.cache_root() / "reference-words"


def cached_ocr_words(path: Path, cache_dir: Path | None) -> list[OcrWord]:
    """reference_ocr_words of an image file, read from / written to `cache_dir` if given."""
    if cache_dir is None:
        with Image.open(path) as image:
            return reference_ocr_words(image)
    entry = cache_dir / f"{sha256_file(path).removeprefix('sha256:')}.{OCR_VERSION}.json"
    # The whole program's identity (version text and language data), not just its version line.
    program = tesseract_cache.program_identity()
    if entry.is_file():
        stored = json.loads(entry.read_text(encoding="utf-8"))
        if stored.get("program") == program:
            return [
                OcrWord(w["text"], Box(*w["box"]), w["confidence"], tuple(w["line_key"]))
                for w in stored["words"]
            ]
    with Image.open(path) as image:
        words = reference_ocr_words(image)
    cache_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "tesseract": tesseract_cache.version_line(),
        "program": program,
        "ocr_version": OCR_VERSION,
        "words": [
            {"text": w.text, "box": list(w.box), "confidence": w.confidence, "line_key": w.line_key}
            for w in words
        ],
    }
    atomic.write_text(entry, json.dumps(payload))
    return words
