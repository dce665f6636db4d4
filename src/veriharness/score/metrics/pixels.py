"""Pixel metrics between a render and its reference: SSIM and mean absolute error.

Both are computed at the reference size. Images are read as sRGB; transparent pixels are
composited onto white, as a browser shows a page without a background. A render whose size
differs from the reference (the render contract says it never should) is placed at the top-left
of a white canvas of the reference size, which crops what overhangs and pads what is missing with
white; `fit_to_reference` reports that it did so, and the caller records it.

SSIM follows Wang, Bovik, Sheikh & Simoncelli (2004): local statistics under a Gaussian window
(sigma 1.5, truncated at 3.5 sigma, i.e. 11 x 11), constants K1 = 0.01 and K2 = 0.03 on a
dynamic range of 1, computed on the luma channel (ITU-R BT.601 weights) and averaged over every
pixel (borders use reflected values).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from PIL import Image
from scipy.ndimage import gaussian_filter

__all__ = ["Fitted", "load_rgb", "fit_to_reference", "ssim", "mae", "luma"]

_SIGMA = 1.5
_TRUNCATE = 3.5
_K1 = 0.01
_K2 = 0.03
_BT601 = np.array([0.299, 0.587, 0.114])


class Fitted(NamedTuple):
    """A render brought to the reference size; `original_size` is (width, height) before."""

    image: Image.Image
    original_size: tuple[int, int]
    resized: bool


def load_rgb(path: str | Path) -> Image.Image:
    """An image file as RGB, transparent areas composited onto white."""
    with Image.open(path) as raw:
        raw.load()
        if raw.mode in ("RGBA", "LA") or (raw.mode == "P" and "transparency" in raw.info):
            rgba = raw.convert("RGBA")
            canvas = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            return Image.alpha_composite(canvas, rgba).convert("RGB")
        return raw.convert("RGB")


def fit_to_reference(render: Image.Image, size: tuple[int, int]) -> Fitted:
    """`render` at exactly `size`: unchanged when it already matches, else cropped or padded with
    white from the top-left corner (never rescaled, so a layout is not stretched into fit)."""
    if render.size == size:
        return Fitted(render, render.size, False)
    canvas = Image.new("RGB", size, (255, 255, 255))
    canvas.paste(render.crop((0, 0, min(render.width, size[0]), min(render.height, size[1]))))
    return Fitted(canvas, render.size, True)


def _as_float(image: Image.Image) -> NDArray[np.float64]:
    return np.asarray(image.convert("RGB"), dtype=np.float64) / 255.0


def luma(image: Image.Image) -> NDArray[np.float64]:
    """BT.601 luma in 0-1."""
    values: NDArray[np.float64] = _as_float(image) @ _BT601
    return values


def _same_size(a: Image.Image, b: Image.Image) -> None:
    if a.size != b.size:
        raise ValueError(f"images differ in size: {a.size} vs {b.size}; fit_to_reference first")


def ssim(a: Image.Image, b: Image.Image) -> float:
    """Mean structural similarity of two equally sized images (1 = identical)."""
    _same_size(a, b)
    x, y = luma(a), luma(b)

    def blur(values: NDArray[np.float64]) -> NDArray[np.float64]:
        blurred: NDArray[np.float64] = gaussian_filter(
            values, _SIGMA, truncate=_TRUNCATE, mode="reflect"
        )
        return blurred

    mu_x, mu_y = blur(x), blur(y)
    var_x = blur(x * x) - mu_x**2
    var_y = blur(y * y) - mu_y**2
    cov = blur(x * y) - mu_x * mu_y
    c1, c2 = _K1**2, _K2**2
    index = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / (
        (mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2)
    )
    return float(index.mean())


def mae(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference over all pixels and RGB channels, on a 0-1 scale."""
    _same_size(a, b)
    return float(np.abs(_as_float(a) - _as_float(b)).mean())
