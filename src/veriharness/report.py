"""`veriharness report`: plots and static per-run pages for people to look at.

Design notes:

- Reads the collected tables (run `veriharness collect` first) and the run folders; writes only
  under --out. Plots are PNG (matplotlib Agg), each with a caption `.rst` beside it for
  `snakemake --report`.
- Pages are static HTML with inline CSS and only relative links to files under --out: no script,
  no remote request. Every piece of run content is HTML-escaped; the answer is shown as escaped
  source next to its render, never embedded as live HTML.
- The images a CallMLLM call saw are found by content, not by name: the trace records the sha256 of
  each input file; the task's reference.png and the files kept under answer/ are the only
  candidates (the workspace itself is gone). A region is drawn as a rectangle on the full image.
  An input that matches none of them is listed as not available, with its path and digest.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

from veriharness.hashing import sha256_file  # noqa: E402
from veriharness.trace_reading import load_json, read_jsonl  # noqa: E402

__all__ = [
    "plot_metrics_by_condition",
    "plot_cost_vs_fidelity",
    "plot_capability_tags",
    "side_by_side",
    "run_page",
    "write_report",
    "add_arguments",
    "run",
]

_TEXT_LIMIT = 4000
_CSS = (
    "body{font-family:sans-serif;max-width:1100px;margin:1em auto;color:#222}"
    ".step{border-left:3px solid #bbb;padding:.2em .8em;margin:.6em 0}"
    ".tool{border-color:#36c}.call{border-color:#c63;background:#fff8f2}.err{color:#b00}"
    "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5em;font-size:12px}"
    "img{max-width:100%;border:1px solid #ccc}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}"
)


def _esc(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, indent=1))


def _cut(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + f"…[{len(text)} chars]"


def _save(fig: plt.Figure, path: Path, caption: str) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    path.with_suffix(".rst").write_text(caption + "\n", encoding="utf-8")
    return path


# --- plots ---------------------------------------------------------------------------------------


def _metric_columns(runs: pd.DataFrame) -> list[str]:
    return sorted(c for c in runs.columns if c.startswith("metric_"))


def plot_metrics_by_condition(runs: pd.DataFrame, path: Path) -> Path:
    metrics = _metric_columns(runs) or ["cost_usd"]
    conditions = sorted(runs["condition"].unique())
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.4), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        values = runs[["condition", "task", metric]].dropna()
        per_task = values.groupby(["task", "condition"])[metric].mean().unstack()
        for _, row in per_task.reindex(columns=conditions).iterrows():
            ax.plot(
                range(len(conditions)),
                row.to_numpy(float, na_value=np.nan),
                color="0.6",
                lw=0.8,
                marker="o",
                ms=3,
            )
        means = values.groupby("condition")[metric].mean().reindex(conditions)
        ax.plot(
            range(len(conditions)),
            means.to_numpy(float, na_value=np.nan),
            "D",
            color="C3",
            ms=8,
            label="mean",
        )
        ax.set_xticks(range(len(conditions)), conditions, rotation=20)
        ax.set_title(metric.removeprefix("metric_"))
    axes[0][0].legend(fontsize=8)
    return _save(
        fig,
        path,
        "Each metric by condition. Grey lines join the same task (mean over "
        "replicates) across conditions; red diamonds are condition means. Runs without "
        "a value are left out.",
    )


def plot_cost_vs_fidelity(runs: pd.DataFrame, path: Path) -> Path:
    metrics = _metric_columns(runs) or ["turns"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.2), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for i, (condition, group) in enumerate(runs.groupby("condition")):
            data = group[["cost_usd", metric]].dropna()
            ax.scatter(data["cost_usd"], data[metric], s=10, color=f"C{i}", label=condition)
        ax.set_xlabel("agent cost (USD)")
        ax.set_title(metric.removeprefix("metric_"))
    axes[0][0].legend(fontsize=8)
    return _save(
        fig,
        path,
        "Agent cost against each fidelity metric, one point per run, coloured by condition.",
    )


def plot_capability_tags(runs: pd.DataFrame, tags: pd.DataFrame, path: Path) -> Path:
    started = runs[~runs["status"].isin(["missing", "not_started"])]
    per_condition = started.groupby("condition").size()
    counts = tags.groupby(["tag", "condition"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=per_condition.index, fill_value=0)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(counts) + 2), 3.4))
    if counts.empty:
        ax.text(0.5, 0.5, "no CallMLLM calls", ha="center", transform=ax.transAxes)
    else:
        (counts / per_condition).plot.bar(ax=ax)
        ax.set_ylabel("declared per started run")
    return _save(
        fig,
        path,
        "Capability tags declared on CallMLLM calls, per started run of each "
        "condition (a call with two tags counts once for each).",
    )


# --- per-run images and pages -------------------------------------------------------------------


def _open(path: Path | None) -> Image.Image | None:
    try:
        return Image.open(path).convert("RGB") if path and path.is_file() else None
    except OSError:
        return None


def side_by_side(reference: Path | None, render: Path | None, out: Path) -> Path:
    """Reference (left) and render (right) in one PNG; a missing side is a labelled blank."""
    images = [_open(reference), _open(render)]
    size = next((im.size for im in images if im is not None), (320, 200))
    tiles = [im or Image.new("RGB", size, (235, 235, 235)) for im in images]
    canvas = Image.new(
        "RGB", (sum(t.width for t in tiles) + 10, max(t.height for t in tiles) + 18), "white"
    )
    draw, x = ImageDraw.Draw(canvas), 0
    for label, tile, im in zip(("reference", "render"), tiles, images, strict=True):
        canvas.paste(tile, (x, 18))
        draw.text((x + 2, 2), label if im is not None else f"{label}: not available", fill="black")
        x += tile.width + 10
    canvas.save(out)
    return out


class _ImageFinder:
    """Files a call could have seen, by sha256: the task reference and kept answer files."""

    def __init__(self, reference: Path | None, answer_dir: Path) -> None:
        candidates = [reference] if reference and reference.is_file() else []
        if answer_dir.is_dir():
            candidates += [p for p in answer_dir.rglob("*") if p.is_file()]
        self.by_hash = {sha256_file(p): p for p in candidates}
        self.reference = reference

    def find(self, item: dict[str, Any]) -> Path | None:
        return self.by_hash.get(str(item.get("file_sha256")))


def _call_images(call: dict[str, Any], finder: _ImageFinder, page_dir: Path) -> str:
    parts = []
    for n, item in enumerate(call.get("inputs") or []):
        if not isinstance(item, dict):
            continue
        label = _esc(str(item.get("label")))
        if item.get("kind") == "text":
            content = _esc(_cut(str(item.get("content"))))
            parts.append(f"<p>text input <b>{label}</b>:</p><pre>{content}</pre>")
            continue
        source, region = finder.find(item), item.get("region")
        where = f"{_esc(str(item.get('path')))} ({_esc(str(item.get('file_sha256')))})"
        if source is None:
            parts.append(
                f"<p>image <b>{label}</b>: {where} is not available; the workspace is "
                "gone and no kept file has this digest.</p>"
            )
            continue
        image = _open(source)
        if image is None:
            parts.append(f"<p>image <b>{label}</b>: {where} could not be opened.</p>")
            continue
        if isinstance(region, dict):
            x, y = region.get("x", 0), region.get("y", 0)
            box = [x, y, x + region.get("width", 0) - 1, y + region.get("height", 0) - 1]
            ImageDraw.Draw(image).rectangle(box, outline=(255, 0, 0), width=2)
        name = f"call-{call.get('call_id')}-{n}.png".replace("/", "_")
        image.save(page_dir / name)
        note = f" region {_esc(region)}" if region else " (full image)"
        parts.append(f"<p>image <b>{label}</b>: {where}{note}</p><img src='{_esc(name)}'>")
    return "".join(parts)


def _call_html(call: dict[str, Any] | None, finder: _ImageFinder, page_dir: Path) -> str:
    if call is None:
        return "<p class='err'>no mllm_trace.jsonl event has this instruction.</p>"
    end = call.get("end") or {}
    response = _esc(_cut(str(end.get("raw_response") or end.get("error"))))
    return (
        f"<p>call <b>{_esc(str(call.get('call_id')))}</b> · tags "
        f"<b>{_esc(', '.join(map(str, call.get('declared_capability_tags') or [])))}</b> · output "
        f"{_esc(call.get('output'))} · {_esc(str(end.get('event', 'no end event')))}"
        f" · {_esc(str(end.get('latency_ms')))} ms</p>"
        f"<p>instruction:</p><pre>{_esc(_cut(str(call.get('instruction'))))}</pre>"
        + _call_images(call, finder, page_dir)
        + f"<p>response:</p><pre>{response}</pre>"
    )


def _trace_calls(run_dir: Path, errors: list[str]) -> list[dict[str, Any]]:
    calls: dict[str, dict[str, Any]] = {}
    for event in read_jsonl(run_dir / "mllm_trace.jsonl", "mllm_trace.jsonl", errors) or []:
        call = calls.setdefault(str(event.get("call_id")), {"call_id": event.get("call_id")})
        if event.get("event") == "mllm_call_started":
            call.update(event)
        else:
            call["end"] = event
    return list(calls.values())


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(
            str(c.get("text", f"[{c.get('type')}]")) for c in content if isinstance(c, dict)
        )
    return str(content)


def _steps(run_dir: Path, finder: _ImageFinder, page_dir: Path, errors: list[str]) -> list[str]:
    calls = _trace_calls(run_dir, errors)
    out: list[str] = []
    for event in read_jsonl(run_dir / "transcript.jsonl", "transcript.jsonl", errors) or []:
        kind, message = event.get("type"), event.get("message") or {}
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        if kind == "system":
            out.append(
                f"<div class='step'>session start: model {_esc(str(event.get('model')))}, "
                f"MCP {_esc(event.get('mcp_servers'))}</div>"
            )
        elif kind == "result":
            out.append(
                f"<div class='step'>end: {_esc(str(event.get('subtype')))}, "
                f"{_esc(str(event.get('num_turns')))} turns, "
                f"${_esc(str(event.get('total_cost_usd')))}</div>"
            )
        for block in (b for b in blocks if isinstance(b, dict)):
            if block.get("type") == "text":
                out.append(
                    f"<div class='step'><pre>{_esc(_cut(str(block.get('text'))))}</pre></div>"
                )
            elif block.get("type") == "tool_use":
                head = f"<b>{_esc(str(block.get('name')))}</b>"
                tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
                if block.get("name") == "mcp__mllm__call":
                    call = next(
                        (c for c in calls if c.get("instruction") == tool_input.get("instruction")),
                        None,
                    )
                    out.append(
                        f"<div class='step call'>{head} (CallMLLM)"
                        f"{_call_html(call, finder, page_dir)}</div>"
                    )
                else:
                    text = _cut(json.dumps(tool_input, indent=1, ensure_ascii=False))
                    out.append(f"<div class='step tool'>{head}<pre>{_esc(text)}</pre></div>")
            elif block.get("type") == "tool_result":
                err = " class='err'" if block.get("is_error") else ""
                out.append(
                    f"<div class='step'><span{err}>result</span>"
                    f"<pre>{_esc(_cut(_result_text(block), 1500))}</pre></div>"
                )
    return out


def run_page(run_dir: Path, reference: Path | None, page_dir: Path, title: str) -> Path:
    """One run's page: status, reference vs render, the agent's steps, the answer source."""
    page_dir.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    outcome = load_json(run_dir / "outcome.json", "outcome.json", errors) or {}
    side_by_side(reference, run_dir / "render" / "render.png", page_dir / "side_by_side.png")
    finder = _ImageFinder(reference, run_dir / "answer")
    steps = _steps(run_dir, finder, page_dir, errors)
    answer = run_dir / "answer" / "answer.html"
    source = answer.read_text(encoding="utf-8", errors="replace") if answer.is_file() else None
    body = [
        f"<h1>{_esc(title)}</h1>",
        f"<p>agent status <b>{_esc(str(outcome.get('status', 'unknown')))}</b>; "
        f"{_esc(str(outcome.get('error') or ''))}</p>",
        "<p>missing or unreadable: " + _esc("; ".join(errors)) + "</p>" if errors else "",
        "<h2>Reference and render</h2><img src='side_by_side.png'>",
        "<h2>Steps</h2>",
        *steps,
        "<h2>Answer</h2>",
        f"<pre>{_esc(_cut(source, 20000))}</pre>"
        if source is not None
        else "<p>no answer/answer.html</p>",
    ]
    path = page_dir / "index.html"
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_esc(title)}"
        f"</title><style>{_CSS}</style></head><body>{''.join(body)}</body></html>",
        encoding="utf-8",
    )
    return path


def write_report(exp_dir: Path, out: Path, tasks_dir: Path) -> Path:
    runs = pd.read_parquet(exp_dir / "tables" / "runs.parquet")
    tags = pd.read_parquet(exp_dir / "tables" / "capability_tags.parquet")
    out.mkdir(parents=True, exist_ok=True)
    plots = [
        plot_metrics_by_condition(runs, out / "metrics_by_condition.png"),
        plot_cost_vs_fidelity(runs, out / "cost_vs_fidelity.png"),
        plot_capability_tags(runs, tags, out / "capability_tags.png"),
    ]
    rows = []
    for r in runs.itertuples():
        rel = f"runs/{r.condition}/{r.task}/r{r.replicate}"
        run_dir = exp_dir / r.condition / r.task / f"r{r.replicate}"
        link = "–"
        if run_dir.is_dir():
            run_page(
                run_dir,
                tasks_dir / r.task / "reference.png",
                out / rel,
                f"{r.condition} / {r.task} / r{r.replicate}",
            )
            link = f"<a href='{_esc(rel)}/index.html'>page</a>"
        rows.append(
            f"<tr><td>{_esc(r.condition)}</td><td>{_esc(r.task)}</td>"
            f"<td>{r.replicate}</td><td>{_esc(r.status)}</td>"
            f"<td>{_esc(str(r.reason or ''))}</td><td>{link}</td></tr>"
        )
    images = "".join(
        f"<h2>{_esc(p.stem)}</h2><p>{_esc(p.with_suffix('.rst').read_text())}</p>"
        f"<img src='{_esc(p.name)}'>"
        for p in plots
    )
    index = out / "index.html"
    index.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_esc(exp_dir.name)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{_esc(exp_dir.name)}</h1>{images}<h2>Runs</h2>"
        "<table><tr><th>condition</th><th>task</th><th>rep</th><th>status</th><th>reason</th>"
        f"<th></th></tr>{''.join(rows)}</table></body></html>",
        encoding="utf-8",
    )
    return index


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment-dir", type=Path, required=True, help="results/<experiment>")
    parser.add_argument("--out", type=Path, required=True, help="report folder")
    parser.add_argument(
        "--tasks-dir", type=Path, default=Path("tasks"), help="holds <task>/reference.png"
    )


def run(args: argparse.Namespace) -> int:
    for name in ("runs", "capability_tags"):
        if not (args.experiment_dir / "tables" / f"{name}.parquet").is_file():
            print(
                f"report: {args.experiment_dir}/tables/{name}.parquet not found; run "
                "`veriharness collect` first",
                file=sys.stderr,
            )
            return 2
    index = write_report(args.experiment_dir, args.out, args.tasks_dir)
    print(f"report: {index}")
    return 0
