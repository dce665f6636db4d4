"""Answers an agent could write to break the later stages, through the real `render` and `score`
verbs, Debian's Chromium and real files: each run still ends with its render and score files and a
named status, at a bounded cost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from support.cli import veriharness
from support.hostile import bomb_png
from veriharness.render.browser import FULL_PAGE_MAX_HEIGHT, Renderer
from veriharness.render.command import render_answer
from veriharness.render.guard import descendants
from veriharness.runfolder.render import DomRecord, RenderRecord

WIDTH, HEIGHT = 320, 200
BLUE = (0, 64, 200)
# A block of colour at the top-left, and words, so a capture can be told from a blank page.
MARK = (
    "<body style='margin:0;font:16px sans-serif'>"
    f"<div style='width:100px;height:60px;background:rgb{BLUE}'></div><p>still here</p>"
)


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("task")
    Image.new("RGB", (WIDTH, HEIGHT), (250, 250, 250)).save(folder / "reference.png")
    return folder


@pytest.fixture(scope="module")
def renderer():
    with Renderer(load_timeout_s=8) as shared:
        yield shared


def _run(tmp_path: Path, html: str) -> Path:
    answer = tmp_path / "answer"
    (answer / "assets").mkdir(parents=True)
    (answer / "answer.html").write_text(html)
    return tmp_path


def _render(renderer: Renderer, run: Path, task: Path) -> RenderRecord:
    return render_answer(renderer, run / "answer", task / "reference.png", run / "render")


def _score(run: Path, task: Path) -> tuple[dict, dict]:
    done = veriharness(
        "score", "--render-dir", run / "render", "--answer-dir", run / "answer",
        "--task-dir", task, "--out-dir", run,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    audit = json.loads((run / "audit.json").read_text())
    return audit, json.loads((run / "metrics.json").read_text())


def _shows_the_mark(run: Path) -> bool:
    with Image.open(run / "render" / "render.png") as shot:
        assert shot.size == (WIDTH, HEIGHT)
        return shot.convert("RGB").getpixel((50, 30)) == BLUE


def _texts(run: Path) -> list[str]:
    dom = DomRecord.model_validate_json((run / "render" / "dom.json").read_text())
    return [t.text for t in dom.texts]


def test_an_image_bomb_in_assets_is_flagged_not_decoded(
    tmp_path: Path, renderer: Renderer, task: Path
) -> None:
    run = _run(tmp_path, MARK + "<img src='assets/big.png' style='width:50px;height:50px'>")
    bomb_png(run / "answer" / "assets" / "big.png", 30_000, 30_000)
    record = _render(renderer, run, task)
    assert record.status == "ok" and _shows_the_mark(run)
    audit, metrics = _score(run, task)
    assert metrics["status"] == "ok" and metrics["metrics"]["ssim"] is not None
    assert audit["flags"]["oversized_images"] is True
    (found,) = audit["evidence"]["oversized_images"]["images"]
    assert found["src"] == "assets/big.png"
    assert "30000" in json.dumps(found)


def test_a_page_of_200000_rows_ends_with_a_named_status_and_its_files(
    tmp_path: Path, renderer: Renderer, task: Path
) -> None:
    rows = "".join(f"<div>row {i} of the long page</div>" for i in range(200_000))
    run = _run(tmp_path, MARK + rows)
    record = _render(renderer, run, task)
    # Either the walk and the capture were cut at their limits, or the renderer passed its
    # memory limit and was stopped: both are recorded; neither takes the stage down.
    if record.status == "ok":
        assert {"dom_height", "full_page_height"} <= set(record.capped)
        assert _shows_the_mark(run) and "still here" in _texts(run)
        with Image.open(run / "render" / "render_full.png") as full:
            assert full.size == (WIDTH, FULL_PAGE_MAX_HEIGHT)
    else:
        assert record.status == "error" and record.failed_step in ("memory", "load")
    _, metrics = _score(run, task)
    assert metrics["status"] == ("ok" if record.status == "ok" else "no_render")


def test_a_300000_pixel_tall_element_gets_a_capped_full_capture(
    tmp_path: Path, renderer: Renderer, task: Path
) -> None:
    run = _run(
        tmp_path, MARK + "<div style='height:300000px;background:linear-gradient(red,blue)'></div>"
    )
    record = _render(renderer, run, task)
    assert record.status == "ok", record.error
    assert record.page.height > 300_000 and "full_page_height" in record.capped
    assert record.limits is not None and record.limits.full_page_max_height == 16_384
    assert _shows_the_mark(run)
    with Image.open(run / "render" / "render_full.png") as full:
        assert full.size == (WIDTH, FULL_PAGE_MAX_HEIGHT)
    _, metrics = _score(run, task)
    assert metrics["status"] == "ok"


@pytest.mark.parametrize(
    "leave",
    [
        "location.href = 'https://example.org/elsewhere'",
        "location.href = 'about:blank'",
        "location.reload()",
        "document.querySelector('form').submit()",
    ],
)
def test_a_page_that_navigates_away_stays_and_is_captured(
    tmp_path: Path, renderer: Renderer, task: Path, leave: str
) -> None:
    script = f"<form action='other.html'></form><script>{leave}</script>"
    late = f"<script>addEventListener('load', () => {{ {leave} }})</script>"
    for name, tail in (("during", script), ("at-load", late)):
        run = _run(tmp_path / name, MARK + tail)
        (run / "answer" / "other.html").write_text("<p>the other page</p>")
        record = _render(renderer, run, task)
        if name == "during" and "submit" in leave:
            # Known limit: the cancelled submission also ends the parse, so the page never
            # reaches its load event; it is captured as it stood and recorded as such.
            assert (record.status, record.failed_step) == ("error", "load")
        else:
            assert record.status == "ok", (name, record.error)
        assert _shows_the_mark(run), name
        assert "still here" in _texts(run) and "the other page" not in _texts(run)


def test_alert_loops_and_popups_neither_hang_nor_leave(
    tmp_path: Path, renderer: Renderer, task: Path
) -> None:
    pages = {
        "interval": "<script>setInterval(() => alert('again'), 1)</script>",
        "confirm": "<script>for (let i = 0; i < 1000; i++) confirm('sure?')</script>",
        "popups": "<script>for (let i = 0; i < 50; i++) window.open('answer.html')</script>",
        "onload": "<script>onload = () => { while (true) { alert('forever') } }</script>",
    }
    for name, tail in pages.items():
        run = _run(tmp_path / name, MARK + tail)
        start = time.monotonic()
        record = _render(renderer, run, task)
        assert time.monotonic() - start < 8 + 20, name  # the load limit, plus the capture
        assert _shows_the_mark(run), name
        if name == "onload":
            assert (record.status, record.failed_step) == ("error", "load")
        else:
            assert record.status == "ok", (name, record.error)
        assert renderer._browser.contexts == []  # no pop-up outlived its page
    _score(tmp_path / "onload", task)


def test_a_memory_hog_is_stopped_at_the_limit(
    tmp_path: Path, renderer: Renderer, task: Path
) -> None:
    hog = (
        "<script>const keep = [];"
        "onload = () => { for (;;) keep.push(new Uint8Array(1 << 24).fill(1)) }</script>"
    )
    run = _run(tmp_path, MARK + hog)
    record = _render(renderer, run, task)
    assert record.status == "error" and record.failed_step in ("memory", "load")
    assert (run / "render" / "render.png").is_file()
    # The browser still serves the next page.
    after = _run(tmp_path / "after", MARK)
    assert _render(renderer, after, task).status == "ok" and _shows_the_mark(after)


def test_chromium_killed_mid_render_is_recorded_and_the_next_page_renders(
    tmp_path: Path, task: Path
) -> None:
    slow = _run(tmp_path / "slow", MARK + "<script>while (true) {}</script>")
    nxt = _run(tmp_path / "next", MARK)
    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        "".join(
            json.dumps(
                {
                    "answer_dir": str(run / "answer"),
                    "reference": str(task / "reference.png"),
                    "out": str(run / "render"),
                }
            )
            + "\n"
            for run in (slow, nxt)
        )
    )
    render = subprocess.Popen(
        [sys.executable, "-m", "veriharness", "render", "--batch", str(batch)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed = False
    deadline = time.monotonic() + 120
    while not killed and time.monotonic() < deadline and render.poll() is None:
        time.sleep(0.5)
        for pid in descendants(render.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            # The browser process itself, once the slow page's renderer is running.
            if b"chromium" in cmdline and b"--type=" not in cmdline and _renderers(render.pid):
                time.sleep(2)
                os.kill(pid, signal.SIGKILL)
                killed = True
    out, err = render.communicate(timeout=180)
    assert killed and render.returncode == 0, err
    record = RenderRecord.model_validate_json((slow / "render" / "render.json").read_text())
    assert (record.status, record.failed_step) == ("error", "browser"), record.error
    after = RenderRecord.model_validate_json((nxt / "render" / "render.json").read_text())
    assert after.status == "ok" and _shows_the_mark(nxt)
    _, metrics = _score(slow, task)
    assert metrics["status"] == "no_render"


def _renderers(root: int) -> list[int]:
    found = []
    for pid in descendants(root):
        try:
            if b"--type=renderer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.fixture()
def tiny_disk(tmp_path: Path):
    """A real 256 KiB filesystem (tmpfs) for the outputs, to be filled up."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_results_disk_is_named_and_loses_nothing_written(
    tmp_path: Path, tiny_disk: Path, task: Path
) -> None:
    run = _run(tmp_path / "run", MARK)
    render = tiny_disk / "render"
    done = veriharness(
        "render", "--answer-dir", run / "answer", "--reference", task / "reference.png",
        "--out", render,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    scored = veriharness(
        "score", "--render-dir", render, "--answer-dir", run / "answer",
        "--task-dir", task, "--out-dir", tiny_disk,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    before = {p: p.read_bytes() for p in tiny_disk.rglob("*") if p.is_file()}
    filler = tiny_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass  # the disk is full
    finally:
        os.close(fd)
    again = veriharness(
        "score", "--render-dir", render, "--answer-dir", run / "answer",
        "--task-dir", task, "--out-dir", tiny_disk,
    )  # fmt: skip
    assert again.returncode == 2
    assert "could not write" in again.stderr and str(tiny_disk) in again.stderr
    rendered = veriharness(
        "render", "--answer-dir", run / "answer", "--reference", task / "reference.png",
        "--out", render,
    )  # fmt: skip
    assert rendered.returncode == 2 and f"could not write {render}" in rendered.stderr
    for path, content in before.items():
        assert path.read_bytes() == content, f"{path} changed"
    leftovers = [p.name for p in tiny_disk.rglob(".*.tmp")]
    assert leftovers == []
