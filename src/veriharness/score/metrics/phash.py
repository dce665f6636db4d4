"""A perceptual hash from the discrete cosine transform, to tell whether two images are one picture.

The image is reduced to luma and resampled to 32 x 32 (Lanczos), transformed with an orthonormal
2-D DCT-II, and the 8 x 8 lowest frequencies are kept. Each of the 64 bits says whether a
coefficient lies above the median of those 64 coefficients without the DC term (the mean
brightness, which says nothing about structure). Two hashes are compared by Hamming distance:
0 for the same picture, about 32 for unrelated ones. Rescaling, recompression and small
colour shifts move few bits, which is what screenshot substitution looks like.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from scipy.fft import dctn

__all__ = ["HASH_BITS", "phash", "hamming"]

_SAMPLE = 32
_KEEP = 8
HASH_BITS = _KEEP * _KEEP


def phash(image: Image.Image | str | Path) -> int:
    """The 64-bit DCT hash of an image, as an integer."""
    if not isinstance(image, Image.Image):
        with Image.open(image) as opened:
            opened.load()
            return phash(opened)
    if image.mode in ("RGBA", "LA", "P"):
        rgba = image.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(canvas, rgba)
    small = image.convert("L").resize((_SAMPLE, _SAMPLE), Image.Resampling.LANCZOS)
    coefficients = dctn(np.asarray(small, dtype=np.float64), type=2, norm="ortho")
    low = coefficients[:_KEEP, :_KEEP].flatten()
    median = float(np.median(low[1:]))
    bits = low > median
    return int(sum(1 << index for index, bit in enumerate(bits) if bit))


def hamming(first: int, second: int) -> int:
    """Number of differing bits between two hashes."""
    return (first ^ second).bit_count()
