"""The example tasks are complete, self-contained, and their references are reproducible."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from veriharness.runfolder.render import DomRecord

TASKS = Path(__file__).resolve().parents[2] / "tasks"
TASK_IDS = sorted(p.parent.name for p in TASKS.glob("*/task.yaml"))
REQUIRED_KINDS = {"landing_page", "form", "pricing_table", "dashboard", "article", "settings_page"}


def _task(task_id: str) -> dict:
    return yaml.safe_load((TASKS / task_id / "task.yaml").read_text())


def test_manifest_lists_exactly_the_task_folders() -> None:
    manifest = yaml.safe_load((TASKS / "manifest.yaml").read_text())
    assert set(manifest) == {"name", "description", "version", "tasks"}
    assert all(isinstance(manifest[k], str) and manifest[k] for k in ("name", "description"))
    assert isinstance(manifest["version"], str)
    assert sorted(manifest["tasks"]) == TASK_IDS and len(set(manifest["tasks"])) == len(TASK_IDS)


def test_the_tasks_cover_every_kind_a_tall_page_and_a_phone() -> None:
    tasks = [_task(t) for t in TASK_IDS]
    assert REQUIRED_KINDS <= {t["kind"] for t in tasks}
    assert any(t["viewport"]["height"] > 1200 for t in tasks)
    assert any(t["viewport"]["width"] < 500 for t in tasks)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_task_folder_is_complete_and_valid(task_id: str) -> None:
    folder = TASKS / task_id
    task = _task(task_id)
    fields = {"id", "title", "kind", "description", "viewport"}
    # `interaction` is obsolete (docs/task-format.md): the shipped tasks do not carry it.
    assert fields <= set(task) <= fields | {"interactions", "viewports"}
    assert task["id"] == task_id
    assert task["title"].strip() and task["description"].strip()
    width, height = task["viewport"]["width"], task["viewport"]["height"]
    assert isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0
    for name in ("reference.html", "reference.png", "reference_dom.json"):
        assert (folder / name).is_file(), name
    with Image.open(folder / "reference.png") as png:
        assert png.size == (width, height)
    assert (folder / "reference.png").stat().st_size < 300_000
    dom = DomRecord.model_validate_json((folder / "reference_dom.json").read_text())
    assert (dom.viewport.width, dom.viewport.height) == (width, height)
    # The reference shows the whole page: nothing lies below or beside the viewport.
    assert (dom.page.width, dom.page.height) == (width, height)
    assert len(dom.texts) >= 10 and dom.images


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_page_uses_only_local_files(task_id: str) -> None:
    folder = TASKS / task_id
    html = (folder / "reference.html").read_text()
    assert not re.search(r"(https?:|wss?:)?//[a-z0-9]", html, re.IGNORECASE)
    assert "@font-face" not in html and "@import" not in html
    for ref in re.findall(r'(?:src|href)="([^"#][^"]*)"', html):
        target = (folder / ref).resolve()
        assert target.is_relative_to(folder / "assets") and target.is_file(), ref
    for asset in (folder / "assets").iterdir():
        assert asset.stat().st_size < 300_000, asset.name
        assert asset.name in html, f"unused asset {asset.name}"


def _pixel_difference(a: Path, b: Path) -> tuple[int, int, tuple[int, int, int, int] | None]:
    """Differing pixels (any channel), the largest channel difference, and their bounding box."""
    with Image.open(a) as first, Image.open(b) as second:
        assert first.size == second.size
        diff = np.abs(
            np.asarray(first.convert("RGB"), np.int16) - np.asarray(second.convert("RGB"), np.int16)
        ).max(axis=2)
    ys, xs = np.nonzero(diff)
    where = (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())) if xs.size else None
    return int(xs.size), int(diff.max()), where


def test_rerendering_every_reference_reproduces_it_pixel_for_pixel(tmp_path: Path) -> None:
    copies = []
    for task_id in TASK_IDS:
        copy = tmp_path / task_id
        shutil.copytree(TASKS / task_id, copy)
        (copy / "reference.png").unlink()
        (copy / "reference_dom.json").unlink()
        copies.append(copy)
    # A pricing page whose "-20%" badge picks up the toggle's padding: the kind of change that
    # moves a few thousand pixels yet keeps the whole-image mean difference tiny. The check
    # below must see it.
    altered = tmp_path / "altered" / "pricing-table"
    shutil.copytree(TASKS / "pricing-table", altered)
    html = (altered / "reference.html").read_text()
    (altered / "reference.html").write_text(html.replace(".switch > span", ".switch span"))
    result = subprocess.run(
        [sys.executable, "-m", "veriharness", "render-reference", *map(str, [*copies, altered])],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for copy in copies:
        count, largest, where = _pixel_difference(
            TASKS / copy.name / "reference.png", copy / "reference.png"
        )
        assert count == 0, f"{copy.name}: {count} pixels differ (up to {largest}) in {where}"
        kept = DomRecord.model_validate_json((TASKS / copy.name / "reference_dom.json").read_text())
        fresh = DomRecord.model_validate_json((copy / "reference_dom.json").read_text())
        assert fresh == kept
        # An interactive or responsive task's replayed states and viewports too.
        for shot in sorted((TASKS / copy.name).glob("*/*.png")):
            relative = shot.relative_to(TASKS / copy.name)
            count, largest, where = _pixel_difference(shot, copy / relative)
            assert count == 0, f"{copy.name}/{relative}: {count} pixels differ in {where}"
    count, _, where = _pixel_difference(
        TASKS / "pricing-table" / "reference.png", altered / "reference.png"
    )
    assert count > 1000 and where is not None
    left, top, right, bottom = where
    assert 500 < left < right < 780 and 130 < top < bottom < 185  # the toggle, nothing else
    with (
        Image.open(TASKS / "pricing-table" / "reference.png") as a,
        Image.open(altered / "reference.png") as b,
    ):
        mean = np.abs(np.asarray(a.convert("RGB"), float) - np.asarray(b.convert("RGB"), float))
    assert mean.mean() < 0.5  # what the old mean-only check allowed
