"""Where the pages of a source folder are, per published layout.

- `design2code`: the test set's layout, `N.html` with its screenshot `N.png` side by side in one
  folder, and the placeholder image(s) the pages load next to them. The screenshot's size is the
  page's first viewport (P-46).
- `html-folder`: every `*.html` / `*.htm` at the top of a folder, their local files anywhere
  below it; the viewport is given (`--width`, `--height`).
- `interaction2code`: refused by name until tasks have explicit interaction inputs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from PIL import Image

from veriharness.runfolder.render import Size

__all__ = ["ImportRefused", "SourcePage", "find_pages", "task_id_for"]


class ImportRefused(Exception):
    """The source cannot be imported at all (a refused layout, no pages, a bad folder)."""


class SourcePage(NamedTuple):
    html: Path
    screenshot: Path | None
    """The layout's own screenshot of the page (design2code), None when it has none."""
    viewport: Size | None
    """The first viewport to render at; None when the screenshot is missing or unreadable."""
    problem: str | None
    """Why the page cannot be imported before it is even opened (no or a bad screenshot)."""


INTERACTION2CODE_REFUSAL = (
    "layout 'interaction2code' is not imported yet: its pages need the interaction inputs of "
    "each action.json (before/after screenshots of a click or a key), and tasks here have no "
    "explicit interaction inputs (task.yaml `interaction: null`); import its pages' static first "
    "views with layout 'html-folder' meanwhile, or wait for interactive tasks"
)


def _numeric_first(path: Path) -> tuple[int, int | str]:
    return (0, int(path.stem)) if path.stem.isdigit() else (1, path.stem)


def _html_files(source: Path) -> list[Path]:
    pages = [p for p in source.iterdir() if p.is_file() and p.suffix.lower() in (".html", ".htm")]
    return sorted(pages, key=_numeric_first)


def _screenshot_page(html: Path) -> SourcePage:
    png = html.with_suffix(".png")
    if not png.is_file():
        return SourcePage(html, None, None, f"no screenshot {png.name} beside it")
    try:
        with Image.open(png) as image:
            width, height = image.size
    except (OSError, ValueError) as exc:
        return SourcePage(html, png, None, f"screenshot {png.name} cannot be read: {exc}")
    return SourcePage(html, png, Size(width=width, height=height), None)


def find_pages(layout: str, source: Path, viewport: Size) -> list[SourcePage]:
    """The pages of `source` in `layout`, in a stable order (numeric stems first, by number)."""
    if layout == "interaction2code":
        raise ImportRefused(INTERACTION2CODE_REFUSAL)
    if not source.is_dir():
        raise ImportRefused(f"source {str(source)!r} is not a folder")
    html = _html_files(source)
    if not html:
        raise ImportRefused(f"source {source} holds no *.html page at its top (layout {layout})")
    if layout == "design2code":
        return [_screenshot_page(p) for p in html]
    if layout == "html-folder":
        return [SourcePage(p, None, viewport, None) for p in html]
    raise ImportRefused(
        f"layout {layout!r} is not one of design2code, html-folder, interaction2code"
    )


_NOT_ID = re.compile(r"[^A-Za-z0-9_.-]+")


def task_id_for(page: Path, prefix: str) -> str:
    """The task id of a page: its file name's stem, runs of other characters as one `-`."""
    stem = _NOT_ID.sub("-", page.stem).strip("-._")
    return f"{prefix}{stem or 'page'}"
