"""Block metrics after Design2Code on hand-computed pages (its own figures: test_design2code)."""

from __future__ import annotations

import pytest

from veriharness.runfolder.render import DomRecord, Size, TextBox
from veriharness.score.metrics.blocks import MIN_TEXT_RATIO, block_scores, page_blocks
from veriharness.score.metrics.color import rgb_delta_e


def _text(text: str, x: float, y: float, w: float, h: float, color=(0, 0, 0)) -> TextBox:
    return TextBox(
        text=text, source="text", x=x, y=y, width=w, height=h, font_size_px=16, font_weight=400,
        color=color, positioning="static", pinned=False,
    )  # fmt: skip


def _page(*texts: TextBox, width: int = 100, height: int = 200) -> DomRecord:
    size = Size(width=width, height=height)
    return DomRecord(viewport=size, page=size, texts=list(texts), images=[])


def test_hungarian_pairs_maximise_total_similarity_and_drop_weak_pairs() -> None:
    reference = _page(_text("Pricing plans", 0, 0, 1, 1), _text("Contact us", 0, 10, 1, 1))
    answer = _page(
        _text("contact us", 0, 0, 1, 1),
        _text("Pricing plan", 0, 50, 1, 1),
        _text("zzz", 0, 100, 1, 1),
    )
    pairs = block_scores(reference, answer).pairs
    assert sorted((p.reference, p.answer) for p in pairs) == [((0,), (1,)), ((1,), (0,))]
    assert all(p.ratio >= MIN_TEXT_RATIO for p in pairs)
    unrelated = block_scores(_page(_text("abc", 0, 0, 1, 1)), _page(_text("xyz", 0, 0, 1, 1)))
    assert unrelated.pairs == []


def test_texts_compare_lowercased() -> None:
    scores = block_scores(_page(_text("PRICING", 0, 0, 9, 9)), _page(_text("Pricing", 0, 0, 9, 9)))
    assert scores.text_similarity == 1.0


def test_a_paragraph_written_one_element_per_line_is_merged_back() -> None:
    paragraph = (
        "The conductor walks the corridor at half past nine, folding down beds with the speed "
        "of someone who has done it thousands of times."
    )
    words = paragraph.split()
    lines = [" ".join(words[:9]), " ".join(words[9:18]), " ".join(words[18:])]
    reference = _page(_text("Title", 0, 0, 50, 10), _text(paragraph, 0, 20, 100, 30))
    answer = _page(
        _text("Title", 0, 0, 50, 10),
        *(_text(line, 0, 20 + 10 * k, 100, 10) for k, line in enumerate(lines)),
    )
    scores = block_scores(reference, answer)
    assert scores.block_match == pytest.approx(1.0)
    assert scores.text_similarity == pytest.approx(1.0)
    assert sorted(p.answer for p in scores.pairs) == [(0,), (1, 2, 3)]
    # The merged block's box is the union of the lines', so its centre is the paragraph's.
    assert scores.position == pytest.approx(1.0)


def test_duplicate_texts_pair_by_their_neighbours() -> None:
    # "Orders" is in a sidebar and in a KPI card; the answer writes the card first. Without the
    # context bonus the two equal texts tie and the assignment crosses them.
    reference = _page(
        *(_text(t, 0, 20 * k, 40, 10) for k, t in enumerate(("Overview", "Orders", "Products"))),
        *(_text(t, 60, 20 * k, 40, 10) for k, t in enumerate(("Revenue", "Orders", "1,284"))),
    )
    answer = _page(*reference.texts[3:], *reference.texts[:3])
    scores = block_scores(reference, answer)
    assert sorted((p.reference, p.answer) for p in scores.pairs) == [
        ((0,), (3,)), ((1,), (4,)), ((2,), (5,)), ((3,), (0,)), ((4,), (1,)), ((5,), (2,)),
    ]  # fmt: skip
    assert scores.position == 1.0


def test_blocks_are_fractions_of_their_page_and_equal_boxes_are_one_block() -> None:
    page = _page(
        _text("Sign", 10, 20, 30, 10, (0, 0, 0)),
        _text("in", 10, 20, 30, 10, (100, 0, 0)),
        _text(" ", 0, 0, 5, 5),
        _text("Empty box", 0, 0, 0, 5),
        width=100,
        height=200,
    )
    (block,) = page_blocks(page)
    assert (block.text, block.nodes, block.color) == ("sign in", (0, 1), (50.0, 0.0, 0.0))
    assert (block.x, block.y, block.width, block.height) == (0.1, 0.1, 0.3, 0.05)


def test_block_areas_are_compared_as_fractions_of_their_page() -> None:
    # The answer page is twice as large with everything scaled: it covers the same share.
    reference = _page(_text("Kept", 0, 0, 10, 10), _text("Lost", 0, 50, 10, 10))
    answer = _page(_text("Kept", 0, 0, 20, 20), width=200, height=400)
    assert block_scores(reference, answer).block_match == pytest.approx(2 / 3)


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
    assert (same.text_similarity, same.position) == (1.0, 1.0)
    assert same.block_match == pytest.approx(1.0) and same.color == pytest.approx(1.0)
    assert block_scores(_page(), _page())[:4] == (None, None, None, None)
    assert block_scores(page, _page())[:4] == (0.0, 0.0, 0.0, 0.0)
