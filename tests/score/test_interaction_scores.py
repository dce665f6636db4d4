"""An interactive and responsive task scored end to end: the reference replayed by
`render-reference`, answers rendered by `render --task-dir` in Debian's Chromium, and `score`
giving each interaction's Implement flag and state metrics and each viewport's metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from render.test_states import INTERACTIONS, VIEWPORTS, _answer, _render, _render_reference, _task
from support.cli import veriharness
from veriharness.runfolder.metrics import MetricsRecord


def _score(task: Path, answer: Path, render: Path, out: Path) -> MetricsRecord:
    done = veriharness(
        "score", "--render-dir", render, "--answer-dir", answer, "--task-dir", task,
        "--out-dir", out, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return MetricsRecord.model_validate_json((out / "metrics.json").read_text())


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("interactive")
    task = _task(root, INTERACTIONS, VIEWPORTS)
    assert _render_reference(task).returncode == 0
    out = {}
    for name, marked in (("good", True), ("plain", False)):
        answer = _answer(root / name, marked, True)
        _render(answer, task, root / f"{name}-render")
        out[name] = _score(task, answer, root / f"{name}-render", root / f"{name}-run")
    return out


def test_an_answer_that_implements_every_interaction(scored: dict[str, Any]) -> None:
    good: MetricsRecord = scored["good"]
    assert (good.interactions_stated, good.viewports_stated) == (3, 1)
    assert [(i.id, i.implemented, i.trigger_matches) for i in good.interactions] == [
        ("yearly", True, 1),
        ("hint", True, 1),
        ("name", True, 1),
    ]
    # The answer is the reference page itself: every state metric at its best.
    for state in good.interactions:
        assert state.state_ssim == pytest.approx(1.0) and state.state_mae == 0.0
        assert state.region_ssim == pytest.approx(1.0)
        assert state.trigger_position == 1.0 and state.region_position == 1.0
    metrics = good.metrics
    assert metrics["implement_rate"] == 1.0 and metrics["region_ssim"] == pytest.approx(1.0)
    assert metrics["viewport_ssim"] == pytest.approx(1.0)
    assert [v.name for v in good.viewports] == ["narrow"] and good.viewports[0].mae == 0.0


def test_an_answer_without_the_contract_implements_nothing(scored: dict[str, Any]) -> None:
    plain: MetricsRecord = scored["plain"]
    assert [(i.implemented, i.trigger_matches) for i in plain.interactions] == [(False, 0)] * 3
    assert all(i.region_ssim is None and i.state_ssim is None for i in plain.interactions)
    metrics = plain.metrics
    assert metrics["implement_rate"] == 0.0
    # Interaction2Code's convention in the run's means: no region counts 0.
    assert metrics["region_ssim"] == 0.0 and metrics["region_position"] == 0.0
    assert metrics["state_ssim"] is None
    # Its page is the same at every size, so the viewport is as good as the good answer's.
    assert metrics["viewport_ssim"] == pytest.approx(1.0)


def test_a_static_task_has_no_interaction_metrics(tmp_path: Path) -> None:
    task = _task(tmp_path, [])
    assert _render_reference(task).returncode == 0
    answer = _answer(tmp_path / "a", True, True)
    done = veriharness(
        "render", "--answer-dir", answer, "--reference", task / "reference.png",
        "--out", tmp_path / "render", "--task-dir", task, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "render" / "states.json").exists()
    record = _score(task, answer, tmp_path / "render", tmp_path / "run")
    assert (record.interactions_stated, record.interactions, record.viewports) == (0, [], [])
    # Not even a null column: a static experiment's comparison keeps its families.
    assert "implement_rate" not in record.metrics and "ssim" in record.metrics
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "ok"
