"""SSIM and MAE on hand-computed cases, and the explicit size handling."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from veriharness.score.metrics.pixels import fit_to_reference, load_rgb, mae, ssim


def _solid(value: int, size: tuple[int, int] = (32, 24)) -> Image.Image:
    return Image.new("RGB", size, (value, value, value))


def _noise(seed: int, size: tuple[int, int] = (64, 48)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def test_identical_images_have_ssim_one_and_mae_zero() -> None:
    image = _noise(1)
    assert ssim(image, image) == pytest.approx(1.0)
    assert mae(image, image) == 0.0


def test_mae_is_the_mean_absolute_channel_difference_on_a_0_1_scale() -> None:
    assert mae(_solid(0), _solid(255)) == pytest.approx(1.0)
    a = np.zeros((1, 2, 3), dtype=np.uint8)
    b = a.copy()
    b[0, 1] = (51, 102, 0)  # one of two pixels off by 0.2, 0.4, 0 -> mean (0.6 / 6) = 0.1
    assert mae(Image.fromarray(a), Image.fromarray(b)) == pytest.approx(0.1)


def test_ssim_of_flat_images_reduces_to_the_luminance_term() -> None:
    # No variance anywhere: SSIM = (2 mu_x mu_y + C1) / (mu_x^2 + mu_y^2 + C1), C1 = 0.01^2.
    c1 = 0.01**2
    assert ssim(_solid(255), _solid(0)) == pytest.approx(c1 / (1 + c1))
    x, y = 0.4, 0.6
    expected = (2 * x * y + c1) / (x * x + y * y + c1)
    assert ssim(_solid(102), _solid(153)) == pytest.approx(expected, rel=1e-9)


def test_ssim_falls_as_noise_grows() -> None:
    base = np.asarray(_noise(2), dtype=np.float64)
    rng = np.random.default_rng(3)
    scores = []
    for amount in (5, 30, 90):
        noisy = np.clip(base + rng.normal(0, amount, base.shape), 0, 255).astype(np.uint8)
        scores.append(ssim(Image.fromarray(base.astype(np.uint8)), Image.fromarray(noisy)))
    assert 1.0 > scores[0] > scores[1] > scores[2]


def test_different_sizes_are_refused_by_the_metrics() -> None:
    with pytest.raises(ValueError, match="differ in size"):
        mae(_solid(0, (10, 10)), _solid(0, (10, 11)))


def test_fit_pads_with_white_and_crops_from_the_top_left() -> None:
    small = _solid(0, (4, 3))
    fitted = fit_to_reference(small, (6, 5))
    assert fitted.resized and fitted.original_size == (4, 3)
    pixels = np.asarray(fitted.image)
    assert (pixels[:3, :4] == 0).all() and (pixels[3:, :] == 255).all()
    assert (pixels[:, 4:] == 255).all()
    big = fit_to_reference(_solid(0, (9, 9)), (6, 5))
    assert big.image.size == (6, 5) and (np.asarray(big.image) == 0).all()
    same = fit_to_reference(small, (4, 3))
    assert not same.resized and same.image is small


def test_transparent_pixels_load_as_white(tmp_path) -> None:
    clear = Image.new("RGBA", (3, 3), (0, 0, 0, 0))
    clear.save(tmp_path / "clear.png")
    assert (np.asarray(load_rgb(tmp_path / "clear.png")) == 255).all()
