"""What the offline vision model sees: facts measured from pixels, never invented.

`describe` reports an image's size, background and dominant colours, its text lines (tesseract
via `veriharness._util.ocr`) with boxes, an estimated font size and a colour sampled from the glyph
pixels, and the boxes of non-text regions that stand out from the background. `compare` puts
two images side by side: mean absolute difference, the regions that differ, text lines of the
reference the other image lacks (and the reverse), text colour shifts, a background shift, and
`line_offsets`: the lines of both images paired by text, each with its offset, size ratio,
colour difference and ink ratio, so a caller can move, resize and recolour what it drew.

Colours are binned at 3 bits per channel before counting, so anti-aliasing does not split one
colour into many; the reported colour is the mean of the pixels in the winning bin. Everything
is deterministic for the same pixels.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
from PIL import Image
from scipy import ndimage
from scipy.optimize import linear_sum_assignment

from veriharness._util.ocr import Box, OcrLine, OcrWord, read_lines

__all__ = ["hex_colour", "describe", "compare", "align_lines", "font_size_from_line"]

_REGION_CELL = 4  # px: grid of the region search
_REGION_MIN_SIDE = 8
_REGION_MIN_AREA = 400
_TEXT_MATCH = 0.8  # difflib ratio for two lines to count as the same text
_COLOUR_SHIFT = 48  # max channel difference that counts as a different colour
_BACKGROUND_SHIFT = 24
_COLUMN_GAP = 1.5  # a word gap wider than this many word heights separates two columns
_ASCENDER, _CAPITAL, _X_HEIGHT, _DESCENDER = 0.76, 0.73, 0.55, 0.24  # DejaVu Sans, in em


def hex_colour(rgb: Any) -> str:
    r, g, b = (int(round(float(v))) for v in rgb)
    return f"#{r:02x}{g:02x}{b:02x}"


def _pixels(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def _mode_colour(pixels: np.ndarray) -> np.ndarray:
    """Mean colour of the most common 3-bit-per-channel bin of an (N, 3) pixel array."""
    bins = (pixels >> 5).astype(np.int32)
    keys = bins[:, 0] * 64 + bins[:, 1] * 8 + bins[:, 2]
    winner = np.bincount(keys).argmax()
    mean: np.ndarray = pixels[keys == winner].mean(axis=0)
    return mean


def _dominant(pixels: np.ndarray, count: int = 5) -> list[dict[str, Any]]:
    bins = (pixels >> 5).astype(np.int32)
    keys = bins[:, 0] * 64 + bins[:, 1] * 8 + bins[:, 2]
    tally = np.bincount(keys, minlength=512)
    result = []
    for key in np.argsort(-tally, kind="stable")[:count]:
        if tally[key] == 0:
            break
        colour = pixels[keys == key].mean(axis=0)
        result.append({"colour": hex_colour(colour), "share": round(tally[key] / len(keys), 4)})
    return result


def _background(array: np.ndarray) -> np.ndarray:
    border = np.concatenate([array[0], array[-1], array[:, 0], array[:, -1]])
    return _mode_colour(border)


def font_size_from_line(line: OcrLine) -> float:
    """Font size in px: the median over words of box height / the share of the em it spans.

    The shares are DejaVu Sans metrics (Debian's default sans-serif, what Chromium renders
    here): capitals 0.73 em, ascenders 0.76 em, x-height 0.55 em, descenders 0.24 em. A
    word with ascenders and descenders spans about 1.0 em of ink, one of x-height letters 0.55.
    """
    estimates = sorted(word.box.height / _ink_share_of_em(word.text) for word in line.words)
    return round(float(np.median(estimates)), 1)


def _ink_share_of_em(text: str) -> float:
    capitals = any(c.isupper() or c.isdigit() for c in text)
    ascends = any(c in "bdfhklt'\"!?/|" for c in text)
    descends = any(c in "gjpqy,;()[]{}" for c in text)
    top = _ASCENDER if ascends else _CAPITAL if capitals else _X_HEIGHT
    return top + (_DESCENDER if descends else 0.0)


def _split_wide_gaps(line: OcrLine) -> list[OcrLine]:
    """Tesseract joins words of one baseline across columns; split where the gap is wide."""
    words = sorted(line.words, key=lambda w: w.box.x)
    groups: list[list[OcrWord]] = [[words[0]]]
    for word in words[1:]:
        previous = groups[-1][-1]
        gap = word.box.x - (previous.box.x + previous.box.width)
        tall = max(word.box.height, previous.box.height)
        if gap > _COLUMN_GAP * tall:
            groups.append([word])
        else:
            groups[-1].append(word)
    return [_line_of(group) for group in groups]


def _line_of(words: list[OcrWord]) -> OcrLine:
    left = min(w.box.x for w in words)
    top = min(w.box.y for w in words)
    right = max(w.box.x + w.box.width for w in words)
    bottom = max(w.box.y + w.box.height for w in words)
    text = " ".join(w.text for w in words)
    return OcrLine(text, Box(left, top, right - left, bottom - top), tuple(words))


def _ink_share(array: np.ndarray, box: dict[str, int]) -> float:
    """Share of a text box's pixels that are ink: a proxy for stroke weight."""
    patch = array[box["y"] : box["y"] + box["height"], box["x"] : box["x"] + box["width"]]
    flat = patch.reshape(-1, 3)
    if len(flat) == 0:
        return 0.0
    distance = np.abs(flat - _mode_colour(flat)).sum(axis=1)
    return float((distance > 60).mean())


