"""Benchmark the results side of a 20,000-run study: `collect`, `compare` (several pairs),
`report` and `status` on synthetic run folders, and the report's index opening in Chromium.

Run: python3 bench/scale.py [--work DIR] [--tasks 1000] [--conditions 4] [--replicates 5]
                            [--only collect compare report status browser]

Writes (once, kept under --work; delete the folder to regenerate) tasks x conditions x replicates
run folders through the run-folder models (`RUN_RECORD`, `AGENT_OUTCOME`, `RENDER`, `METRICS`,
`AUDIT`, the trace's event models), each like a finished session: a Claude Code stream-json
transcript of 10-30 tool uses with 1-4 CallMLLM calls (one assistant event per content block,
as the CLI writes them), the matching mllm_trace.jsonl, answer.html, a 1280x800 render.png and
the task's reference.png (drawn once each from a pool of pages, so no two tasks share a digest
only by accident of drawing), metrics and audit flags; about 4% failed, timed-out or unstarted.
Then times each command in a subprocess: wall seconds, the peak resident memory of its whole
process tree (sampled every 50 ms, `bench/collect.py`'s sampler), and what it wrote.
Targets on the 2-core machine at 20,000 runs: collect <= 60 s, compare <= 60 s, report
<= 10 min and <= 4 GB, status <= 2 s, the report's index opening in headless Chromium < 5 s.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import resource
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))  # before tests/, whose package `collect` has no _timed

from PIL import Image, ImageDraw  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from collect import _timed  # noqa: E402
from support.synthetic_runs import TOOLS, tool_input_of  # noqa: E402
from veriharness._util.hashing import sha256_file  # noqa: E402
from veriharness.agent.plan import USER_MESSAGE  # noqa: E402
from veriharness.experiment.analysis import AUDIT_FLAGS  # noqa: E402
from veriharness.experiment.config import ExperimentConfig  # noqa: E402
from veriharness.experiment.definition import execution_record  # noqa: E402
from veriharness.experiment.provenance import Provenance  # noqa: E402
from veriharness.experiment.record import RunRecord  # noqa: E402
from veriharness.runfolder._files import JsonFile  # noqa: E402
from veriharness.runfolder.audit import AUDIT, AuditRecord, AuditThresholds  # noqa: E402
from veriharness.runfolder.metrics import METRICS, MetricsRecord  # noqa: E402
from veriharness.runfolder.mllm_trace import (  # noqa: E402
    NAME as TRACE,
)
from veriharness.runfolder.mllm_trace import (  # noqa: E402
    CallCompleted,
    CallFailed,
    CallStarted,
    CallUsage,
    Region,
    TaxonomyRef,
    TracedImage,
    TracedText,
)
from veriharness.runfolder.outcome import AGENT_OUTCOME, AgentOutcome, SessionUsage, Spend  # noqa: E402
from veriharness.runfolder.render import RENDER, RenderRecord, Size, Timings  # noqa: E402
from veriharness.runfolder.run_record import RUN_RECORD  # noqa: E402
from veriharness.runfolder.transcript import NAME as TRANSCRIPT  # noqa: E402
from veriharness.score.command import METRIC_NAMES  # noqa: E402

EXPERIMENT = "scale"
MODEL = "claude-sonnet-4-5"
PAGES = 40  # distinct page images drawn; tasks and renders take one each
TAGS = (["B1"], ["A2", "B1"], ["C1"], ["G1", "G2"], ["A1"], ["D1", "B1"], ["E1"])


# --- images ----------------------------------------------------------------------------------


def _page_png(seed: int) -> bytes:
    """A 1280x800 page-like screenshot: header, text lines, a photo-ish panel."""
    rng = random.Random(seed)
    image = Image.new("RGB", (1280, 800), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    draw.rectangle([0, 0, 1280, 90], fill=(rng.randrange(256), 60, 120))
    for line in range(18):
        y = 130 + line * 34
        draw.rectangle([60, y, 60 + rng.randint(300, 700), y + 14], fill=(40, 40, 40))
    for _ in range(400):
        x, y = rng.randint(820, 1200), rng.randint(140, 700)
        draw.rectangle([x, y, x + 8, y + 8], fill=tuple(rng.randrange(256) for _ in range(3)))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- one run ---------------------------------------------------------------------------------


def _run_record(condition: str, task: str, replicate: int) -> RunRecord:
    identity = {"condition": condition, "task": task}
    return RunRecord(
        experiment=EXPERIMENT,
        condition=condition,
        task=task,
        replicate=replicate,
        identity_hash=_digest(json.dumps(identity, sort_keys=True).encode()),
        identity=identity,
        provenance=Provenance(
            created_at="2026-12-02T10:00:00+00:00",
            hostname="bench",
            python="3.11.7",
            git_commit="0" * 40,
            git_dirty_files=(),
            uncommitted_changes=False,
            packages={},
            claude_version="2.1.328",
            claude_version_error=None,
            resolved_models={MODEL: MODEL},
        ),
        execution=execution_record(ExperimentConfig()),
        offline=False,
    )


def _html(rng: random.Random) -> str:
    items = "".join(
        f"<li><h3>Card {i}</h3><p>{'lorem ipsum dolor ' * rng.randint(5, 20)}</p></li>"
        for i in range(rng.randint(10, 30))
    )
    head = "<!doctype html><html><head><meta charset='utf-8'></head>"
    return f"{head}<body><ul>{items}</ul></body></html>\n"


def _call(
    rng: random.Random, number: int, use_id: str, reference: str, step: int
) -> tuple[dict[str, Any], list[str], str]:
    """A CallMLLM tool input, its trace lines and the answer the agent got."""
    region = Region(x=100, y=120, width=640, height=360) if rng.random() < 0.4 else None
    image = TracedImage(
        label="reference",
        path="reference.png",
        file_sha256=reference,
        region=region,
        attached_sha256=reference if region is None else _digest(f"{reference}{number}".encode()),
        attached_bytes=70_000 if region is None else 30_000,
        media_type="image/png",
        width=1280,
        height=800,
    )
    inputs: list[TracedText | TracedImage] = [image]
    if rng.random() < 0.3:
        inputs.append(TracedText(label="notes", content="the header uses a serif face"))
    tags = rng.choice(TAGS)
    instruction = (
        "Read every visible line of text in the image labelled reference and report it in "
        "reading order with its bounding box in pixels. " * rng.randint(1, 3)
    )
    output = {"kind": "json"} if rng.random() < 0.5 else {"kind": "text"}
    call_id = f"{rng.getrandbits(64):016x}"
    when = f"2026-12-02T10:{step:02d}:00+00:00"
    started = CallStarted(
        call_id=call_id,
        time=when,
        instruction=instruction,
        inputs=inputs,
        declared_capability_tags=tags,
        taxonomy=TaxonomyRef(id="veriharness-capabilities", version="0.1"),
        output=output,
        requested_model_profile=None,
        resolved_model_profile="default",
        resolved_model_config_hash="sha256:" + "cd" * 32,
        tool_use_id=use_id,
    )
    answer = "Heading 'Pricing' at (60, 20, 400, 48); then 18 lines of body text. " * 6
    end: CallCompleted | CallFailed
    if rng.random() < 0.05:
        end = CallFailed(
            call_id=call_id,
            time=when,
            latency_ms=120.0,
            error_type="ProviderError",
            error="HTTP 503",
        )
        answer = "CallMLLM failed: ProviderError: HTTP 503"
    else:
        end = CallCompleted(
            call_id=call_id,
            time=when,
            latency_ms=round(rng.uniform(800, 9000), 1),
            raw_response=answer,
            parse_status="not_applicable",
            diagnostic=None,
            usage=CallUsage(
                input_tokens=rng.randint(1500, 4000), output_tokens=rng.randint(100, 600)
            ),
            provider_model="vision-model-1",
            cost_usd=round(rng.uniform(0.002, 0.02), 5),
        )
    tool_input = {
        "instruction": instruction,
        "inputs": [
            i.model_dump(include={"kind", "label", "path", "region", "content"}) for i in inputs
        ],
        "capability_tags": tags,
        "output": output,
    }
    return tool_input, [started.model_dump_json(), end.model_dump_json()], answer


def _transcript(
    rng: random.Random, reference: str, html: str
) -> tuple[list[str], list[str], int, float]:
    """The stream-json lines, the trace lines, the turn count and Claude Code's own cost."""
    session = f"{rng.getrandbits(128):032x}"
    lines = [
        json.dumps(
            {
                "type": "system",
                "subtype": "init",
                "session_id": session,
                "tools": ["Bash", "Edit", "Glob", "Grep", "Read", "Write", "mcp__mllm__call"],
                "mcp_servers": [{"name": "mllm", "status": "connected"}],
                "model": MODEL,
            }
        )
    ]
    trace: list[str] = []
    steps = rng.randint(10, 30)
    mllm_steps = set(rng.sample(range(1, steps), rng.randint(1, 4)))
    for step in range(steps):
        message_id = f"msg_{rng.getrandbits(96):024x}"
        use_id = f"toolu_{rng.getrandbits(96):024x}"
        usage = {"input_tokens": 3000 + 400 * step, "output_tokens": rng.randint(80, 900)}
        if step == 0:
            name, tool_input, result = "Read", {"file_path": "reference.png"}, "[image]"
        elif step in mllm_steps:
            name = "mcp__mllm__call"
            tool_input, call_lines, result = _call(rng, len(trace) // 2, use_id, reference, step)
            trace += call_lines
        else:
            name = rng.choice(TOOLS)
            tool_input = tool_input_of(name, html)
            result = html if name == "Read" else "ok"
        text = f"Step {step}: I use {name} to get closer to the reference."
        for block in (
            {"type": "text", "text": text},
            {"type": "tool_use", "id": use_id, "name": name, "input": tool_input},
        ):
            message = {"id": message_id, "role": "assistant", "model": MODEL, "content": [block]}
            lines.append(json.dumps({"type": "assistant", "message": {**message, "usage": usage}}))
        content = [{"type": "tool_result", "tool_use_id": use_id, "content": result}]
        lines.append(json.dumps({"type": "user", "message": {"role": "user", "content": content}}))
    cost = round(rng.uniform(0.2, 1.5), 4)
    lines.append(
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "num_turns": steps + 1,
                "total_cost_usd": cost,
                "result": "answer.html written",
                "session_id": session,
            }
        )
    )
    return lines, trace, steps + 1, cost


