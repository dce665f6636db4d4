"""One run's report page: the transcript's steps, each CallMLLM call with the images it saw and the
regions it asked for, the reference beside the render, and the answer's source.

Design notes:

- A page is static HTML with inline CSS and only relative links to files under the report folder:
  no script, no remote request. Every piece of run content is HTML-escaped; the answer is shown as
  escaped source next to its render, never embedded as live HTML.
- No image is decoded. Reference and render are shown side by side by the page itself (two lazily
  loaded `<img>`), a region a call asked for is a CSS rectangle laid over the full image in percent
  of its size, and every image file is copied once under `images/<sha256>.<ext>` (the render into
  its run's page folder). Copies are renamed into place, so worker processes may write pages at
  the same time.
- The images a CallMLLM call saw are found by content, not by name: the trace records the sha256 of
  each input file and of the bytes attached; the task's reference.png, the files kept under
  answer/ and the bytes the mllm server kept as attached (`call_images/`, used only when they hash
  to their name) are the candidates (the workspace itself is gone). A region is drawn on the full
  file when that is found and shown as sent when its crop was kept. An input that matches none of
  them is listed as not available, with its path and digests.
- A call is shown under the tool use it answers, linked as `call_records.link_calls` does for the
  tables (recorded tool_use_id, else order); a doubtful link is said on the page, and a trace call
  linked to no tool use is listed after the steps rather than left out.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from PIL import Image

from veriharness._util import atomic
from veriharness._util.hashing import sha256_file
from veriharness.collect.call_links import (
    MLLM_TOOL,
    TraceCall,
    callmllm_uses,
    group_trace,
    link_calls,
    linked_call_rows,
    message_blocks,
    transcript_tool_uses,
)
from veriharness.collect.trajectory_rows import trajectory_of_run
from veriharness.experiment.analysis import DEFAULT_PRIMARY
from veriharness.runfolder._files import read_object
from veriharness.runfolder.call_images import kept_image
from veriharness.runfolder.mllm_trace import read_trace_objects
from veriharness.runfolder.outcome import NAME as OUTCOME
from veriharness.runfolder.states import STATES, read_states
from veriharness.runfolder.transcript import read_transcript

__all__ = [
    "CSS",
    "PageJob",
    "RunImages",
    "esc",
    "run_page",
]

_TEXT_LIMIT = 4000
CSS = (
    "body{font-family:sans-serif;max-width:1100px;margin:1em auto;color:#222}"
    ".step{border-left:3px solid #bbb;padding:.2em .8em;margin:.6em 0}"
    ".tool{border-color:#36c}.call{border-color:#c63;background:#fff8f2}.err{color:#b00}"
    "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5em;font-size:12px}"
    "img{max-width:100%;border:1px solid #ccc}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}"
    ".pair{display:flex;gap:10px;align-items:flex-start}.pair figure{margin:0;flex:1}"
    ".blank{background:#ebebeb;padding:3em 1em;text-align:center}"
    ".shot{position:relative;display:inline-block;max-width:100%}"
    ".shot img{display:block;border:0}"
    ".region{position:absolute;box-sizing:border-box;border:2px solid #f00}"
    ".caveat{background:#fde2e1;padding:.5em;border:2px solid #b00}"
    ".strip{display:flex;gap:8px;overflow-x:auto;align-items:flex-start}"
    ".strip figure{margin:0;flex:0 0 220px}.strip figcaption{font-size:12px}"
    ".between{flex:0 0 150px;font-size:12px;border-left:3px solid #c63;padding-left:4px}"
    ".between img{max-width:140px}"
)


def esc(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value))


def _cut(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + f"…[{len(text)} chars]"


# --- images: copied once, never decoded -----------------------------------------------------------

_DIGESTS: dict[Path, str] = {}  # per process: a task's reference is hashed once, not once per run


def _digest(path: Path) -> str:
    if path not in _DIGESTS:
        _DIGESTS[path] = sha256_file(path)
    return _DIGESTS[path]


def _copy_once(source: Path, dest: Path) -> None:
    """Copy unless `dest` exists; the rename makes concurrent workers safe."""
    if dest.exists():
        return
    with atomic.replacing(dest) as tmp:
        shutil.copyfile(source, tmp)


class RunImages:
    """The files a run's CallMLLM calls could have seen, by sha256: the task reference, the
    files kept under answer/ and the bytes the mllm server kept as attached (`call_images/` of
    `run_dir`; a file there counts only when its bytes hash to its name, a mismatch is named in
    `errors`)."""

    def __init__(
        self,
        reference: Path | None,
        answer_dir: Path,
        run_dir: Path | None = None,
        errors: list[str] | None = None,
    ) -> None:
        self.reference = reference if reference and reference.is_file() else None
        self.answer_dir = answer_dir
        self.run_dir = run_dir
        self.errors = errors if errors is not None else []
        self._answer: dict[str, Path] | None = None
        self._kept: dict[str, Path | None] = {}

    def find(self, digest: str) -> Path | None:
        if self.reference is not None and _digest(self.reference) == digest:
            return self.reference
        if self._answer is None:  # hashed only when a call saw something other than the reference
            files = self.answer_dir.rglob("*") if self.answer_dir.is_dir() else ()
            self._answer = {sha256_file(p): p for p in files if p.is_file()}
        return self._answer.get(digest) or self.attached(digest)

    def attached(self, digest: Any) -> Path | None:
        """The kept file of the bytes a call attached with this digest, or None (also for a
        trace that records no digest)."""
        if self.run_dir is None or not isinstance(digest, str):
            return None
        if digest not in self._kept:
            name = kept_image(self.run_dir, digest, self.errors)
            self._kept[digest] = None if name is None else self.run_dir / name
        return self._kept[digest]


class _Images(RunImages):
    """A run's images and their copies under <out>/images/."""

    def __init__(self, out: Path, reference: Path | None, run_dir: Path, errors: list[str]) -> None:
        super().__init__(reference, run_dir / "answer", run_dir, errors)
        self.out = out

    def publish(self, source: Path, digest: str | None = None) -> str:
        """Path of the copy of `source`, relative to --out."""
        name = (digest or _digest(source)).removeprefix("sha256:")
        rel = f"images/{name}{source.suffix.lower()}"
        _copy_once(source, self.out / rel)
        return rel


