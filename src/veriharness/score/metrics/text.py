"""Word-level text agreement: precision, recall and F1 of two bags of words.

Words are normalised before comparison: Unicode NFKC, case-folded, and every punctuation or
symbol character removed (so "Price:" and "price" agree, "$49" becomes "49"); what is left
empty is dropped. Matching is by multiset: a word that appears three times in the reference is
matched at most three times. Precision divides the matched count by the answer's word count,
recall by the reference's.

OCR readings add one error of their own: tesseract drops a narrow space, so "A person" on the
page is read as the single word "aperson". `ocr_word_scores` therefore first splits each glued
reference word (`split_glued`): a reference word that the answer lacks, but which the answer
spells as two or three consecutive words it has to spare, is replaced by those words. Only the
answer's own consecutive words can fill a gap, so no reordering or partial spelling earns credit;
the opposite error (a space inserted inside a word) was never seen on the example tasks and is
not tolerated.

Edge cases are explicit rather than smoothed: with no reference words, recall is undefined
(None); with no answer words but some reference words, precision is 0 (the answer produced
nothing correct), as is F1; with neither, all three are None.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = [
    "WordScores",
    "GluedWord",
    "normalise_word",
    "words_of",
    "word_scores",
    "split_glued",
    "ocr_word_scores",
    "char_count",
]

MAX_GLUED_PARTS = 3


class WordScores(NamedTuple):
    precision: float | None
    recall: float | None
    f1: float | None
    matched: int
    answer_words: int
    reference_words: int


class GluedWord(NamedTuple):
    """A reference word read without its spaces, and the answer words it was split into."""

    word: str
    parts: tuple[str, ...]


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
    return _scores(words_of(answer), words_of(reference))


def ocr_word_scores(
    answer: Iterable[str], reference_ocr: Iterable[str]
) -> tuple[WordScores, list[GluedWord]]:
    """word_scores against OCR words after their glued words are split, and those splits."""
    mine = words_of(answer)
    theirs, glued = split_glued(words_of(reference_ocr), mine)
    return _scores(mine, theirs), glued


def split_glued(
    reference: Sequence[str], answer: Sequence[str]
) -> tuple[list[str], list[GluedWord]]:
    """`reference` (normalised words) with each word the answer lacks but spells as 2 to
    MAX_GLUED_PARTS consecutive spare words replaced by those words; and the splits made.

    Spare words are the answer's words beyond what the reference matches. Reference words are
    taken in order, and each takes the answer's first run that is still spare."""
    spare = Counter(answer) - Counter(reference)
    missing = Counter(reference) - Counter(answer)
    runs: dict[str, list[tuple[str, ...]]] = {}
    for start in range(len(answer)):
        for length in range(2, MAX_GLUED_PARTS + 1):
            parts = tuple(answer[start : start + length])
            if len(parts) == length:
                runs.setdefault("".join(parts), []).append(parts)
    split: list[str] = []
    glued: list[GluedWord] = []
    for word in reference:
        found = _spare_run(runs.get(word, []), spare) if missing[word] else None
        if found is None:
            split.append(word)
            continue
        missing[word] -= 1
        spare.subtract(found)
        split.extend(found)
        glued.append(GluedWord(word, found))
    return split, glued


def _spare_run(candidates: list[tuple[str, ...]], spare: Counter[str]) -> tuple[str, ...] | None:
    for parts in candidates:
        if all(spare[part] >= count for part, count in Counter(parts).items()):
            return parts
    return None


def _scores(mine_words: Sequence[str], their_words: Sequence[str]) -> WordScores:
    mine, theirs = Counter(mine_words), Counter(their_words)
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