def _write(file: JsonFile[Any], run_dir: Path, value: BaseModel) -> None:
    """The file as its writer writes it (the model, built and so validated, as JSON), without the
    writer's fsync: 100,000 of them would make the bench about the disk."""
    path = file.path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value.model_dump_json(indent=2))


def _write_run(job: tuple[Path, str, str, int, int, str, bytes, float]) -> None:
    exp_dir, condition, task, replicate, seed, reference, render_png, effect = job
    rng = random.Random(seed)
    run_dir = exp_dir / condition / task / f"r{replicate}"
    _write(RUN_RECORD, run_dir, _run_record(condition, task, replicate))
    (run_dir / "system_prompt.md").write_text("Rebuild reference.png as answer.html.\n" * 20)
    fate = rng.random()
    if fate < 0.01:  # never started: the folder holds its record only
        return
    html = _html(rng)
    lines, trace, turns, claude_cost = _transcript(rng, reference, html)
    status = "ok" if fate >= 0.04 else rng.choice(["failed", "timeout"])
    if status != "ok":
        lines = lines[: len(lines) // 2]
    (run_dir / TRANSCRIPT).write_text("\n".join(lines) + "\n")
    (run_dir / TRACE).write_text("\n".join(trace) + "\n")
    agent_usd = round(rng.uniform(0.3, 2.0), 4)
    mllm_usd = round(rng.uniform(0.01, 0.08), 4)
    outcome = AgentOutcome(
        status=status,  # type: ignore[arg-type]
        spend=Spend(
            agent_usd=agent_usd,
            mllm_usd=mllm_usd,
            total_usd=round(agent_usd + mllm_usd, 4),
            agent_source="proxy",
        ),
        exit_code=0 if status == "ok" else 1,
        result_subtype="success" if status == "ok" else None,
        is_error=status != "ok",
        num_turns=turns,
        total_cost_usd=claude_cost,
        usage=SessionUsage(
            input_tokens=rng.randint(40_000, 200_000),
            output_tokens=rng.randint(3_000, 20_000),
            cache_read_input_tokens=rng.randint(100_000, 900_000),
            cache_creation_input_tokens=rng.randint(5_000, 60_000),
        ),
        duration_ms=rng.randint(60_000, 600_000),
        wall_seconds=round(rng.uniform(70, 620), 1),
        session_id=json.loads(lines[0])["session_id"],
        mllm_connected=True,
        answer_present=status == "ok",
        claude_version="2.1.328",
        sandboxed=True,
        session_network="none",
        offline=False,
        model=MODEL,
        user_message=USER_MESSAGE,
        started_at="2026-12-02T10:00:00+00:00",
        finished_at="2026-12-02T10:05:00+00:00",
        error=None if status == "ok" else f"{status} (synthetic)",
    )
    _write(AGENT_OUTCOME, run_dir, outcome)
    if status != "ok":
        return
    (run_dir / "answer").mkdir(exist_ok=True)
    (run_dir / "answer" / "answer.html").write_text(html)
    (run_dir / "render").mkdir(exist_ok=True)
    (run_dir / "render" / "render.png").write_bytes(render_png)
    _write(
        RENDER,
        run_dir,
        RenderRecord(
            status="ok",
            viewport=Size(width=1280, height=800),
            page=Size(width=1280, height=800),
            full_page=False,
            timings=Timings(load_ms=rng.uniform(200, 900), capture_ms=rng.uniform(80, 300)),
            blocked_requests=[],
            console_errors=[],
            page_errors=[],
            error=None,
            answer_sha256=_digest(html.encode()),
        ),
    )
    base = (seed % 50) / 100
    values = {
        name: round(min(1.0, 0.3 + base + effect + rng.uniform(-0.05, 0.05)), 4)
        for name in METRIC_NAMES
    }
    _write(
        METRICS,
        run_dir,
        MetricsRecord(scorer_version="2", status="ok", metrics=values, details={}, versions={}),
    )
    flags: dict[str, bool | None] = {flag: rng.random() < 0.03 for flag in AUDIT_FLAGS}
    _write(AUDIT, run_dir, AuditRecord(flags=flags, evidence={}, thresholds=AuditThresholds()))


def _write_experiment(work: Path, tasks: int, conditions: list[str], replicates: int) -> Path:
    exp_dir = work / "results" / EXPERIMENT
    pages = [_page_png(k) for k in range(PAGES)]
    digests = [_digest(p) for p in pages]
    task_ids = [f"page-{k:04d}" for k in range(tasks)]
    for k, task in enumerate(task_ids):
        folder = work / "tasks" / task
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "reference.png").write_bytes(pages[k % PAGES])
    jobs = [
        (
            exp_dir,
            condition,
            task,
            rep,
            hash((c, k, rep)) & 0xFFFFFFF,
            digests[k % PAGES],
            pages[(k + c + rep) % PAGES],
            0.02 * c,
        )  # fmt: skip
        for k, task in enumerate(task_ids)
        for c, condition in enumerate(conditions)
        for rep in range(1, replicates + 1)
    ]
    with Pool(2) as pool:
        for _ in pool.imap_unordered(_write_run, jobs, chunksize=64):
            pass
    assert sha256_file(work / "tasks" / task_ids[0] / "reference.png") == digests[0]
    record = {
        "kind": "experiment_record",
        "experiment": EXPERIMENT,
        "matrix": {"conditions": conditions, "tasks": task_ids, "replicates": replicates},
        "cells": {c: {t: _run_record(c, t, 1).identity_hash for t in task_ids} for c in conditions},
        "config": {
            "agent": {"model": MODEL, "endpoint": "anthropic", "network": "none"},
            "execution": {"max_usd": 60_000.0, "max_usd_per_run": 5.0},
        },
    }
    (exp_dir / "experiment.json").write_text(json.dumps(record))
    return exp_dir