def _size(item: dict[str, Any], source: Path) -> tuple[int, int] | None:
    width, height = item.get("width"), item.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        return width, height
    try:
        with Image.open(source) as image:  # reads the header only
            return image.size
    except OSError:
        return None


def _region_box(region: Any, size: tuple[int, int] | None) -> str | None:
    """The CSS rectangle of a region in percent of the image, or None when it cannot be drawn."""
    fields = ("x", "y", "width", "height")
    if size is None or not isinstance(region, dict):
        return None
    if not all(isinstance(region.get(f), int | float) for f in fields):
        return None
    w, h = size
    left, top = region["x"] / w * 100, region["y"] / h * 100
    width, height = region["width"] / w * 100, region["height"] / h * 100
    return (
        f"<span class='region' style='left:{left:.4f}%;top:{top:.4f}%;"
        f"width:{width:.4f}%;height:{height:.4f}%'></span>"
    )


# --- per-run pages ------------------------------------------------------------------------------


def _call_images(request: dict[str, Any], images: _Images, prefix: str) -> str:
    parts = []
    for item in request.get("inputs") or []:
        if not isinstance(item, dict):
            continue
        label = esc(str(item.get("label")))
        if item.get("kind") == "text":
            content = esc(_cut(str(item.get("content"))))
            parts.append(f"<p>text input <b>{label}</b>:</p><pre>{content}</pre>")
            continue
        digest, region = str(item.get("file_sha256")), item.get("region")
        attached = item.get("attached_sha256")
        source = images.find(digest)
        sent = images.attached(attached) if region and attached != digest else None
        where = f"{esc(str(item.get('path')))} ({esc(digest)})"
        if source is None and sent is None:
            parts.append(
                f"<p>image <b>{label}</b>: {where} is not available; the workspace is "
                "gone and no kept file has this digest.</p>"
            )
            continue
        if source is None:
            parts.append(
                f"<p>image <b>{label}</b>: {where} region {esc(region)}; the file is gone, the "
                "region as sent to the model is kept</p>"
            )
        else:
            overlay = _region_box(region, _size(item, source)) if region else ""
            note = " (full image)"
            if region:
                note = f" region {esc(region)}" + ("" if overlay else " (could not be drawn)")
            parts.append(
                f"<p>image <b>{label}</b>: {where}{note}</p><span class='shot'>"
                f"<img loading='lazy' src='{esc(prefix + images.publish(source, digest))}'>"
                f"{overlay or ''}</span>"
            )
        if sent is not None:
            src = esc(prefix + images.publish(sent, attached))
            parts.append(
                f"<p>as sent to the model ({esc(str(attached))}):</p>"
                f"<img loading='lazy' src='{src}'>"
            )
    return "".join(parts)


