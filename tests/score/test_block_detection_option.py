"""`scoring.block_detection: design2code` through the real verbs: `render --design2code-blocks`
in Debian's Chromium, then `score --block-detection design2code`, on a stored Design2Code pair
whose figures Design2Code's own code computed (tests/score/metrics/design2code/)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from support.cli import veriharness

ROOT = Path(__file__).resolve().parents[2]
PAIRS = Path(__file__).parent / "metrics" / "design2code"
PAIR, TASK = "variant-pricing-moved", "pricing-table"
METRICS = {"block_match": "block_match", "text_similarity": "text", "position": "position",
           "color": "color"}  # fmt: skip


def _figures() -> dict[str, str]:
    with (PAIRS / "design2code_pairs.tsv").open(encoding="utf-8") as handle:
        rows = csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t")
        return next(row for row in rows if row["pair"] == PAIR)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("run")
    answer = run / "answer"
    shutil.copytree(ROOT / "tasks" / TASK / "assets", answer / "assets")
    shutil.copyfile(PAIRS / "answers" / f"{PAIR}.html", answer / "answer.html")
    done = veriharness(
        "render", "--answer-dir", str(answer), "--reference",
        str(ROOT / "tasks" / TASK / "reference.png"), "--out", str(run / "render"),
        "--design2code-blocks",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "design2code" in done.stdout and ": ok" in done.stdout
    return run


def _score(run: Path, out: Path, detection: str) -> dict:
    done = veriharness(
        "score", "--render-dir", str(run / "render"), "--answer-dir", str(run / "answer"),
        "--task-dir", str(ROOT / "tasks" / TASK), "--out-dir", str(out),
        "--block-detection", detection,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def test_design2code_detection_scores_as_design2code_does(run: Path, tmp_path: Path) -> None:
    metrics = _score(run, tmp_path, "design2code")
    assert metrics["status"] == "ok"
    assert metrics["details"]["blocks"]["detection"] == "design2code"
    figures = _figures()
    for ours, theirs in METRICS.items():
        assert metrics["metrics"][ours] == pytest.approx(float(figures[f"d2c_{theirs}"]), abs=1e-3)


def test_dom_blocks_stay_the_default_and_say_so(run: Path, tmp_path: Path) -> None:
    metrics = _score(run, tmp_path, "dom")
    assert metrics["details"]["blocks"]["detection"] == "dom"
    figures = _figures()
    for ours, theirs in METRICS.items():
        expected = float(figures[f"d2cdom_{theirs}"])
        assert metrics["metrics"][ours] == pytest.approx(expected, abs=1e-3)


def test_design2code_detection_without_its_captures_is_a_named_score_failure(
    run: Path, tmp_path: Path
) -> None:
    render = tmp_path / "render"
    shutil.copytree(run / "render", render, ignore=shutil.ignore_patterns("design2code"))
    done = veriharness(
        "score", "--render-dir", str(render), "--answer-dir", str(run / "answer"),
        "--task-dir", str(ROOT / "tasks" / TASK), "--out-dir", str(tmp_path),
        "--block-detection", "design2code",
    )  # fmt: skip
    assert done.returncode == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["status"] == "score_failed"
    assert "reference.page.png: file not found" in metrics["details"]["reason"]
    assert "render --design2code-blocks" in metrics["details"]["reason"]
