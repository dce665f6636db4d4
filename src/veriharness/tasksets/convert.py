"""One source page into one task folder, and the pages of a source into a task set.

A page is accepted only when it is a clean reference: every file it loads is local, inside the
source folder and present; it renders in Chromium with nothing blocked, no page or console error;
and its render shows text. Anything else is a `SkippedPage` with its reason, listed in the
manifest and the verb's summary, never dropped silently. A page taller than its first viewport
is rendered again at its own height, so the reference shows the whole page (P-46). An
Interaction2Code page is then given the interactions of its action.json that replay on its
reference (`interaction2code`), and rendered once more with them, which writes their states;
a page none of whose interactions replays is skipped, as a static page would drop what the set
measures (P-50).

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
from veriharness.experiment.config import ConfigError, SourceInteraction, load_task
from veriharness.experiment.interactions import Interaction
from veriharness.experiment.task_set import (
    MANIFEST,
    Layout,
    SetImporter,
    SetSource,
    SkippedInteraction,
    SkippedPage,
    SkipReason,
    TaskSetManifest,
    set_files,
)
from veriharness.render.browser import FULL_PAGE_MAX_HEIGHT, Renderer, RenderSetupError
from veriharness.render.command import UncleanReference, render_reference
from veriharness.runfolder.render import DomRecord, Size
from veriharness.score.metrics.refs import page_references
from veriharness.tasksets.interaction2code import ACTIONS_FILE, import_interactions
from veriharness.tasksets.layouts import SourcePage, task_id_for

__all__ = [
    "IMPORTER_VERSION",
    "SetDescription",
    "Converted",
    "Imported",
    "Skip",
    "convert_page",
    "import_set",
    "prepare_destination",
]

# What the converter does to a page; bump it when that changes (recorded in every manifest).
IMPORTER_VERSION = "2"  # 2: an interaction chained to another is skipped

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
    """A page that cannot become a task; carries the manifest's entry (and, for an
    Interaction2Code page, its interactions that were not imported)."""

    def __init__(self, page: SkippedPage, interactions: tuple[SkippedInteraction, ...] = ()):
        super().__init__(f"{page.page}: {page.reason}: {page.detail}")
        self.page = page
        self.interactions = interactions


@dataclass(frozen=True)
class Converted:
    folder: Path
    renders: int
    source_files: dict[str, str]
    """Source-relative path -> sha256 of every source file the task was made from."""
    skipped_interactions: tuple[SkippedInteraction, ...] = ()
    interactions: int = 0


@dataclass(frozen=True)
class Imported:
    manifest: TaskSetManifest
    renders: int
    interactions: int


def _skip(page: SourcePage, reason: SkipReason, detail: str) -> Skip:
    return Skip(SkippedPage(page=page.name, reason=reason, detail=detail))


def _root(page: SourcePage, described: SetDescription) -> Path:
    """The folder a page's local files must be in (and are copied from)."""
    return page.folder if page.folder is not None else described.source


def _local_assets(page: SourcePage, source: Path) -> list[Path]:
    """The local files the page loads (relative to `source`, the page's root), refused when
    remote, missing, outside the folder or named like a task file."""
    references = page_references(page.html, source)
    remote = sorted({r.value for r in references if r.kind == "remote"})
    if remote:
        raise _skip(page, "remote_resources", "loads " + ", ".join(remote))
    root = source.resolve()
    assets: set[Path] = set()
    for ref in references:
        if ref.kind != "local" or ref.path is None:
            continue
        if not ref.path.is_relative_to(root):
            raise _skip(page, "asset_outside_folder", f"{ref.value!r} resolves to {ref.path}")
        if not ref.path.is_file():
            raise _skip(page, "missing_asset", f"{ref.value!r} ({ref.path}) is not a file")
        relative = ref.path.relative_to(root)
        if relative.as_posix() in _TASK_NAMES:
            raise _skip(page, "asset_name_clash", f"{ref.value!r} is named like a task file")
        if ref.path != page.html.resolve():
            assets.add(relative)
    return sorted(assets)