_LINK_NOTES = {
    "order_instruction_differs": "linked by order, but the trace's instruction differs from "
    "this tool use's input",
    "unmatched": "no CallMLLM tool use of the transcript is linked to this call",
}


def _call_html(call: TraceCall | None, how: str, images: _Images, prefix: str) -> str:
    if call is None:
        return "<p class='err'>no mllm_trace.jsonl call is linked to this tool use.</p>"
    request, end = call.request, call.end or {}
    response = esc(_cut(str(end.get("raw_response") or end.get("error"))))
    tags = request.get("declared_capability_tags") or request.get("capability_tags") or []
    note = f"<p class='err'>{_LINK_NOTES[how]}.</p>" if how in _LINK_NOTES else ""
    return (
        f"{note}<p>call <b>{esc(call.call_id)}</b> · tags "
        f"<b>{esc(', '.join(map(str, tags)))}</b> · output "
        f"{esc(request.get('output'))} · {esc(str(end.get('event', 'no end event')))}"
        f" · {esc(str(end.get('latency_ms')))} ms</p>"
        f"<p>instruction:</p><pre>{esc(_cut(str(request.get('instruction'))))}</pre>"
        + _call_images(request, images, prefix)
        + f"<p>response:</p><pre>{response}</pre>"
    )


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(
            str(c.get("text", f"[{c.get('type')}]")) for c in content if isinstance(c, dict)
        )
    return str(content)


def _event_html(event: dict[str, Any]) -> str | None:
    if event.get("type") == "system":
        return (
            f"<div class='step'>session start: model {esc(str(event.get('model')))}, "
            f"MCP {esc(event.get('mcp_servers'))}</div>"
        )
    if event.get("type") == "result":
        return (
            f"<div class='step'>end: {esc(str(event.get('subtype')))}, "
            f"{esc(str(event.get('num_turns')))} turns, "
            f"${esc(str(event.get('total_cost_usd')))}</div>"
        )
    return None


def _steps(run_dir: Path, images: _Images, prefix: str, errors: list[str]) -> list[str]:
    events = read_transcript(run_dir, errors) or []
    trace = read_trace_objects(run_dir, errors) or []
    calls = group_trace(trace, errors)
    links = link_calls(callmllm_uses(events), calls, errors)
    by_use: dict[str, tuple[TraceCall, str]] = {}
    for call, link in zip(calls, links, strict=True):
        if link.tool_use_id is not None:
            by_use.setdefault(str(link.tool_use_id), (call, link.how))
    out: list[str] = []
    for event in events:
        if (line := _event_html(event)) is not None:
            out.append(line)
        for block in message_blocks(event):
            if block.get("type") == "text":
                out.append(
                    f"<div class='step'><pre>{esc(_cut(str(block.get('text'))))}</pre></div>"
                )
            elif block.get("type") == "tool_use":
                head = f"<b>{esc(str(block.get('name')))}</b>"
                tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
                if block.get("name") == MLLM_TOOL:
                    matched, how = by_use.get(str(block.get("id")), (None, "unmatched"))
                    out.append(
                        f"<div class='step call'>{head} (CallMLLM)"
                        f"{_call_html(matched, how, images, prefix)}</div>"
                    )
                else:
                    # Compact JSON: json's C encoder only serves calls without indent.
                    text = _cut(json.dumps(tool_input, ensure_ascii=False))
                    out.append(f"<div class='step tool'>{head}<pre>{esc(text)}</pre></div>")
            elif block.get("type") == "tool_result":
                err = " class='err'" if block.get("is_error") else ""
                out.append(
                    f"<div class='step'><span{err}>result</span>"
                    f"<pre>{esc(_cut(_result_text(block), 1500))}</pre></div>"
                )
    unlinked = [c for c, link in zip(calls, links, strict=True) if link.tool_use_id is None]
    if unlinked:
        out.append("<h3>Trace calls linked to no tool use</h3>")
        out += [
            f"<div class='step call'>{_call_html(c, 'unmatched', images, prefix)}</div>"
            for c in unlinked
        ]
    return out


