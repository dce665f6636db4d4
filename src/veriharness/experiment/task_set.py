"""A task set: a folder of task folders with a `manifest.yaml` saying what the set is.

The manifest has a human `version` (for people) and, for an imported set, the sha256 of every
file of every task (the source of truth, P-45). `check-experiment` verifies those checksums
against the files and records the set's name, version and the manifest's own digest in
`experiment.json` (`task_set`); a changed, missing or unlisted file refuses the start, named.
The set's digest is recorded, never hashed into a cell: each cell's identity already holds its
own task's files, and a set-wide digest would redo every run when one page is added.

A hand-kept set (the nine examples) has a manifest without `files`: it is recorded with
`files_verified: null`, and a task folder its `tasks` does not list (or a listed one that is
gone) is warned of at the start (`manifest_warnings`), since no checksum would catch it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from veriharness._util.hashing import sha256_file
from veriharness._util.yaml_text import load_yaml
from veriharness.experiment.config import ConfigError

__all__ = [
    "MANIFEST",
    "IMPORT_LAYOUTS",
    "Layout",
    "SkippedInteraction",
    "SkippedInteractionReason",
    "SkippedPage",
    "SkipReason",
    "SetSource",
    "SetImporter",
    "TaskSetManifest",
    "TaskSetRecord",
    "set_files",
    "read_manifest",
    "verify_manifest",
    "manifest_warnings",
    "task_set_record",
]

MANIFEST = "manifest.yaml"
Layout = Literal["design2code", "html-folder", "interaction2code"]
IMPORT_LAYOUTS: tuple[Layout, ...] = ("design2code", "html-folder", "interaction2code")

_Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]

SkipReason = Literal[
    "remote_resources",
    "no_text",
    "render_failed",
    "missing_asset",
    "asset_outside_folder",
    "no_screenshot",
    "duplicate_id",
    "too_tall",
    "asset_name_clash",
    "no_page_html",
    "several_page_html",
    "bad_action_json",
    "no_interactions",
]

# Why one interaction of an Interaction2Code page was not imported (P-50).
SkippedInteractionReason = Literal[
    "chained",
    "no_action_text",
    "unsupported_action",
    "no_trigger_name",
    "missing_screenshot",
    "trigger_not_found",
    "trigger_ambiguous",
    "action_failed",
    "unclean_replay",
    "no_change",
]


class SkippedPage(BaseModel):
    """A source page left out of the set, and why."""

    model_config = ConfigDict(extra="forbid")
    page: str
    reason: SkipReason
    detail: str


class SkippedInteraction(BaseModel):
    """An interaction of a source page left out (of an imported task or of a skipped page)."""

    model_config = ConfigDict(extra="forbid")
    page: str
    interaction: str
    """Its key in the page's action.json."""
    reason: SkippedInteractionReason
    detail: str


class SetSource(BaseModel):
    model_config = ConfigDict(extra="forbid")
    layout: Layout
    path: str
    """The folder the pages were read from, as given to import-tasks."""
    pages: int = Field(ge=0)
    """Pages found in the source folder (imported and skipped together)."""


class SetImporter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str
    """The converter's own version: what it does to a page (bumped when that changes)."""
    harness_version: str | None
    git_commit: str | None
    git_dirty: bool | None
    """True when the importer's code had uncommitted changes; None outside a git checkout."""


