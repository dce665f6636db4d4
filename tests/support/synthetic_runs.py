"""Realistic synthetic run folders for the collect/compare/report tests and bench/collect.py.

Each run gets the files the pipeline stages write (run.json, outcome.json, a stream-json transcript
of 20-60 events with a few CallMLLM tool uses, the matching mllm_trace.jsonl, metrics.json,
audit.json, render/render.json, answer/answer.html), generated from a seed so every test can
recompute what a table must contain. `faults` turns chosen runs into the broken or partial cases a
real experiment produces (timeouts, runs never started, folders missing, corrupt lines, ...).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veriharness._util.hashing import sha256_file
from veriharness.experiment.analysis import AUDIT_FLAGS
from veriharness.runfolder.snapshots import (
    SNAPSHOT_INDEX,
    TRAJECTORY,
    SnapshotEntry,
    SnapshotScore,
    TrajectoryRecord,
)
from veriharness.score import SCORER_VERSION

__all__ = [
    "FAULTS",
    "SHARED_INSTRUCTION",
    "SyntheticRun",
    "SyntheticExperiment",
    "TOOLS",
    "tool_input_of",
    "write_experiment",
    "write_png",
    "write_repeated_calls",
]

FAULTS = (
    "timeout",
    "failed",
    "max_turns",
    "not_started",
    "missing",
    "missing_answer",
    "corrupt_transcript",
    "no_metrics",
    "bad_outcome",
    "bad_type",
)

TAG_CHOICES = (["B1"], ["A2", "B1"], ["C1"], ["G1", "G2"], ["A1"], ["D1", "B1"], ["G1"])


@dataclass
class SyntheticRun:
    condition: str
    task: str
    replicate: int
    fault: str | None
    tool_names: list[str] = field(default_factory=list)
    mllm_calls: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, float | None] = field(default_factory=dict)
    cost_usd: float = 0.0
    turns: int = 0
    reference_sha: str = "sha256:" + "ab" * 32


@dataclass
class SyntheticExperiment:
    exp_dir: Path
    tasks_dir: Path
    expected: list[dict[str, Any]]
    runs: dict[tuple[str, str, int], SyntheticRun]

    def write_expected(self, path: Path) -> Path:
        path.write_text(json.dumps(self.expected), encoding="utf-8")
        return path


def write_png(path: Path, width: int, height: int, color: tuple[int, int, int]) -> None:
    from PIL import Image, ImageDraw

    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", (width, height), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    draw.rectangle([4, 4, width // 2, height // 3], fill=color)
    draw.rectangle([8, height // 2, width - 8, height - 8], outline=(30, 30, 30), width=2)
    image.save(path)


TOOLS = ("Write", "Edit", "Bash", "Read")


def tool_input_of(name: str, html: str) -> dict[str, Any]:
    """The input of a synthetic session's tool use of `name` (one of TOOLS) on `html`."""
    return {
        "Write": {"file_path": "answer.html", "content": html},
        "Edit": {"file_path": "answer.html", "old_string": "Card 1", "new_string": "Card"},
        "Bash": {"command": "chromium --headless --screenshot=shot.png answer.html"},
        "Read": {"file_path": "answer.html"},
    }[name]


def _html(rng: random.Random) -> str:
    items = "\n".join(
        f'    <li class="item"><h3>Card {i}</h3>'
        f"<p>{'lorem ipsum dolor ' * rng.randint(5, 20)}</p></li>"
        for i in range(rng.randint(10, 30))
    )
    return (
        "<!doctype html>\n<html><head><meta charset='utf-8'><style>\n"
        "body{font-family:sans-serif;margin:0} .item{padding:8px;border:1px solid #ccc}\n"
        f"</style></head><body>\n  <ul>\n{items}\n  </ul>\n</body></html>\n"
    )


