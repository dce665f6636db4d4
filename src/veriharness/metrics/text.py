"""Word-level text agreement: precision, recall and F1 of two bags of words.

Words are normalised before comparison: Unicode NFKC, case-folded, and every punctuation or
symbol character removed (so "Price:" and "price" agree, "$49" becomes "49"); what is left
empty is dropped. Matching is by multiset: a word that appears three times in the reference is
matched at most three times. Precision divides the matched count by the answer's word count,
recall by the reference's.

Edge cases are explicit rather than smoothed: with no reference words, recall is undefined
(None); with no answer words but some reference words, precision is 0 (the answer produced
nothing correct), as is F1; with neither, all three are None.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["WordScores", "normalise_word", "words_of", "word_scores", "char_count"]


class WordScores(NamedTuple):
    precision: float | None
    recall: float | None
    f1: float | None
    matched: int
    answer_words: int
    reference_words: int


def normalise_word(word: str) -> str:
    """A word case-folded with punctuation and symbols removed ('' when nothing is left)."""
    folded = unicodedata.normalize("NFKC", word).casefold()
    return "".join(ch for ch in folded if unicodedata.category(ch)[0] not in ("P", "S"))


def words_of(texts: Iterable[str]) -> list[str]:
    """Normalised, non-empty words of some texts, split on whitespace."""
    words = (normalise_word(token) for text in texts for token in text.split())
    return [word for word in words if word]


def char_count(texts: Iterable[str]) -> int:
    """Characters of some texts, whitespace not counted."""
    return sum(len("".join(text.split())) for text in texts)


def word_scores(answer: Iterable[str], reference: Iterable[str]) -> WordScores:
    """Multiset precision/recall/F1 of normalised answer words against reference words."""
    mine, theirs = Counter(words_of(answer)), Counter(words_of(reference))
    n_mine, n_theirs = sum(mine.values()), sum(theirs.values())
    matched = sum((mine & theirs).values())
    if n_mine == 0 and n_theirs == 0:
        return WordScores(None, None, None, 0, 0, 0)
    precision = matched / n_mine if n_mine else 0.0
    recall = matched / n_theirs if n_theirs else None
    if recall is None:
        f1 = None
    elif precision + recall == 0:
        f1 = 0.0
    else:
        f1 = 2 * precision * recall / (precision + recall)
    return WordScores(precision, recall, f1, matched, n_mine, n_theirs)
