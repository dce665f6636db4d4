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
- Every capture is bounded (`RenderLimits`, recorded in render.json with the limits it reached):
  the page gets `load_timeout_s` to load; if it has not loaded by then (a script that never
  returns, an alert() loop), its scripts are stopped and what it shows is captured all the same,
  with status `error` and failed step `load`. Once loaded, page scripts are switched off, so the
  capture and the DOM walk see one settled page. The full-page capture covers at most
  `full_page_max_height` x `full_page_max_width` pixels, and the DOM walk lists at most
  `dom_max_entries` texts (and images), none starting below that height. A renderer that grows
  past `renderer_memory_mb` is killed (`guard.py`): failed step `memory`.
- The page cannot leave: alert/confirm/prompt/print return at once (and any dialog that still
  opens is dismissed), window.open returns null (a pop-up that opens anyway is closed), and a
  navigation of the top frame after the answer itself is cancelled, so the page stays as it was
  and is captured.
- A page that breaks (its own scripts, a failed load, a DOM walk that returns junk, a renderer or
  browser crash) yields a `Capture` with status `error` and the step that failed, keeping any
  viewport capture already taken. A browser that died is started again for the next page. Only
  setup problems (a time limit that is not positive, a Chromium that cannot be found or started)
  raise `RenderSetupError`.
- Known limit: the DOM walk runs in the page's own JavaScript world, so an answer that replaces
  built-ins such as `getComputedStyle` could distort `dom.json` (it cannot touch `render.png`).
  Running the walk in an isolated world over CDP would close that gap at the price of a call
  without a time limit.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from playwright._impl._api_structures import Clip, FloatRect
    from playwright.sync_api import BrowserContext, CDPSession, Locator, Page

from veriharness._util import programs as tools
from veriharness.experiment.interactions import Action, Box
from veriharness.render.dom import DOM_SCRIPT, inside, tidy_src
from veriharness.render.guard import MemoryGuard
from veriharness.render.setup import DEFAULT_LOAD_TIMEOUT_S, RenderSetupError
from veriharness.runfolder.render import (
    BlockedRequest,
    Capped,
    DomRecord,
    FailedStep,
    RenderLimits,
    Size,
    Status,
    Timings,
)

__all__ = [
    "CHROMIUM_ARGS",
    "DEFAULT_LOAD_TIMEOUT_S",
    "FULL_PAGE_MAX_HEIGHT",
    "FULL_PAGE_MAX_WIDTH",
    "DOM_MAX_ENTRIES",
    "RENDERER_MEMORY_MB",
    "RenderSetupError",
    "Act",
    "ActResult",
    "Capture",
    "Renderer",
    "add_browser_arguments",
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
    # A first memory fence: V8's heap stops here (the guard covers everything else).
    "--js-flags=--max-old-space-size=384",
]

FULL_PAGE_MAX_HEIGHT = 16_384
FULL_PAGE_MAX_WIDTH = 4_096
DOM_MAX_ENTRIES = 20_000
RENDERER_MEMORY_MB = 512
_ADD_STYLE = """css => {
  const style = document.createElement('style');
  style.textContent = css;
  (document.head || document.documentElement).appendChild(style);
}"""

# Runs first in every document and frame: the page cannot open dialogs or windows, and cannot
# replace itself. The first document (about:blank) must let the answer's own navigation through.
GUARD_SCRIPT = """(() => {
  window.alert = () => undefined;
  window.print = () => undefined;
  window.confirm = () => false;
  window.prompt = () => null;
  window.open = () => null;
  if (window.navigation && location.href !== 'about:blank') {
    navigation.addEventListener('navigate', event => {
      if (!event.destination.sameDocument && event.cancelable) event.preventDefault();
    });
  }
})();"""

# Stops CSS motion so a capture shows the settled page rather than a frame mid-animation.
FREEZE_CSS = (
    "*,*::before,*::after{animation:none!important;transition:none!important;"
    "caret-color:transparent!important;scroll-behavior:auto!important}"
)


