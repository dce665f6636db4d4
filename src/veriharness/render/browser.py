"""Browser session for rendering: one Debian Chromium, a fresh context per page, a closed network.

Design notes
- Pages are captured at the viewport size the caller gives, at device scale factor 1. A second,
  full-page capture is taken only when the page is taller than the viewport.
- The network is closed by a context-wide route: a request is let through only when it is a
  `file://` URL whose resolved path lies inside the page's own folder (the answer folder, or the
  task folder for a reference) or a `data:` URL (which never reaches the route). Everything else,
  WebSockets included, is aborted and listed in `blocked_requests`. As a second fence Chromium
  resolves no host names at all, so even a request that somehow escaped the route could not reach a
  named remote host.
- One browser serves a whole batch; each page gets a fresh context, so nothing (cache, storage,
  routes) carries over from one answer to the next.
- A page that breaks (its own scripts, a failed load, a DOM walk that returns junk) yields a
  `Capture` with status `error`, keeping any viewport capture already taken. Only setup problems
  (a time limit that is not positive, a Chromium that cannot be found or started) raise
  `RenderSetupError`.
- Known limit: the DOM walk runs in the page's own JavaScript world, so an answer that replaces
  built-ins such as `getComputedStyle` could distort `dom.json` (it cannot touch `render.png`).
  Running the walk in an isolated world over CDP would close that gap at the price of a call
  without a time limit.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from veriharness._util import programs as tools
from veriharness.render.dom import (
    DOM_SCRIPT,
    BlockedRequest,
    DomRecord,
    Size,
    Status,
    Timings,
    inside,
    tidy_src,
)

__all__ = [
    "CHROMIUM_ARGS",
    "DEFAULT_LOAD_TIMEOUT_S",
    "RenderSetupError",
    "Capture",
    "Renderer",
]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    # Chromium otherwise re-rasters only the invalidated part of a tile after the freeze style
    # lands, keeping edge pixels from the earlier pass: rounded corners then came out one level
    # different in about one capture in five. Whole-tile raster makes captures repeatable.
    "--disable-partial-raster",
    # Second fence behind the route: no host name resolves, so no DNS query leaves either.
    "--host-resolver-rules=MAP * ~NOTFOUND",
]

DEFAULT_LOAD_TIMEOUT_S = 30.0

# Stops CSS motion so a capture shows the settled page rather than a frame mid-animation.
FREEZE_CSS = (
    "*,*::before,*::after{animation:none!important;transition:none!important;"
    "caret-color:transparent!important;scroll-behavior:auto!important}"
)


class RenderSetupError(RuntimeError):
    """The stage cannot run at all: no Chromium, or arguments it cannot use."""


class Capture(BaseModel):
    """What one page load produced, before anything is written to disk."""

    status: Status
    error: str | None = None
    viewport_png: bytes | None = None
    full_png: bytes | None = None
    dom: DomRecord
    timings: Timings
    blocked_requests: list[BlockedRequest] = []
    console_errors: list[str] = []
    page_errors: list[str] = []


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


class Renderer:
    """One Chromium for many pages; use as a context manager."""

    def __init__(self, load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S, chromium: str | None = None):
        if not load_timeout_s > 0:
            raise RenderSetupError(f"load timeout must be > 0 seconds, got {load_timeout_s!r}")
        self.load_timeout_ms = load_timeout_s * 1000
        try:
            self.executable = tools.find_chromium(chromium)
        except tools.MissingTool as missing:
            raise RenderSetupError(str(missing)) from missing
        self.launch_ms: float | None = None
        self._launch_reported = False

    def __enter__(self) -> Renderer:
        from playwright.sync_api import sync_playwright

        start = time.perf_counter()
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=str(self.executable), args=CHROMIUM_ARGS
            )
        except Exception as exc:
            self._playwright.stop()
            raise RenderSetupError(f"Chromium at {self.executable} did not start: {exc}") from exc
        self.launch_ms = _ms(start)
        return self

    def __exit__(self, *exc: object) -> None:
        self._browser.close()
        self._playwright.stop()

    def _take_launch_ms(self) -> float | None:
        if self._launch_reported:
            return None
        self._launch_reported = True
        return self.launch_ms

    def capture(self, html: Path, root: Path, viewport: Size) -> Capture:
        """Load `html` with only files under `root` reachable, and capture it."""
        from playwright.sync_api import Error as PlaywrightError

        root = root.resolve()
        blocked: list[BlockedRequest] = []
        console: list[str] = []
        errors: list[str] = []

        def route(route, request) -> None:  # type: ignore[no-untyped-def]
            if inside(request.url, root):
                route.continue_()
            else:
                blocked.append(BlockedRequest(url=request.url, resource_type=request.resource_type))
                route.abort("blockedbyclient")

        def socket(ws) -> None:  # type: ignore[no-untyped-def]
            blocked.append(BlockedRequest(url=ws.url, resource_type="websocket"))
            ws.close()

        context = self._browser.new_context(
            viewport={"width": viewport.width, "height": viewport.height},
            device_scale_factor=1,
            reduced_motion="reduce",
            accept_downloads=False,
            service_workers="block",
        )
        launch_ms = self._take_launch_ms()
        dom = DomRecord(viewport=viewport, page=viewport, texts=[], images=[])
        shot = full = None
        start, load_ms = time.perf_counter(), 0.0
        try:
            context.route("**/*", route)
            context.route_web_socket("**/*", socket)
            page = context.new_page()
            page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            timeout = self.load_timeout_ms
            page.goto(html.resolve().as_uri(), wait_until="load", timeout=timeout)
            page.add_style_tag(content=FREEZE_CSS)
            page.wait_for_function("() => document.fonts.ready.then(() => true)", timeout=timeout)
            load_ms, start = _ms(start), time.perf_counter()
            shot = page.screenshot(animations="disabled", caret="hide", timeout=timeout)
            raw = page.wait_for_function(DOM_SCRIPT, timeout=timeout).json_value()
            for image in raw["images"]:
                image["src"] = tidy_src(image["src"], root)
            dom = DomRecord(
                viewport=viewport, page=raw["page"], texts=raw["texts"], images=raw["images"]
            )
            if dom.page.height > viewport.height:
                full = page.screenshot(
                    full_page=True, animations="disabled", caret="hide", timeout=timeout
                )
            status, error = "ok", None
        except (PlaywrightError, ValidationError, KeyError, TypeError) as exc:
            # The answer's own scripts can break the page or the DOM walk: a result, not a crash.
            # A viewport capture already taken is kept; render.json says what failed.
            status, error = "error", str(exc).strip()
            load_ms = load_ms or _ms(start)
        finally:
            context.close()
        return Capture(
            status=status,
            error=error,
            viewport_png=shot,
            full_png=full,
            dom=dom,
            timings=Timings(launch_ms=launch_ms, load_ms=load_ms, capture_ms=_ms(start)),
            blocked_requests=blocked,
            console_errors=console,
            page_errors=errors,
        )
