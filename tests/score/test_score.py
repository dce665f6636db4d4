"""The `score` verb through its real boundary: pages rendered by the real render verb in Debian's
Chromium, then scored by `python -m veriharness score` in a subprocess, reading real files.

One batch render and one batch score serve the whole module (one browser, one OCR per reference).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli import veriharness
from veriharness._util import tesseract_cache
from veriharness._util.hashing import sha256_file
from veriharness._util.tesseract_cache import CACHE_ENV
from veriharness.score.metrics.ocrwords import OCR_VERSION

ROOT = Path(__file__).resolve().parents[2]
TASKS = sorted(
    p.parent.name
    for p in (ROOT / "tasks").glob("*/reference.html")
    if (p.parent / "reference.png").is_file() and (p.parent / "reference_dom.json").is_file()
)
BLOCK_METRICS = ("block_match", "text_similarity", "position", "color")


def _run_folder(base: Path, name: str, task: str, html: str | None) -> dict[str, str]:
    run = base / name
    answer = run / "answer"
    answer.mkdir(parents=True)
    if html is not None:
        (answer / "answer.html").write_text(html, encoding="utf-8")
    return {
        "render_dir": str(run / "render"),
        "answer_dir": str(answer),
        "task_dir": str(ROOT / "tasks" / task),
        "out_dir": str(run),
    }


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    assert TASKS, "no task ships reference.html, reference.png and reference_dom.json"
    base = tmp_path_factory.mktemp("runs")
    task = TASKS[0]
    reference = ROOT / "tasks" / task / "reference.png"
    jobs: dict[str, dict[str, str]] = {}
    for name in TASKS:
        source = ROOT / "tasks" / name
        jobs[f"self-{name}"] = _run_folder(
            base, f"self-{name}", name, (source / "reference.html").read_text(encoding="utf-8")
        )
        if (source / "assets").is_dir():
            shutil.copytree(source / "assets", Path(jobs[f"self-{name}"]["answer_dir"]) / "assets")
    jobs["blank"] = _run_folder(base, "blank", task, "<!doctype html><html><body></body></html>")
    jobs["missing"] = _run_folder(base, "missing", task, None)
    jobs["screenshot"] = _run_folder(
        base,
        "screenshot",
        task,
        '<!doctype html><body style="margin:0"><img src="assets/ref.png" style="display:block">',
    )
    (Path(jobs["screenshot"]["answer_dir"]) / "assets").mkdir()
    shutil.copy(reference, Path(jobs["screenshot"]["answer_dir"]) / "assets" / "ref.png")
    jobs["remote"] = _run_folder(
        base,
        "remote",
        task,
        '<!doctype html><head><link rel="stylesheet" href="https://fonts.example.com/x.css">'
        "</head><body><h1>Simple plans for every team</h1></body>",
    )
    render_batch = base / "render.jsonl"
    render_batch.write_text(
        "".join(
            json.dumps(
                {
                    "answer_dir": job["answer_dir"],
                    "reference": str(Path(job["task_dir"]) / "reference.png"),
                    "out": job["render_dir"],
                    "task_dir": job["task_dir"],
                }
            )
            + "\n"
            for job in jobs.values()
        )
    )
    rendered = veriharness("render", "--batch", str(render_batch))
    assert rendered.returncode == 0, rendered.stderr
    score_batch = base / "score.jsonl"
    score_batch.write_text("".join(json.dumps(job) + "\n" for job in jobs.values()))
    done = veriharness("score", "--batch", str(score_batch), "--ocr-cache", str(base / "ocr"))
    assert done.returncode == 0, done.stderr
    return {name: Path(job["out_dir"]) for name, job in jobs.items()}


def _read(run: Path, name: str) -> dict:
    return json.loads((run / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("task", TASKS)
def test_a_reference_page_scored_against_itself_is_near_perfect(scored, task) -> None:
    record = _read(scored[f"self-{task}"], "metrics.json")
    metrics = record["metrics"]
    assert record["kind"] == "metrics" and record["status"] == "ok"
    assert metrics["ssim"] >= 0.99
    assert 1 - metrics["mae"] >= 0.99
    for name in BLOCK_METRICS:
        assert metrics[name] >= 0.99, name
    # The OCR word metric of a perfect answer is the task's OCR ceiling (the merged OCR of the
    # reference against the reference's own DOM words), and that ceiling is near 1.
    assert metrics["ocr_word_f1"] == pytest.approx(record["details"]["ocr_words"]["f1_ceiling"])
    assert metrics["ocr_word_f1"] >= 0.99
    assert record["details"]["size_mismatch"] is None
    audit = _read(scored[f"self-{task}"], "audit.json")
    assert not any(audit["flags"].values()), audit["evidence"]


def test_a_blank_page_scores_low_on_every_metric(scored) -> None:
    blank = _read(scored["blank"], "metrics.json")["metrics"]
    perfect = _read(scored[f"self-{TASKS[0]}"], "metrics.json")["metrics"]
    assert blank["ssim"] < perfect["ssim"] - 0.1
    assert blank["mae"] > perfect["mae"] + 0.02
    assert blank["ocr_word_precision"] == 0.0 and blank["ocr_word_f1"] == 0.0
    for name in BLOCK_METRICS:
        assert blank[name] == 0.0, name
    assert _read(scored["blank"], "audit.json")["flags"]["low_text_volume"] is True


def test_a_missing_answer_is_no_render_with_null_metrics(scored) -> None:
    record = _read(scored["missing"], "metrics.json")
    assert record["status"] == "no_render"
    assert record["details"]["render_status"] == "missing_answer"
    assert set(record["metrics"].values()) == {None}
    assert len(record["metrics"]) == 9
    audit = _read(scored["missing"], "audit.json")
    assert audit["evidence"]["screenshot_substitution"] == {"checked": False}
    unchecked = ("screenshot_substitution", "text_in_images", "absolute_pinning", "low_text_volume")
    assert all(audit["flags"][name] is None for name in unchecked)  # unknown, not "clean"
    assert audit["flags"]["files_outside_assets"] is False


def test_an_image_of_the_reference_is_flagged_as_screenshot_substitution(scored) -> None:
    audit = _read(scored["screenshot"], "audit.json")
    assert audit["flags"]["screenshot_substitution"] is True
    evidence = audit["evidence"]["screenshot_substitution"]
    assert {"src": "assets/ref.png", "distance": 0} in evidence["hash_matches"]
    assert any(item["share"] >= 0.99 and item["kind"] == "img" for item in evidence["large"])
    assert audit["flags"]["remote_dependencies"] is False


def test_a_remote_stylesheet_is_flagged_with_its_url(scored) -> None:
    audit = _read(scored["remote"], "audit.json")
    assert audit["flags"]["remote_dependencies"] is True
    evidence = audit["evidence"]["remote_dependencies"]
    assert "https://fonts.example.com/x.css" in evidence["urls"]
    assert evidence["declared"] == ["https://fonts.example.com/x.css"]


def _ocr_cache(scored: dict[str, Path]) -> Path:
    """The module's reference OCR cache, filled by the batch (the workflow passes one too): a
    single-run score reads the reference words from it instead of running tesseract again."""
    return scored["blank"].parent / "ocr"


def _score_one(
    render: Path, answer: Path, task: Path, out: Path, ocr_cache: Path
) -> subprocess.CompletedProcess:
    """`veriharness score` for one run, through its command line."""
    return veriharness(
        "score", "--render-dir", str(render), "--answer-dir", str(answer),
        "--task-dir", str(task), "--out-dir", str(out), "--ocr-cache", str(ocr_cache),
    )  # fmt: skip


def test_single_run_arguments_and_a_malformed_render_json(scored, tmp_path: Path) -> None:
    run = scored["blank"]
    render = tmp_path / "render"
    shutil.copytree(run / "render", render)
    cache = _ocr_cache(scored)
    single = _score_one(render, run / "answer", ROOT / "tasks" / TASKS[0], tmp_path, cache)
    assert single.returncode == 0, single.stderr
    assert _read(tmp_path, "metrics.json")["metrics"] == _read(run, "metrics.json")["metrics"]

    info = json.loads((render / "render.json").read_text())
    info["status"] = "rendered"
    (render / "render.json").write_text(json.dumps(info))
    (tmp_path / "metrics.json").unlink()
    bad = _score_one(render, run / "answer", ROOT / "tasks" / TASKS[0], tmp_path, cache)
    assert bad.returncode == 0
    assert "render.json: status:" in bad.stderr and "'rendered'" in bad.stderr
    failed = _read(tmp_path, "metrics.json")
    assert failed["status"] == "score_failed"
    assert "render.json: status:" in failed["details"]["reason"]
    assert set(failed["metrics"].values()) == {None}
    assert set(_read(tmp_path, "audit.json")["flags"].values()) == {None}


def test_without_a_named_cache_the_reference_words_are_kept_for_the_machine(
    scored, tmp_path: Path
) -> None:
    """P-54: what the workflow's score jobs do. The words land in the machine's cache folder
    under the reference's digest and the OCR version; a second score reads them back and gives
    the same metrics."""
    run, task = scored["blank"], ROOT / "tasks" / TASKS[0]
    machine = tmp_path / "machine-cache"
    args = ("score", "--render-dir", run / "render", "--answer-dir", run / "answer",
            "--task-dir", task, "--out-dir")  # fmt: skip
    first = veriharness(*args, tmp_path / "first", env={CACHE_ENV: str(machine)})
    assert first.returncode == 0, first.stderr
    digest = sha256_file(task / "reference.png").removeprefix("sha256:")
    [entry] = (machine / "reference-words").iterdir()
    assert entry.name == f"{digest}.{OCR_VERSION}.json"
    stored = json.loads(entry.read_text())
    assert stored["words"] and stored["program"] == tesseract_cache.program_identity()
    again = veriharness(*args, tmp_path / "again", env={CACHE_ENV: str(machine)})
    assert again.returncode == 0, again.stderr
    assert _read(tmp_path / "again", "metrics.json") == _read(tmp_path / "first", "metrics.json")
    assert (
        _read(tmp_path / "first", "metrics.json")["metrics"]
        == _read(run, "metrics.json")["metrics"]
    )


def test_a_screenshot_only_task_gets_the_screenshot_metrics_and_null_block_metrics(
    scored, tmp_path: Path
) -> None:
    task = tmp_path / "screenshot-only"
    task.mkdir()
    shutil.copy(ROOT / "tasks" / TASKS[0] / "reference.png", task / "reference.png")
    run = scored[f"self-{TASKS[0]}"]
    done = _score_one(run / "render", run / "answer", task, tmp_path / "out", _ocr_cache(scored))
    assert done.returncode == 0, done.stderr
    record = _read(tmp_path / "out", "metrics.json")
    full = _read(run, "metrics.json")["metrics"]
    for name in ("ssim", "mae", "ocr_word_precision", "ocr_word_recall", "ocr_word_f1"):
        assert record["metrics"][name] == pytest.approx(full[name]), name
    assert all(record["metrics"][name] is None for name in BLOCK_METRICS)
    assert record["details"]["blocks"] == {
        "computed": False,
        "reason": "the task ships no reference.html",
    }
    assert record["details"]["ocr_words"]["f1_ceiling"] is None


def test_missing_arguments_are_named() -> None:
    done = veriharness("score", "--render-dir", "x")
    assert done.returncode == 2
    assert "--answer-dir" in done.stderr and "--out-dir" in done.stderr


def test_a_batch_scores_the_good_runs_and_names_the_bad_one(scored, tmp_path: Path) -> None:
    run = scored["blank"]
    good = {
        "render_dir": str(run / "render"),
        "answer_dir": str(run / "answer"),
        "task_dir": str(ROOT / "tasks" / TASKS[0]),
        "out_dir": str(tmp_path / "good"),
    }
    bad = {**good, "render_dir": str(tmp_path / "nowhere"), "out_dir": str(tmp_path / "bad")}
    batch = tmp_path / "score.jsonl"
    batch.write_text(json.dumps(bad) + "\n" + json.dumps(good) + "\n")
    done = veriharness("score", "--batch", str(batch))
    assert done.returncode == 0, done.stderr
    assert f"{tmp_path / 'nowhere' / 'render.json'}: file not found" in done.stderr
    assert _read(tmp_path / "good", "metrics.json")["status"] == "ok"
    failed = _read(tmp_path / "bad", "metrics.json")
    assert failed["status"] == "score_failed" and "nowhere" in failed["details"]["reason"]

    batch.write_text(json.dumps({**good, "out": "x"}) + "\n")
    done = veriharness("score", "--batch", str(batch))
    assert done.returncode == 2 and "line 1: out: Extra inputs are not permitted" in done.stderr


def test_a_render_of_the_wrong_size_is_padded_and_the_mismatch_recorded(scored, tmp_path) -> None:
    from PIL import Image

    run = scored[f"self-{TASKS[0]}"]
    render = tmp_path / "render"
    shutil.copytree(run / "render", render)
    with Image.open(render / "render.png") as full:
        width, height = full.size
        full.crop((0, 0, width - 100, height)).save(render / "render.png")
    done = veriharness(
        "score", "--render-dir", str(render), "--answer-dir", str(run / "answer"),
        "--task-dir", str(ROOT / "tasks" / TASKS[0]), "--out-dir", str(tmp_path),
        "--ocr-cache", str(_ocr_cache(scored)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = _read(tmp_path, "metrics.json")
    mismatch = record["details"]["size_mismatch"]
    assert (mismatch["render"], mismatch["reference"]) == ([width - 100, height], [width, height])
    perfect = _read(run, "metrics.json")["metrics"]
    assert record["metrics"]["mae"] >= perfect["mae"]
    assert record["metrics"]["block_match"] == perfect["block_match"]  # from the DOM, not pixels
