"""Text-block metrics after Design2Code (Si et al., 2024), matching stage as published.

A block is one visible text node of a page's DOM (from `dom.json`), with its text, box and
colour; nodes without area or visible text are not blocks. Reference blocks come from the task's
`reference_dom.json`, answer blocks from the run's `dom.json`. Boxes are taken as fractions of
their own page's width and height, so areas and positions of pages of different sizes compare.

Matching follows Design2Code's published method (NoviScl/Design2Code, `metrics/visual_score.py`,
commit in docs/metrics.md), written anew here:
1. Texts are compared lowercased with difflib's SequenceMatcher ratio r(answer, reference),
   default junk heuristic included, as Design2Code does.
2. Blocks of one page with the very same box are one block (texts joined by a space).
3. Neighbour merging: on each page in turn (answer first), every merge of two consecutive blocks
   is tried against the current one-to-one assignment (Hungarian method on cost -r). A merge is
   worth doing when the pairs it changes gain more than `MERGE_MIN_GAIN` in mean r and its best
   new pair beats the best pair it dropped; the worth-doing merges are applied best first, never
   two sharing a block. Rounds repeat until neither page changes. A merged block takes the union
   box, the joined text and the channel-wise floor mean of the two colours.
4. Final assignment with a context bonus: a cell with r > 0.5 has its cost lowered by
   `CONTEXT_BONUS` times the sum of the two best ratios around it (within `CONTEXT_WINDOW` rows
   and columns), so among equal texts the one whose neighbours also match wins.
5. Pairs with r below `MIN_TEXT_RATIO` are discarded.

From the kept pairs:
- block_match = area of matched blocks (both pages) / area of all blocks (both pages), areas as
  fractions of their page;
- text_similarity = mean r;
- position = mean of 1 - max(|dx|, |dy|) between block centres (fractions of each page);
- color = mean of max(0, 1 - CIEDE2000 / 100) between the two text colours.

Deliberate difference from Design2Code: blocks are read from the DOM, not detected by
recolouring and screenshot differencing, and colours are the computed CSS colours rather than
the mean of glyph pixels (docs/metrics.md gives the measured sizes).
When neither page has a block every metric is None; when blocks exist but none pair up every
metric is 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher
from statistics import fmean
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment

from veriharness.runfolder.render import DomRecord
from veriharness.score.metrics.color import ciede2000, srgb_to_lab

__all__ = [
    "MIN_TEXT_RATIO",
    "MERGE_MIN_GAIN",
    "CONTEXT_BONUS",
    "CONTEXT_WINDOW",
    "Block",
    "BlockPair",
    "BlockScores",
    "page_blocks",
    "same_box_joined",
    "match_blocks",
    "block_scores",
    "scores_of_blocks",
]

MIN_TEXT_RATIO = 0.5
MERGE_MIN_GAIN = 0.05
CONTEXT_BONUS = 0.1
CONTEXT_WINDOW = 1
_CONTEXT_MIN_RATIO = 0.5


Rgb = tuple[float, float, float]


class Block(NamedTuple):
    """A text block with its box as fractions of its page, and the DOM texts it holds."""

    text: str
    x: float
    y: float
    width: float
    height: float
    color: Rgb
    nodes: tuple[int, ...]

    @property
    def area(self) -> float:
        return self.width * self.height

    @property
    def centre(self) -> tuple[float, float]:
        return (self.x + self.width / 2, self.y + self.height / 2)


class BlockPair(NamedTuple):
    """A matched pair: DOM text indexes on each page (several after merging), and r."""

    reference: tuple[int, ...]
    answer: tuple[int, ...]
    ratio: float


class BlockScores(NamedTuple):
    block_match: float | None
    text_similarity: float | None
    position: float | None
    color: float | None
    pairs: list[BlockPair]
    reference_blocks: int
    answer_blocks: int


def _mix(first: Rgb, second: Rgb, *, floor: bool) -> Rgb:
    """Channel-wise mean of two colours; Design2Code floors it when it merges neighbours."""
    (r1, g1, b1), (r2, g2, b2) = first, second
    if floor:
        return ((r1 + r2) // 2, (g1 + g2) // 2, (b1 + b2) // 2)
    return ((r1 + r2) / 2, (g1 + g2) / 2, (b1 + b2) / 2)


def _join(first: Block, second: Block) -> Block:
    x0, y0 = min(first.x, second.x), min(first.y, second.y)
    x1 = max(first.x + first.width, second.x + second.width)
    y1 = max(first.y + first.height, second.y + second.height)
    color = _mix(first.color, second.color, floor=True)
    return Block(
        f"{first.text} {second.text}", x0, y0, x1 - x0, y1 - y0, color, first.nodes + second.nodes
    )


def same_box_joined(blocks: Sequence[Block]) -> list[Block]:
    """`blocks` with those sharing one box made one block: texts joined by a space in order, the
    channel-wise mean colour."""
    by_box: dict[tuple[float, float, float, float], Block] = {}
    for block in blocks:
        box = (block.x, block.y, block.width, block.height)
        same = by_box.get(box)
        if same is None:
            by_box[box] = block
        else:
            color = _mix(same.color, block.color, floor=False)
            nodes = same.nodes + block.nodes
            by_box[box] = same._replace(text=f"{same.text} {block.text}", color=color, nodes=nodes)
    return list(by_box.values())


def page_blocks(page: DomRecord) -> list[Block]:
    """The page's text nodes as blocks, in document order; texts sharing one box joined."""
    width, height = max(page.page.width, 1), max(page.page.height, 1)
    blocks: list[Block] = []
    for index, node in enumerate(page.texts):
        text = " ".join(node.text.split()).lower()
        if not text or node.area <= 0:
            continue
        box = (node.x / width, node.y / height, node.width / width, node.height / height)
        red, green, blue = node.color
        blocks.append(Block(text, *box, (float(red), float(green), float(blue)), (index,)))
    return same_box_joined(blocks)


