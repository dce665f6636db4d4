"""Text-block metrics after Design2Code (Si et al., 2024).

A block is one visible text node of a page's DOM (from `dom.json`), with its text, box and
colour. Reference blocks come from the task's `reference_dom.json`, answer blocks from the run's
`dom.json`. Blocks are paired one-to-one by the Hungarian method (scipy's
`linear_sum_assignment`) on the cost 1 - r, where r is difflib's SequenceMatcher ratio of the two
texts (whitespace collapsed); pairs with r below `MIN_TEXT_RATIO` are discarded as non-matches.

From the kept pairs:
- block_match = area of matched blocks (both pages) / area of all blocks (both pages);
- text_similarity = mean r;
- position = mean of 1 - max(|dx|, |dy|), with block centres divided by their own page's
  width and height;
- color = mean of max(0, 1 - CIEDE2000 / 100) between the two text colours.

Unlike Design2Code, blocks are not merged across nodes and no visual-element detection is
involved: the DOM of both pages is known, so blocks are read, not guessed.
When neither page has a block every metric is None; when blocks exist but none pair up every
metric is 0.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment

from veriharness.score.metrics.color import ciede2000, srgb_to_lab
from veriharness.score.metrics.inputs import DomFacts, DomText

__all__ = ["MIN_TEXT_RATIO", "BlockPair", "BlockScores", "match_blocks", "block_scores"]

MIN_TEXT_RATIO = 0.5


class BlockPair(NamedTuple):
    reference: int
    answer: int
    ratio: float


class BlockScores(NamedTuple):
    block_match: float | None
    text_similarity: float | None
    position: float | None
    color: float | None
    pairs: list[BlockPair]
    reference_blocks: int
    answer_blocks: int


def _clean(text: str) -> str:
    return " ".join(text.split())


def _ratio(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


def match_blocks(reference: list[DomText], answer: list[DomText]) -> list[BlockPair]:
    """One-to-one pairs maximising total text similarity, ratio >= MIN_TEXT_RATIO kept."""
    if not reference or not answer:
        return []
    ref_texts = [_clean(t.text) for t in reference]
    ans_texts = [_clean(t.text) for t in answer]
    ratios = np.array([[_ratio(r, a) for a in ans_texts] for r in ref_texts])
    rows, cols = linear_sum_assignment(1.0 - ratios)
    return [
        BlockPair(int(r), int(c), float(ratios[r, c]))
        for r, c in zip(rows, cols, strict=True)
        if ratios[r, c] >= MIN_TEXT_RATIO
    ]


def _position(ref: DomText, ans: DomText, ref_page: DomFacts, ans_page: DomFacts) -> float:
    (rx, ry), (ax, ay) = ref.centre, ans.centre
    dx = abs(rx / max(ref_page.page.width, 1) - ax / max(ans_page.page.width, 1))
    dy = abs(ry / max(ref_page.page.height, 1) - ay / max(ans_page.page.height, 1))
    return 1.0 - max(dx, dy)


def block_scores(reference: DomFacts, answer: DomFacts) -> BlockScores:
    """The four block metrics of an answer page against a reference page."""
    refs, anss = reference.texts, answer.texts
    pairs = match_blocks(refs, anss)
    total_area = sum(t.area for t in refs) + sum(t.area for t in anss)
    if not refs and not anss:
        return BlockScores(None, None, None, None, pairs, 0, 0)
    if not pairs:
        return BlockScores(0.0, 0.0, 0.0, 0.0, pairs, len(refs), len(anss))
    matched_area = sum(refs[p.reference].area + anss[p.answer].area for p in pairs)
    block_match = matched_area / total_area if total_area > 0 else 0.0
    text_similarity = float(np.mean([p.ratio for p in pairs]))
    position = float(
        np.mean([_position(refs[p.reference], anss[p.answer], reference, answer) for p in pairs])
    )
    ref_lab = srgb_to_lab([refs[p.reference].color for p in pairs])
    ans_lab = srgb_to_lab([anss[p.answer].color for p in pairs])
    color = float(np.mean(np.clip(1.0 - ciede2000(ref_lab, ans_lab) / 100.0, 0.0, None)))
    return BlockScores(block_match, text_similarity, position, color, pairs, len(refs), len(anss))
