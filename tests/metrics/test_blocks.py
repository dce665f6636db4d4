"""Design2Code-style block metrics on hand-computed pages."""

from __future__ import annotations

import pytest

from veriharness.score.metrics.blocks import MIN_TEXT_RATIO, block_scores, match_blocks
from veriharness.score.metrics.color import rgb_delta_e
from veriharness.score.metrics.inputs import DomFacts, DomText


def _text(text: str, x: float, y: float, w: float, h: float, color=(0, 0, 0)) -> DomText:
    return DomText(text=text, x=x, y=y, width=w, height=h, color=color)


def _page(*texts: DomText, width: int = 100, height: int = 200) -> DomFacts:
    size = {"width": width, "height": height}
    return DomFacts(kind="dom", viewport=size, page=size, texts=list(texts))


def test_hungarian_pairs_maximise_total_similarity_and_drop_weak_pairs() -> None:
    reference = [_text("Pricing plans", 0, 0, 1, 1), _text("Contact us", 0, 0, 1, 1)]
    answer = [
        _text("contact us", 0, 0, 1, 1),
        _text("Pricing plan", 0, 0, 1, 1),
        _text("zzz", 0, 0, 1, 1),
    ]
    pairs = match_blocks(reference, answer)
    assert sorted((p.reference, p.answer) for p in pairs) == [(0, 1), (1, 0)]
    assert all(p.ratio >= MIN_TEXT_RATIO for p in pairs)
    assert match_blocks([_text("abc", 0, 0, 1, 1)], [_text("xyz", 0, 0, 1, 1)]) == []


def test_hand_computed_scores() -> None:
    # Reference: "Hello" (10x10 at 0,0) and "World" (10x10 at 0,100) on a 100x200 page.
    # Answer: "Hello" moved by 10 px right (dx = 0.1), red; "Wxrld" in place; "Extra" unmatched.
    reference = _page(_text("Hello", 0, 0, 10, 10), _text("World", 0, 100, 10, 10))
    answer = _page(
        _text("Hello", 10, 0, 10, 10, color=(255, 0, 0)),
        _text("Wxrld", 0, 100, 10, 10),
        _text("Extra", 50, 50, 20, 10),
    )
    scores = block_scores(reference, answer)
    assert len(scores.pairs) == 2
    # matched area: 4 blocks of 100 = 400; all area: 400 + 200 = 600
    assert scores.block_match == pytest.approx(400 / 600)
    # SequenceMatcher("World", "Wxrld") = 2 * 4 / 10 = 0.8; mean with 1.0
    assert scores.text_similarity == pytest.approx((1.0 + 0.8) / 2)
    assert scores.position == pytest.approx(((1 - 0.1) + 1.0) / 2)
    red = max(0.0, 1 - rgb_delta_e((0, 0, 0), (255, 0, 0)) / 100)
    assert scores.color == pytest.approx((red + 1.0) / 2)


def test_positions_are_normalised_by_each_page_size() -> None:
    reference = _page(_text("Title", 40, 90, 20, 20), width=100, height=200)
    answer = _page(_text("Title", 80, 180, 40, 40), width=200, height=400)
    assert block_scores(reference, answer).position == pytest.approx(1.0)


def test_identical_pages_score_one_and_empty_or_unmatched_pages_are_explicit() -> None:
    page = _page(_text("One", 1, 2, 30, 10, (10, 20, 30)), _text("Two words", 5, 50, 60, 12))
    same = block_scores(page, page)
    assert (same.block_match, same.text_similarity, same.position, same.color) == (
        pytest.approx(1.0),
        1.0,
        1.0,
        pytest.approx(1.0),
    )
    assert block_scores(_page(), _page())[:4] == (None, None, None, None)
    assert block_scores(page, _page())[:4] == (0.0, 0.0, 0.0, 0.0)
