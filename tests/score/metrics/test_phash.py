"""The DCT hash: same picture close, different pictures far."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

from veriharness.score.metrics.phash import HASH_BITS, hamming, phash


def _page(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    image = Image.new("RGB", (320, 200), "white")
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x, y = int(rng.integers(0, 280)), int(rng.integers(0, 170))
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        draw.rectangle((x, y, x + int(rng.integers(10, 120)), y + int(rng.integers(5, 60))), colour)
    return image


def test_hamming_counts_differing_bits() -> None:
    assert hamming(0b1011, 0b0001) == 2
    assert hamming(2**64 - 1, 0) == HASH_BITS


def test_a_rescaled_recompressed_copy_stays_within_a_few_bits() -> None:
    original = _page(1)
    buffer = io.BytesIO()
    original.resize((160, 100)).save(buffer, "JPEG", quality=60)
    copy = Image.open(io.BytesIO(buffer.getvalue()))
    assert phash(original) == phash(original.copy())
    assert hamming(phash(original), phash(copy)) <= 6


def test_different_pages_are_far_apart() -> None:
    distances = [hamming(phash(_page(1)), phash(_page(seed))) for seed in range(2, 8)]
    assert min(distances) > 12
