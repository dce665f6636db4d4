"""The block metrics against Design2Code's own figures on 28 page pairs.

`design2code/design2code_pairs.tsv` holds what Design2Code's published code computed (its header
names the commit and how it was run); the pairs' inputs lie beside it. Two comparisons:
- `d2cdom_*`: Design2Code's matching and scoring fed with our DOM blocks. This is the stage the
  project follows, so every pair must agree.
- `d2c_*`: Design2Code's whole pipeline, with its own block detection. The one deliberate
  difference, DOM_BLOCKS, is named below with the size measured on these pairs
  (docs/metrics.md).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from veriharness.render.browser import Renderer
from veriharness.render.d2ccapture import capture_recoloured
from veriharness.runfolder.render import Size
from veriharness.score.metrics.blocks import Block, block_scores, same_box_joined, scores_of_blocks
from veriharness.score.metrics.d2cblocks import detect_blocks
from veriharness.score.metrics.inputs import read_dom

DATA = Path(__file__).with_name("design2code")
METRICS = ("block_match", "text", "position", "color")
TOLERANCE = 0.03
MIN_PEARSON = 0.95


class Deviation(NamedTuple):
    """A deliberate difference from Design2Code: where it shows and how large it was measured."""

    reason: str
    pairs: frozenset[str]
    max_abs: float
    min_pearson: float


# Design2Code finds blocks by recolouring each element of a fixed tag list and differencing two
# screenshots: the text of one coloured element is one box (an <h1> with a <br> is one block
# spanning both lines), text in other tags (<blockquote>, <label>, <strong>) belongs to its
# coloured ancestor, and text it cannot tell apart by colour is missed. VeriHarness reads one block
# per visible DOM text node instead.
DOM_BLOCKS = "blocks are read from the DOM, not detected from screenshots"
WHOLE_PIPELINE_DEVIATIONS = {
    "block_match": Deviation(
        DOM_BLOCKS,
        frozenset(
            f"agent-{condition}-{task}"
            for condition in ("b3-absent", "b3-present")
            for task in ("article", "landing-page")
        ),
        max_abs=0.06,
        min_pearson=0.90,
    ),
    "text": Deviation(
        DOM_BLOCKS,
        frozenset(f"agent-{c}-landing-page" for c in ("b3-absent", "b3-present")),
        max_abs=0.04,
        min_pearson=0.85,
    ),
}


def _rows() -> list[dict[str, str]]:
    with (DATA / "design2code_pairs.tsv").open(encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


ROWS = _rows()


def _ours(row: dict[str, str]) -> dict[str, float]:
    reference = read_dom(DATA / "references" / f"{row['task']}.dom.json")
    answer = read_dom(DATA / "answers" / f"{row['pair']}.dom.json")
    scores = block_scores(reference, answer)
    values = (scores.block_match, scores.text_similarity, scores.position, scores.color)
    assert all(v is not None for v in values), row["pair"]
    return dict(zip(METRICS, values, strict=True))  # type: ignore[arg-type]


def _paired(
    scores: dict[str, dict[str, float]], metric: str, column: str
) -> tuple[list[float], list[float]]:
    """One metric over every pair: the project's values and the stored `column_<metric>` ones."""
    return (
        [scores[row["pair"]][metric] for row in ROWS],
        [float(row[f"{column}_{metric}"]) for row in ROWS],
    )


@pytest.fixture(scope="module")
def ours() -> dict[str, dict[str, float]]:
    return {row["pair"]: _ours(row) for row in ROWS}


def test_the_pairs_cover_what_the_issue_asks_for() -> None:
    kinds = {row["pair"].split("-")[0] for row in ROWS}
    assert len(ROWS) >= 20 and kinds == {"self", "variant", "agent"}
    for row in ROWS:
        assert (DATA / "answers" / f"{row['pair']}.dom.json").is_file()