def _mllm_input(rng: random.Random, call_no: int) -> tuple[dict[str, Any], list[str]]:
    tags = rng.choice(TAG_CHOICES)
    image: dict[str, Any] = {"kind": "image", "label": "ref", "path": "reference.png"}
    if rng.random() < 0.4:
        image["region"] = {"x": 2, "y": 3, "width": 20, "height": 10}
    inputs: list[dict[str, Any]] = [image]
    if rng.random() < 0.3:
        inputs.append({"kind": "image", "label": "mine", "path": "shot.png"})
    if rng.random() < 0.3:
        inputs.append({"kind": "text", "label": "notes", "content": "header uses a serif face"})
    output: dict[str, Any] = {"kind": "text"}
    if rng.random() < 0.5:
        output = {"kind": "json"}
        if rng.random() < 0.5:
            output["schema"] = {"type": "object", "properties": {"text": {"type": "string"}}}
    instruction = (
        f"Call {call_no}: read every visible line of text in the image labelled ref and "
        "report it in reading order with approximate positions. " * rng.randint(1, 3)
    )
    return {
        "instruction": instruction,
        "inputs": inputs,
        "capability_tags": tags,
        "output": output,
    }, tags


def _transcript_and_trace(
    rng: random.Random, spec: SyntheticRun, truncated: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    session = f"sess-{rng.getrandbits(48):012x}"
    events: list[dict[str, Any]] = [
        {
            "type": "system",
            "subtype": "init",
            "session_id": session,
            "tools": ["Read", "Write", "Edit", "Bash", "mcp__mllm__call"],
            "mcp_servers": [{"name": "mllm", "status": "connected"}],
            "model": "veriharness-offline-agent-1",
        }
    ]
    trace: list[dict[str, Any]] = []
    steps = rng.randint(9, 29)
    n_mllm = rng.randint(1, 4)
    mllm_steps = set(rng.sample(range(1, steps), min(n_mllm, steps - 1)))
    html = _html(rng)
    for step in range(steps):
        if step == 0:
            name, tool_input = "Read", {"file_path": "reference.png"}
        elif step in mllm_steps:
            name, tool_input = "mcp__mllm__call", None
        else:
            name = rng.choice(TOOLS)
            tool_input = tool_input_of(name, html)
        tool_id = f"toolu_{step:03d}_{rng.getrandbits(32):08x}"
        result: str = "ok"
        is_error = rng.random() < 0.05
        if name == "mcp__mllm__call":
            call_id = f"call-{len(spec.mllm_calls) + 1}"
            tool_input, tags = _mllm_input(rng, len(spec.mllm_calls) + 1)
            failed = rng.random() < 0.1
            spec.mllm_calls.append(
                {"call_id": call_id, "tags": tags, "failed": failed, **tool_input}
            )
            trace.append(_started(call_id, tool_input, tags, step, spec.reference_sha))
            trace.append(_ended(rng, call_id, failed, step))
            result = "The page shows a list of cards titled Card 1 to Card 9. " * 8
        elif name == "Read" and step > 0:
            result = html
        spec.tool_names.append(name)
        message = {
            "id": f"msg_{step:03d}",
            "content": [
                {"type": "text", "text": f"Step {step}: next I use {name}."},
                {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
            ],
            "usage": {"input_tokens": 1200 + 40 * step, "output_tokens": 300},
        }
        events.append({"type": "assistant", "message": message, "session_id": session})
        block: dict[str, object] = {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": result,
        }
        block["is_error"] = is_error
        events.append({"type": "user", "message": {"content": [block]}, "session_id": session})
    spec.turns = steps + 1
    if not truncated:
        events.append(
            {
                "type": "assistant",
                "message": {"id": "msg_end", "content": [{"type": "text", "text": "Done."}]},
                "session_id": session,
            }
        )
        events.append(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "num_turns": spec.turns,
                "total_cost_usd": spec.cost_usd,
                "usage": {"input_tokens": 30000, "output_tokens": 4000},
                "duration_ms": 60000,
                "session_id": session,
                "result": "answer.html written",
            }
        )
    return events, trace


def _started(
    call_id: str, request: dict[str, Any], tags: list[str], step: int, reference_sha: str
) -> dict[str, Any]:
    inputs = [
        {
            **i,
            "file_sha256": reference_sha if i["path"] == "reference.png" else "sha256:" + "ee" * 32,
            "media_type": "image/png",
            "width": 64,
            "height": 48,
            "region": i.get("region"),
        }
        if i["kind"] == "image"
        else i
        for i in request["inputs"]
    ]
    return {
        "event": "mllm_call_started",
        "call_id": call_id,
        "time": f"2026-11-30T10:{step:02d}:00Z",
        "instruction": request["instruction"],
        "inputs": inputs,
        "declared_capability_tags": tags,
        "taxonomy": {"id": "veriharness-capabilities", "version": "0.1"},
        "output": request["output"],
        "requested_model_profile": None,
        "resolved_model_profile": "default",
        "resolved_model_config_hash": "sha256:" + "cd" * 32,
    }


def _ended(rng: random.Random, call_id: str, failed: bool, step: int) -> dict[str, Any]:
    time = f"2026-11-30T10:{step:02d}:05Z"
    if failed:
        return {
            "event": "mllm_call_failed",
            "call_id": call_id,
            "time": time,
            "latency_ms": 120.0,
            "error_type": "ProviderError",
            "error": "HTTP 503 from model",
        }
    return {
        "event": "mllm_call_completed",
        "call_id": call_id,
        "time": time,
        "latency_ms": round(rng.uniform(200, 4000), 1),
        "raw_response": "Card 1 at the top left; Card 2 below it. " * 5,
        "parse_status": "not_applicable",
        "diagnostic": None,
        "usage": {"input_tokens": rng.randint(800, 3000), "output_tokens": rng.randint(50, 400)},
        "provider_model": "offline-vision-1",
    }


def _dump(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def _write_run(
    exp_dir: Path,
    experiment: str,
    spec: SyntheticRun,
    rng: random.Random,
    effect: float,
    images: tuple[int, int] | None,
    snapshots: int = 0,
) -> None:
    run_dir = exp_dir / spec.condition / spec.task / f"r{spec.replicate}"
    fault = spec.fault
    if fault == "missing":
        return
    _dump(
        run_dir / "run.json",
        {
            "kind": "run_record",
            "experiment": experiment,
            "condition": spec.condition,
            "task": spec.task,
            "replicate": spec.replicate,
            "offline": True,
            "identity_hash": "sha256:" + f"{rng.getrandbits(256):064x}",
        },
    )
    if fault == "not_started":
        return
    spec.cost_usd = round(rng.uniform(0.05, 0.6), 4)
    events, trace = _transcript_and_trace(rng, spec, truncated=fault in ("timeout", "failed"))
    lines = [json.dumps(e) for e in events]
    if fault == "corrupt_transcript":
        lines.insert(3, '{"type": "assistant", "message": {"id": ')
    (run_dir / "transcript.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run_dir / "mllm_trace.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in trace), encoding="utf-8"
    )
    status = {"timeout": "timeout", "failed": "failed", "max_turns": "max_turns"}.get(
        fault or "", "ok"
    )
    outcome = {
        "kind": "agent_outcome",
        "status": status,
        "exit_code": 0 if status == "ok" else 1,
        "result_subtype": "error_max_turns" if status == "max_turns" else "success",
        "is_error": status != "ok",
        "num_turns": spec.turns,
        "total_cost_usd": spec.cost_usd,
        "spend": {
            "agent_usd": round(spec.cost_usd * 0.75, 6),
            "mllm_usd": round(spec.cost_usd - round(spec.cost_usd * 0.75, 6), 6),
            "total_usd": spec.cost_usd,
            "agent_source": "session",
        },
        "usage": {
            "input_tokens": 30000,
            "output_tokens": 4000,
            "cache_read_input_tokens": 9000,
            "cache_creation_input_tokens": 2000,
        },
        "duration_ms": 60000,
        "wall_seconds": 61.5,
        "session_id": events[0]["session_id"],
        "mllm_connected": True,
        "answer_present": fault != "missing_answer",
        "claude_version": "2.1.328",
        "offline": True,
        "error": {
            "timeout": "wall clock limit 900 s reached",
            "failed": "claude exited with code 1",
        }.get(fault or ""),
    }
    if fault == "bad_type":
        outcome["num_turns"] = "many"
        outcome["duration_ms"] = 10**24  # an integer no 64-bit column holds
    text = json.dumps(outcome)
    (run_dir / "outcome.json").write_text(text[:25] if fault == "bad_outcome" else text)
    if fault == "missing_answer":
        return
    answer = run_dir / "answer" / "answer.html"
    answer.parent.mkdir(parents=True, exist_ok=True)
    answer.write_text(_html(rng) + "<script>alert('<b>x</b>')</script>", encoding="utf-8")
    _dump(run_dir / "render" / "render.json", {"status": "ok"})
    if images:
        write_png(run_dir / "render" / "render.png", *images, (200, 40, 40))
    if fault == "no_metrics":
        return
    base = (sum(map(ord, spec.task)) % 50) / 100
    spec.metrics = {
        "ssim": round(min(1.0, 0.4 + base + effect + rng.uniform(-0.02, 0.02)), 4),
        "mae": round(0.2 - effect / 2 + rng.uniform(-0.01, 0.01), 4),
        "ocr_word_f1": round(0.5 + effect + rng.uniform(-0.05, 0.05), 4),
        "position": None if rng.random() < 0.1 else round(rng.uniform(0.3, 0.9), 4),
    }
    metrics = {"kind": "metrics", "scorer_version": SCORER_VERSION, "status": "ok",
               "metrics": spec.metrics, "details": {"blocks": {"detection": "dom"}},
               "versions": {}}  # fmt: skip
    _dump(run_dir / "metrics.json", metrics)
    if snapshots:
        _write_snapshots(run_dir, rng, spec, snapshots)
    _dump(
        run_dir / "audit.json",
        {
            "kind": "audit",
            # The audit's real flags; only low_text_volume (no rule of the task) varies, so no
            # synthetic answer is floored unless a test plants it.
            "flags": {
                **dict.fromkeys(AUDIT_FLAGS, False),
                "low_text_volume": rng.random() < 0.1,
            },
            "evidence": {},
        },
    )


def _write_snapshots(run_dir: Path, rng: random.Random, spec: SyntheticRun, count: int) -> None:
    """snapshots/index.jsonl and trajectory.json: `count` versions spread over the run's tool
    uses, the metrics rising to the run's final ones."""
    index = SNAPSHOT_INDEX.path(run_dir)
    index.parent.mkdir(parents=True, exist_ok=True)
    places = sorted(
        rng.sample(range(1, len(spec.tool_names) + 1), min(count, len(spec.tool_names)))
    )
    scores = []
    with index.open("w", encoding="utf-8") as sink:
        for n, uses in enumerate(places, start=1):
            digest = f"sha256:{rng.getrandbits(256):064x}"
            entry = SnapshotEntry(
                n=n, at="request", request_seq=uses + 1, time="2026-12-04T00:00:00.000+00:00",
                seconds=float(uses), turn=uses, tool_uses=uses,
                tool_uses_since=spec.tool_names[([0, *places][n - 1]) : uses], answer_sha256=digest,
                answer_digest=digest, files={"answer.html": digest}, bytes=4000,
            )  # fmt: skip
            sink.write(entry.model_dump_json() + "\n")
            share = n / len(places)
            metrics = {k: None if v is None else round(v * (0.8 + 0.2 * share), 4)
                       for k, v in spec.metrics.items()}  # fmt: skip
            scores.append(
                SnapshotScore(
                    n=n, answer_digest=digest, status="ok", render_status="ok", metrics=metrics
                )  # fmt: skip
            )
    TRAJECTORY.write(run_dir, TrajectoryRecord(scorer_version=SCORER_VERSION, snapshots=scores))


def write_experiment(
    results: Path,
    experiment: str = "exp",
    conditions: tuple[str, ...] = ("base", "treat"),
    tasks: int | list[str] = 3,
    replicates: int = 1,
    seed: int = 0,
    effects: dict[str, float] | None = None,
    faults: dict[tuple[str, str, int], str] | None = None,
    images: bool = False,
    image_size: tuple[int, int] = (64, 48),
    snapshots: int = 0,
) -> SyntheticExperiment:
    """Write results/<experiment>/<condition>/<task>/r<k>/ for the whole matrix."""
    task_ids = [f"task-{i:03d}" for i in range(tasks)] if isinstance(tasks, int) else tasks
    effects = effects if effects is not None else {conditions[-1]: 0.05}
    faults = faults or {}
    exp_dir = results / experiment
    tasks_dir = results.parent / "tasks"
    expected: list[dict[str, Any]] = []
    runs: dict[tuple[str, str, int], SyntheticRun] = {}
    for task in task_ids:
        reference_sha = "sha256:" + "ab" * 32
        if images:
            write_png(tasks_dir / task / "reference.png", *image_size, (40, 40, 200))
            reference_sha = sha256_file(tasks_dir / task / "reference.png")
        for condition in conditions:
            for rep in range(1, replicates + 1):
                key = (condition, task, rep)
                spec = SyntheticRun(condition, task, rep, faults.get(key))
                spec.reference_sha = reference_sha
                rng = random.Random(f"{seed}/{condition}/{task}/{rep}")
                effect = effects.get(condition, 0.0)
                size = image_size if images else None
                _write_run(exp_dir, experiment, spec, rng, effect, size, snapshots)
                expected.append({"condition": condition, "task": task, "replicate": rep})
                runs[key] = spec
    return SyntheticExperiment(exp_dir, tasks_dir, expected, runs)


SHARED_INSTRUCTION = "Transcribe the heading of the image labelled ref, word for word."


def write_repeated_calls(
    run_dir: Path,
    reference_sha: str,
    responses: list[str],
    extra_uses: int = 0,
    trace_instructions: list[str] | None = None,
) -> list[str]:
    """Replace a run's transcript and trace with CallMLLM calls that all send the same
    instruction, so only their order can tell them apart. Call k answers with responses[k];
    `extra_uses` adds tool uses the server never saw; `trace_instructions` overrides what the
    trace says each call was asked. Returns the tool-use ids in transcript order."""
    instructions = trace_instructions or [SHARED_INSTRUCTION] * len(responses)
    ids = [f"toolu_rep_{k}" for k in range(len(responses) + extra_uses)]
    events: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": "s", "model": "m", "mcp_servers": []}
    ]
    request = {
        "instruction": SHARED_INSTRUCTION,
        "inputs": [{"kind": "image", "label": "ref", "path": "reference.png"}],
        "capability_tags": ["B1"],
        "output": {"kind": "text"},
    }
    for k, tool_id in enumerate(ids):
        use = {"type": "tool_use", "id": tool_id, "name": "mcp__mllm__call", "input": request}
        events.append({"type": "assistant", "message": {"id": f"m{k}", "content": [use]}})
        result = {"type": "tool_result", "tool_use_id": tool_id, "content": "reply"}
        events.append({"type": "user", "message": {"content": [result]}})
    trace: list[dict[str, Any]] = []
    for k, (response, instruction) in enumerate(zip(responses, instructions, strict=True)):
        call_id = f"rep-{k}"
        trace.append(
            _started(call_id, {**request, "instruction": instruction}, ["B1"], k, reference_sha)
        )
        trace.append(
            {
                "event": "mllm_call_completed",
                "call_id": call_id,
                "time": "2026-11-30T11:00:00Z",
                "latency_ms": 10.0,
                "raw_response": response,
                "parse_status": "not_applicable",
                "diagnostic": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
                "provider_model": "offline-vision-1",
            }
        )
    (run_dir / "transcript.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8"
    )
    (run_dir / "mllm_trace.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in trace), encoding="utf-8"
    )
    return ids