# --- measuring -------------------------------------------------------------------------------


def _size_mb(path: Path) -> float:
    files = path.rglob("*") if path.is_dir() else [path]
    return sum(f.stat().st_size for f in files if f.is_file()) / 1e6


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "veriharness", *args]


def _measured(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system of the whole process tree, which carry over
    from a loaded machine better than wall time) and peak MiB of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, peak_kib = _timed(command)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, peak_kib / 1024


def _index_load_seconds(index: Path) -> tuple[float, int]:
    """Seconds until the index's load event in headless Chromium (fresh browser, best of 3),
    and the rows of its runs table."""
    from playwright.sync_api import sync_playwright

    from veriharness._util.programs import find_chromium

    best = float("inf")
    rows = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(find_chromium()), args=["--no-sandbox", "--disable-gpu"]
        )
        for _ in range(3):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            begun = time.perf_counter()
            page.goto(index.as_uri(), wait_until="load", timeout=120_000)
            best = min(best, time.perf_counter() - begun)
            rows = page.evaluate("document.querySelectorAll('tr').length")
            page.close()
        browser.close()
    return best, rows


class _Figures(dict[str, tuple[float, float, float, float]]):
    """Each command's figures, printed as soon as they are in (a later one may take long)."""

    def __setitem__(self, name: str, value: tuple[float, float, float, float]) -> None:
        super().__setitem__(name, value)
        seconds, cpu, peak_mib, out_mb = value
        print(
            f"{name:>8}: {seconds:7.1f} s wall, {cpu:7.1f} s CPU, peak {peak_mib:6.0f} MiB, "
            f"wrote {out_mb:8.1f} MB, load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/veriharness-bench-scale"))
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--conditions", type=int, default=4)
    parser.add_argument("--replicates", type=int, default=5)
    parser.add_argument(
        "--only",
        nargs="+",
        default=["collect", "compare", "report", "status", "browser"],
        choices=["collect", "compare", "report", "status", "browser"],
    )
    args = parser.parse_args()
    conditions = ["baseline", "b3", "b3-regions", "b3-json"][: args.conditions]
    runs = args.tasks * len(conditions) * args.replicates
    work = args.work / f"runs-{runs}"
    exp_dir = work / "results" / EXPERIMENT
    if not (exp_dir / "experiment.json").is_file():
        begun = time.perf_counter()
        _write_experiment(work, args.tasks, conditions, args.replicates)
        print(f"wrote {runs} runs in {time.perf_counter() - begun:.0f} s, "
              f"{_size_mb(exp_dir):.0f} MB")  # fmt: skip
    figures = _Figures()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    if "collect" in args.only:
        measured = _measured(_command("collect", "--experiment-dir", str(exp_dir)))
        figures["collect"] = (*measured, _size_mb(exp_dir / "tables"))
    if "compare" in args.only:
        pairs = [a for c in conditions[1:] for a in ("--pair", conditions[0], c)]
        measured = _measured(_command("compare", "--experiment-dir", str(exp_dir), *pairs))
        figures["compare"] = (*measured, _size_mb(exp_dir / "comparison.csv"))
    if "report" in args.only:
        out = exp_dir / "report"
        measured = _measured(
            _command(
                "report",
                "--experiment-dir",
                str(exp_dir),
                "--out",
                str(out),
                "--tasks-dir",
                str(work / "tasks"),
            )  # fmt: skip
        )
        figures["report"] = (*measured, _size_mb(out))
    if "status" in args.only:
        figures["status"] = (
            *min(_measured(_command("status", str(exp_dir))) for _ in range(3)),
            0.0,
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if "browser" in args.only:
        index = exp_dir / "report" / "index.html"
        load, rows = _index_load_seconds(index)
        print(f" browser: index.html ({_size_mb(index):.1f} MB, {rows} table rows) "
              f"loads in {load:.2f} s")  # fmt: skip
    print(json.dumps({"runs": runs, **figures}))


if __name__ == "__main__":
    main()