def _figure(label: str, src: str | None) -> str:
    if src is None:
        return (
            f"<figure><figcaption>{label}: not available</figcaption><div class='blank'>"
            f"no {label} image</div></figure>"
        )
    return f"<figure><figcaption>{label}</figcaption><img loading='lazy' src='{esc(src)}'></figure>"


def _copied(source: Path, page_dir: Path, name: str) -> str | None:
    if not source.is_file():
        return None
    (page_dir / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, page_dir / name)
    return name


def _state_pairs(job: PageJob, page_dir: Path, errors: list[str]) -> list[str]:
    """An interactive or responsive task's states: the reference's after each interaction
    (marked: trigger blue, changed region red) beside the answer's, then each extra viewport."""
    if job.reference is None or not STATES.exists(job.run_dir):
        return []
    states = read_states(job.run_dir, errors)
    if states is None:
        return []
    task = job.reference.parent
    out = ["<h2>Interactions and viewports</h2>"]
    for state in states.interactions:
        reference = _copied(task / f"states/{state.id}_marked.png", page_dir, f"ref-{state.id}.png")
        answer = _copied(job.run_dir / "render" / f"states/{state.id}.png", page_dir,
                         f"answer-{state.id}.png")  # fmt: skip
        found = f"{state.trigger_matches} trigger(s), acted: {state.acted}"
        out += [
            f"<p>interaction <b>{esc(state.id)}</b>: {esc(found)}, "
            f"{state.changed_pixels} pixels changed{'; ' + esc(state.error) if state.error else ''}"
            "</p><div class='pair'>",
            _figure(f"reference after {state.id}", reference),
            _figure(f"answer after {state.id}", answer),
            "</div>",
        ]
    for view in states.viewports:
        reference = _copied(task / f"viewports/{view.name}.png", page_dir, f"ref-{view.name}.png")
        answer = _copied(job.run_dir / "render" / f"viewports/{view.name}.png", page_dir,
                         f"answer-{view.name}.png")  # fmt: skip
        out += [
            f"<p>viewport <b>{esc(view.name)}</b> ({view.width}x{view.height}): "
            f"{esc(view.status)}</p><div class='pair'>",
            _figure(f"reference at {view.name}", reference),
            _figure(f"answer at {view.name}", answer),
            "</div>",
        ]
    return out


def _between_html(
    calls: list[dict[str, Any]], run_dir: Path, images: _Images, prefix: str, metric: str
) -> str:
    """The CallMLLM calls made between two versions, each with the images it was sent."""
    parts = []
    for call in calls:
        kept = [run_dir / name for name in call.get("call_images") or []]
        shots = "".join(
            f"<img loading='lazy' src='{esc(prefix + images.publish(path))}'>"
            for path in kept
            if path.is_file()
        )
        change = call.get(f"change_{metric}")
        moved = "" if change is None else f"; {metric} then {change:+.3f}"
        parts.append(
            f"<div class='between'>CallMLLM <b>{esc(call.get('combination') or '')}</b> "
            f"({esc(call.get('outcome') or '')}{esc(moved)}){shots}</div>"
        )
    return "".join(parts)


def _trajectory_strip(job: PageJob, page_dir: Path, images: _Images, prefix: str,
                      errors: list[str]) -> list[str]:  # fmt: skip
    """The answer's versions in order, each rendered, with the calls made between them and the
    images each call saw (snapshots/ and trajectory.json; none for a run without them)."""
    events = read_transcript(job.run_dir, errors)
    tools, uses = transcript_tool_uses(events) if events is not None else (None, None)
    calls = linked_call_rows(job.run_dir, uses, errors)
    trajectory = trajectory_of_run(job.run_dir, calls, tools, errors)
    if trajectory is None or not trajectory.snapshots:
        return []
    images_of = {str(c.get("call_id")): c.get("call_images") for c in calls or []}
    effects = [{**e, "call_images": images_of.get(str(e.get("call_id")))}
               for e in trajectory.call_effects]  # fmt: skip
    metric = job.primary.removeprefix("metric_")
    before = [e for e in effects if e.get("snapshot_at_call") is None]
    out = ["<h2>The answer over the session</h2><div class='strip'>",
           _between_html(before, job.run_dir, images, prefix, metric)]  # fmt: skip
    for row in trajectory.snapshots:
        n = row["snapshot"]
        src = _copied(job.run_dir / "trajectory" / str(n) / "render" / "render.png", page_dir,
                      f"versions/{n}.png")  # fmt: skip
        if src is None and row.get("scored_as"):
            src = _copied(job.run_dir / "trajectory" / str(row["scored_as"]) / "render" /
                          "render.png", page_dir, f"versions/{n}.png")  # fmt: skip
        value, change = row.get(f"metric_{metric}"), row.get(f"change_{metric}")
        score = "" if value is None else f", {metric} {value:.3f}"
        score += "" if change is None else f" ({change:+.3f})"
        caption = (f"version {n}{' (final)' if row['final'] else ''}: {row['seconds']:.0f} s"
                   f"{score}; {row.get('score_status') or 'not scored'}")  # fmt: skip
        out.append(_figure(caption, src))
        after = [e for e in effects if e.get("snapshot_at_call") == n]
        out.append(_between_html(after, job.run_dir, images, prefix, metric))
    out.append("</div>")
    return out


