"""The annotate stage's verb, `annotate`: its arguments, and the calls to `command`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_annotate_arguments", "run_annotate"]


def add_annotate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="the experiment's config")
    parser.add_argument("--run-dir", type=Path, required=True, help="<condition>/<task>/r<k>")
    parser.add_argument("--task-dir", type=Path, required=True, help="the run's task folder")
    parser.add_argument(
        "--project-root", type=Path, default=Path("."), help="config paths are relative to it"
    )


def run_annotate(args: argparse.Namespace) -> int:
    from veriharness.annotate.command import annotate_run, write_annotations
    from veriharness.experiment.catalog import CatalogError
    from veriharness.experiment.config import ConfigError, load_config
    from veriharness.experiment.prompts import PromptError

    try:
        config = load_config(args.config)
        record = annotate_run(config, args.project_root.resolve(), args.run_dir, args.task_dir)
    except (ConfigError, CatalogError, PromptError, OSError, ValueError) as exc:
        print(f"annotate: {exc}", file=sys.stderr)
        return 2
    write_annotations(args.run_dir, record)
    counts: dict[str, int] = {}
    for call in record.calls:
        counts[call.status] = counts.get(call.status, 0) + 1
    print(
        f"annotate: {len(record.calls)} calls by {record.annotator.id} "
        f"({record.annotator.kind} {record.annotator.version}): {counts}"
    )
    return 0
