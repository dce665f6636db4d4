"""`render/render.json` and `render/dom.json`: what `render` saw of the run's answer.

`render.json` is the capture's status (and the step that failed), sizes, timings, the requests
and navigations it blocked and the limits it ran under; `dom.json` the words and images drawn on
the page with their boxes (a task's `reference_dom.json` has the same model). `docs/metrics.md`
describes how scoring uses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from veriharness.runfolder._files import JsonFile

__all__ = [
    "DESIGN2CODE_DIR",
    "DOM",
    "DOM_NAME",
    "RENDER",
    "RENDER_NAME",
    "BlockedRequest",
    "Capped",
    "DomRecord",
    "FailedStep",
    "ImageBox",
    "Positioning",
    "RenderLimits",
    "RenderRecord",
    "Size",
    "Status",
    "TextBox",
    "TextSource",
    "Timings",
    "read_dom",
    "read_render",
]

RENDER_NAME = "render/render.json"
# render --design2code-blocks writes Design2Code's recoloured captures of the answer and the
# reference into this subfolder of render/; score reads them with block_detection design2code.
DESIGN2CODE_DIR = "design2code"
DOM_NAME = "render/dom.json"

Status = Literal["ok", "missing_answer", "empty_answer", "error"]
Positioning = Literal["static", "relative", "absolute", "fixed", "sticky"]
TextSource = Literal["text", "input-value", "placeholder"]
Channel = Annotated[int, Field(ge=0, le=255)]


class Size(BaseModel):
    model_config = ConfigDict(extra="forbid")
    width: PositiveInt
    height: PositiveInt


class Timings(BaseModel):
    launch_ms: float | None = Field(default=None, description="only on the page that paid for it")
    load_ms: float
    capture_ms: float


class BlockedRequest(BaseModel):
    url: str
    resource_type: str


FailedStep = Literal["load", "capture", "dom", "full_capture", "memory", "browser", "internal"]
Capped = Literal["load_time", "full_page_height", "full_page_width", "dom_height", "dom_texts",
                 "dom_images"]  # fmt: skip


class RenderLimits(BaseModel):
    """The bounds every capture runs under; `render.json` records them with what reached them."""

    load_timeout_s: float
    full_page_max_height: int
    full_page_max_width: int
    dom_max_entries: int
    renderer_memory_mb: int


class RenderRecord(BaseModel):
    """`render/render.json`."""

    kind: Literal["render"] = "render"
    status: Status
    failed_step: FailedStep | None = None  # set when status is error
    viewport: Size
    page: Size
    full_page: bool
    timings: Timings
    blocked_requests: list[BlockedRequest]
    console_errors: list[str]
    page_errors: list[str]
    error: str | None
    answer_sha256: str | None
    limits: RenderLimits | None = None
    capped: list[Capped] = []
    blocked_navigations: list[str] = []
    dialogs_dismissed: int = 0
    popups_closed: int = 0


class TextBox(BaseModel):
    """Words drawn on the page, with their box in page coordinates."""

    text: str
    source: TextSource
    x: float
    y: float
    width: float
    height: float
    font_size_px: float
    font_weight: int
    color: tuple[Channel, Channel, Channel]
    positioning: Positioning
    pinned: bool

    @property
    def area(self) -> float:
        """The box's area in square CSS pixels (computed, never stored)."""
        return self.width * self.height


class ImageBox(BaseModel):
    kind: Literal["img", "background", "svg", "canvas"]
    src: str | None
    x: float
    y: float
    width: float
    height: float
    natural_width: int | None
    natural_height: int | None


class DomRecord(BaseModel):
    """`render/dom.json`, or a task's `reference_dom.json`."""

    kind: Literal["dom"] = "dom"
    viewport: Size
    page: Size
    texts: list[TextBox]
    images: list[ImageBox]


RENDER = JsonFile(RENDER_NAME, RenderRecord)
DOM = JsonFile(DOM_NAME, DomRecord)


def read_render(run_dir: Path, errors: list[str]) -> RenderRecord | None:
    """The run's render record, leniently (`_files`)."""
    return RENDER.read(run_dir, errors)


def read_dom(run_dir: Path, errors: list[str]) -> DomRecord | None:
    """The DOM facts of the run's render, leniently (`_files`)."""
    return DOM.read(run_dir, errors)
