"""One source page into one task folder, and the pages of a source into a task set.

A page is accepted only when it is a clean reference: every file it loads is local, inside the
source folder and present; it renders in Chromium with nothing blocked, no page or console error;
and its render shows text. Anything else is a `SkippedPage` with its reason, listed in the
manifest and the verb's summary, never dropped silently. A page taller than its first viewport
is rendered again at its own height, so the reference shows the whole page (P-46).

Each task is built in a hidden staging folder and moved into the set only once accepted, so a
skipped page leaves nothing behind.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from html import unescape
from pathlib import Path

import yaml

from veriharness._util import atomic
from veriharness._util.harness import harness_version
from veriharness._util.hashing import sha256_file
from veriharness.experiment.config import ConfigError, load_task
from veriharness.experiment.task_set import (
    MANIFEST,
    Layout,
    SetImporter,
    SetSource,
    SkippedPage,
    SkipReason,
    TaskSetManifest,
    set_files,
)
from veriharness.render.browser import FULL_PAGE_MAX_HEIGHT, Renderer, RenderSetupError
from veriharness.render.command import UncleanReference, render_reference
from veriharness.runfolder.render import DomRecord, Size
from veriharness.score.metrics.refs import page_references
from veriharness.tasksets.layouts import SourcePage, task_id_for

__all__ = [
    "IMPORTER_VERSION",
    "SetDescription",
    "Imported",
    "Skip",
    "convert_page",
    "import_set",
    "prepare_destination",
]

# What the converter does to a page; bump it when that changes (recorded in every manifest).
IMPORTER_VERSION = "1"

STAGING = ".import-staging"
# Files a task folder holds by name: a page's own asset of the same name would be overwritten.
_TASK_NAMES = {"task.yaml", "reference.html", "reference.png", "reference_dom.json"}
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class SetDescription:
    name: str
    description: str
    version: str
    layout: Layout
    source: Path
    id_prefix: str


class Skip(Exception):
    """A page that cannot become a task; carries the manifest's entry."""

    def __init__(self, page: SkippedPage):
        super().__init__(f"{page.page}: {page.reason}: {page.detail}")
        self.page = page


@dataclass(frozen=True)
class Imported:
    manifest: TaskSetManifest
    renders: int


def _skip(page: Path, reason: SkipReason, detail: str) -> Skip:
    return Skip(SkippedPage(page=page.name, reason=reason, detail=detail))


def _local_assets(page: SourcePage, source: Path) -> list[Path]:
    """The local files the page loads (relative to the source folder), refused when remote,
    missing, outside the folder or named like a task file."""
    references = page_references(page.html, source)
    remote = sorted({r.value for r in references if r.kind == "remote"})
    if remote:
        raise _skip(page.html, "remote_resources", "loads " + ", ".join(remote))
    root = source.resolve()
    assets: set[Path] = set()
    for ref in references:
        if ref.kind != "local" or ref.path is None:
            continue
        if not ref.path.is_relative_to(root):
            raise _skip(page.html, "asset_outside_folder", f"{ref.value!r} resolves to {ref.path}")
        if not ref.path.is_file():
            raise _skip(page.html, "missing_asset", f"{ref.value!r} ({ref.path}) is not a file")
        relative = ref.path.relative_to(root)
        if relative.as_posix() in _TASK_NAMES:
            raise _skip(page.html, "asset_name_clash", f"{ref.value!r} is named like a task file")
        if ref.path != page.html.resolve():
            assets.add(relative)
    return sorted(assets)


def _title(html: Path) -> str:
    text = html.read_text(encoding="utf-8", errors="replace")
    found = _TITLE.search(text)
    title = " ".join(unescape(found.group(1)).split()) if found else ""
    return title or f"Page {html.name}"


def _task_yaml(
    task_id: str, page: SourcePage, viewport: Size, described: SetDescription
) -> dict[str, object]:
    source: dict[str, object] = {
        "layout": described.layout,
        "page": page.html.name,
        "page_sha256": sha256_file(page.html),
    }
    if page.screenshot is not None:
        source |= {
            "screenshot": page.screenshot.name,
            "screenshot_sha256": sha256_file(page.screenshot),
        }
    return {
        "id": task_id,
        "title": _title(page.html),
        "kind": "web_page",
        "description": (
            f"Page {page.html.name} of the task set {described.name!r} "
            f"({described.layout} layout), imported by veriharness import-tasks."
        ),
        "viewport": {"width": viewport.width, "height": viewport.height},
        "interaction": None,
        "source": source,
    }


