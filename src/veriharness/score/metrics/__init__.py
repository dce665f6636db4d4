"""Fidelity metrics for a rendered answer against its reference.

One concept per module: `pixels` (SSIM, mean absolute error), `text` (word precision/recall/F1),
`blocks` (text-block metrics after Design2Code), `interaction` (states before and after an
interaction, after Interaction2Code), `color` (CIEDE2000), `phash` (DCT perceptual
hash), `refs` (files an answer page refers to) and `inputs` (the render-stage files, read whole
through `runfolder.render`).
The formulas are written out in docs/metrics.md.
"""

from veriharness.score.metrics.blocks import block_scores
from veriharness.score.metrics.color import ciede2000, rgb_delta_e, srgb_to_lab
from veriharness.score.metrics.phash import hamming, phash
from veriharness.score.metrics.pixels import fit_to_reference, mae, ssim
from veriharness.score.metrics.text import word_scores

__all__ = [
    "block_scores",
    "ciede2000",
    "rgb_delta_e",
    "srgb_to_lab",
    "hamming",
    "phash",
    "fit_to_reference",
    "mae",
    "ssim",
    "word_scores",
]
