"""`veriharness annotate`: label every CallMLLM call of one run (writes `inferred_tags.json`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from veriharness._util import atomic
from veriharness.annotate.annotators import (
    ModelAnnotator,
    annotate_with_rules,
    model_info,
    rules_info,
)
from veriharness.annotate.calls import trace_calls
from veriharness.experiment.catalog import CatalogError, load_catalog
from veriharness.experiment.config import (
    ConfigError,
    ExperimentConfig,
    config_from_mapping,
    load_config,
)
from veriharness.experiment.prompts import PromptError
from veriharness.experiment.taxonomy import load_taxonomy
from veriharness.runfolder.inferred_tags import INFERRED_TAGS, AnnotationRecord, AnnotatorInfo

__all__ = ["annotator_info", "annotator_digest", "annotate_run", "add_arguments", "run"]


def annotator_info(config: ExperimentConfig, root: Path) -> AnnotatorInfo:
    """Which annotator the config names, with everything that defines it."""
    taxonomy = load_taxonomy(root / config.taxonomy)
    if config.annotation.profile is None:
        return rules_info(taxonomy)
    catalog = load_catalog(root / config.model_catalog)
    profile = catalog.resolve(config.annotation.profile)
    return model_info(
        catalog, profile, root / config.prompts_dir, config.annotation.prompt, taxonomy
    )


def annotator_digest(config: dict[str, object], root: Path = Path(".")) -> str:
    """For the workflow: a digest that changes exactly when the annotator does."""
    return annotator_info(config_from_mapping(dict(config)), root).digest


def annotate_run(
    config: ExperimentConfig, root: Path, run_dir: Path, task_dir: Path
) -> AnnotationRecord:
    errors: list[str] = []
    calls = trace_calls(run_dir, errors)
    taxonomy = load_taxonomy(root / config.taxonomy)
    info = annotator_info(config, root)
    if info.kind == "rule-based":
        annotations = annotate_with_rules(calls, taxonomy)
    else:
        catalog = load_catalog(root / config.model_catalog)
        annotator = ModelAnnotator(
            catalog,
            catalog.resolve(config.annotation.profile),
            root / config.prompts_dir,
            config.annotation.prompt,
            taxonomy,
        )
        annotations = annotator.annotate(calls, task_dir, run_dir)
    return AnnotationRecord(
        annotator=info, annotator_digest=info.digest, calls=annotations, read_errors=errors
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="the experiment's config")
    parser.add_argument("--run-dir", type=Path, required=True, help="<condition>/<task>/r<k>")
    parser.add_argument("--task-dir", type=Path, required=True, help="the run's task folder")
    parser.add_argument(
        "--project-root", type=Path, default=Path("."), help="config paths are relative to it"
    )


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        record = annotate_run(config, args.project_root.resolve(), args.run_dir, args.task_dir)
    except (ConfigError, CatalogError, PromptError, OSError, ValueError) as exc:
        print(f"annotate: {exc}", file=sys.stderr)
        return 2
    atomic.write_text(INFERRED_TAGS.path(args.run_dir), record.model_dump_json(indent=2) + "\n")
    counts: dict[str, int] = {}
    for call in record.calls:
        counts[call.status] = counts.get(call.status, 0) + 1
    print(
        f"annotate: {len(record.calls)} calls by {record.annotator.id} "
        f"({record.annotator.kind} {record.annotator.version}): {counts}"
    )
    return 0
