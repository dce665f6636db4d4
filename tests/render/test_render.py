"""The render stage through its real boundaries: the `veriharness` command, Debian's Chromium,
real files, and a real HTTP server on 127.0.0.1 that must never be reached."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image

from support.cli import veriharness
from veriharness._util.hashing import sha256_file
from veriharness.render.browser import Renderer, RenderSetupError
from veriharness.render.command import BatchItem, read_batch, render_answer
from veriharness.runfolder.render import DomRecord, RenderRecord


def _veriharness(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return veriharness(*args, cwd=cwd, timeout=180)


def _reference(path: Path, width: int, height: int) -> Path:
    Image.new("RGB", (width, height), (200, 200, 200)).save(path)
    return path


def _answer(folder: Path, html: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "answer.html").write_text(html)
    return folder


def _record(out: Path) -> RenderRecord:
    return RenderRecord.model_validate_json((out / "render.json").read_text())


def _darkest(image: Image.Image) -> float:
    """The darkest grey level of an image (0 black, 255 white)."""
    low, _ = image.convert("L").getextrema()
    assert isinstance(low, int | float)
    return low


def _grey(grey_image: Image.Image, x: int, y: int) -> float:
    """One pixel of a single-band ("L") image."""
    value = grey_image.getpixel((x, y))
    assert isinstance(value, int | float)
    return value


def _dom(out: Path) -> DomRecord:
    return DomRecord.model_validate_json((out / "dom.json").read_text())


@pytest.fixture(scope="module")
def renderer():
    with Renderer(load_timeout_s=20) as shared:
        yield shared


def test_page_is_rendered_at_the_reference_size(tmp_path: Path) -> None:
    answer = _answer(
        tmp_path / "answer",
        "<body style='margin:0;background:#fff'>"
        "<div style='position:absolute;left:40px;top:30px;width:50px;height:20px;"
        "background:rgb(0,128,255)'></div></body>",
    )
    reference = _reference(tmp_path / "reference.png", 321, 203)
    out = tmp_path / "render"
    result = _veriharness("render", "--answer-dir", answer, "--reference", reference, "--out", out)
    assert result.returncode == 0, result.stderr
    with Image.open(out / "render.png") as shot:
        assert shot.size == (321, 203)
        rgb = shot.convert("RGB")
        assert rgb.getpixel((60, 40)) == (0, 128, 255)
        assert rgb.getpixel((10, 10)) == (255, 255, 255)
    record = _record(out)
    assert record.status == "ok"
    assert (record.viewport.width, record.viewport.height) == (321, 203)
    assert record.full_page is False and not (out / "render_full.png").exists()
    assert record.answer_sha256 == sha256_file(answer / "answer.html")
    assert record.timings.launch_ms is not None and record.blocked_requests == []


class _Recorder(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
        self.seen.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def local_server():
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.seen
    server.shutdown()
    server.server_close()


def test_network_is_closed_and_every_attempt_is_logged(
    tmp_path: Path, renderer: Renderer, local_server
) -> None:
    base, seen = local_server
    Image.new("RGB", (7, 5), "red").save(tmp_path / "outside.png")
    answer = tmp_path / "run" / "answer"
    (answer / "assets").mkdir(parents=True)
    Image.new("RGB", (9, 4), "blue").save(answer / "assets" / "inside.png")
    os.symlink(tmp_path / "outside.png", answer / "assets" / "escape.png")
    _answer(
        answer,
        f"""<link rel="stylesheet" href="{base}/remote.css">
        <img src="{base}/remote.png"><img src="assets/inside.png">
        <img src="../../outside.png"><img src="assets/escape.png">
        <script>fetch("{base}/api").catch(() => {{}});
        try {{ new WebSocket("{base.replace("http", "ws")}/socket"); }} catch (e) {{}}</script>
        <p>closed network</p>""",
    )
    record = render_answer(
        renderer, answer, _reference(tmp_path / "ref.png", 300, 200), tmp_path / "out"
    )
    assert seen == []
    blocked = {(b.url, b.resource_type) for b in record.blocked_requests}
    assert (f"{base}/remote.css", "stylesheet") in blocked
    assert (f"{base}/remote.png", "image") in blocked
    assert (f"{base}/api", "fetch") in blocked
    assert (f"{base.replace('http', 'ws')}/socket", "websocket") in blocked
    assert (f"{(tmp_path / 'outside.png').as_uri()}", "image") in blocked
    assert (f"{(answer / 'assets' / 'escape.png').as_uri()}", "image") in blocked
    assert record.status == "ok"
    images = {i.src: i for i in _dom(tmp_path / "out").images}
    assert images["assets/inside.png"].natural_width == 9
    assert images[f"{base}/remote.png"].natural_width == 0


def _launch_counting_chromium(tmp_path: Path) -> tuple[Path, Path]:
    from veriharness._util.programs import find_chromium

    log = tmp_path / "launches.log"
    wrapper = tmp_path / "chromium-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho launch >> "{log}"\nexec "{find_chromium()}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def test_batch_uses_one_browser_and_records_failed_answers(tmp_path: Path) -> None:
    reference = _reference(tmp_path / "ref.png", 240, 160)
    runs = {
        "ok": "<p style='margin:0;font-size:30px'>fine page</p>",
        "empty": "  \n ",
        "broken": "<p>still here</p><script>throw new Error('broken on purpose')</script>",
        "hangs": "<p>spins</p><script>while (true) {}</script>",
    }
    lines = []
    for name, html in runs.items():
        _answer(tmp_path / name / "answer", html)
        lines.append(
            {
                "answer_dir": str(tmp_path / name / "answer"),
                "reference": str(reference),
                "out": str(tmp_path / name / "render"),
            }
        )
    lines.append(
        {
            "answer_dir": str(tmp_path / "missing" / "answer"),
            "reference": str(reference),
            "out": str(tmp_path / "missing" / "render"),
        }
    )
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines))
    wrapper, log = _launch_counting_chromium(tmp_path)

    result = _veriharness("render", "--batch", batch, "--chromium", wrapper, "--load-timeout", "3")

    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == ["launch"]
    status = {name: _record(tmp_path / name / "render") for name in [*runs, "missing"]}
    assert {name: r.status for name, r in status.items()} == {
        "ok": "ok",
        "empty": "empty_answer",
        "broken": "ok",
        "hangs": "error",
        "missing": "missing_answer",
    }
    assert any("broken on purpose" in e for e in status["broken"].page_errors)
    # The spinning script is stopped at the load limit and the page is captured as it stands.
    assert status["hangs"].failed_step == "load" and "load_time" in status["hangs"].capped
    assert "did not finish loading within 3.0 s" in (status["hangs"].error or "")
    with Image.open(tmp_path / "hangs" / "render" / "render.png") as shot:
        assert shot.size == (240, 160) and _darkest(shot) < 100
    assert [t.text for t in _dom(tmp_path / "hangs" / "render").texts] == ["spins"]
    assert status["missing"].answer_sha256 is None
    assert status["empty"].answer_sha256 is not None
    for name in ("empty", "missing"):
        with Image.open(tmp_path / name / "render" / "render.png") as shot:
            assert shot.size == (240, 160)
            assert shot.convert("RGB").getextrema() == ((255, 255), (255, 255), (255, 255))
        assert _dom(tmp_path / name / "render").texts == []
    with Image.open(tmp_path / "broken" / "render" / "render.png") as shot:
        assert _darkest(shot) < 100  # the text before the error is drawn
    assert [t.text for t in _dom(tmp_path / "broken" / "render").texts] == ["still here"]
    launches = [r.timings.launch_ms for r in status.values() if r.timings.launch_ms is not None]
    assert len(launches) == 1


DOM_PAGE = """<body style="margin:0;font-family:'DejaVu Sans'">
<p style="margin:0;padding:10px 0 0 20px;font-size:20px;font-weight:700;
 color:rgb(255,0,0)">Flow text</p>
