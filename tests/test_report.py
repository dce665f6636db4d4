"""`veriharness report`: plots, per-run pages, escaping, and no remote request in Chromium."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

from support.synthetic_runs import write_experiment
from veriharness.report import side_by_side
from veriharness.tools import find_chromium

ROOT = Path(__file__).resolve().parents[1]
FAULTS = {("base", "task-000", 1): "timeout", ("treat", "task-001", 1): "missing"}


def _cmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veriharness", *args], capture_output=True, text=True, cwd=ROOT
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("report")
    exp = write_experiment(root / "results", tasks=3, faults=FAULTS, images=True, seed=2)
    expected = str(exp.write_expected(root / "expected.json"))
    assert (
        _cmd("collect", "--experiment-dir", str(exp.exp_dir), "--expected", expected).returncode
        == 0
    )
    out = exp.exp_dir / "report"
    proc = _cmd(
        "report",
        "--experiment-dir",
        str(exp.exp_dir),
        "--out",
        str(out),
        "--tasks-dir",
        str(exp.tasks_dir),
    )
    assert proc.returncode == 0, proc.stderr
    return exp, out


def test_plots_are_pngs_with_captions(report) -> None:
    _, out = report
    for name in ("metrics_by_condition", "cost_vs_fidelity", "capability_tags"):
        with Image.open(out / f"{name}.png") as image:
            assert image.format == "PNG" and image.width > 200
        assert (out / f"{name}.rst").read_text().strip()


def test_every_run_folder_gets_a_page_and_the_index_lists_every_run(report) -> None:
    exp, out = report
    index = (out / "index.html").read_text()
    for (condition, task, rep), spec in exp.runs.items():
        page = out / "runs" / condition / task / f"r{rep}" / "index.html"
        assert page.is_file() == (spec.fault != "missing")
        assert f"<td>{condition}</td><td>{task}</td><td>{rep}</td>" in index
    assert "run folder is absent" in index
    timeout = (out / "runs/base/task-000/r1/index.html").read_text()
    assert "timeout" in timeout and "wall clock limit" in timeout


def test_page_shows_steps_in_order_and_each_call_with_what_it_saw(report) -> None:
    exp, out = report
    spec = exp.runs[("treat", "task-002", 1)]
    page_dir = out / "runs/treat/task-002/r1"
    html = (page_dir / "index.html").read_text()
    positions = [
        html.index(f"Step {i}: next I use {name}.") for i, name in enumerate(spec.tool_names)
    ]
    assert positions == sorted(positions)
    for call in spec.mllm_calls:
        assert f"call <b>{call['call_id']}</b>" in html
        assert ", ".join(call["tags"]) in html
        image = Image.open(page_dir / f"call-{call['call_id']}-0.png").convert("RGB")
        region = call["inputs"][0].get("region")
        red = [
            (x, y)
            for x in range(image.width)
            for y in range(image.height)
            if image.getpixel((x, y)) == (255, 0, 0)
        ]
        if region:
            assert (region["x"], region["y"]) in red and len(red) > 20
        else:
            assert red == []
        if any(i["path"] == "shot.png" for i in call["inputs"] if i["kind"] == "image"):
            assert "shot.png (sha256:" in html and "is not available" in html


def test_run_content_is_escaped_and_pages_make_no_remote_request(report) -> None:
    exp, out = report
    pages = list(out.rglob("*.html"))
    for page in pages:
        text = page.read_text()
        assert "<script" not in text.lower() and "http://" not in text and "https://" not in text
    assert (
        "&lt;script&gt;alert(&#x27;&lt;b&gt;x&lt;/b&gt;&#x27;)"
        in (out / "runs/base/task-001/r1/index.html").read_text()
    )
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(find_chromium()), args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page()
        page.on("request", lambda r: requests.append(r.url))
        for target in (out / "index.html", out / "runs/base/task-001/r1/index.html"):
            page.goto(target.as_uri())
            broken = page.evaluate(
                "[...document.images].filter(i => !i.complete || i.naturalWidth === 0).length"
            )
            assert broken == 0
        browser.close()
    assert requests and all(url.startswith("file://") for url in requests)


def test_side_by_side_labels_a_missing_render(tmp_path) -> None:
    reference = tmp_path / "ref.png"
    Image.new("RGB", (40, 30), (0, 0, 255)).save(reference)
    out = side_by_side(reference, tmp_path / "absent.png", tmp_path / "pair.png")
    with Image.open(out) as image:
        assert image.size == (90, 48)
        assert image.convert("RGB").getpixel((5, 25)) == (0, 0, 255)
        assert image.convert("RGB").getpixel((55, 25)) == (235, 235, 235)


def test_report_without_collected_tables_says_what_to_run(tmp_path) -> None:
    proc = _cmd("report", "--experiment-dir", str(tmp_path), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "run `veriharness collect` first" in proc.stderr