@pytest.mark.parametrize("row", ROWS, ids=[row["pair"] for row in ROWS])
def test_matching_agrees_with_design2code_on_our_blocks(
    row: dict[str, str], ours: dict[str, dict[str, float]]
) -> None:
    for metric in METRICS:
        theirs = float(row[f"d2cdom_{metric}"])
        assert ours[row["pair"]][metric] == pytest.approx(theirs, abs=TOLERANCE), metric


@pytest.mark.parametrize("metric", METRICS)
def test_matching_correlates_with_design2code_on_our_blocks(
    metric: str, ours: dict[str, dict[str, float]]
) -> None:
    mine, theirs = _paired(ours, metric, "d2cdom")
    assert np.corrcoef(mine, theirs)[0, 1] >= MIN_PEARSON


@pytest.mark.parametrize("metric", METRICS)
def test_whole_pipeline_agrees_but_for_the_named_block_detection_difference(
    metric: str, ours: dict[str, dict[str, float]]
) -> None:
    deviation = WHOLE_PIPELINE_DEVIATIONS.get(metric)
    excused = deviation.pairs if deviation else frozenset()
    differences = {
        row["pair"]: abs(ours[row["pair"]][metric] - float(row[f"d2c_{metric}"])) for row in ROWS
    }
    beyond = {pair for pair, diff in differences.items() if diff > TOLERANCE}
    assert beyond <= excused, f"{metric}: {sorted(beyond - excused)} differ beyond {TOLERANCE}"
    mine, theirs = _paired(ours, metric, "d2c")
    pearson = np.corrcoef(mine, theirs)[0, 1]
    if deviation is None:
        assert pearson >= MIN_PEARSON
    else:
        assert max(differences.values()) <= deviation.max_abs, deviation.reason
        assert pearson >= deviation.min_pearson, deviation.reason


# --- Design2Code's block detection (the scorer option `block_detection: design2code`) ---------

TASKS = Path(__file__).parents[3] / "tasks"


def _viewport(task: str) -> Size:
    return read_dom(DATA / "references" / f"{task}.dom.json").viewport


def _detected(renderer: Renderer, html: Path, task: str, folder: Path) -> list[Block]:
    """Blocks of `html` as Design2Code detects them, the task's assets beside the page."""
    shutil.copytree(TASKS / task / "assets", folder / "assets")
    page = folder / "page.html"
    shutil.copyfile(html, page)
    capture = capture_recoloured(renderer, page, folder, _viewport(task))
    return same_box_joined(detect_blocks(*capture))


@pytest.fixture(scope="module")
def detected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, float]]:
    """The four metrics of every pair with both pages' blocks detected as Design2Code does."""
    scores: dict[str, dict[str, float]] = {}
    with Renderer() as renderer:
        references = {
            task: _detected(
                renderer, TASKS / task / "reference.html", task, tmp_path_factory.mktemp(task)
            )
            for task in sorted({row["task"] for row in ROWS})
        }
        for row in ROWS:
            if row["pair"].startswith("self-"):
                answer = references[row["task"]]
            else:
                html = DATA / "answers" / f"{row['pair']}.html"
                answer = _detected(renderer, html, row["task"], tmp_path_factory.mktemp("answer"))
            result = scores_of_blocks(references[row["task"]], answer)
            values = (result.block_match, result.text_similarity, result.position, result.color)
            assert all(v is not None for v in values), row["pair"]
            scores[row["pair"]] = dict(zip(METRICS, values, strict=True))  # type: ignore[arg-type]
    return scores


@pytest.mark.parametrize("metric", METRICS)
def test_design2code_detection_reproduces_the_whole_pipeline(
    metric: str, detected: dict[str, dict[str, float]]
) -> None:
    mine, theirs = _paired(detected, metric, "d2c")
    assert np.corrcoef(mine, theirs)[0, 1] >= MIN_PEARSON
    # Measured: every pair equal to the stored four decimals.
    worst = max(abs(m - t) for m, t in zip(mine, theirs, strict=True))
    assert worst <= 0.001, f"{metric}: largest difference {worst:.4f}"
