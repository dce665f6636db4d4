"""The images a CallMLLM call attached, shown from the run folder's call_images/: the agent's own
render (`draft.png`, gone with the workspace) is on the run page and in the Inspect export, a
region as the PNG the model got; only an image that was not kept says so, and a planted file of a
digest's name is not shown."""

from __future__ import annotations

import base64
from pathlib import Path

from support.call_images import CROP, DRAFT, GONE, kept_call_run
from veriharness._util.hashing import sha256_bytes
from veriharness.report.run_page import PageJob, RunImages, run_page
from veriharness.runfolder.call_images import image_name


def test_the_run_page_shows_the_kept_draft_and_the_region_as_sent(tmp_path: Path) -> None:
    run_dir = kept_call_run(tmp_path / "results/exp/cond/task/r1")
    out = tmp_path / "report"
    page = run_page(PageJob(run_dir, None, out, "runs/cond/task/r1", "cond/task/r1"))
    html = page.read_text()
    draft_hex = sha256_bytes(DRAFT).removeprefix("sha256:")
    crop_hex = sha256_bytes(CROP).removeprefix("sha256:")
    assert f"image <b>draft</b>: draft.png (sha256:{draft_hex}) (full image)" in html
    assert f"src='../../../../images/{draft_hex}.png'" in html
    assert f"as sent to the model (sha256:{crop_hex})" in html
    assert f"src='../../../../images/{crop_hex}.png'" in html
    assert (out / "images" / f"{draft_hex}.png").read_bytes() == DRAFT
    assert (out / "images" / f"{crop_hex}.png").read_bytes() == CROP
    # The region is drawn on the draft it was cut from.
    assert "image <b>detail</b>: draft.png" in html and "class='region'" in html
    assert html.count("is not available") == 1
    assert "image <b>gone</b>: gone.png" in html.split("is not available")[0].rsplit("<p>", 1)[1]
    assert "its bytes do not hash to its name&#x27;s digest; not used" in html
    gone_hex = sha256_bytes(GONE).removeprefix("sha256:")
    assert not (out / "images" / f"{gone_hex}.png").exists()


def test_a_region_whose_file_is_gone_is_shown_as_sent(tmp_path: Path) -> None:
    run_dir = kept_call_run(tmp_path / "results/exp/cond/task/r1")
    (run_dir / image_name(sha256_bytes(DRAFT), "image/png")).unlink()
    html = run_page(PageJob(run_dir, None, tmp_path / "report", "r", "r")).read_text()
    assert "the file is gone, the region as sent to the model is kept" in html
    assert html.count("is not available") == 2  # draft (whole) and gone
    crop_hex = sha256_bytes(CROP).removeprefix("sha256:")
    assert f"src='../images/{crop_hex}.png'" in html


def test_the_inspect_export_sends_the_kept_bytes(tmp_path: Path) -> None:
    from inspect_ai.model import ContentImage, ContentText

    from veriharness.collect.call_links import group_trace
    from veriharness.report.inspect_log import _call_input
    from veriharness.runfolder.mllm_trace import read_trace_objects

    run_dir = kept_call_run(tmp_path / "results/exp/cond/task/r1")
    errors: list[str] = []
    [call] = group_trace(read_trace_objects(run_dir, errors) or [], errors)
    parts = _call_input(call.request, RunImages(None, run_dir / "answer", run_dir, errors))
    images = [
        base64.b64decode(p.image.split(",", 1)[1]) for p in parts if isinstance(p, ContentImage)
    ]
    assert images == [DRAFT, CROP]
    notes = [p.text for p in parts if isinstance(p, ContentText) and "not available" in p.text]
    assert len(notes) == 1 and "gone.png" in notes[0]
    assert any("do not hash to its name" in e for e in errors)