def _line_colour(array: np.ndarray, line: OcrLine) -> np.ndarray:
    box = line.box
    patch = array[box.y : box.y + box.height, box.x : box.x + box.width].reshape(-1, 3)
    local = _mode_colour(patch)
    distance = np.abs(patch - local).sum(axis=1)
    ink = patch[distance > 60]
    if len(ink) == 0:
        return local
    # The farthest third of the ink is the glyph cores, not their anti-aliased edges.
    cut = np.quantile(distance[distance > 60], 2 / 3)
    core: np.ndarray = ink[distance[distance > 60] >= cut].mean(axis=0)
    return core


def _box(x: int, y: int, width: int, height: int) -> dict[str, int]:
    return {"x": int(x), "y": int(y), "width": int(width), "height": int(height)}


def _components(mask: np.ndarray, limit: int) -> list[tuple[slice, slice]]:
    """Bounding slices of the mask's connected parts (on a coarse grid), largest first."""
    cell = _REGION_CELL
    rows, cols = -(-mask.shape[0] // cell), -(-mask.shape[1] // cell)
    padded = np.zeros((rows * cell, cols * cell), dtype=bool)
    padded[: mask.shape[0], : mask.shape[1]] = mask
    grid = padded.reshape(rows, cell, cols, cell).any(axis=(1, 3))
    labels, _ = ndimage.label(ndimage.binary_closing(grid, iterations=1) | grid)
    found = []
    for rs, cs in ndimage.find_objects(labels):
        y0, y1 = rs.start * cell, min(rs.stop * cell, mask.shape[0])
        x0, x1 = cs.start * cell, min(cs.stop * cell, mask.shape[1])
        # Tighten the coarse cells to the mask pixels they hold.
        ys, xs = np.nonzero(mask[y0:y1, x0:x1])
        if len(ys):
            found.append(
                (slice(y0 + ys.min(), y0 + ys.max() + 1), slice(x0 + xs.min(), x0 + xs.max() + 1))
            )
    found.sort(
        key=lambda s: (-(s[0].stop - s[0].start) * (s[1].stop - s[1].start), s[0].start, s[1].start)
    )
    return found[:limit]


def _text_line(array: np.ndarray, line: OcrLine) -> dict[str, Any]:
    return {
        "text": line.text,
        "box": _box(*line.box),
        "font_size_px": font_size_from_line(line),
        "colour": hex_colour(_line_colour(array, line)),
    }


def _describe_with_lines(image: Image.Image) -> tuple[dict[str, Any], list[OcrLine]]:
    array = _pixels(image)
    height, width = array.shape[:2]
    background = _background(array)
    lines = [part for line in read_lines(image) for part in _split_wide_gaps(line)]
    lines.sort(key=lambda line: (line.box.y, line.box.x))
    mask = np.abs(array - background).sum(axis=2) > 40
    for line in lines:
        b = line.box
        mask[max(0, b.y - 2) : b.y + b.height + 2, max(0, b.x - 2) : b.x + b.width + 2] = False
    regions = []
    for rows, cols in _components(mask, limit=20):
        h, w = rows.stop - rows.start, cols.stop - cols.start
        if min(h, w) < _REGION_MIN_SIDE or h * w < _REGION_MIN_AREA:
            continue
        inside = array[rows, cols][mask[rows, cols]]
        regions.append(
            {"box": _box(cols.start, rows.start, w, h), "colour": hex_colour(_mode_colour(inside))}
        )
    description = {
        "width": width,
        "height": height,
        "background": hex_colour(background),
        "dominant_colours": _dominant(array.reshape(-1, 3)),
        "text_lines": [_text_line(array, line) for line in lines],
        "image_regions": regions,
    }
    return description, lines


def describe(image: Image.Image) -> dict[str, Any]:
    """Size, background, dominant colours, text lines and non-text regions of one image."""
    return _describe_with_lines(image)[0]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _best_match(text: str, candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
    best, score = None, _TEXT_MATCH
    for candidate in candidates:
        ratio = difflib.SequenceMatcher(None, _norm(text), _norm(candidate["text"])).ratio()
        if ratio >= score:
            best, score = candidate, ratio
    return best


def _distance(first: str, second: str) -> int:
    a = [int(first[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(second[i : i + 2], 16) for i in (1, 3, 5)]
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def _similarity(first: str, second: str) -> float:
    return difflib.SequenceMatcher(None, _norm(first), _norm(second)).ratio()


def _offset(
    ref_line: dict[str, Any], other_line: dict[str, Any], ref_ink: float, other_ink: float
) -> dict[str, Any]:
    a, b = ref_line["box"], other_line["box"]
    centre_a, centre_b = a["y"] + a["height"] / 2, b["y"] + b["height"] / 2
    return {
        "text": ref_line["text"],
        "other_text": other_line["text"],
        "text_similarity": round(_similarity(ref_line["text"], other_line["text"]), 4),
        "reference_box": a,
        "other_box": b,
        "dx": b["x"] - a["x"],
        "dy": round(centre_b - centre_a, 1),
        "width_ratio": round(a["width"] / b["width"], 4) if b["width"] else None,
        "height_ratio": round(a["height"] / b["height"], 4) if b["height"] else None,
        "reference_colour": ref_line["colour"],
        "other_colour": other_line["colour"],
        "colour_difference": _distance(ref_line["colour"], other_line["colour"]),
        "ink_ratio": round(ref_ink / other_ink, 4) if other_ink else None,
    }


def align_lines(
    ref_array: np.ndarray,
    ref_lines: list[dict[str, Any]],
    other_array: np.ndarray,
    other_lines: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Pair the text lines of two images one to one by text, and measure each pair.

    The pairing minimises 1 - similarity over all pairs (Hungarian method), with a tiny
    distance term so repeated texts pair with their nearest copy. Pairs below
    `_TEXT_MATCH` are dropped. Per pair: `dx` (left edges), `dy` (vertical centres), ink
    `width_ratio`/`height_ratio` (reference over other), colours and their largest channel
    difference, and `ink_ratio` (share of ink pixels, reference over other: > 1 means the
    reference strokes are heavier). Offsets are other minus reference, in pixels.
    """
    if not ref_lines or not other_lines:
        return []
    diagonal = float(np.hypot(*ref_array.shape[:2]))
    cost = np.zeros((len(ref_lines), len(other_lines)))
    for i, ref_line in enumerate(ref_lines):
        for j, other_line in enumerate(other_lines):
            a, b = ref_line["box"], other_line["box"]
            far = np.hypot(a["x"] - b["x"], a["y"] - b["y"]) / diagonal
            cost[i, j] = 1 - _similarity(ref_line["text"], other_line["text"]) + 0.01 * far
    pairs = []
    for i, j in zip(*linear_sum_assignment(cost), strict=True):
        ref_line, other_line = ref_lines[i], other_lines[j]
        if _similarity(ref_line["text"], other_line["text"]) < _TEXT_MATCH:
            continue
        ink = _ink_share(ref_array, ref_line["box"]), _ink_share(other_array, other_line["box"])
        pairs.append(_offset(ref_line, other_line, *ink))
    return sorted(pairs, key=lambda pair: (pair["reference_box"]["y"], pair["reference_box"]["x"]))


def compare(reference: Image.Image, other: Image.Image) -> dict[str, Any]:
    """How `other` differs from `reference` (resized to the reference's size if needed)."""
    ref = describe(reference)
    size_match = reference.size == other.size
    resized = other if size_match else other.convert("RGB").resize(reference.size)
    oth = describe(resized)
    diff = np.abs(_pixels(reference) - _pixels(resized))
    changed = diff.sum(axis=2) > 40
    regions = [
        _box(cols.start, rows.start, cols.stop - cols.start, rows.stop - rows.start)
        for rows, cols in _components(changed, limit=10)
    ]
    missing, shifts = [], []
    for line in ref["text_lines"]:
        match = _best_match(line["text"], oth["text_lines"])
        if match is None:
            missing.append(line)
        elif _distance(line["colour"], match["colour"]) > _COLOUR_SHIFT:
            shifts.append(
                {
                    "text": line["text"],
                    "box": line["box"],
                    "reference_colour": line["colour"],
                    "draft_colour": match["colour"],
                }
            )
    extra = [ln for ln in oth["text_lines"] if _best_match(ln["text"], ref["text_lines"]) is None]
    background_shift = None
    if _distance(ref["background"], oth["background"]) > _BACKGROUND_SHIFT:
        background_shift = {
            "reference_colour": ref["background"],
            "draft_colour": oth["background"],
        }
    return {
        "size_match": size_match,
        "reference_size": {"width": reference.width, "height": reference.height},
        "other_size": {"width": other.width, "height": other.height},
        "mean_abs_diff": round(float(diff.mean()) / 255.0, 5),
        "changed_share": round(float(changed.mean()), 5),
        "differing_regions": regions,
        "missing_text": missing,
        "extra_text": extra,
        "colour_shifts": shifts,
        "background_shift": background_shift,
        "line_offsets": align_lines(
            _pixels(reference), ref["text_lines"], _pixels(resized), oth["text_lines"]
        ),
        "reference": ref,
        "other": oth,
    }
