"""Interaction metrics on small synthetic states (the agreement with Interaction2Code's own code
is in test_interaction2code.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from veriharness._util.ocr import Box
from veriharness.score.metrics.interaction import (
    State,
    centre_position,
    changed_region,
    char_bleu,
    compare_states,
    implement_rate,
    is_implemented,
    region_ssim,
    state_words,
)

STATES = Path(__file__).with_name("interaction2code") / "states"


def _page(height: int = 100, width: int = 120) -> Image.Image:
    return Image.new("RGB", (width, height), (255, 255, 255))


def _with_bar(image: Image.Image, box: tuple[int, int, int, int], colour: str) -> Image.Image:
    copy = image.copy()
    ImageDraw.Draw(copy).rectangle(box, fill=colour)
    return copy


def _stripes(height: int, width: int = 60) -> np.ndarray:
    """A page whose every row differs from its neighbours (no ambiguous blank rows)."""
    rows = np.arange(height, dtype=np.uint8)[:, None, None]
    return np.broadcast_to(rows, (height, width, 3)).copy()


def test_identical_states_have_no_region_and_are_not_implemented() -> None:
    page = _with_bar(_page(), (10, 10, 50, 20), "navy")
    assert changed_region(page, page.copy()) is None
    assert not is_implemented(True, page, page.copy())


def test_region_of_equal_sized_states_is_the_box_of_the_changed_pixels() -> None:
    before = _with_bar(_page(), (10, 10, 50, 20), "navy")
    after = _with_bar(before, (30, 40, 69, 59), "teal")
    assert changed_region(before, after) == Box(30, 40, 40, 20)
    assert is_implemented(True, before, after)


def test_inserted_rows_are_the_region_and_the_rows_they_push_down_are_not() -> None:
    before = _stripes(80)
    inserted = np.full((15, 60, 3), 200, dtype=np.uint8)
    after = np.concatenate([before[:30], inserted, before[30:]])
    region = changed_region(Image.fromarray(before), Image.fromarray(after))
    assert region == Box(0, 30, 60, 15)


def test_removed_rows_leave_a_region_where_they_were() -> None:
    before = _stripes(80)
    after = np.concatenate([before[:30], before[45:]])
    region = changed_region(Image.fromarray(before), Image.fromarray(after))
    assert region is not None and region.y in (29, 30) and region.width == 60


def test_a_change_of_width_makes_the_whole_after_state_the_region() -> None:
    assert changed_region(_page(width=120), _page(width=130)) == Box(0, 0, 130, 100)


def test_size_change_alone_counts_as_implemented_and_a_missing_trigger_never_does() -> None:
    assert is_implemented(True, _page(100), _page(110))
    before = _page()
    assert not is_implemented(False, before, _with_bar(before, (0, 0, 5, 5), "navy"))
    assert not is_implemented(True, before, None)


def test_implement_rate() -> None:
    assert implement_rate([True, False, True, True]) == 0.75
    assert implement_rate([]) is None


# Figures of nltk 3.10.4's sentence_bleu([reference], answer) on these strings, which is what
# Interaction2Code's get_bleu computes (it passes strings, so the tokens are characters).
@pytest.mark.parametrize(
    ("reference", "answer", "nltk"),
    [
        ("Show monthly prices", "Show yearly prices", 0.6187129112191097),
        ("13 likes Liked", "13 likes", 0.4723665527410147),
        ("Basic $90/yr Pro $290/yr", "Basic $99/yr Pro $299 per year", 0.5703815182048178),
    ],
)
def test_char_bleu_reproduces_nltk(reference: str, answer: str, nltk: float) -> None:
    assert char_bleu(reference, answer) == pytest.approx(nltk, abs=1e-12)


def test_char_bleu_edges() -> None:
    assert char_bleu("same text", "same text") == pytest.approx(1.0)
    assert char_bleu("abc", "abd") == 0.0  # no shared 3-gram (nltk: 1e-154)
    assert char_bleu("", "") == 1.0
    assert char_bleu("text", "") == 0.0 and char_bleu("", "text") == 0.0


def test_region_ssim_resizes_the_answer_crop_to_the_reference_crop() -> None:
    reference = _with_bar(_page(40, 80), (10, 10, 60, 25), "navy")
    assert region_ssim(reference, reference.resize((160, 80))) > 0.9
    assert region_ssim(reference, _page(40, 80)) < 0.7


def test_centre_position_compares_centres_as_fractions_of_each_page() -> None:
    reference = Box(40, 10, 20, 20)  # centre (50, 20) on 100 x 100
    assert centre_position(reference, (100, 100), Box(80, 20, 40, 40), (200, 200)) == 1.0
    assert centre_position(reference, (100, 100), Box(60, 10, 20, 20), (100, 100)) == 0.8


def _words(image: Image.Image) -> list[str]:
    """A stand-in reader: one word per distinct non-white colour, so text follows the pixels."""
    colours = {tuple(c) for c in np.asarray(image).reshape(-1, 3).tolist()} - {(255, 255, 255)}
    return sorted("c" + "".join(f"{v:02x}" for v in c) for c in colours)


def test_compare_states_scores_an_implemented_interaction() -> None:
    before = _with_bar(_page(), (5, 5, 40, 15), "navy")  # the trigger
    after = _with_bar(before, (20, 40, 99, 79), "teal")
    reference = State(before, after, Box(5, 5, 36, 11), changed_region(before, after))
    answer_after = _with_bar(before, (30, 40, 109, 79), "teal")
    answer = State(before, answer_after, Box(5, 5, 36, 11), changed_region(before, answer_after))
    scores = compare_states(reference, answer, _words)
    assert scores.implemented
    assert scores.region_ssim == pytest.approx(1.0)
    assert scores.region_text == pytest.approx(1.0)
    assert scores.trigger_position == 1.0
    assert scores.region_position == pytest.approx(1 - 10 / 120)
    assert scores.state_ssim is not None and 0.5 < scores.state_ssim < 1.0


def test_compare_states_leaves_region_metrics_empty_when_nothing_happened() -> None:
    before = _with_bar(_page(), (5, 5, 40, 15), "navy")
    after = _with_bar(before, (20, 40, 99, 79), "teal")
    reference = State(before, after, Box(5, 5, 36, 11), changed_region(before, after))
    dead = compare_states(reference, State(before, before.copy(), Box(5, 5, 36, 11), None), _words)
    assert not dead.implemented and dead.state_ssim is not None
    assert dead.region_ssim is dead.region_text is dead.trigger_position is None
    missing = compare_states(reference, State(before, None, None, None), _words)
    assert missing == (False, None, None, None, None, None, None)


def test_compare_states_refuses_an_incomplete_reference() -> None:
    page = _page()
    with pytest.raises(ValueError, match="reference state"):
        compare_states(State(page, page, None, None), State(page, page, None, None), _words)


def test_state_words_reads_a_real_state_with_tesseract() -> None:
    with Image.open(STATES / "ref-menu.after.png") as image:
        menu = image.convert("RGB").crop((24, 52, 176, 144))
    assert {"Storage", "Compute", "Analytics"} <= set(state_words(menu))
