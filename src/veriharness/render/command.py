"""Render stage: open an `answer.html` in Debian's Chromium and record what it shows.

The `render` and `render-reference` verbs: arguments, batch files, and for each answer (or task
reference) the files written from one capture. The browser itself is `render_browser.py`'s
business; what `dom.json` holds, and how image sources in it are written, is `render_dom.py`'s.

Design notes
- The viewport is the reference image's size at device scale factor 1, so a capture can be
  compared with the reference pixel for pixel. `render.png` is always exactly that size;
  `render_full.png` exists only when the page is taller than the viewport.
- A missing, empty or failing answer is a result, not a crash: its status is recorded and
  `render.png` is a white image of the viewport size so the later stages still have their inputs.
  Only setup problems (no Chromium, unusable arguments) make the verb exit non-zero.
- Every batch line and every reference image is checked before Chromium starts, so a bad line
  late in a batch cannot leave earlier runs half rendered.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image
from pydantic import BaseModel, ConfigDict

from veriharness._util import atomic
from veriharness._util.batch_files import BatchFileError, read_batch_file
from veriharness._util.hashing import sha256_file
from veriharness.experiment.config import ConfigError, TaskSpec, read_task_spec
from veriharness.render.browser import (
    Capture,
    Renderer,
    RenderSetupError,
)
from veriharness.render.states import Triggers, render_answer_states, render_reference_states
from veriharness.runfolder.outcome import ExternalOutcome, read_outcome
from veriharness.runfolder.render import (
    DomRecord,
    FailedStep,
    RenderLimits,
    RenderRecord,
    Size,
    Status,
    Timings,
)

# The dom.json and render.json models live in runfolder.render; the browser session in browser.
__all__ = [
    "BatchItem",
    "UncleanReference",
    "answer_triggers",
    "render_answer",
    "render_reference",
    "read_batch",
    "reference_size",
    "task_spec",
    "task_viewport",
]


class BatchItem(BaseModel):
    """One line of a `--batch` file."""

    model_config = ConfigDict(extra="forbid")
    answer_dir: Path
    reference: Path
    out: Path
    task_dir: Path | None = None


def _white_png(viewport: Size) -> bytes:
    from io import BytesIO

    buffer = BytesIO()
    Image.new("RGB", (viewport.width, viewport.height), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def _write_json(path: Path, model: BaseModel) -> None:
    atomic.write_text(path, model.model_dump_json(indent=1, exclude_none=False) + "\n")


def reference_size(reference: Path) -> Size:
    try:
        with Image.open(reference) as image:
            width, height = image.size
    except (OSError, ValueError) as exc:
        raise RenderSetupError(f"reference image {reference} cannot be read: {exc}") from exc
    return Size(width=width, height=height)


def _answer_state(answer: Path) -> Status | None:
    if not answer.is_file():
        return "missing_answer"
    with answer.open("rb") as handle:
        start = handle.read(1 << 20)
    if not start.strip() and answer.stat().st_size <= len(start):
        return "empty_answer"
    return None


def _failed(viewport: Size, step: FailedStep, error: str) -> Capture:
    empty = DomRecord(viewport=viewport, page=viewport, texts=[], images=[])
    return Capture(
        status="error",
        failed_step=step,
        error=error,
        dom=empty,
        timings=Timings(load_ms=0, capture_ms=0),
    )


def render_answer(
    renderer: Renderer,
    answer_dir: Path,
    reference: Path,
    out: Path,
    task: TaskSpec | None = None,
) -> RenderRecord:
    """Render `answer_dir/answer.html` at the size of `reference`; write the outputs into `out`.
    With the `task` of an interactive or responsive task, also replay its interactions and render
    its extra viewports (`states.py`).

    Whatever the answer does, the outputs are written: a failure inside the capture that the
    browser layer did not foresee is recorded as failed step `internal`."""
    viewport = reference_size(reference)
    answer = answer_dir / "answer.html"
    try:
        state = _answer_state(answer)
        if state is None:
            capture = renderer.capture(answer, answer_dir, viewport)
        else:
            empty = DomRecord(viewport=viewport, page=viewport, texts=[], images=[])
            capture = Capture(status=state, dom=empty, timings=Timings(load_ms=0, capture_ms=0))
    except Exception as exc:  # noqa: BLE001 - recorded in render.json; the batch goes on
        capture = _failed(viewport, "internal", f"{type(exc).__name__}: {exc}")
    record = _write_render(capture, answer, viewport, renderer.limits, out)
    if task is not None and task.interactive:
        loadable = renderer if _answer_state(answer) is None else None
        render_answer_states(
            loadable,
            answer,
            answer_dir,
            task.interactions,
            task.viewports,
            viewport,
            out,
            answer_triggers(answer_dir.parent),
        )
    return record


def answer_triggers(run_dir: Path) -> Triggers:
    """How the run's answer marks its triggers: the task's own reference, imported as an answer
    (`import-answer`, source `task_references`), is found by the task's selectors, as the
    metric's reference side is; every other answer by the output contract's marks."""
    outcome = read_outcome(run_dir, [])
    own = isinstance(outcome, ExternalOutcome) and outcome.source == "task_references"
    return "task" if own else "marks"


def _write_render(
    capture: Capture, answer: Path, viewport: Size, limits: RenderLimits, out: Path
) -> RenderRecord:
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(out / "render.png", capture.viewport_png or _white_png(viewport))
    full = out / "render_full.png"
    if capture.full_png is not None:
        atomic.write_bytes(full, capture.full_png)
    elif full.exists():
        full.unlink()  # a stale capture from an earlier render would contradict render.json
    record = RenderRecord(
        status=capture.status,
        failed_step=capture.failed_step,
        viewport=viewport,
        page=capture.dom.page,
        full_page=capture.full_png is not None,
        timings=capture.timings,
        blocked_requests=capture.blocked_requests,
        console_errors=capture.console_errors,
        page_errors=capture.page_errors,
        error=capture.error,
        answer_sha256=sha256_file(answer) if answer.is_file() else None,
        limits=limits,
        capped=capture.capped,
        blocked_navigations=capture.blocked_navigations,
        dialogs_dismissed=capture.dialogs_dismissed,
        popups_closed=capture.popups_closed,
    )
    _write_json(out / "dom.json", capture.dom)
    out_json = json.loads(record.model_dump_json())
    if record.timings.launch_ms is None:
        del out_json["timings"]["launch_ms"]
    atomic.write_json(out / "render.json", out_json, indent=1)
    return record


def task_spec(task_dir: Path) -> TaskSpec:
    """The task's `task.yaml`, checked as `check-experiment` checks it (its id must be the
    folder's name)."""
    try:
        return read_task_spec(task_dir, task_dir.resolve().name)
    except ConfigError as exc:
        raise RenderSetupError(str(exc)) from exc


