"""`veriharness report`: plots, per-run pages, escaping, and no remote request in Chromium."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

from support.cli import veriharness
from support.synthetic_runs import write_experiment, write_repeated_calls
from veriharness._util.programs import find_chromium
from veriharness.score import SCORER_VERSION

ROOT = Path(__file__).resolve().parents[2]
FAULTS = {
    ("base", "task-000", 1): "timeout",
    ("treat", "task-001", 1): "missing",
    ("treat", "task-000", 1): "missing_answer",
}


_cmd = veriharness


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


def test_every_run_folder_gets_a_page_and_its_conditions_list_every_run(report) -> None:
    exp, out = report
    index = (out / "index.html").read_text()
    lists = {n: (out / f"runs-{n}.html").read_text() for n in (1, 2)}
    assert "<tr><td>base</td><td>3</td><td><a href='runs-1.html'>every run</a>" in index
    assert "<tr><td>treat</td><td>3</td><td><a href='runs-2.html'>every run</a>" in index
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet").set_index(
        ["condition", "task", "replicate"]
    )
    for (condition, task, rep), spec in exp.runs.items():
        page = out / "runs" / condition / task / f"r{rep}" / "index.html"
        assert page.is_file() == (spec.fault != "missing")
        row = f"<td>{condition}</td><td>{task}</td><td>{rep}</td>"
        assert row in lists[1 if condition == "base" else 2]
        # The index itself lists only the runs that need a look.
        assert (row in index) == (runs.loc[(condition, task, rep), "status"] != "ok")
    assert "run folder is absent" in index
    timeout = (out / "runs/base/task-000/r1/index.html").read_text()
    assert "timeout" in timeout and "wall clock limit" in timeout


def test_a_run_page_opens_with_its_status_cost_metrics_flags_and_the_offline_caveat(
    report,
) -> None:
    exp, out = report
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet").set_index(
        ["condition", "task", "replicate"]
    )
    row = runs.loc[("base", "task-001", 1)]
    page = (out / "runs/base/task-001/r1/index.html").read_text()
    order = [
        page.index("OFFLINE: this run used the embedded offline model"),
        page.index("<td>status (tables)</td><td>ok</td>"),
        page.index(f"<td>metric_ssim</td><td>{row.metric_ssim:.4g}</td>"),
        page.index("<td>audit_screenshot_substitution</td><td>False</td>"),
        page.index("<h2>Reference and render</h2>"),
    ]
    assert order == sorted(order)
    assert "spend (our prices)" in page
    assert "Claude Code&#x27;s own" not in page and "Claude Code's own" not in page
    caption = (out / "capability_tags.rst").read_text()
    assert "the tags the agent declared" in caption and "the annotator inferred" in caption


def _browser(pw):
    return pw.chromium.launch(
        executable_path=str(find_chromium()), args=["--no-sandbox", "--disable-gpu"]
    )


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
        if any(i["path"] == "shot.png" for i in call["inputs"] if i["kind"] == "image"):
            assert "shot.png (sha256:" in html and "is not available" in html
    # What the browser shows: the reference with each call's region outlined in red on top.
    with sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page()
        page.goto((page_dir / "index.html").as_uri())
        shots = page.locator(".call .shot")
        assert shots.count() == len(spec.mllm_calls)
        for n, call in enumerate(spec.mllm_calls):
            shots.nth(n).scroll_into_view_if_needed()
            page.wait_for_function(
                "el => el.complete && el.naturalWidth > 0",
                arg=shots.nth(n).locator("img").element_handle(),
            )
            image = Image.open(io.BytesIO(shots.nth(n).screenshot())).convert("RGB")
            # The element may sit at a fractional offset, so the capture can be one pixel
            # larger and shifted by up to one pixel.
            assert image.size in {(64, 48), (65, 48), (64, 49), (65, 49)}
            red = {
                (x, y)
                for x in range(image.width)
                for y in range(image.height)
                if image.getpixel((x, y)) == (255, 0, 0)
            }
            region = call["inputs"][0].get("region")
            if region:
                corner = (region["x"], region["y"])
                far = (region["x"] + region["width"] - 1, region["y"] + region["height"] - 1)
                for x, y in (corner, far):
                    assert {(x, y), (x + 1, y), (x, y + 1), (x + 1, y + 1)} & red, (x, y)
                assert len(red) > 20 and all(
                    region["x"] <= x <= region["x"] + region["width"]
                    and region["y"] <= y <= region["y"] + region["height"]
                    for x, y in red
                )
            else:
                assert red == set()
        browser.close()


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
        browser = _browser(pw)
        page = browser.new_page()
        page.on("request", lambda r: requests.append(r.url))
        targets = (
            "index.html",
            "runs/base/task-001/r1/index.html",
            "runs/treat/task-000/r1/index.html",
        )
        for target in (out / t for t in targets):
            page.goto(target.as_uri())
            # Images load lazily: ask each one to load now and count those that cannot.
            broken = page.evaluate(
                "Promise.all([...document.images].map(i => { i.loading = 'eager';"
                " return i.decode().then(() => 0, () => 1); }))"
                ".then(r => r.reduce((a, b) => a + b, 0))"
            )
            assert broken == 0
        browser.close()
    assert requests and all(url.startswith("file://") for url in requests)


def test_a_run_without_render_says_so_beside_the_reference(report) -> None:
    _, out = report
    html = (out / "runs/treat/task-000/r1/index.html").read_text()
    assert "render: not available" in html and "no answer/answer.html" in html
    assert not (out / "runs/treat/task-000/r1/render.png").exists()
    ok = (out / "runs/base/task-002/r1/index.html").read_text()
    assert "<figcaption>render</figcaption><img loading='lazy' src='render.png'>" in ok
    with Image.open(out / "runs/base/task-002/r1/render.png") as image:
        assert image.convert("RGB").getpixel((10, 10)) == (200, 40, 40)


def test_calls_sharing_an_instruction_each_appear_under_their_own_tool_use(tmp_path) -> None:
    exp = write_experiment(tmp_path / "results", conditions=("base",), tasks=1, images=True)
    run_dir = exp.exp_dir / "base" / "task-000" / "r1"
    reference_sha = exp.runs[("base", "task-000", 1)].reference_sha
    write_repeated_calls(run_dir, reference_sha, ["FIRST-REPLY", "SECOND-REPLY"], extra_uses=1)
    assert _cmd("collect", "--experiment-dir", str(exp.exp_dir)).returncode == 0
    out = tmp_path / "report"
    args = ["--experiment-dir", str(exp.exp_dir), "--out", str(out), "--jobs", "1"]
    proc = _cmd("report", *args, "--tasks-dir", str(exp.tasks_dir))
    assert proc.returncode == 0, proc.stderr
    html = (out / "runs/base/task-000/r1/index.html").read_text()
    steps = html.split("<div class='step call'>")[1:]
    assert len(steps) == 3
    assert "call <b>rep-0</b>" in steps[0] and "FIRST-REPLY" in steps[0]
    assert "call <b>rep-1</b>" in steps[1] and "SECOND-REPLY" in steps[1]
    assert "SECOND-REPLY" not in steps[0] and "FIRST-REPLY" not in steps[1]
    assert "no mllm_trace.jsonl call is linked to this tool use" in steps[2]
    assert "1 mcp__mllm__call tool use(s)" not in html and "has 3 mcp__mllm__call" in html
    # Both calls saw the same reference: it is copied once, by digest.
    assert len(list((out / "images").iterdir())) == 1


def test_each_compared_pair_gets_its_table_and_plot_in_the_report(tmp_path) -> None:
    exp = write_experiment(
        tmp_path / "results", conditions=("base", "treat", "same"), tasks=4, seed=3
    )
    assert _cmd("collect", "--experiment-dir", str(exp.exp_dir)).returncode == 0
    compared = _cmd(
        "compare",
        "--experiment-dir",
        str(exp.exp_dir),
        "--resamples",
        "200",
        "--pair",
        "base",
        "treat",
        "--pair",
        "same",
        "treat",
    )
    assert compared.returncode == 0, compared.stderr
    out = tmp_path / "report"
    proc = _cmd("report", "--experiment-dir", str(exp.exp_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    index = (out / "index.html").read_text()
    assert "<h2>Comparisons</h2>" in index
    assert "<h3>treat vs base</h3>" in index and "<h3>treat vs same</h3>" in index
    sections = index.split("<h2>Comparisons</h2>")[1]
    assert sections.count("<th>p (Holm)</th>") == 2
    verdicts = index.split("<h2>Verdict</h2>")[1].split("<h2>")[0]
    assert verdicts.count("<th>p (Holm)</th>") == 2  # each pair's primary outcome, first
    for number in (1, 2):
        with Image.open(out / f"comparison_{number}.png") as image:
            assert image.format == "PNG" and image.height > 200
        assert f"src='comparison_{number}.png'" in index


def test_report_without_collected_tables_says_what_to_run(tmp_path) -> None:
    proc = _cmd("report", "--experiment-dir", str(tmp_path), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "run `veriharness collect` first" in proc.stderr


def test_the_first_screen_says_offline_and_uncommitted_and_leads_with_the_comparison(
    tmp_path,
) -> None:
    import json

    exp = write_experiment(
        tmp_path / "results", tasks=3, faults={("treat", "task-002", 1): "not_started"}
    )
    record = exp.exp_dir / "base" / "task-001" / "r1" / "run.json"
    data = json.loads(record.read_text())
    record.write_text(json.dumps(data | {"provenance": {"uncommitted_changes": True}}))
    # One run keeps the scores of an older scorer: its scores cannot be set beside the others'.
    metrics = exp.exp_dir / "treat" / "task-000" / "r1" / "metrics.json"
    metrics.write_text(json.dumps(json.loads(metrics.read_text()) | {"scorer_version": "1"}))
    assert _cmd("collect", "--experiment-dir", exp.exp_dir).returncode == 0
    proc = _cmd(
        "compare", "--experiment-dir", exp.exp_dir, "--baseline", "base", "--treatment", "treat"
    )
    assert proc.returncode == 0, proc.stderr
    comparison = (exp.exp_dir / "comparison.md").read_text()
    head = comparison.split("| measure |")[0]
    assert "OFFLINE: 6 of 6 session runs ran against the embedded offline model" in head
    assert "UNCOMMITTED: 1 of 6 session runs ran with uncommitted inputs" in head
    scored = (
        f"Scored by scorer 1 (1 runs), {SCORER_VERSION} (4 runs); block detection dom (5 runs)."
    )
    assert "MIXED SCORING: the scored runs were not all scored alike" in head
    assert head.count(scored) == 2  # the caveat, and the method paragraph
    out = exp.exp_dir / "report"
    proc = _cmd(
        "report", "--experiment-dir", exp.exp_dir, "--out", out, "--tasks-dir", exp.tasks_dir
    )
    assert proc.returncode == 0, proc.stderr
    index = (out / "index.html").read_text()
    order = [
        index.index("OFFLINE: 6 of 6 session runs"),
        index.index("UNCOMMITTED: 1 of 6 session runs"),
        index.index("MIXED SCORING"),
        index.index("<h2>Verdict</h2>"),
        index.index("did not detectably change metric_ssim"),
        index.index("This design cannot reach alpha 0.05"),
        # Every counted run had a scored answer: the two analyses agree, shown once.
        index.index("<td>metric_ssim</td><td>itt = pp</td>"),
        index.index("<h2>Runs excluded from the comparison: 1 (not the agent's doing)</h2>"),
        index.index("not_started: never started"),
        index.index("<h2>Audit flag rates</h2>"),
        index.index("<h2>Experiment</h2>"),
        index.index("spend (our prices)"),
        index.index("<img"),
    ]
    assert order == sorted(order)
    assert index.count(scored) == 2  # the caveat, and the experiment's facts


def test_the_workflow_hands_the_report_its_tasks_folder(tmp_path: Path) -> None:
    """The run pages show each task's reference.png from the config's tasks_dir, wherever it is."""
    import shutil

    from support.project_copy import copy_project

    (tmp_path / "p").mkdir()
    project = copy_project(tmp_path / "p", ["article"], {}, "fixture")
    shutil.move(project / "tasks", project / "my-tasks")
    proc = subprocess.run(
        ["snakemake", "-n", "-p", "--cores", "1", "write_report",
         "--config", "tasks_dir=my-tasks", "allow_uncommitted=true"],
        cwd=project, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--tasks-dir my-tasks" in proc.stdout


def test_a_run_whose_cost_is_estimated_is_named_beside_the_spend_not_summed(tmp_path) -> None:
    import json

    exp = write_experiment(tmp_path / "results", tasks=2, faults={})
    run_dir = exp.exp_dir / "base" / "task-000" / "r1"
    outcome = json.loads((run_dir / "outcome.json").read_text())
    spend = {"agent_usd": 0.4, "mllm_usd": 0.1, "total_usd": 0.5, "agent_source": "proxy"}
    outcome["spend"] = spend | {"cost_estimated": True, "estimated_usd": 0.3}
    (run_dir / "outcome.json").write_text(json.dumps(outcome))
    assert _cmd("collect", "--experiment-dir", exp.exp_dir).returncode == 0
    out = exp.exp_dir / "report"
    proc = _cmd(
        "report", "--experiment-dir", exp.exp_dir, "--out", out, "--tasks-dir", exp.tasks_dir
    )
    assert proc.returncode == 0, proc.stderr
    index = (out / "index.html").read_text()
    assert "1 run(s) not in these sums: a reply reported no usage" in index
    assert "the caps counted an estimate of $0.50" in index


def test_the_first_screen_names_each_conditions_prompt_modules(tmp_path: Path) -> None:
    import json

    exp = write_experiment(tmp_path / "results", tasks=2)
    assert _cmd("collect", "--experiment-dir", exp.exp_dir).returncode == 0
    modules = {"base": ["b1-x", "env-facts-v0.1"], "treat": ["b1-x", "env-facts-v0.1", "b3-y"]}
    record = {
        "kind": "experiment_record",
        "conditions": {name: {"id": name, "modules": ids} for name, ids in modules.items()},
    }
    (exp.exp_dir / "experiment.json").write_text(json.dumps(record))
    out = exp.exp_dir / "report"
    proc = _cmd(
        "report", "--experiment-dir", exp.exp_dir, "--out", out, "--tasks-dir", exp.tasks_dir
    )
    assert proc.returncode == 0, proc.stderr
    index = (out / "index.html").read_text()
    assert (
        "<td>prompt modules</td><td>base: b1-x, env-facts-v0.1; "
        "treat: b1-x, env-facts-v0.1, b3-y</td>"
    ) in index
