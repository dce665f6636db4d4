"""What scoring reads from a run folder and a task folder, as validated models.

`render.json` and `dom.json` are written by the render stage to the render contract (see
docs/metrics.md). Scoring reads them through these models only, never through the render
module, so a malformed file stops scoring with an error naming the file, the field and the value
instead of being half-read. Fields the scorer does not use are allowed and ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "InputError",
    "Size",
    "BlockedRequest",
    "RenderInfo",
    "DomText",
    "DomImage",
    "DomFacts",
    "load_model",
]


Channel = Annotated[int, Field(ge=0, le=255)]


class InputError(ValueError):
    """A file scoring needs is missing or does not follow the render contract."""


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Size(_Lenient):
    width: int = Field(ge=0)
    height: int = Field(ge=0)


class BlockedRequest(_Lenient):
    url: str
    resource_type: str | None = None


class RenderInfo(_Lenient):
    """`render/render.json`."""

    kind: Literal["render"]
    status: Literal["ok", "missing_answer", "empty_answer", "error"]
    viewport: Size
    blocked_requests: list[BlockedRequest] = []
    error: str | None = None
    answer_sha256: str | None = None


class DomText(_Lenient):
    """One visible text node with its box in page coordinates."""

    text: str
    x: float
    y: float
    width: float = Field(ge=0)
    height: float = Field(ge=0)
    color: tuple[Channel, Channel, Channel]
    positioning: Literal["static", "relative", "absolute", "fixed", "sticky"] = "static"
    pinned: bool = False

    @property
    def area(self) -> float:
        return self.width * self.height

    @property
    def centre(self) -> tuple[float, float]:
        return (self.x + self.width / 2, self.y + self.height / 2)


class DomImage(_Lenient):
    """One image-like element (img, CSS background image, svg, canvas) with its box."""

    kind: Literal["img", "background", "svg", "canvas"]
    src: str | None = None
    x: float
    y: float
    width: float = Field(ge=0)
    height: float = Field(ge=0)


class DomFacts(_Lenient):
    """`render/dom.json` or a task's `reference_dom.json`."""

    kind: Literal["dom"]
    viewport: Size
    page: Size
    texts: list[DomText]
    images: list[DomImage] = []


_M = TypeVar("_M", bound=BaseModel)


def load_model(path: Path, model: type[_M]) -> _M:
    """Read and validate a JSON file, or raise InputError naming the file, field and value."""
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as bad:
        raise InputError(f"{path}: not valid JSON ({bad})") from bad
    try:
        return model.model_validate(raw)
    except ValidationError as invalid:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']} "
            f"(got {_short(e.get('input'))})"
            for e in invalid.errors()[:5]
        )
        raise InputError(f"{path}: {problems}") from invalid


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
