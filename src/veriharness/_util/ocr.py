"""Text read from pixels with tesseract: words and lines with their boxes.

Used by the offline model's vision side and by scoring. Calls the `tesseract` program (Debian's
tesseract-ocr) and parses its TSV output; no Python binding is needed.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

from PIL import Image

from veriharness._util import tesseract_cache
from veriharness._util.programs import find_tesseract

__all__ = ["Box", "OcrWord", "OcrLine", "read_words", "read_lines", "OcrError"]


class OcrError(RuntimeError):
    pass


class Box(NamedTuple):
    x: int
    y: int
    width: int
    height: int


class OcrWord(NamedTuple):
    text: str
    box: Box
    confidence: float
    line_key: tuple[int, int, int]


class OcrLine(NamedTuple):
    text: str
    box: Box
    words: tuple[OcrWord, ...]


def read_words(
    image: Image.Image | str | Path,
    *,
    min_confidence: float = 30.0,
    psm: int = 3,
    upscale: int = 1,
) -> list[OcrWord]:
    """Words tesseract reads with at least `min_confidence` (0-100), in page segmentation mode
    `psm`, on the image enlarged `upscale` times; boxes are in the given image's pixels."""
    picture = image if isinstance(image, Image.Image) else Image.open(image)
    picture = picture.convert("RGB")
    if upscale != 1:
        size = (picture.width * upscale, picture.height * upscale)
        picture = picture.resize(size, Image.Resampling.LANCZOS)
    output = _tesseract_tsv(picture, ["--psm", str(psm), "tsv"])
    words = []
    for row in csv.DictReader(io.StringIO(output), delimiter="\t", quoting=csv.QUOTE_NONE):
        text = (row.get("text") or "").strip()
        if row.get("level") != "5" or not text:
            continue
        confidence = float(row["conf"])
        if confidence < min_confidence:
            continue
        box = (int(row["left"]), int(row["top"]), int(row["width"]), int(row["height"]))
        key = (int(row["block_num"]), int(row["par_num"]), int(row["line_num"]))
        words.append(OcrWord(text, Box(*(round(v / upscale) for v in box)), confidence, key))
    return words


def _tesseract_tsv(picture: Image.Image, arguments: list[str]) -> str:
    """tesseract's TSV reading of `picture`, from the cache when this machine has read the same
    pixels with the same program before (`_util.tesseract_cache`)."""
    entry = tesseract_cache.entry_for(picture, arguments)
    if (kept := tesseract_cache.load(entry)) is not None:
        return kept
    with tempfile.TemporaryDirectory(prefix="veriharness-ocr-") as tmp:
        source = Path(tmp) / "in.png"
        picture.save(source, compress_level=1)  # lossless either way; level 6 costs 2x the time
        result = subprocess.run(
            [str(find_tesseract()), str(source), "stdout", *arguments],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            # tesseract's own threads fight each other on a small, busy machine (5x slower).
            env={"OMP_THREAD_LIMIT": "1", **os.environ},
        )
    if result.returncode != 0:
        raise OcrError(f"tesseract failed ({result.returncode}): {result.stderr.strip()[:300]}")
    tesseract_cache.store(entry, result.stdout)
    return result.stdout


def read_lines(image: Image.Image | str | Path, *, min_confidence: float = 30.0) -> list[OcrLine]:
    """Words grouped into tesseract's lines, top to bottom, each with its enclosing box."""
    grouped: dict[tuple[int, int, int], list[OcrWord]] = {}
    for word in read_words(image, min_confidence=min_confidence):
        grouped.setdefault(word.line_key, []).append(word)
    lines = []
    for words in grouped.values():
        left = min(w.box.x for w in words)
        top = min(w.box.y for w in words)
        right = max(w.box.x + w.box.width for w in words)
        bottom = max(w.box.y + w.box.height for w in words)
        text = " ".join(w.text for w in words)
        lines.append(OcrLine(text, Box(left, top, right - left, bottom - top), tuple(words)))
    return sorted(lines, key=lambda line: (line.box.y, line.box.x))