# Taken into a replayed page before its action: the focus ring Chromium draws on a clicked
# button would otherwise count as a change the page made (a dead button would look alive).
NO_FOCUS_RING_CSS = ":focus,:focus-visible{outline:none!important}"


class Act(BaseModel):
    """An action to take on the loaded page before it is captured (an interaction's replay)."""

    selector: str
    action: Action
    value: str | None = None


class ActResult(BaseModel):
    """What happened when the action was taken. `trigger_matches` is None when the page never
    got as far as looking (it did not load, or the selector is not valid CSS: `error` says).
    `before_png` is the viewport just before the action."""

    trigger_matches: int | None
    trigger_box: Box | None = None
    acted: bool = False
    error: str | None = None
    before_png: bytes | None = None


class Capture(BaseModel):
    """What one page load produced, before anything is written to disk. With an action, the
    captures and the DOM are of the page after it."""

    status: Status
    failed_step: FailedStep | None = None
    error: str | None = None
    viewport_png: bytes | None = None
    full_png: bytes | None = None
    dom: DomRecord
    timings: Timings
    blocked_requests: list[BlockedRequest] = []
    console_errors: list[str] = []
    page_errors: list[str] = []
    capped: list[Capped] = []
    blocked_navigations: list[str] = []
    dialogs_dismissed: int = 0
    popups_closed: int = 0
    act: ActResult | None = None


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def _quietly(action: Callable[[], object]) -> None:
    """Run a clean-up step on a page that may already be gone."""
    try:
        action()
    except Exception:  # noqa: BLE001 - the page or browser died; nothing left to clean
        pass


class Renderer:
    """One Chromium for many pages; use as a context manager."""

    def __init__(
        self,
        load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S,
        chromium: str | None = None,
        *,
        renderer_memory_mb: int = RENDERER_MEMORY_MB,
    ):
        if not load_timeout_s > 0:
            raise RenderSetupError(f"load timeout must be > 0 seconds, got {load_timeout_s!r}")
        self.load_timeout_ms = load_timeout_s * 1000
        self.limits = RenderLimits(
            load_timeout_s=load_timeout_s,
            full_page_max_height=FULL_PAGE_MAX_HEIGHT,
            full_page_max_width=FULL_PAGE_MAX_WIDTH,
            dom_max_entries=DOM_MAX_ENTRIES,
            renderer_memory_mb=renderer_memory_mb,
        )
        try:
            self.executable = tools.find_chromium(chromium)
        except tools.MissingTool as missing:
            raise RenderSetupError(str(missing)) from missing
        self.launch_ms: float | None = None
        self._launch_reported = False
        self._guard = MemoryGuard(renderer_memory_mb)

    def __enter__(self) -> Renderer:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self._launch()
        except RenderSetupError:
            self._playwright.stop()
            raise
        self._guard.__enter__()
        return self

    def _launch(self) -> None:
        start = time.perf_counter()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=str(self.executable), args=CHROMIUM_ARGS
            )
        except Exception as exc:
            raise RenderSetupError(f"Chromium at {self.executable} did not start: {exc}") from exc
        self.launch_ms = _ms(start)
        self._launch_reported = False

    def __exit__(self, *exc: object) -> None:
        self._guard.__exit__()
        _quietly(self._browser.close)
        self._playwright.stop()

    def _take_launch_ms(self) -> float | None:
        if self._launch_reported:
            return None
        self._launch_reported = True
        return self.launch_ms

    def _alive(self) -> bool:
        """Whether the browser still answers (its disconnection may not have been noticed yet)."""
        if not self._browser.is_connected():
            return False
        try:
            self._browser.new_context().close()
        except Exception:  # noqa: BLE001 - any failure here means the browser is gone
            return False
        return True

    def capture(self, html: Path, root: Path, viewport: Size, act: Act | None = None) -> Capture:
        """Load `html` with only files under `root` reachable, take `act` if given (the page's
        scripts still running), and capture it."""
        if not self._alive():
            self._launch()  # the last page took the browser down with it
        return _PageCapture(self, html, root, viewport, act).run()


