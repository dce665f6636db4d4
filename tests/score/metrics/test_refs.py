"""References an answer page declares, found in its HTML and local CSS."""

from __future__ import annotations

from pathlib import Path

from veriharness.score.metrics.refs import classify, page_references


def _answer(tmp_path: Path) -> Path:
    answer = tmp_path / "answer"
    (answer / "assets" / "css").mkdir(parents=True)
    (answer / "assets" / "css" / "site.css").write_text(
        "@import 'more.css';\nbody { background: url(../bg.png) }\n"
    )
    (answer / "assets" / "css" / "more.css").write_text(
        ".x { background-image: url('https://cdn.example/x.png') }\n"
    )
    (answer / "answer.html").write_text(
        """<!doctype html><html><head>
        <link rel="stylesheet" href="assets/css/site.css">
        <link rel="stylesheet" href="https://fonts.example/css">
        <style>.h { background: url("logo.png") }</style>
        <script src="../outside.js"></script></head>
        <body><img src="assets/a.png" srcset="assets/a2.png 2x, assets/a3.png 3x">
        <img src="data:image/png;base64,AAAA"><a href="https://example.org/">link</a>
        <div style="background:url(file:///etc/hosts)"></div></body></html>"""
    )
    return answer


def test_every_reference_is_found_once_with_its_kind_and_resolved_path(tmp_path: Path) -> None:
    answer = _answer(tmp_path)
    refs = {r.value: r for r in page_references(answer / "answer.html", answer)}
    root = answer.resolve()
    assert refs["assets/css/site.css"].path == root / "assets/css/site.css"
    assert refs["more.css"].source == "assets/css/site.css"
    assert refs["../bg.png"].path == root / "assets/bg.png"
    assert refs["https://cdn.example/x.png"].kind == "remote"
    assert refs["https://fonts.example/css"].kind == "remote"
    assert refs["logo.png"].path == root / "logo.png"
    assert refs["../outside.js"].path == tmp_path.resolve() / "outside.js"
    assert {"assets/a.png", "assets/a2.png", "assets/a3.png"} <= refs.keys()
    assert refs["data:image/png;base64,AAAA"].kind == "inline"
    assert refs["file:///etc/hosts"].path == Path("/etc/hosts")
    assert "https://example.org/" not in refs  # hyperlinks are not loaded


def test_classify() -> None:
    assert classify("//cdn.example/x.js") == "remote"
    assert classify("wss://x") == "remote"
    assert classify("#frag") == "inline"
    assert classify("javascript:void(0)") == "inline"
    assert classify("assets/x.png?v=2") == "local"