class _Ratios:
    """SequenceMatcher ratios r(answer text, reference text), each pair computed once."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], float] = {}

    def __call__(self, answer: str, reference: str) -> float:
        key = (answer, reference)
        if key not in self._known:
            self._known[key] = SequenceMatcher(None, answer, reference).ratio()
        return self._known[key]

    def matrix(self, answer: Sequence[Block], reference: Sequence[Block]) -> NDArray[np.float64]:
        return np.array([[self(a.text, r.text) for r in reference] for a in answer]).reshape(
            len(answer), len(reference)
        )


def _with_context(cost: NDArray[np.float64]) -> NDArray[np.float64]:
    """Costs of likely pairs lowered by the best neighbouring pairs (the context bonus)."""
    adjusted = cost.copy()
    rows, cols = cost.shape
    w = CONTEXT_WINDOW
    for i, j in zip(*np.nonzero(cost < -_CONTEXT_MIN_RATIO), strict=True):
        top, left = max(0, i - w), max(0, j - w)
        window = cost[top : min(rows, i + w + 1), left : min(cols, j + w + 1)]
        own = (i - top) * window.shape[1] + (j - left)
        around = np.sort(np.delete(window.ravel(), own))
        adjusted[i, j] += CONTEXT_BONUS * np.sum(around[: 2 * w][::-1])
    return adjusted


def _assign(
    ratios: NDArray[np.float64], context: bool
) -> tuple[list[tuple[int, int]], list[float]]:
    """One-to-one assignment minimising cost -r (with the context bonus if asked): the pairs
    (answer, reference) and their costs."""
    cost = -ratios
    if context:
        cost = _with_context(cost)
    rows, cols = linear_sum_assignment(cost)
    pairs = [(int(r), int(c)) for r, c in zip(rows, cols, strict=True)]
    return pairs, [float(cost[r, c]) for r, c in pairs]


def _mean(costs: list[float]) -> float:
    # Summed in order, not with fsum: merges near the threshold then decide as Design2Code's do.
    return sum(costs) / len(costs) if costs else 0.0


def _gain(before: list[float], after: list[float]) -> float:
    """How much a merge improves the assignment: mean r of the pairs only `after` has minus
    mean r of those only `before` has (costs given, -r); 0 unless its best new pair is better
    than the best pair it replaced."""
    dropped = list((Counter(before) - Counter(after)).elements())
    added = list((Counter(after) - Counter(before)).elements())
    gain = _mean(dropped) - _mean(added)
    if gain > 0 and dropped and added and min(added) >= min(dropped):
        return 0.0
    return gain


def _merge_once(
    blocks: list[Block], others: list[Block], ratios: _Ratios, answer_side: bool
) -> list[Block] | None:
    """`blocks` (one page) after the worth-doing merges of neighbours against `others` (the
    other page), or None when there is none. Ratio matrices have one row per block of `blocks`
    and are turned answer-by-reference for the assignment."""

    def r(block: Block, other: Block) -> float:
        return ratios(block.text, other.text) if answer_side else ratios(other.text, block.text)

    def costs(rows: NDArray[np.float64]) -> list[float]:
        return _assign(rows if answer_side else rows.T, context=False)[1]

    base = np.array([[r(b, o) for o in others] for b in blocks])
    before = costs(base)
    gains: list[tuple[float, int]] = []
    for k in range(len(blocks) - 1):
        joined = np.array([[r(_join(blocks[k], blocks[k + 1]), o) for o in others]])
        gain = _gain(before, costs(np.vstack((base[:k], joined, base[k + 2 :]))))
        if gain > MERGE_MIN_GAIN:
            gains.append((gain, k))
    if not gains:
        return None
    taken: set[int] = set()
    for _, k in sorted(gains, key=lambda g: -g[0]):
        if k not in taken and k + 1 not in taken:
            taken.update((k, k + 1))
    merged: list[Block] = []
    k = 0
    while k < len(blocks):
        if k in taken:
            merged.append(_join(blocks[k], blocks[k + 1]))
            k += 2
        else:
            merged.append(blocks[k])
            k += 1
    return merged


def _merge_neighbours(
    answer: list[Block], reference: list[Block], ratios: _Ratios
) -> tuple[list[Block], list[Block]]:
    """Both pages after rounds of neighbour merging, until neither changes."""
    while True:
        changed = False
        merged = _merge_once(answer, reference, ratios, answer_side=True)
        if merged is not None:
            answer, changed = merged, True
        merged = _merge_once(reference, answer, ratios, answer_side=False)
        if merged is not None:
            reference, changed = merged, True
        if not changed:
            return answer, reference


def match_blocks(
    reference: list[Block], answer: list[Block]
) -> tuple[list[Block], list[Block], list[tuple[int, int, float]]]:
    """Both pages' blocks after merging, and the kept pairs (reference, answer, r) between them."""
    if not reference or not answer:
        return reference, answer, []
    ratios = _Ratios()
    answer, reference = _merge_neighbours(answer, reference, ratios)
    pairs, _ = _assign(ratios.matrix(answer, reference), context=True)
    kept = []
    for a, r in pairs:
        ratio = ratios(answer[a].text, reference[r].text)
        if ratio >= MIN_TEXT_RATIO:
            kept.append((r, a, ratio))
    return reference, answer, kept


