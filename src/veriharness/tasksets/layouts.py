"""Where the pages of a source folder are, per published layout.

- `design2code`: the test set's layout, `N.html` with its screenshot `N.png` side by side in one
  folder, and the placeholder image(s) the pages load next to them. The screenshot's size is the
  page's first viewport (P-46).
- `html-folder`: every `*.html` / `*.htm` at the top of a folder, their local files anywhere
  below it; the viewport is given (`--width`, `--height`).
- `interaction2code`: one folder per page (`<n>/`, numeric first), holding `action.json`, the
  screenshots of the page's states, and the page's HTML, which the published set does not
  include: whoever imports saves it from `action.json`'s `link` as the folder's only `*.html`
  (P-50). The first viewport is given (`--width`, `--height`), as the published screenshots were
  taken at different device scales (1680 and 3360 px wide in one sample), so their size is no
  CSS viewport; the first interaction's before-state is recorded as the page's screenshot. The
  page's local files are looked for in its own folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from PIL import Image

from veriharness.experiment.task_set import SkipReason
from veriharness.runfolder.render import Size
from veriharness.tasksets.interaction2code import ACTIONS_FILE, ActionsError, read_actions

__all__ = ["ImportRefused", "SourcePage", "find_pages", "task_id_for"]


class ImportRefused(Exception):
    """The source cannot be imported at all (a refused layout, no pages, a bad folder)."""


class SourcePage(NamedTuple):
    html: Path
    """The page (interaction2code: its folder when it has no single HTML file)."""
    screenshot: Path | None
    """The layout's own screenshot of the page, None when it has none."""
    viewport: Size | None
    """The first viewport to render at; None when the screenshot is missing or unreadable."""
    problem: str | None
    """Why the page cannot be imported before it is even opened."""
    problem_reason: SkipReason = "no_screenshot"
    folder: Path | None = None
    """interaction2code: the page's folder, where its local files and action.json are."""

    @property
    def name(self) -> str:
        """How the manifest names the page: its file, or (interaction2code) its folder."""
        return self.folder.name if self.folder is not None else self.html.name


def _numeric_first(path: Path) -> tuple[int, int | str]:
    return (0, int(path.stem)) if path.stem.isdigit() else (1, path.stem)


def _html_files(source: Path) -> list[Path]:
    pages = [p for p in source.iterdir() if p.is_file() and p.suffix.lower() in (".html", ".htm")]
    return sorted(pages, key=_numeric_first)


def _screenshot_page(html: Path) -> SourcePage:
    png = html.with_suffix(".png")
    if not png.is_file():
        return SourcePage(html, None, None, f"no screenshot {png.name} beside it")
    size = _image_size(png)
    if isinstance(size, str):
        return SourcePage(html, png, None, size)
    return SourcePage(html, png, size, None)


def _image_size(png: Path) -> Size | str:
    try:
        with Image.open(png) as image:
            width, height = image.size
    except (OSError, ValueError) as exc:
        return f"screenshot {png.name} cannot be read: {exc}"
    return Size(width=width, height=height)


def _interaction2code_page(folder: Path, viewport: Size) -> SourcePage:
    pages = _html_files(folder)
    actions = folder / ACTIONS_FILE
    if not actions.is_file():
        return SourcePage(folder, None, None, f"no {ACTIONS_FILE}", "bad_action_json", folder)
    if not pages:
        return SourcePage(
            folder, None, None,
            f"no *.html in {folder.name}/: Interaction2Code publishes screenshots only; save "
            f"the page at its {ACTIONS_FILE} link into the folder",
            "no_page_html", folder,
        )  # fmt: skip
    if len(pages) > 1:
        names = ", ".join(p.name for p in pages)
        problem = f"several pages, {names}: which one was saved from the link is not known"
        return SourcePage(folder, None, None, problem, "several_page_html", folder)
    try:
        entries = read_actions(actions)
    except ActionsError as exc:
        return SourcePage(pages[0], None, None, str(exc), "bad_action_json", folder)
    if not entries:
        return SourcePage(pages[0], None, None, f"{ACTIONS_FILE} lists no interaction",
                          "no_interactions", folder)  # fmt: skip
    first = folder / f"{next(iter(entries.values())).src}.png"
    shown = first if first.is_file() else None
    return SourcePage(pages[0], shown, viewport, None, "no_screenshot", folder)


def find_pages(layout: str, source: Path, viewport: Size) -> list[SourcePage]:
    """The pages of `source` in `layout`, in a stable order (numeric stems first, by number)."""
    if not source.is_dir():
        raise ImportRefused(f"source {str(source)!r} is not a folder")
    if layout == "interaction2code":
        folders = sorted((p for p in source.iterdir() if p.is_dir()), key=_numeric_first)
        if not folders:
            raise ImportRefused(f"source {source} holds no page folder (layout {layout})")
        return [_interaction2code_page(folder, viewport) for folder in folders]
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
    """The task id of a page: its file name's stem (a page folder's whole name), runs of other
    characters as one `-`."""
    stem = _NOT_ID.sub("-", page.name if page.is_dir() else page.stem).strip("-._")
    return f"{prefix}{stem or 'page'}"