def task_viewport(task_dir: Path) -> Size:
    viewport = task_spec(task_dir).viewport
    return Size(width=viewport.width, height=viewport.height)


class UncleanReference(RenderSetupError):
    """A reference page that did not render cleanly; `blocked` holds the URLs it asked for that
    the renderer blocked (a remote resource), apart from its other problems."""

    def __init__(self, html: Path, blocked: list[str], problems: list[str]):
        every = [f"blocked request {url}" for url in blocked] + problems
        super().__init__(f"{html} is not a clean reference: " + "; ".join(every))
        self.blocked = blocked
        self.problems = problems


def render_reference(renderer: Renderer, task_dir: Path) -> DomRecord:
    """Render tasks/<id>/reference.html; write reference.png and reference_dom.json next to it,
    and replay the task's interactions and extra viewports (`states.py`).

    A reference that blocks requests, throws, or fails to load is refused (`UncleanReference`):
    it would be a broken yardstick for every run scored against it. So is an interaction that
    cannot be replayed on it.
    """
    spec = task_spec(task_dir)
    viewport = Size(width=spec.viewport.width, height=spec.viewport.height)
    html = task_dir / "reference.html"
    if not html.is_file():
        raise RenderSetupError(f"{html} does not exist")
    capture = renderer.capture(html, task_dir, viewport)
    problems = [f"load failed: {capture.error}"] if capture.status != "ok" else []
    problems += [f"page error {e}" for e in capture.page_errors]
    problems += [f"console error {e}" for e in capture.console_errors]
    if capture.viewport_png is None:
        problems.append("no screenshot was captured")
    blocked = [b.url for b in capture.blocked_requests]
    if blocked or problems or capture.viewport_png is None:
        raise UncleanReference(html, blocked, problems)
    render_reference_states(
        renderer, task_dir, spec.id, spec.interactions, spec.viewports, viewport
    )
    (task_dir / "reference.png").write_bytes(capture.viewport_png)
    _write_json(task_dir / "reference_dom.json", capture.dom)
    return capture.dom


def read_batch(path: Path) -> list[BatchItem]:
    """Every line of a batch file, all checked before any page is rendered."""
    try:
        return read_batch_file(path, BatchItem)
    except BatchFileError as exc:
        raise RenderSetupError(str(exc)) from exc