class _PageCapture:
    """One page: load it within the limits, capture it, and note what happened on the way."""

    def __init__(
        self, renderer: Renderer, html: Path, root: Path, viewport: Size, act: Act | None = None
    ):
        self.act = act
        self.act_result: ActResult | None = None
        self.renderer = renderer
        self.limits = renderer.limits
        self.url = html.resolve().as_uri()
        self.root = root.resolve()
        self.viewport = viewport
        self.blocked: list[BlockedRequest] = []
        self.navigations: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        self.capped: list[Capped] = []
        self.dialogs = 0
        self.popups = 0
        self.page_requested = False
        self.page: Page | None = None
        self.crashed = False

    def _route(self, route, request) -> None:  # type: ignore[no-untyped-def]
        if request.is_navigation_request() and request.frame.parent_frame is None:
            if self.page_requested:
                # Aborted, not blocked: a blocked navigation would commit an error page.
                self.navigations.append(request.url)
                route.abort("aborted")
                return
            self.page_requested = True
        if inside(request.url, self.root):
            route.continue_()
        else:
            blocked = BlockedRequest(url=request.url, resource_type=request.resource_type)
            self.blocked.append(blocked)
            route.abort("blockedbyclient")

    def _socket(self, ws) -> None:  # type: ignore[no-untyped-def]
        self.blocked.append(BlockedRequest(url=ws.url, resource_type="websocket"))
        ws.close()

    def _dialog(self, dialog) -> None:  # type: ignore[no-untyped-def]
        self.dialogs += 1
        _quietly(dialog.dismiss)

    def _popup(self, page) -> None:  # type: ignore[no-untyped-def]
        if page is not self.page:
            self.popups += 1
            _quietly(page.close)

    def new_context(self) -> BrowserContext:
        """A fresh browser context at the viewport, device scale factor 1."""
        viewport = self.viewport
        return self.renderer._browser.new_context(
            viewport={"width": viewport.width, "height": viewport.height},
            device_scale_factor=1,
            reduced_motion="reduce",
            accept_downloads=False,
            service_workers="block",
        )

    def fenced_page(self, context: BrowserContext) -> Page:
        """The page of `context`, behind the guard script and the network fence."""
        context.add_init_script(GUARD_SCRIPT)
        context.route("**/*", self._route)
        context.route_web_socket("**/*", self._socket)
        self.page = page = context.new_page()
        return page

    def run(self) -> Capture:
        from playwright.sync_api import Error as PlaywrightError

        renderer, viewport = self.renderer, self.viewport
        context = self.new_context()
        launch_ms = renderer._take_launch_ms()
        dom = DomRecord(viewport=viewport, page=viewport, texts=[], images=[])
        self.shot: bytes | None = None
        full = None
        status: Status = "ok"
        step: FailedStep = "load"
        error = None
        start, load_ms = time.perf_counter(), 0.0
        renderer._guard.capturing(True)
        try:
            page = self.fenced_page(context)
            context.on("page", self._popup)
            page.on("console", lambda m: self.console.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: self.errors.append(str(e)))
            page.on("dialog", self._dialog)
            page.on("crash", self._crash)
            cdp = context.new_cdp_session(page)
            loaded = self._load(cdp, page)
            if self.act is not None:
                self.act_result = self._act(cdp, page, self.act, loaded)
            self._freeze(cdp, page, loaded)
            load_ms, start = _ms(start), time.perf_counter()
            step = "capture"
            self.shot = page.screenshot(
                animations="disabled", caret="hide", timeout=renderer.load_timeout_ms
            )
            step = "dom"
            walk_limits = {
                "height": self.limits.full_page_max_height,
                "entries": self.limits.dom_max_entries,
            }
            raw = page.evaluate(DOM_SCRIPT, walk_limits)
            self._note_dom_caps(raw["capped"])
            for image in raw["images"]:
                image["src"] = tidy_src(image["src"], self.root)
            dom = DomRecord(
                viewport=viewport, page=raw["page"], texts=raw["texts"], images=raw["images"]
            )
            step = "full_capture"
            full = self._full_capture(page, dom.page)
            if not loaded:
                status, step = "error", "load"
                error = (
                    f"the page did not finish loading within {self.limits.load_timeout_s} s; "
                    "its scripts were stopped and what it showed was captured"
                )
        except (PlaywrightError, ValidationError, KeyError, TypeError) as exc:
            # The answer's own scripts can break the page or the DOM walk: a result, not a crash.
            # A viewport capture already taken is kept; render.json says what failed.
            status, error = "error", str(exc).strip()
            load_ms = load_ms or _ms(start)
            kills = renderer._guard.take_kills()
            if kills:
                error = (
                    f"the page's renderer grew past {self.limits.renderer_memory_mb} MB "
                    f"({kills[0][1]} MB) and was stopped during the {step} step: {error}"
                )
                step = "memory"
            elif not renderer._alive():
                error = f"the browser stopped during the {step} step: {error}"
                step = "browser"
        finally:
            _quietly(context.close)
            renderer._guard.capturing(False)
        return Capture(
            status=status,
            failed_step=step if status == "error" else None,
            error=error,
            viewport_png=self.shot,
            full_png=full,
            dom=dom,
            timings=Timings(launch_ms=launch_ms, load_ms=load_ms, capture_ms=_ms(start)),
            blocked_requests=self.blocked,
            console_errors=self.console,
            page_errors=self.errors,
            capped=self.capped,
            blocked_navigations=self.navigations,
            dialogs_dismissed=self.dialogs,
            popups_closed=self.popups,
            act=self.act_result,
        )

    def _load(self, cdp: CDPSession, page: Page) -> bool:
        """Load the page within the limit. False when the limit ran out first (the scripts are
        stopped where they were)."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        timeout = self.renderer.load_timeout_ms
        page.goto(self.url, wait_until="commit", timeout=timeout)
        try:
            page.wait_for_load_state("load", timeout=timeout)
            page.add_style_tag(content=FREEZE_CSS)
            page.wait_for_function("() => document.fonts.ready.then(() => true)", timeout=timeout)
            loaded = True
        except PlaywrightTimeout:
            self.capped.append("load_time")
            self._send(cdp, "Runtime.terminateExecution")
            loaded = False
        return loaded

    def _act(self, cdp: CDPSession, page: Page, act: Act, loaded: bool) -> ActResult:
        """Take the action on the one element `act.selector` matches, with the page's scripts
        running, and wait two frames for what it changes to be painted. An action that fails
        or does not end within the load limit has its scripts stopped and is recorded."""
        from playwright.sync_api import Error as PlaywrightError

        if not loaded:
            return ActResult(trigger_matches=None, error="the page did not load; no action taken")
        timeout = self.renderer.load_timeout_ms
        page.add_style_tag(content=NO_FOCUS_RING_CSS)
        before = page.screenshot(animations="disabled", caret="hide", timeout=timeout)
        locator = page.locator(act.selector)
        try:
            matches = locator.count()
        except PlaywrightError as exc:
            return ActResult(trigger_matches=None, error=_first_line(exc), before_png=before)
        if matches != 1:
            return ActResult(trigger_matches=matches, before_png=before)
        try:
            found = locator.bounding_box(timeout=timeout)
            box = None if found is None else _box(found)
            _perform(locator, act, timeout)
            if act.action != "hover":
                # Off the page: the clicked element's hover style is not the action's effect.
                page.mouse.move(-10, -10)
            # Back to the top, so the after-state is captured where the before-state was.
            page.evaluate("window.scrollTo(0, 0)")
            page.wait_for_function(_TWO_FRAMES, timeout=timeout)
        except PlaywrightError as exc:
            self._send(cdp, "Runtime.terminateExecution")
            _quietly(lambda: page.evaluate("0"))
            return ActResult(trigger_matches=1, error=_first_line(exc), before_png=before)
        return ActResult(trigger_matches=1, trigger_box=box, acted=True, before_png=before)

    def _crash(self, _page: Page) -> None:
        self.crashed = True

    def _send(self, cdp: CDPSession, method: str, params: dict[str, bool] | None = None) -> None:
        """A DevTools command to the page; raised as a page error when its renderer has gone
        (the memory guard's kill): a command to a crashed page is never answered, and the
        render would wait on it for ever."""
        from playwright.sync_api import Error as PlaywrightError

        if self.crashed:
            raise PlaywrightError(f"the page crashed before {method}")
        cdp.send(method, params)

    def _freeze(self, cdp: CDPSession, page: Page, loaded: bool) -> None:
        """Switch the page's scripts off, so the capture and the DOM walk see one settled page."""
        self._send(cdp, "Emulation.setScriptExecutionDisabled", {"value": True})
        if not loaded:
            # A termination still pending would end the next evaluation: let this one take it.
            _quietly(lambda: page.evaluate("0"))
            # add_style_tag would wait for a load event that no longer comes.
            page.evaluate(_ADD_STYLE, FREEZE_CSS)

    def _note_dom_caps(self, capped: dict[str, bool]) -> None:
        names: dict[str, Capped] = {
            "height": "dom_height",
            "texts": "dom_texts",
            "images": "dom_images",
        }
        self.capped.extend(name for key, name in names.items() if capped.get(key))

    def _full_capture(self, page: Page, size: Size) -> bytes | None:
        if size.height <= self.viewport.height:
            return None
        height = min(size.height, self.limits.full_page_max_height)
        width = min(size.width, self.limits.full_page_max_width)
        if width < size.width:
            self.capped.append("full_page_width")
        clip: Clip = {"x": 0, "y": 0, "width": width, "height": height}
        if height < size.height:
            # A full-page capture lays out and paints the whole page however tall it is (minutes
            # and gigabytes for a page millions of pixels tall); a viewport of the capped height
            # paints only what is kept. Units of the viewport height (vh) grow with it.
            self.capped.append("full_page_height")
            page.set_viewport_size({"width": self.viewport.width, "height": height})
            return page.screenshot(
                clip=clip,
                animations="disabled",
                caret="hide",
                timeout=self.renderer.load_timeout_ms,
            )
        return page.screenshot(
            full_page=True,
            clip=clip,
            animations="disabled",
            caret="hide",
            timeout=self.renderer.load_timeout_ms,
        )


def add_browser_arguments(parser: argparse.ArgumentParser) -> None:
    """`--load-timeout` and `--chromium`, for every verb that opens pages in a `Renderer`."""
    parser.add_argument(
        "--load-timeout",
        type=float,
        default=DEFAULT_LOAD_TIMEOUT_S,
        metavar="SECONDS",
        help="page-load time limit (default %(default)s)",
    )
    parser.add_argument("--chromium", default=None, help="Chromium binary (default: Debian's)")


# Resolves after two animation frames: what an action changed has then been painted.
_TWO_FRAMES = (
    "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(1))))"
)


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _box(found: FloatRect) -> Box:
    return Box(
        x=round(found["x"]),
        y=round(found["y"]),
        width=round(found["width"]),
        height=round(found["height"]),
    )


def _perform(locator: Locator, act: Act, timeout: float) -> None:
    value = act.value or ""
    if act.action == "click":
        locator.click(timeout=timeout)
    elif act.action == "hover":
        locator.hover(timeout=timeout)
    elif act.action == "type":
        locator.press_sequentially(value, timeout=timeout)
    elif act.action == "select":
        locator.select_option(value, timeout=timeout)
    else:
        locator.press(value, timeout=timeout)