class TaskSetManifest(BaseModel):
    """`<set>/manifest.yaml`. Only name, description, version and tasks are required (a hand-kept
    set); an imported set also has its source, importer, files and skipped pages."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    version: str = Field(min_length=1)
    tasks: list[str]
    source: SetSource | None = None
    importer: SetImporter | None = None
    files: dict[str, _Digest] | None = None
    """`<task>/<path>` -> sha256 of every file of every listed task."""
    skipped: list[SkippedPage] = []
    skipped_interactions: list[SkippedInteraction] = []
    source_files: dict[str, _Digest] | None = None
    """Path relative to the source folder -> sha256 of every source file an imported task was
    made from (page, assets, screenshot, action.json and the interactions' images)."""


class TaskSetRecord(BaseModel):
    """`task_set` of `experiment.json`: which set the experiment used (recorded, not hashed)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    version: str
    manifest: str
    """The manifest's path, relative to the project root."""
    manifest_sha256: _Digest
    files_verified: int | None
    """How many files' checksums check-experiment verified; null: the manifest lists none."""
    source_layout: str | None
    importer_version: str | None


def set_files(set_dir: Path, tasks: list[str]) -> dict[str, str]:
    """Every non-hidden file of the named task folders by sha256, keyed `<task>/<path>`."""
    files: dict[str, str] = {}
    for task in sorted(tasks):
        folder = set_dir / task
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if path.is_file() and not any(part.startswith(".") for part in relative.parts):
                files[f"{task}/{relative.as_posix()}"] = sha256_file(path)
    return files


def read_manifest(set_dir: Path) -> TaskSetManifest | None:
    """The set's manifest, or None when the folder has none."""
    path = set_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"task set manifest {path} cannot be read: {exc}") from None
    try:
        return TaskSetManifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise ConfigError(
            f"task set manifest {path}: {where}: {first['msg']} (got {first.get('input')!r})"
        ) from None


def verify_manifest(set_dir: Path, manifest: TaskSetManifest) -> int:
    """Check every listed file against its checksum and refuse any file the manifest does not
    list; returns how many files were verified."""
    if manifest.files is None:
        return 0
    found = set_files(set_dir, manifest.tasks)
    folders = {p.parent.name for p in set_dir.glob("*/task.yaml")}
    found |= set_files(set_dir, sorted(folders - set(manifest.tasks)))
    changed = sorted(p for p in manifest.files if p in found and found[p] != manifest.files[p])
    missing = sorted(p for p in manifest.files if p not in found)
    unlisted = sorted(p for p in found if p not in manifest.files)
    problems = [f"changed since import: {p}" for p in changed]
    problems += [f"missing: {p}" for p in missing]
    problems += [f"not in the manifest: {p}" for p in unlisted]
    if problems:
        raise ConfigError(
            f"task set {set_dir} does not match its {MANIFEST} (re-import the set, or restore "
            f"the files): " + "; ".join(problems)
        )
    return len(found)


def manifest_warnings(set_dir: Path) -> list[str]:
    """What the set's manifest says of its tasks that its folders contradict: a task folder (with
    a task.yaml) `tasks` does not list, a listed task with no folder. None without a manifest."""
    manifest = read_manifest(set_dir)
    if manifest is None:
        return []
    path = set_dir / MANIFEST
    folders = {p.parent.name for p in set_dir.glob("*/task.yaml")}
    listed = set(manifest.tasks)
    lines = [
        f"{path}: tasks lists {len(listed)} task(s) but {set_dir / task} is a task folder too; "
        f"add {task!r} to its tasks (and its description, if it counts them)"
        for task in sorted(folders - listed)
    ]
    lines += [
        f"{path}: tasks lists {task!r}, which has no folder {set_dir / task} with a task.yaml; "
        "remove it from tasks or restore the folder"
        for task in sorted(listed - folders)
    ]
    return lines


def task_set_record(set_dir: Path, root: Path) -> TaskSetRecord | None:
    """The record of the set in `set_dir` (its checksums verified), or None without a manifest."""
    manifest = read_manifest(set_dir)
    if manifest is None:
        return None
    verified = verify_manifest(set_dir, manifest)
    path = set_dir / MANIFEST
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    return TaskSetRecord(
        name=manifest.name,
        version=manifest.version,
        manifest=shown.as_posix(),
        manifest_sha256=sha256_file(path),
        files_verified=verified if manifest.files is not None else None,
        source_layout=manifest.source.layout if manifest.source else None,
        importer_version=manifest.importer.version if manifest.importer else None,
    )
