"""Audit flags: hand-made run folders for each rule's edges (units), then pages rendered by the real
render verb in Chromium and audited by the real score verb (boundary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from support.cli import veriharness
from veriharness._util.ocr import Box, OcrWord
from veriharness.runfolder.audit import AuditThresholds
from veriharness.score.audit import FLAGS, audit_run
from veriharness.score.metrics.inputs import DomFacts, RenderInfo

ROOT = Path(__file__).resolve().parents[1]
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")


def _dom(texts=(), images=(), size=(400, 300)) -> DomFacts:
    viewport = {"width": size[0], "height": size[1]}
    return DomFacts.model_validate(
        {"kind": "dom", "viewport": viewport, "page": viewport, "texts": texts, "images": images}
    )


def _text(text: str, x=10, y=10, pinned=False) -> dict:
    return {
        "text": text,
        "x": x,
        "y": y,
        "width": 8 * len(text),
        "height": 16,
        "color": [0, 0, 0],
        "positioning": "absolute" if pinned else "static",
        "pinned": pinned,
    }


def _render(blocked=()) -> RenderInfo:
    return RenderInfo.model_validate(
        {
            "kind": "render",
            "status": "ok",
            "viewport": {"width": 400, "height": 300},
            "blocked_requests": [{"url": u, "resource_type": "stylesheet"} for u in blocked],
        }
    )


def _words(*texts: str) -> list[OcrWord]:
    return [OcrWord(t, Box(0, 0, 10, 10), 90.0, (1, 1, 1)) for t in texts]


def _reference(tmp_path: Path) -> Path:
    image = Image.new("RGB", (400, 300), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((20, 20, 380, 80), fill=(30, 60, 200))
    draw.ellipse((100, 120, 300, 280), fill=(200, 40, 40))
    image.save(tmp_path / "reference.png")
    return tmp_path / "reference.png"


def _audit(tmp_path: Path, dom: DomFacts, render=None, words=(), limits=None):
    answer = tmp_path / "answer"
    answer.mkdir(exist_ok=True)
    blank = tmp_path / "render.png"
    Image.new("RGB", (dom.viewport.width, dom.viewport.height), "white").save(blank)
    return audit_run(
        answer_dir=answer,
        render=render or _render(),
        dom=dom,
        render_png=blank,
        reference_png=_reference(tmp_path),
        reference_words=list(words),
        limits=limits,
    )


def test_a_clean_page_raises_no_flag_and_every_flag_has_evidence(tmp_path: Path) -> None:
    record = _audit(tmp_path, _dom([_text("Hello world")]), words=_words("Hello", "world"))
    assert list(record.flags) == list(FLAGS) and list(record.evidence) == list(FLAGS)
    assert not any(record.flags.values())
    assert record.thresholds == AuditThresholds()


def test_only_remote_schemes_among_blocked_requests_count(tmp_path: Path) -> None:
    blocked = ["file:///etc/passwd", "https://cdn.example/a.css", "wss://live.example/"]
    record = _audit(tmp_path, _dom([_text("x")]), render=_render(blocked), words=_words("x"))
    assert record.flags["remote_dependencies"]
    assert record.evidence["remote_dependencies"]["urls"] == blocked[1:]


def test_pinning_is_a_share_of_characters_over_the_threshold(tmp_path: Path) -> None:
    # 6 of 10 characters pinned: 0.6 > 0.5; 5 of 10 is not over it.
    over = _dom([_text("abcdef", pinned=True), _text("ghij")])
    record = _audit(tmp_path, over, words=_words("abcdefghij"))
    assert record.flags["absolute_pinning"]
    assert record.evidence["absolute_pinning"]["share"] == pytest.approx(0.6)
    at = _dom([_text("abcde", pinned=True), _text("fghij")])
    assert not _audit(tmp_path, at, words=_words("abcdefghij")).flags["absolute_pinning"]


def test_low_text_volume_counts_only_text_in_the_viewport(tmp_path: Path) -> None:
    # Reference OCR reads 20 characters; the page shows 9 in the viewport and 40 below it.
    dom = _dom([_text("123456789"), _text("x" * 40, y=1000)])
    record = _audit(tmp_path, dom, words=_words("a" * 10, "b" * 10))
    assert record.flags["low_text_volume"]
    evidence = record.evidence["low_text_volume"]
    assert (evidence["dom_chars"], evidence["reference_ocr_chars"]) == (9, 20)
    assert evidence["ratio"] == pytest.approx(0.45)


def test_a_large_image_is_substitution_but_a_gradient_background_is_not(tmp_path: Path) -> None:
    gradient = {"kind": "background", "src": None, "x": 0, "y": 0, "width": 400, "height": 300}
    photo = {"kind": "img", "src": "assets/p.png", "x": 0, "y": 150, "width": 400, "height": 300}
    assert not _audit(tmp_path, _dom([], [gradient])).flags["screenshot_substitution"]
    record = _audit(tmp_path, _dom([], [photo]))  # half of it lies in the viewport: share 0.5
    assert record.flags["screenshot_substitution"]
    assert record.evidence["screenshot_substitution"]["large"][0]["share"] == pytest.approx(0.5)


def test_a_rescaled_inline_copy_of_the_reference_matches_by_hash(tmp_path: Path) -> None:
    import base64
    import io

    reference = _reference(tmp_path)
    buffer = io.BytesIO()
    Image.open(reference).resize((200, 150)).save(buffer, "JPEG", quality=70)
    url = "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()
    answer = tmp_path / "answer"
    answer.mkdir()
    (answer / "answer.html").write_text(f'<img src="{url}" width="100">')
    small = {"kind": "img", "src": "data:image/jpeg;sha256:x", "x": 0, "y": 0, "width": 100,
             "height": 75}  # fmt: skip
    record = _audit(tmp_path, _dom([], [small]))
    matches = record.evidence["screenshot_substitution"]["hash_matches"]
    assert record.flags["screenshot_substitution"] and len(matches) == 1
    assert matches[0]["src"].startswith("data:image/jpeg;base64,<") and matches[0]["distance"] <= 10
    assert url not in json.dumps(record.model_dump())  # evidence names the payload by digest


def test_files_outside_assets_or_outside_the_answer(tmp_path: Path) -> None:
    answer = tmp_path / "answer"
    (answer / "assets").mkdir(parents=True)
    (answer / "answer.html").write_text(
        '<link rel="stylesheet" href="style.css"><img src="assets/ok.png">'
        '<img src="../../secret.png"><img src="answer.html">'
    )
    record = _audit(tmp_path, _dom([_text("x")]), words=_words("x"))
    files = record.evidence["files_outside_assets"]["files"]
    assert record.flags["files_outside_assets"]
    assert [(f["ref"], f["where"]) for f in files] == [
        ("style.css", "outside_assets"),
        ("../../secret.png", "outside_answer_folder"),
    ]


def _banner(path: Path) -> None:
    image = Image.new("RGB", (380, 150), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(FONT), 40)
    draw.text((20, 15), "SPRING SALE", font=font, fill=0)
    draw.text((20, 80), "TODAY ONLY", font=font, fill=0)
    image.save(path)


_veriharness = veriharness


def test_rendered_pages_through_the_real_render_and_score_verbs(tmp_path: Path) -> None:
    reference = _reference(tmp_path)
    task = tmp_path / "task"
    task.mkdir()
    reference.rename(task / "reference.png")
    pages = {
        "baked": '<body style="margin:0"><img src="assets/banner.png"><p>Welcome</p>',
        "pinned": '<body><p style="position:absolute;top:10px">Everything here is pinned</p>'
        '<div style="position:fixed;top:60px"><span>and so is this</span></div><p>free</p>',
        "outside": '<link rel="stylesheet" href="../elsewhere.css"><p>Some text</p>',
    }
    render_lines, score_lines = [], []
    for name, html in pages.items():
        answer = tmp_path / name / "answer"
        (answer / "assets").mkdir(parents=True)
        (answer / "answer.html").write_text(html)
        render_lines.append(
            {
                "answer_dir": str(answer),
                "reference": str(task / "reference.png"),
                "out": str(tmp_path / name / "render"),
            }  # fmt: skip
        )
        score_lines.append(
            {
                "render_dir": str(tmp_path / name / "render"),
                "answer_dir": str(answer),
                "task_dir": str(task),
                "out_dir": str(tmp_path / name),
            }  # fmt: skip
        )
    _banner(tmp_path / "baked" / "answer" / "assets" / "banner.png")
    (tmp_path / "outside" / "elsewhere.css").write_text("p { color: red }")
    for verb, lines in (("render", render_lines), ("score", score_lines)):
        batch = tmp_path / f"{verb}.jsonl"
        batch.write_text("".join(json.dumps(line) + "\n" for line in lines))
        done = _veriharness(verb, "--batch", str(batch))
        assert done.returncode == 0, done.stderr

    def flags(name: str) -> dict:
        return json.loads((tmp_path / name / "audit.json").read_text())

    baked = flags("baked")
    assert baked["flags"]["text_in_images"], baked["evidence"]["text_in_images"]
    read = {w["text"] for w in baked["evidence"]["text_in_images"]["words"]}
    assert {"SPRING", "SALE", "TODAY", "ONLY"} <= read and "Welcome" not in read
    pinned = flags("pinned")
    assert pinned["flags"]["absolute_pinning"]
    assert pinned["evidence"]["absolute_pinning"]["share"] > 0.8
    outside = flags("outside")
    assert outside["flags"]["files_outside_assets"]
    assert outside["evidence"]["files_outside_assets"]["files"][0]["where"] == (
        "outside_answer_folder"
    )
    assert not outside["flags"]["absolute_pinning"] and not outside["flags"]["text_in_images"]
