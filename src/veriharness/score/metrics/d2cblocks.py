"""Text blocks detected as Design2Code detects them, from recoloured screenshots.

The opt-in alternative to reading blocks from the DOM (`blocks.page_blocks`). The render stage
(`render.d2ccapture`) recolours the page twice and captures it each time: every element of a
fixed tag list gets its own text colour from a pool, and the second time every channel of every
colour is shifted by `SHIFT` (mod 256); backgrounds are made transparent. It also lists each
visible text node with the colour of its nearest recoloured ancestor (black when there is none).
This module turns those captures into blocks, as Design2Code's `get_blocks_ocr_free` does
(NoviScl/Design2Code, `metrics/ocr_free_utils.py`, commit in docs/metrics.md), written anew:

1. A pixel is recoloured text when its second colour is its first shifted by `SHIFT`, within
   `SHIFT_TOLERANCE` per channel; everything the recolouring did not touch drops out.
2. Each listed text takes the recoloured pixels whose first colour lies within
   `COLOUR_TOLERANCE` of its assigned colour; none, no block.
3. Its box is the bounding box of those pixels as fractions of the page; its colour the mean of
   the same pixels in the page's ordinary screenshot, truncated to integers.

So all text of one recoloured element is one box (a heading with a line break is one block over
both lines), text in tags outside the list is counted with its recoloured ancestor, and text that
keeps a colour of its own from a style rule is missed: Design2Code's behaviour, kept on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from veriharness.score.metrics.blocks import Block

__all__ = ["SHIFT", "SHIFT_TOLERANCE", "COLOUR_TOLERANCE", "detect_blocks"]

SHIFT = 50
SHIFT_TOLERANCE = 8
COLOUR_TOLERANCE = 4

Rgb = tuple[int, int, int]


def _array(image: Image.Image) -> NDArray[np.int16]:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def recoloured_pixels(first: Image.Image, second: Image.Image) -> NDArray[np.bool_]:
    """Pixels whose colour in `second` is their colour in `first` shifted by SHIFT."""
    if first.size != second.size:
        raise ValueError(f"recoloured captures differ in size: {first.size} vs {second.size}")
    a, b = _array(first), _array(second)
    shifted: NDArray[np.bool_] = np.all(np.abs((a + SHIFT) % 256 - b) <= SHIFT_TOLERANCE, axis=2)
    return shifted


def detect_blocks(
    page: Image.Image,
    first: Image.Image,
    second: Image.Image,
    texts: Sequence[tuple[str, Rgb]],
) -> list[Block]:
    """The blocks of a page from its ordinary capture `page`, its two recoloured captures and its
    listed texts (text, assigned colour), in the order listed. Texts are stripped and lowercased;
    empty ones are skipped."""
    if page.size != first.size:
        raise ValueError(f"page and recoloured capture differ in size: {page.size} vs {first.size}")
    recoloured = recoloured_pixels(first, second)
    height, width = recoloured.shape
    rows_all, cols_all = np.nonzero(recoloured)
    colours = _array(first)[rows_all, cols_all]
    original = _array(page)[rows_all, cols_all]
    blocks: list[Block] = []
    for index, (text, colour) in enumerate(texts):
        text = text.strip().lower()
        if not text:
            continue
        near = np.all(np.abs(colours - np.array(colour)) <= COLOUR_TOLERANCE, axis=1)
        if not near.any():
            continue
        rows, cols = rows_all[near], cols_all[near]
        top, left = int(rows.min()), int(cols.min())
        mean = original[near].mean(axis=0).astype(int)
        blocks.append(
            Block(
                text,
                left / width,
                top / height,
                (int(cols.max()) - left + 1) / width,
                (int(rows.max()) - top + 1) / height,
                (float(mean[0]), float(mean[1]), float(mean[2])),
                (index,),
            )
        )
    return blocks
