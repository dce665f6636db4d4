"""The task-set verb, `import-tasks`: its arguments, and the calls to `layouts` and `convert`.

Exit status: 0 every page imported; 1 the set was written but some pages (or some interactions
of an Interaction2Code page) were left out, each named with its reason on standard error and
in the manifest; 2 nothing was imported (a refused
layout, an unusable source or destination, bad arguments, or every page skipped: the manifest
then lists why, and its set has no task).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from veriharness.experiment.task_set import SkippedInteraction, SkippedPage

__all__ = ["add_import_tasks_arguments", "run_import_tasks"]

_ID_PREFIX = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def add_import_tasks_arguments(parser: argparse.ArgumentParser) -> None:
    from veriharness.experiment.task_set import IMPORT_LAYOUTS
    from veriharness.render.browser import add_browser_arguments

    parser.add_argument("layout", choices=IMPORT_LAYOUTS, help="the source folder's layout")
    parser.add_argument("source", type=Path, help="folder holding the published pages")
    parser.add_argument("dest", type=Path, help="new folder for the task set (e.g. tasks/<set>)")
    parser.add_argument("--name", help="the set's name (default: the destination's folder name)")
    parser.add_argument("--description", help="what the set is (default: says where it came from)")
    parser.add_argument(
        "--set-version", default="1", help="the set's human version (default %(default)s)"
    )
    parser.add_argument("--id-prefix", default="", help="put before every task id (default: none)")
    parser.add_argument(
        "--width",
        type=int,
        default=1280,
        help="html-folder, interaction2code: viewport width (default %(default)s)",
    )
    parser.add_argument(
        "--height",
        type=int,
        default=800,
        help="html-folder, interaction2code: first viewport height; a taller page gets its own "
        "height "
        "(default %(default)s)",
    )
    add_browser_arguments(parser)


def _fail(message: str) -> int:
    print(f"import-tasks: {message}", file=sys.stderr)
    return 2


def _skipped(entries: Sequence[SkippedPage] | Sequence[SkippedInteraction]) -> str:
    """'N skipped', with how many for each reason when there are any."""
    reasons = Counter(entry.reason for entry in entries)
    listed = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    return f"{len(entries)} skipped" + (f" ({listed})" if listed else "")


def run_import_tasks(args: argparse.Namespace) -> int:
    from veriharness.render.browser import Renderer, RenderSetupError
    from veriharness.runfolder.render import Size
    from veriharness.tasksets.convert import SetDescription, import_set, prepare_destination
    from veriharness.tasksets.layouts import ImportRefused, find_pages

    if not _ID_PREFIX.match(args.id_prefix):
        return _fail(
            f"--id-prefix {args.id_prefix!r} must start with a letter or digit and hold "
            "only letters, digits, '_', '.' and '-'"
        )
    if args.width < 1 or args.height < 1:
        return _fail(f"--width {args.width} and --height {args.height} must be positive")
    source, dest = args.source.resolve(), args.dest.resolve()
    described = SetDescription(
        name=args.name or dest.name,
        description=args.description
        or f"Pages of {source.name} in the {args.layout} layout, imported by import-tasks.",
        version=args.set_version,
        layout=args.layout,
        source=source,
        id_prefix=args.id_prefix,
    )
    try:
        pages = find_pages(args.layout, source, Size(width=args.width, height=args.height))
        prepare_destination(dest)
        with Renderer(args.load_timeout, args.chromium) as renderer:
            imported = import_set(renderer, pages, described, dest)
    except (ImportRefused, RenderSetupError, FileExistsError) as exc:
        return _fail(str(exc))
    manifest = imported.manifest
    print(
        f"import-tasks: {len(manifest.tasks)} of {len(pages)} page(s) imported into {dest} "
        f"({imported.renders} render(s)); {_skipped(manifest.skipped)}"
    )
    if args.layout == "interaction2code":
        print(
            f"import-tasks: {imported.interactions} interaction(s) imported; "
            f"{_skipped(manifest.skipped_interactions)}"
        )
    for skipped in manifest.skipped:
        print(f"skipped {skipped.page}: {skipped.reason}: {skipped.detail}", file=sys.stderr)
    for action in manifest.skipped_interactions:
        print(
            f"skipped interaction {action.interaction} of {action.page}: {action.reason}: "
            f"{action.detail}",
            file=sys.stderr,
        )
    if not manifest.tasks:
        print(f"import-tasks: no page of {source} could be imported", file=sys.stderr)
        return 2
    return 1 if manifest.skipped or manifest.skipped_interactions else 0