class PageJob(NamedTuple):
    """One run page to write: where the run is, its task's reference, where the page goes."""

    run_dir: Path
    reference: Path | None
    out: Path
    rel: str  # the page folder relative to `out`
    title: str
    # What the runs table says of the run (status, reason, cost, metrics, audit flags), shown
    # first; `offline` runs also get the stand-in caveat.
    facts: tuple[tuple[str, str], ...] = ()
    offline: bool = False
    primary: str = DEFAULT_PRIMARY[0]  # the metric the versions' captions give


def run_page(job: PageJob) -> Path:
    """One run's page: status, reference and render, the agent's steps, the answer source."""
    page_dir = job.out / job.rel
    page_dir.mkdir(parents=True, exist_ok=True)
    prefix = "../" * len(Path(job.rel).parts)
    errors: list[str] = []
    outcome = read_object(job.run_dir / OUTCOME, OUTCOME, errors) or {}
    images = _Images(job.out, job.reference, job.run_dir, errors)
    reference = prefix + images.publish(images.reference) if images.reference else None
    render = job.run_dir / "render" / "render.png"
    if render.is_file():
        shutil.copyfile(render, page_dir / "render.png")
    external = outcome.get("kind") == "external_answer"
    if external:  # no session: nothing to show as steps, and no transcript to miss
        steps = ["<p>an imported answer: no session, no transcript, no CallMLLM calls</p>"]
        status = (
            f"<p>external answer set <b>{esc(str(outcome.get('set')))}</b> "
            f"({esc(str(outcome.get('source_path')))}): "
            f"<b>{esc(str(outcome.get('status', 'unknown')))}</b>; "
            f"{esc(str(outcome.get('error') or ''))}</p>"
        )
    else:
        steps = _steps(job.run_dir, images, prefix, errors)
        status = (
            f"<p>agent status <b>{esc(str(outcome.get('status', 'unknown')))}</b>; "
            f"{esc(str(outcome.get('error') or ''))}</p>"
        )
    answer = job.run_dir / "answer" / "answer.html"
    source = answer.read_text(encoding="utf-8", errors="replace") if answer.is_file() else None
    facts = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in job.facts)
    state_pairs = _state_pairs(job, page_dir, errors)
    read_again: list[str] = []  # the strip reads the transcript and trace the steps read too
    strip = [] if external else _trajectory_strip(job, page_dir, images, prefix, read_again)
    errors += [e for e in read_again if e not in errors]
    body = [
        f"<h1>{esc(job.title)}</h1>",
        (
            "<p class='caveat'><b>OFFLINE: this run used the embedded offline model, a scripted "
            "stand-in; its numbers test the pipeline and are not a result of any model.</b></p>"
            if job.offline
            else ""
        ),
        status,
        f"<table>{facts}</table>" if facts else "",
        "<p>problems reading this run: " + esc("; ".join(errors)) + "</p>" if errors else "",
        "<h2>Reference and render</h2><div class='pair'>",
        _figure("reference", reference),
        _figure("render", "render.png" if render.is_file() else None),
        "</div>",
        *state_pairs,
        *strip,
        "<h2>Steps</h2>",
        *steps,
        "<h2>Answer</h2>",
        f"<pre>{esc(_cut(source, 20000))}</pre>"
        if source is not None
        else "<p>no answer/answer.html</p>",
    ]
    path = page_dir / "index.html"
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(job.title)}"
        f"</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>",
        encoding="utf-8",
    )
    return path