def _write_task_yaml(folder: Path, content: dict[str, object]) -> None:
    atomic.write_text(folder / "task.yaml", yaml.safe_dump(content, sort_keys=False))


def _render(renderer: Renderer, folder: Path, page: Path) -> DomRecord:
    try:
        return render_reference(renderer, folder)
    except UncleanReference as exc:
        if exc.blocked:
            raise _skip(page, "remote_resources", "requested " + ", ".join(exc.blocked)) from None
        raise _skip(page, "render_failed", "; ".join(exc.problems)) from None
    except RenderSetupError as exc:
        raise _skip(page, "render_failed", str(exc)) from None


def convert_page(
    renderer: Renderer, page: SourcePage, task_id: str, staging: Path, described: SetDescription
) -> tuple[Path, int]:
    """Build the task folder of one page under `staging`; returns it and the renders it took.
    Raises `Skip` when the page cannot be a clean reference."""
    if page.problem is not None or page.viewport is None:
        raise _skip(page.html, "no_screenshot", page.problem or "no viewport")
    assets = _local_assets(page, described.source)
    folder = staging / task_id
    folder.mkdir(parents=True)
    shutil.copyfile(page.html, folder / "reference.html")
    for relative in assets:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(described.source / relative, folder / relative)
    content = _task_yaml(task_id, page, page.viewport, described)
    _write_task_yaml(folder, content)
    dom = _render(renderer, folder, page.html)
    renders = 1
    first, first_height = page.viewport, dom.page.height
    if first_height > first.height:
        if dom.page.height > FULL_PAGE_MAX_HEIGHT:
            raise _skip(
                page.html,
                "too_tall",
                f"the page is {dom.page.height} px tall, more than {FULL_PAGE_MAX_HEIGHT}",
            )
        fitted = Size(width=first.width, height=dom.page.height)
        _write_task_yaml(folder, _task_yaml(task_id, page, fitted, described))
        dom = _render(renderer, folder, page.html)
        renders += 1
        if dom.page.height > fitted.height:
            raise _skip(
                page.html,
                "too_tall",
                f"the page grows with the viewport: {first_height} px tall at a "
                f"{first.height} px viewport, {dom.page.height} px at {fitted.height} px",
            )
    if not any(box.text.strip() for box in dom.texts):
        raise _skip(page.html, "no_text", "its render shows no text")
    try:
        load_task(staging, task_id)
    except ConfigError as exc:  # the converter's own output must be a valid task
        raise RuntimeError(f"import-tasks wrote an invalid task: {exc}") from exc
    return folder, renders


def prepare_destination(dest: Path) -> None:
    """Make `dest`, refusing one that exists and is not an empty folder."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise FileExistsError(
            f"destination {dest} exists and is not an empty folder; import into a new folder "
            "(a set is never merged into or overwritten)"
        )
    dest.mkdir(parents=True, exist_ok=True)


def import_set(
    renderer: Renderer, pages: list[SourcePage], described: SetDescription, dest: Path
) -> Imported:
    """Convert every page into `dest/<task>/` and write `dest/manifest.yaml`."""
    prepare_destination(dest)
    staging = dest / STAGING
    tasks: list[str] = []
    seen: set[str] = set()
    skipped: list[SkippedPage] = []
    renders = 0
    try:
        for page in pages:
            task_id = task_id_for(page.html, described.id_prefix)
            if task_id in seen:
                skipped.append(
                    SkippedPage(
                        page=page.html.name,
                        reason="duplicate_id",
                        detail=f"another page of the source already has task id {task_id!r}",
                    )
                )
                continue
            seen.add(task_id)
            try:
                folder, used = convert_page(renderer, page, task_id, staging, described)
            except Skip as skip:
                skipped.append(skip.page)
                shutil.rmtree(staging / task_id, ignore_errors=True)
                continue
            renders += used
            folder.rename(dest / task_id)
            tasks.append(task_id)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    version = harness_version()
    manifest = TaskSetManifest(
        name=described.name,
        description=described.description,
        version=described.version,
        tasks=tasks,
        source=SetSource(layout=described.layout, path=str(described.source), pages=len(pages)),
        importer=SetImporter(
            version=IMPORTER_VERSION,
            harness_version=version.version,
            git_commit=version.git_commit,
            git_dirty=version.git_dirty,
        ),
        files=set_files(dest, tasks),
        skipped=skipped,
    )
    atomic.write_text(
        dest / MANIFEST,
        yaml.safe_dump(manifest.model_dump(mode="json"), sort_keys=False, width=100),
    )
    return Imported(manifest, renders)