def _title(html: Path) -> str:
    text = html.read_text(encoding="utf-8", errors="replace")
    found = _TITLE.search(text)
    title = " ".join(unescape(found.group(1)).split()) if found else ""
    return title or f"Page {html.name}"


@dataclass(frozen=True)
class _Given:
    """An Interaction2Code page's interactions and where they came from."""

    interactions: list[Interaction]
    sources: list[SourceInteraction]


def _relative(path: Path, described: SetDescription) -> str:
    return path.relative_to(described.source).as_posix()


def _task_yaml(
    task_id: str,
    page: SourcePage,
    viewport: Size,
    described: SetDescription,
    given: _Given | None = None,
) -> dict[str, object]:
    source: dict[str, object] = {
        "layout": described.layout,
        "page": _relative(page.html, described),
        "page_sha256": sha256_file(page.html),
    }
    if page.screenshot is not None:
        source |= {
            "screenshot": _relative(page.screenshot, described),
            "screenshot_sha256": sha256_file(page.screenshot),
        }
    content: dict[str, object] = {
        "id": task_id,
        "title": _title(page.html),
        "kind": "web_page",
        "description": (
            f"Page {page.name} of the task set {described.name!r} "
            f"({described.layout} layout), imported by veriharness import-tasks."
        ),
        "viewport": {"width": viewport.width, "height": viewport.height},
    }
    if given is not None and page.folder is not None:
        actions = page.folder / ACTIONS_FILE
        source |= {
            "actions": _relative(actions, described),
            "actions_sha256": sha256_file(actions),
            "interactions": [s.model_dump() for s in given.sources],
        }
        content["interactions"] = [i.model_dump(exclude_none=True) for i in given.interactions]
    return content | {"source": source}


def _source_files(
    page: SourcePage, assets: list[Path], described: SetDescription, given: _Given | None
) -> dict[str, str]:
    root = _root(page, described)
    paths = [page.html, *(root / a for a in assets)]
    paths += [page.screenshot] if page.screenshot is not None else []
    if given is not None and page.folder is not None:
        paths.append(page.folder / ACTIONS_FILE)
        for source in given.sources:
            paths += [described.source / source.before, described.source / source.after]
    return {_relative(p, described): sha256_file(p) for p in sorted(set(paths))}


def _write_task_yaml(folder: Path, content: dict[str, object]) -> None:
    atomic.write_text(folder / "task.yaml", yaml.safe_dump(content, sort_keys=False))


def _render(renderer: Renderer, folder: Path, page: SourcePage) -> DomRecord:
    try:
        return render_reference(renderer, folder)
    except UncleanReference as exc:
        if exc.blocked:
            raise _skip(page, "remote_resources", "requested " + ", ".join(exc.blocked)) from None
        raise _skip(page, "render_failed", "; ".join(exc.problems)) from None
    except RenderSetupError as exc:
        raise _skip(page, "render_failed", str(exc)) from None


def _fitted(
    renderer: Renderer,
    page: SourcePage,
    task_id: str,
    folder: Path,
    described: SetDescription,
) -> tuple[Size, int]:
    """Render the static page, again at its own height when taller than its first viewport;
    returns the viewport the task keeps and the renders it took."""
    assert page.viewport is not None
    _write_task_yaml(folder, _task_yaml(task_id, page, page.viewport, described))
    dom = _render(renderer, folder, page)
    renders = 1
    first, first_height = page.viewport, dom.page.height
    viewport = first
    if first_height > first.height:
        if dom.page.height > FULL_PAGE_MAX_HEIGHT:
            raise _skip(
                page,
                "too_tall",
                f"the page is {dom.page.height} px tall, more than {FULL_PAGE_MAX_HEIGHT}",
            )
        viewport = Size(width=first.width, height=dom.page.height)
        _write_task_yaml(folder, _task_yaml(task_id, page, viewport, described))
        dom = _render(renderer, folder, page)
        renders += 1
        if dom.page.height > viewport.height:
            raise _skip(
                page,
                "too_tall",
                f"the page grows with the viewport: {first_height} px tall at a "
                f"{first.height} px viewport, {dom.page.height} px at {viewport.height} px",
            )
    if not any(box.text.strip() for box in dom.texts):
        raise _skip(page, "no_text", "its render shows no text")
    return viewport, renders


