"""Word precision/recall/F1 on hand-computed cases."""

from __future__ import annotations

import pytest

from veriharness.metrics.text import char_count, normalise_word, word_scores, words_of


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