def _position(reference: Block, answer: Block) -> float:
    (rx, ry), (ax, ay) = reference.centre, answer.centre
    return 1.0 - max(abs(rx - ax), abs(ry - ay))


def block_scores(reference: DomRecord, answer: DomRecord) -> BlockScores:
    """The four block metrics of an answer page against a reference page, DOM blocks."""
    return scores_of_blocks(page_blocks(reference), page_blocks(answer))


def scores_of_blocks(refs: list[Block], anss: list[Block]) -> BlockScores:
    """The four block metrics from the blocks of each page (same-box blocks already joined)."""
    n_refs, n_anss = len(refs), len(anss)
    if not refs and not anss:
        return BlockScores(None, None, None, None, [], 0, 0)
    refs, anss, kept = match_blocks(refs, anss)
    pairs = [BlockPair(refs[r].nodes, anss[a].nodes, ratio) for r, a, ratio in kept]
    if not kept:
        return BlockScores(0.0, 0.0, 0.0, 0.0, pairs, n_refs, n_anss)
    total_area = sum(b.area for b in refs) + sum(b.area for b in anss)
    matched_area = sum(refs[r].area + anss[a].area for r, a, _ in kept)
    block_match = matched_area / total_area if total_area > 0 else 0.0
    text_similarity = fmean(ratio for _, _, ratio in kept)
    position = fmean(_position(refs[r], anss[a]) for r, a, _ in kept)
    ref_lab = srgb_to_lab([refs[r].color for r, _, _ in kept])
    ans_lab = srgb_to_lab([anss[a].color for _, a, _ in kept])
    color = float(np.mean(np.clip(1.0 - ciede2000(ref_lab, ans_lab) / 100.0, 0.0, None)))
    return BlockScores(block_match, text_similarity, position, color, pairs, n_refs, n_anss)