<div style="position:absolute;left:100px;top:150px;font-size:12px;color:#00ff00">
  <span>Pinned   inside</span></div>
<span style="position:relative;left:5px;color:oklch(0.5 0 0)">Nudged</span>
<div style="position:fixed;right:0;bottom:0">Corner</div>
<div style="position:sticky;top:0">Sticky</div>
<p style="display:none">Gone</p><p style="visibility:hidden">Hidden</p>
<img src="assets/dot.png" width="30" height="20">
<div style="width:40px;height:40px;background-image:url('assets/dot.png')"></div>
<svg width="16" height="16"><circle cx="8" cy="8" r="8"/></svg>
<canvas width="64" height="32" style="width:32px;height:16px"></canvas>
<p style="position:absolute;top:900px;left:0;margin:0">Far below</p>
</body>"""


def test_dom_facts_for_a_hand_made_page(tmp_path: Path, renderer: Renderer) -> None:
    answer = _answer(tmp_path / "answer", DOM_PAGE)
    (answer / "assets").mkdir()
    Image.new("RGB", (6, 3), "black").save(answer / "assets" / "dot.png")
    out = tmp_path / "out"
    render_answer(renderer, answer, _reference(tmp_path / "ref.png", 400, 300), out)
    dom = _dom(out)
    texts = {t.text: t for t in dom.texts}
    assert {t.source for t in dom.texts} == {"text"}
    assert set(texts) == {"Flow text", "Pinned inside", "Nudged", "Corner", "Sticky", "Far below"}
    flow = texts["Flow text"]
    assert (flow.x, flow.y) == (20, 10)
    assert (flow.font_size_px, flow.font_weight, flow.color) == (20, 700, (255, 0, 0))
    assert (flow.positioning, flow.pinned) == ("static", False)
    pinned = texts["Pinned inside"]
    assert (pinned.x, pinned.y, pinned.color) == (100, 150, (0, 255, 0))
    assert (pinned.positioning, pinned.pinned) == ("absolute", True)
    assert (texts["Nudged"].positioning, texts["Nudged"].pinned) == ("relative", False)
    assert (
        texts["Nudged"].color[0] == texts["Nudged"].color[2] and 0 < texts["Nudged"].color[0] < 255
    )
    assert (texts["Corner"].positioning, texts["Corner"].pinned) == ("fixed", True)
    assert (texts["Sticky"].positioning, texts["Sticky"].pinned) == ("sticky", False)
    assert texts["Far below"].y == 900 and dom.page.height > 900
    kinds = {(i.kind, i.src, i.natural_width, i.natural_height) for i in dom.images}
    assert kinds == {
        ("img", "assets/dot.png", 6, 3),
        ("background", "assets/dot.png", None, None),
        ("svg", None, None, None),
        ("canvas", None, 64, 32),
    }
    canvas = next(i for i in dom.images if i.kind == "canvas")
    assert (canvas.width, canvas.height) == (32, 16)


def test_tall_page_gets_a_full_page_capture(tmp_path: Path, renderer: Renderer) -> None:
    answer = _answer(
        tmp_path / "answer",
        "<body style='margin:0'><div style='height:700px;background:#123456'></div>"
        "<div style='height:500px;background:#abcdef'></div></body>",
    )
    out = tmp_path / "out"
    record = render_answer(renderer, answer, _reference(tmp_path / "ref.png", 200, 300), out)
    assert record.full_page and (record.page.width, record.page.height) == (200, 1200)
    with Image.open(out / "render.png") as shot:
        assert shot.size == (200, 300)
    with Image.open(out / "render_full.png") as full:
        assert full.size == (200, 1200)
        assert full.convert("RGB").getpixel((100, 1000)) == (0xAB, 0xCD, 0xEF)
    (answer / "answer.html").write_text("<p>short now</p>")
    record = render_answer(renderer, answer, tmp_path / "ref.png", out)
    assert not record.full_page and not (out / "render_full.png").exists()


def test_bad_arguments_are_setup_errors_that_name_the_problem(tmp_path: Path) -> None:
    batch = tmp_path / "batch.jsonl"
    batch.write_text('{"answer_dir": "a", "reference": "r.png", "out": "o"}\n{"answer_dir": "a"}\n')
    result = _veriharness("render", "--batch", batch)
    assert result.returncode == 2
    assert "line 2" in result.stderr and "reference" in result.stderr
    batch.write_text('{"answer_dir": "a", "reference": "r", "out": "o", "unknown_key": 1}\n')
    with pytest.raises(RenderSetupError, match="line 1: unknown_key"):
        read_batch(batch)
    missing = tmp_path / "nope.png"
    result = _veriharness(
        "render", "--answer-dir", tmp_path, "--reference", missing, "--out", tmp_path / "o"
    )
    assert result.returncode == 2 and str(missing) in result.stderr
    assert not (tmp_path / "o").exists()
    reference = _reference(tmp_path / "ref.png", 10, 10)
    result = _veriharness(
        "render",
        "--answer-dir",
        tmp_path,
        "--reference",
        reference,
        "--out",
        tmp_path / "o",
        "--load-timeout",
        "-1",
    )
    assert result.returncode == 2 and "load timeout must be > 0 seconds, got -1" in result.stderr
    result = _veriharness("render", "--answer-dir", tmp_path)
    assert result.returncode == 2 and "--reference" in result.stderr
    assert BatchItem(answer_dir="a", reference="r", out="o").out == Path("o")


def test_render_reference_refuses_a_page_that_reaches_outside(tmp_path: Path) -> None:
    task = tmp_path / "task"
    task.mkdir()
    head = "id: task\ntitle: T\nkind: k\n"
    (task / "task.yaml").write_text(head + "viewport: {width: 120, height: 90}\n")
    (task / "reference.html").write_text('<p>x</p><img src="../elsewhere.png">')
    result = _veriharness("render-reference", task)
    assert result.returncode == 2
    assert "elsewhere.png" in result.stderr and not (task / "reference.png").exists()
    (task / "task.yaml").write_text(head + "viewport: {width: 0, height: 90}\n")
    result = _veriharness("render-reference", task)
    assert result.returncode == 2 and "viewport.width" in result.stderr


def test_a_page_that_breaks_the_dom_walk_is_an_error_but_keeps_its_capture(
    tmp_path: Path, renderer: Renderer
) -> None:
    answer = _answer(
        tmp_path / "answer",
        "<body style='margin:0;background:rgb(10,20,30)'><p>sabotage</p><script>"
        "Range.prototype.getBoundingClientRect = () => { throw new Error('no boxes'); };"
        "</script></body>",
    )
    out = tmp_path / "out"
    record = render_answer(renderer, answer, _reference(tmp_path / "ref.png", 120, 80), out)
    assert record.status == "error" and "no boxes" in (record.error or "")
    with Image.open(out / "render.png") as shot:
        assert shot.convert("RGB").getpixel((100, 70)) == (10, 20, 30)
    assert _dom(out).texts == []


FORM_PAGE = """<body style="margin:0;font:16px 'DejaVu Sans'">
<style>input, textarea, select { font: 16px 'DejaVu Sans'; border: 1px solid #888; padding: 4px; }
#mail::placeholder { color: rgb(200, 0, 0); font-size: 16px; }</style>
<label for="name">Name</label>
<input id="name" value="Ada   Lovelace" style="position:absolute;left:20px;top:40px;width:200px;
 height:30px;color:rgb(0,0,255);font-weight:700">
<input id="mail" type="email" placeholder="you@example.org" style="margin:80px 0 0 20px">
<input type="password" value="hunter2" placeholder="never shown">
<input type="password" placeholder="Choose a password">
<input type="checkbox" value="on"><input type="hidden" value="secret-ish">
<input value="hidden by style" style="display:none">
<textarea rows="3" style="text-align:right">Line one
line two</textarea>
<select><option>First</option><option selected>Second choice</option></select>
<input type="submit" value="Send it" style="width:200px">
<button>Real button</button>
</body>"""


def test_form_controls_show_their_values_and_placeholders(
    tmp_path: Path, renderer: Renderer
) -> None:
    answer = _answer(tmp_path / "answer", FORM_PAGE)
    out = tmp_path / "out"
    record = render_answer(renderer, answer, _reference(tmp_path / "ref.png", 640, 400), out)
    assert record.status == "ok", record.error
    dom = _dom(out)
    assert [(t.text, t.source) for t in dom.texts] == [
        ("Name", "text"),
        ("Ada Lovelace", "input-value"),
        ("you@example.org", "placeholder"),
        ("Choose a password", "placeholder"),
        ("Line one line two", "input-value"),
        ("Second choice", "input-value"),
        ("Send it", "input-value"),
        ("Real button", "text"),
    ]
    texts = {t.text: t for t in dom.texts}
    name = texts["Ada Lovelace"]
    # Words sit inside the content box (left 20 + border 1 + padding 4), one line centred in it.
    assert name.x == 25 and 40 < name.y < name.y + name.height < 40 + 30
    assert 0 < name.width < 200 and 14 < name.height <= 22
    assert (name.color, name.font_weight, name.font_size_px) == ((0, 0, 255), 700, 16)
    assert (name.positioning, name.pinned) == ("absolute", True)
    mail = texts["you@example.org"]
    assert mail.color == (200, 0, 0) and mail.font_weight == 400
    # The measured advance of the placeholder, not the whole control.
    assert abs(mail.width - texts["Ada Lovelace"].width) > 5
    area = texts["Line one line two"]
    send = texts["Send it"]
    assert 0 < send.width < 200 - 10  # centred label, narrower than the control
    shot = Image.open(out / "render.png").convert("L")
    ink = [
        x
        for x in range(int(send.x) - 40, int(send.x + send.width) + 40)
        if _grey(shot, x, int(send.y + send.height / 2)) < 128
    ]
    assert ink and send.x - 2 <= min(ink) and max(ink) <= send.x + send.width + 2
    # A textarea: content-box height, the widest line's width, right-aligned as styled.
    assert area.height > 2 * area.font_size_px
    assert 0 < area.width < name.width
    row = int(area.y + area.font_size_px / 2)
    ink = [x for x in range(int(area.x) - 80, 640) if _grey(shot, x, row) < 128]
    assert ink and area.x - 2 <= min(ink) and max(ink) <= area.x + area.width + 2
    row = int(name.y + name.height / 2)
    # Inside the control's borders (x 20 and 219), so only the value's glyphs count as ink.
    ink = [x for x in range(22, 218) if _grey(shot, x, row) < 128]
    assert ink and name.x - 2 <= min(ink) and max(ink) <= name.x + name.width + 2
    assert not any("hunter2" in t.text or "secret" in t.text for t in dom.texts)
