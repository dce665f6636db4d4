"""Throughput of render + score over the example tasks' reference pages, in runs per minute.

Each task's reference.html (with its assets) is used as an answer, `--repeats` times. Three ways:

- per page: one `veriharness render` and one `veriharness score` process per run, as one
  Snakemake job per run does; every render launches its own browser and every score reads the
  reference with OCR again;
- per page, OCR cache: the same with `score --ocr-cache DIR`, so the reference OCR is done once;
- shared: one `render --batch` (one browser for all pages) and one `score --batch`.

Prints the three rates and the shared/per-page ratio. Figures depend on the machine's load:
run it on an idle machine.

    python3 bench/render_score.py [--repeats 2] [--tasks pricing-table signup-form]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["main"]


def _veriharness(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "veriharness", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"veriharness {args[0]} failed: {done.stderr.strip()}")


def _runs(base: Path, tasks: list[str], repeats: int) -> list[dict[str, str]]:
    runs = []
    for task in tasks:
        source = ROOT / "tasks" / task
        for k in range(repeats):
            run = base / task / f"r{k}"
            answer = run / "answer"
            answer.mkdir(parents=True)
            shutil.copy(source / "reference.html", answer / "answer.html")
            if (source / "assets").is_dir():
                shutil.copytree(source / "assets", answer / "assets")
            runs.append(
                {
                    "answer_dir": str(answer),
                    "reference": str(source / "reference.png"),
                    "render_dir": str(run / "render"),
                    "task_dir": str(source),
                    "out_dir": str(run),
                }
            )
    return runs


def _per_page(runs: list[dict[str, str]], cache: Path | None) -> float:
    start = time.perf_counter()
    for run in runs:
        _veriharness(
            "render", "--answer-dir", run["answer_dir"], "--reference", run["reference"],
            "--out", run["render_dir"],
        )  # fmt: skip
        extra = ["--ocr-cache", str(cache)] if cache else []
        _veriharness(
            "score", "--render-dir", run["render_dir"], "--answer-dir", run["answer_dir"],
            "--task-dir", run["task_dir"], "--out-dir", run["out_dir"], *extra,
        )  # fmt: skip
    return time.perf_counter() - start


def _shared(runs: list[dict[str, str]], base: Path) -> float:
    render_batch, score_batch = base / "render.jsonl", base / "score.jsonl"
    render_batch.write_text(
        "".join(
            json.dumps(
                {"answer_dir": r["answer_dir"], "reference": r["reference"], "out": r["render_dir"]}
            )
            + "\n"
            for r in runs
        )  # fmt: skip
    )
    score_batch.write_text(
        "".join(
            json.dumps({k: r[k] for k in ("render_dir", "answer_dir", "task_dir", "out_dir")})
            + "\n"
            for r in runs
        )
    )
    start = time.perf_counter()
    _veriharness("render", "--batch", str(render_batch))
    rendered = time.perf_counter()
    _veriharness("score", "--batch", str(score_batch))
    end = time.perf_counter()
    print(f"  shared: render {rendered - start:.1f} s, score {end - rendered:.1f} s")
    return end - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tasks", nargs="*", default=None)
    args = parser.parse_args()
    tasks = args.tasks or sorted(
        p.parent.name
        for p in (ROOT / "tasks").glob("*/reference.html")
        if (p.parent / "reference.png").is_file()
    )
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"tasks: {', '.join(tasks)}; repeats: {args.repeats}")
    rates = {}
    with tempfile.TemporaryDirectory(prefix="vh-bench-") as tmp:
        base = Path(tmp)
        for label, go in (
            ("per page", lambda runs, b: _per_page(runs, None)),
            ("per page, OCR cache", lambda runs, b: _per_page(runs, b / "ocr")),
            ("shared (batch)", _shared),
        ):
            folder = base / label.replace(" ", "_").replace(",", "")
            runs = _runs(folder, tasks, args.repeats)
            seconds = go(runs, folder)
            rates[label] = len(runs) / seconds * 60
            print(f"{label:<22} {len(runs):3d} runs in {seconds:6.1f} s = "
                  f"{rates[label]:6.1f} runs/min")  # fmt: skip
    print(f"ratio shared / per page: {rates['shared (batch)'] / rates['per page']:.2f}")
    print(f"ratio shared / per page with OCR cache: "
          f"{rates['shared (batch)'] / rates['per page, OCR cache']:.2f}")  # fmt: skip
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
