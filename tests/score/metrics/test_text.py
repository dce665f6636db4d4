"""Word precision/recall/F1 on hand-computed cases."""

from __future__ import annotations

import pytest

from veriharness.score.metrics.text import (
    GluedWord,
    char_count,
    normalise_word,
    ocr_word_scores,
    split_glued,
    word_scores,
    words_of,
)


def test_normalisation_folds_case_and_strips_punctuation_and_symbols() -> None:
    assert normalise_word("Price:") == "price"
    assert normalise_word("$49") == "49"
    assert normalise_word("STRASSE") == normalise_word("straße")
    assert words_of(["Hello, world!", " -- ", "14-day"]) == ["hello", "world", "14day"]


def test_multiset_matching_counts_each_reference_word_at_most_as_often_as_it_occurs() -> None:
    # answer: a a a b (4 words); reference: a b c (3 words); matched: a, b = 2
    scores = word_scores(["a a a b"], ["a b c"])
    assert scores.matched == 2
    assert scores.precision == pytest.approx(2 / 4)
    assert scores.recall == pytest.approx(2 / 3)
    assert scores.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))


def test_identical_bags_score_one() -> None:
    scores = word_scores(["Buy now", "Free trial"], ["free TRIAL", "buy now!"])
    assert (scores.precision, scores.recall, scores.f1) == (1.0, 1.0, 1.0)


def test_empty_answer_against_a_reference_scores_zero_and_both_empty_is_undefined() -> None:
    assert word_scores([], ["some words"])[:3] == (0.0, 0.0, 0.0)
    assert word_scores([], [])[:3] == (None, None, None)
    nothing_to_recall = word_scores(["extra"], [])
    assert nothing_to_recall.precision == 0.0
    assert nothing_to_recall.recall is None and nothing_to_recall.f1 is None


def test_char_count_ignores_whitespace() -> None:
    assert char_count(["a b\n c", "  dd "]) == 5


def test_a_glued_ocr_word_is_split_into_the_answers_consecutive_spare_words() -> None:
    scores, glued = ocr_word_scores(["A person starts following"], ["Aperson starts following"])
    assert glued == [GluedWord("aperson", ("a", "person"))]
    # Reference becomes a, person, starts, following: 4 words, all matched.
    assert (scores.matched, scores.answer_words, scores.reference_words) == (4, 4, 4)
    assert scores.f1 == 1.0
    # Without the split: 2 of 4 answer words and 2 of 3 reference words match.
    plain = word_scores(["A person starts following"], ["Aperson starts following"])
    assert (plain.matched, plain.precision) == (2, 0.5) and plain.recall == pytest.approx(2 / 3)


def test_splits_need_consecutive_answer_words_in_order() -> None:
    assert split_glued(["aperson"], ["person", "a"]) == (["aperson"], [])
    assert split_glued(["aperson"], ["a", "kind", "person"]) == (["aperson"], [])
    assert split_glued(["signupnow"], ["sign", "up", "now"]) == (
        ["sign", "up", "now"],
        [GluedWord("signupnow", ("sign", "up", "now"))],
    )
    # Four parts is beyond MAX_GLUED_PARTS.
    assert split_glued(["abcd"], ["a", "b", "c", "d"]) == (["abcd"], [])


def test_only_spare_answer_words_fill_a_glued_word() -> None:
    # "a" is already matched by the reference's own "a", so nothing is spare to split "aperson".
    assert split_glued(["a", "aperson"], ["a", "person"]) == (["a", "aperson"], [])
    # With two answer "a"s, one is spare.
    assert split_glued(["a", "aperson"], ["a", "a", "person"])[0] == ["a", "a", "person"]
    # A reference word the answer has is never split, even if a spare run spells it.
    assert split_glued(["today"], ["today", "to", "day"]) == (["today"], [])
    # Each spare run is used once: the second glued word stays whole.
    assert split_glued(["aperson", "aperson"], ["a", "person"]) == (
        ["a", "person", "aperson"],
        [GluedWord("aperson", ("a", "person"))],
    )