def _interactive(
    renderer: Renderer,
    page: SourcePage,
    task_id: str,
    folder: Path,
    viewport: Size,
    described: SetDescription,
) -> tuple[_Given, tuple[SkippedInteraction, ...], int]:
    """Give an Interaction2Code page the interactions that replay on its reference, and render
    it with them (which writes their states); returns them, the others, and the renders."""
    assert page.folder is not None
    found = import_interactions(
        renderer, folder, task_id, page.folder / ACTIONS_FILE, described.source, viewport
    )
    skipped = tuple(found.skipped)
    if not found.interactions:
        reasons = ", ".join(f"{s.interaction}: {s.reason}" for s in skipped)
        raise Skip(
            SkippedPage(
                page=page.name,
                reason="no_interactions",
                detail=f"none of its interactions replays on the saved page ({reasons})",
            ),
            skipped,
        )
    given = _Given(found.interactions, found.sources)
    _write_task_yaml(folder, _task_yaml(task_id, page, viewport, described, given))
    try:
        _render(renderer, folder, page)
    except Skip as skip:
        raise Skip(skip.page, skipped) from None
    return given, skipped, 1


def convert_page(
    renderer: Renderer, page: SourcePage, task_id: str, staging: Path, described: SetDescription
) -> Converted:
    """Build the task folder of one page under `staging`. Raises `Skip` when the page cannot be
    a clean reference (or, from Interaction2Code, has no interaction that replays on it)."""
    if page.problem is not None or page.viewport is None:
        raise _skip(page, page.problem_reason, page.problem or "no viewport")
    root = _root(page, described)
    assets = _local_assets(page, root)
    folder = staging / task_id
    folder.mkdir(parents=True)
    shutil.copyfile(page.html, folder / "reference.html")
    for relative in assets:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / relative, folder / relative)
    viewport, renders = _fitted(renderer, page, task_id, folder, described)
    given: _Given | None = None
    skipped: tuple[SkippedInteraction, ...] = ()
    if page.folder is not None:
        given, skipped, more = _interactive(renderer, page, task_id, folder, viewport, described)
        renders += more
    try:
        load_task(staging, task_id)
    except ConfigError as exc:  # the converter's own output must be a valid task
        raise RuntimeError(f"import-tasks wrote an invalid task: {exc}") from exc
    files = _source_files(page, assets, described, given)
    count = 0 if given is None else len(given.interactions)
    return Converted(folder, renders, files, skipped, count)


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
    skipped_interactions: list[SkippedInteraction] = []
    source_files: dict[str, str] = {}
    renders = interactions = 0
    try:
        for page in pages:
            task_id = task_id_for(page.folder or page.html, described.id_prefix)
            if task_id in seen:
                skipped.append(
                    SkippedPage(
                        page=page.name,
                        reason="duplicate_id",
                        detail=f"another page of the source already has task id {task_id!r}",
                    )
                )
                continue
            seen.add(task_id)
            try:
                converted = convert_page(renderer, page, task_id, staging, described)
            except Skip as skip:
                skipped.append(skip.page)
                skipped_interactions += skip.interactions
                shutil.rmtree(staging / task_id, ignore_errors=True)
                continue
            renders += converted.renders
            interactions += converted.interactions
            skipped_interactions += converted.skipped_interactions
            source_files |= converted.source_files
            converted.folder.rename(dest / task_id)
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
        skipped_interactions=skipped_interactions,
        source_files=dict(sorted(source_files.items())),
    )
    atomic.write_text(
        dest / MANIFEST,
        yaml.safe_dump(manifest.model_dump(mode="json"), sort_keys=False, width=100),
    )
    return Imported(manifest, renders, interactions)
