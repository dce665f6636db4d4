"""CIEDE2000 against the published test pairs, and the sRGB to CIELAB conversion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from veriharness.score.metrics.color import ciede2000, rgb_delta_e, srgb_to_lab

PAIRS = np.loadtxt(Path(__file__).with_name("sharma2005_pairs.tsv"))


def test_all_34_sharma_pairs_match_to_the_published_four_decimals() -> None:
    assert PAIRS.shape == (34, 7)
    got = ciede2000(PAIRS[:, 0:3], PAIRS[:, 3:6])
    np.testing.assert_allclose(got, PAIRS[:, 6], atol=5e-5)


def test_the_difference_is_symmetric_on_the_published_pairs() -> None:
    np.testing.assert_allclose(
        ciede2000(PAIRS[:, 3:6], PAIRS[:, 0:3]), ciede2000(PAIRS[:, 0:3], PAIRS[:, 3:6])
    )


def test_srgb_primaries_map_to_their_known_lab_values() -> None:
    np.testing.assert_allclose(srgb_to_lab([255, 255, 255]), [100.0, 0.0, 0.0], atol=1e-3)
    np.testing.assert_allclose(srgb_to_lab([0, 0, 0]), [0.0, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(srgb_to_lab([255, 0, 0]), [53.2408, 80.0925, 67.2032], atol=1e-3)


def test_identical_colours_differ_by_zero_and_black_white_by_100() -> None:
    assert rgb_delta_e([12, 200, 77], [12, 200, 77]) == pytest.approx(0.0, abs=1e-12)
    assert rgb_delta_e([0, 0, 0], [255, 255, 255]) == pytest.approx(100.0, abs=1e-3)


def test_out_of_range_channels_are_refused_with_the_values() -> None:
    with pytest.raises(ValueError, match="0-255.*300"):
        srgb_to_lab([300, 0, 0])
