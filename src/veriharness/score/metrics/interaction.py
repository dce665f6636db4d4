"""Interaction metrics after Interaction2Code (Xiao et al., ASE 2025), on screenshots.

Contract (for the render and score stages; nothing here runs a browser or reads a file):

- A state is a PIL image of the whole page; boxes are `Box(x, y, width, height)` in its pixels.
- `changed_region(before, after)`: the part of `after` that differs from `before`, or None when
  the two are identical, as Interaction2Code reads it (content inserted or removed counts, what
  it pushed down does not). `score` takes it on both sides' whole-page states; it is not the
  render stage's `changed_box` (the box of the changed viewport pixels that `states.json` records
  and the marked copy shows, P-69).
- `is_implemented(trigger_found, before, after)`: Interaction2Code's rule. The trigger exists
  (exactly one element carries the answer's trigger mark) and acting on it changed at least one
  pixel of the page. `implement_rate(flags)` is the share of True among a run's interactions.
- `compare_states(reference, answer, words)`: the state metrics of one interaction, the answer's
  against the reference's (`StateScores`). `words` reads an image's text in reading order
  (`state_words` is the project's OCR). When the interaction is not implemented the region and
  position metrics are None (there is no changed region to compare) while the whole-state
  metrics are still computed; Interaction2Code writes 0 for all of them, so an analysis that
  wants its figures floors them at 0.

Metrics (docs/metrics.md has the formulas and the measured differences from the published code):
- `state_ssim`, `state_text`: the answer's after-state against the reference's after-state;
- `region_ssim`, `region_text`: the answer's changed region against the reference's, the
  answer's crop resized to the reference's crop;
- `trigger_position`, `region_position`: 1 - max(|dx|, |dy|) between the centres of the two
  triggers (before-states) and of the two changed regions (after-states), as fractions of their
  own page's width and height.
Interaction2Code also scores CLIP similarity; CLIP is not available here and is not computed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from math import exp, log
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from veriharness._util.ocr import Box
from veriharness.score.metrics.ocrpasses import multipass_words
from veriharness.score.metrics.pixels import fit_to_reference, ssim

__all__ = [
    "BLEU_ORDER",
    "State",
    "StateScores",
    "changed_region",
    "is_implemented",
    "implement_rate",
    "char_bleu",
    "state_words",
    "region_ssim",
    "centre_position",
    "compare_states",
]

BLEU_ORDER = 4

WordReader = Callable[[Image.Image], Sequence[str]]


class State(NamedTuple):
    """One side of an interaction: the page before and after the action, the trigger's box in
    `before` (None: no trigger found) and the changed region of `after` (None: nothing changed).
    `after` is None when the action could not be done (no trigger)."""

    before: Image.Image
    after: Image.Image | None
    trigger: Box | None
    region: Box | None


class StateScores(NamedTuple):
    implemented: bool
    state_ssim: float | None
    state_text: float | None
    region_ssim: float | None
    region_text: float | None
    trigger_position: float | None
    region_position: float | None


def _pixels(image: Image.Image) -> NDArray[np.uint8]:
    return np.asarray(image.convert("RGB"), dtype=np.uint8)


def _first_differing_row(top: NDArray[np.uint8], other: NDArray[np.uint8]) -> int | None:
    """Index of the first row where two images aligned at their top rows differ, or None."""
    rows = min(len(top), len(other))
    differs = np.flatnonzero(np.any(top[:rows] != other[:rows], axis=(1, 2)))
    if differs.size:
        return int(differs[0])
    return rows if len(top) != len(other) else None


def changed_region(before: Image.Image, after: Image.Image) -> Box | None:
    """The smallest box of `after` holding every change from `before`, or None if identical.

    Rows: from the first row that differs with the two images aligned at the top to the last
    that differs with them aligned at the bottom, so content inserted or removed counts and the
    content it pushed down does not. Columns: those of the differing pixels when both images have
    one size; the full width when the heights differ. Different widths: the whole of `after`."""
    old, new = _pixels(before), _pixels(after)
    if old.shape[1] != new.shape[1]:
        return Box(0, 0, after.width, after.height)
    first = _first_differing_row(new, old)
    if first is None:
        return None
    from_bottom = _first_differing_row(new[::-1], old[::-1])
    last = len(new) - 1 - (from_bottom if from_bottom is not None else 0)
    # Rows repeated around an insertion (blank lines) make the two ends cross; span both.
    top, bottom = min(first, last), min(max(first, last), len(new) - 1)
    if old.shape != new.shape:
        return Box(0, top, after.width, bottom - top + 1)
    cols = np.flatnonzero(np.any(old != new, axis=(0, 2)))
    return Box(int(cols[0]), top, int(cols[-1]) - int(cols[0]) + 1, bottom - top + 1)


def is_implemented(trigger_found: bool, before: Image.Image, after: Image.Image | None) -> bool:
    """The trigger exists and acting on it changed the page (any pixel, or the page's size)."""
    if not trigger_found or after is None:
        return False
    return before.size != after.size or bool(np.any(_pixels(before) != _pixels(after)))


def implement_rate(flags: Sequence[bool]) -> float | None:
    """Share of implemented interactions; None for a run without interactions."""
    return sum(flags) / len(flags) if flags else None


def _ngrams(text: str, n: int) -> Counter[str]:
    return Counter(text[i : i + n] for i in range(len(text) - n + 1))


def char_bleu(reference: str, answer: str) -> float:
    """BLEU-4 over characters (Papineni et al., 2002; uniform weights, no smoothing) of one
    answer text against one reference text, as Interaction2Code's text score computes it: its
    published code hands BLEU whole strings, so the tokens are characters.

    Both empty: 1. One empty, or no shared n-gram of some order: 0."""
    if not reference and not answer:
        return 1.0
    if not reference or not answer:
        return 0.0
    log_sum = 0.0
    for n in range(1, BLEU_ORDER + 1):
        hypothesis, ref = _ngrams(answer, n), _ngrams(reference, n)
        matched = sum(min(count, ref[gram]) for gram, count in hypothesis.items())
        if matched == 0:
            return 0.0
        log_sum += log(matched / max(1, sum(hypothesis.values()))) / BLEU_ORDER
    brevity = 1.0 if len(answer) > len(reference) else exp(1 - len(reference) / len(answer))
    return brevity * exp(log_sum)


def state_words(image: Image.Image) -> list[str]:
    """The words the project's OCR reads on a state (`multipass_words`), top to bottom."""
    return [word.text for word in multipass_words(image)]


def _text_score(reference: Image.Image, answer: Image.Image, words: WordReader) -> float:
    return char_bleu(" ".join(words(reference)), " ".join(words(answer)))


def region_ssim(reference: Image.Image, answer: Image.Image) -> float:
    """SSIM of two crops, the answer's resized (bilinear) to the reference's size."""
    if answer.size != reference.size:
        answer = answer.convert("RGB").resize(reference.size, Image.Resampling.BILINEAR)
    return ssim(reference, answer)


def _crop(image: Image.Image, box: Box) -> Image.Image:
    return image.crop((box.x, box.y, box.x + box.width, box.y + box.height))


def centre_position(
    reference: Box, reference_size: tuple[int, int], answer: Box, answer_size: tuple[int, int]
) -> float:
    """1 - max(|dx|, |dy|) between the two boxes' centres, each a fraction of its page."""
    rx = (reference.x + reference.width / 2) / reference_size[0]
    ry = (reference.y + reference.height / 2) / reference_size[1]
    ax = (answer.x + answer.width / 2) / answer_size[0]
    ay = (answer.y + answer.height / 2) / answer_size[1]
    return 1.0 - max(abs(rx - ax), abs(ry - ay))


def compare_states(reference: State, answer: State, words: WordReader = state_words) -> StateScores:
    """The state metrics of one interaction (module notes). The reference must be complete: an
    after-state, a trigger and a changed region."""
    if reference.after is None or reference.trigger is None or reference.region is None:
        raise ValueError("the reference state needs an after-state, a trigger and a region")
    implemented = is_implemented(answer.trigger is not None, answer.before, answer.after)
    if answer.after is None:
        return StateScores(False, None, None, None, None, None, None)
    fitted = fit_to_reference(answer.after.convert("RGB"), reference.after.size).image
    state_ssim = ssim(reference.after.convert("RGB"), fitted)
    state_text = _text_score(reference.after, answer.after, words)
    if not implemented or answer.region is None or answer.trigger is None:
        return StateScores(implemented, state_ssim, state_text, None, None, None, None)
    reference_crop = _crop(reference.after, reference.region)
    answer_crop = _crop(answer.after, answer.region)
    return StateScores(
        implemented,
        state_ssim,
        state_text,
        region_ssim(reference_crop, answer_crop),
        _text_score(reference_crop, answer_crop, words),
        centre_position(
            reference.trigger, reference.before.size, answer.trigger, answer.before.size
        ),
        centre_position(reference.region, reference.after.size, answer.region, answer.after.size),
    )
