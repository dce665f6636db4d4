"""The captures Design2Code's block detection needs (`score.metrics.d2cblocks` reads them).

A page is loaded as for an ordinary capture (same network fence, dialogs, limits; scripts off
once loaded) and captured three times, whole page: as it is, then recoloured, then recoloured
with every colour shifted. Recolouring follows Design2Code (NoviScl/Design2Code,
`metrics/ocr_free_utils.py`, commit in docs/metrics.md): every element gets a transparent
background, and each element of `RECOLOURED_TAGS`, in document order, gets the next text colour
of a pool (every combination of channel values 10, 26, ..., 250, taken from the end) at full
opacity, all with `!important`. The page's texts are listed with the colour of their nearest
recoloured ancestor (black when none), as Design2Code reads them back from its rewritten HTML.

Difference from Design2Code: it rewrites the HTML file and loads each version afresh; here the
loaded page is restyled in place, so one load serves the three captures.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from PIL import Image

from veriharness._util import atomic
from veriharness.render.browser import (
    FULL_PAGE_MAX_HEIGHT,
    FULL_PAGE_MAX_WIDTH,
    Renderer,
    _PageCapture,
    _quietly,
)
from veriharness.runfolder.render import DESIGN2CODE_DIR, Size

if TYPE_CHECKING:
    from playwright._impl._api_structures import Clip

__all__ = [
    "RECOLOURED_TAGS",
    "RecolouredCapture",
    "capture_recoloured",
    "render_recoloured",
    "write_recoloured",
]

RECOLOURED_TAGS = (
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "div", "span", "a", "b", "li", "table", "td", "th",
    "button", "footer", "header", "figcaption",
)  # fmt: skip
_SHIFT = 50  # score.metrics.d2cblocks.SHIFT; render may not import score (layers)

# Restyles the page; returns each non-empty text node of <body> (stripped) with the colour its
# nearest recoloured ancestor received before the shift.
_RECOLOUR = """([tags, shift]) => {
  const levels = [];
  for (let v = 10; v <= 250; v += 16) levels.push(v);
  const pool = [];
  for (const r of levels) for (const g of levels) for (const b of levels) pool.push([r, g, b]);
  for (const el of document.querySelectorAll('*')) {
    el.style.setProperty('background-color', 'rgba(255, 255, 255, 0)', 'important');
  }
  const assigned = new Map();
  const wanted = new Set(tags);
  for (const el of document.querySelectorAll('*')) {
    if (!wanted.has(el.localName)) continue;
    const base = pool.pop();
    if (base === undefined) throw new Error('colour pool exhausted');
    assigned.set(el, base);
    const [r, g, b] = base.map(c => (c + shift) % 256);
    el.style.setProperty('color', `rgb(${r}, ${g}, ${b})`, 'important');
    el.style.setProperty('opacity', '1', 'important');
  }
  const texts = [];
  if (!document.body) return texts;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.data.trim();
    if (!text) continue;
    let colour = [0, 0, 0];
    for (let el = node.parentElement; el; el = el.parentElement) {
      if (assigned.has(el)) { colour = assigned.get(el); break; }
    }
    texts.push([text, colour]);
  }
  return texts;
}"""


_PAGE_SIZE = "() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight]"


class RecolouredCapture(NamedTuple):
    """The page as it is, recoloured, recoloured and shifted (whole page, same size), and its
    texts with their assigned colours."""

    page: Image.Image
    first: Image.Image
    second: Image.Image
    texts: list[tuple[str, tuple[int, int, int]]]


def capture_recoloured(
    renderer: Renderer, html: Path, root: Path, viewport: Size
) -> RecolouredCapture:
    """Load `html` (only files under `root` reachable) and take the three captures. A page that
    cannot be loaded or captured raises playwright's error: the detection has no result then."""
    fence = _PageCapture(renderer, html, root, viewport)
    context = fence.new_context()
    # The memory guard watches only while a capture says so (render/guard.py).
    renderer._guard.capturing(True)
    try:
        page = fence.fenced_page(context)
        page.on("dialog", fence._dialog)
        cdp = context.new_cdp_session(page)
        fence._freeze(cdp, page, fence._load(cdp, page))

        def shot() -> Image.Image:
            size = page.evaluate(_PAGE_SIZE)
            clip: Clip = {
                "x": 0,
                "y": 0,
                "width": min(max(size[0], viewport.width), FULL_PAGE_MAX_WIDTH),
                "height": min(max(size[1], viewport.height), FULL_PAGE_MAX_HEIGHT),
            }
            png = page.screenshot(
                full_page=True,
                clip=clip,
                animations="disabled",
                caret="hide",
                timeout=renderer.load_timeout_ms,
            )
            return Image.open(io.BytesIO(png)).convert("RGB")

        original = shot()
        raw = page.evaluate(_RECOLOUR, [list(RECOLOURED_TAGS), 0])
        first = shot()
        page.evaluate(_RECOLOUR, [list(RECOLOURED_TAGS), _SHIFT])
        second = shot()
    finally:
        _quietly(context.close)
        renderer._guard.capturing(False)
    texts = [(str(text), (int(c[0]), int(c[1]), int(c[2]))) for text, c in raw]
    return RecolouredCapture(original, first, second, texts)


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def write_recoloured(capture: RecolouredCapture, folder: Path, side: str) -> None:
    """`<side>.page.png`, `.first.png`, `.second.png` and `.texts.json` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    images = {"page": capture.page, "first": capture.first, "second": capture.second}
    for name, image in images.items():
        atomic.write_bytes(folder / f"{side}.{name}.png", _png(image))
    atomic.write_json(folder / f"{side}.texts.json", [[t, list(c)] for t, c in capture.texts])


def render_recoloured(renderer: Renderer, answer_dir: Path, reference: Path, out: Path) -> str:
    """The captures of the answer and of the task's reference.html (beside `reference`) written
    into out/design2code/; returns "ok" or the error that stopped them, also written there as
    error.txt (score then names it)."""
    folder = out / DESIGN2CODE_DIR
    viewport = _size(reference)
    error = folder / "error.txt"
    try:
        pages = (("answer", answer_dir / "answer.html", answer_dir),
                 ("reference", reference.parent / "reference.html", reference.parent))  # fmt: skip
        for side, html, root in pages:
            write_recoloured(capture_recoloured(renderer, html, root, viewport), folder, side)
    except Exception as exc:  # noqa: BLE001 - recorded for score; the batch goes on
        message = f"{type(exc).__name__}: {exc}".strip()
        folder.mkdir(parents=True, exist_ok=True)
        atomic.write_text(error, message + "\n")
        return message
    if error.exists():
        error.unlink()
    return "ok"


def _size(reference: Path) -> Size:
    with Image.open(reference) as image:
        return Size(width=image.width, height=image.height)
