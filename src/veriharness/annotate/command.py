"""Label every CallMLLM call of one run (`veriharness annotate`) into `inferred_tags.json`."""

from __future__ import annotations

from pathlib import Path

from veriharness._util import atomic
from veriharness.annotate.calls import trace_calls
from veriharness.annotate.identity import annotator_info
from veriharness.annotate.rules import rule_codes
from veriharness.experiment.catalog import load_catalog
from veriharness.experiment.config import ExperimentConfig
from veriharness.experiment.taxonomy import load_taxonomy
from veriharness.runfolder.inferred_tags import INFERRED_TAGS, AnnotationRecord, CallAnnotation

__all__ = ["annotate_run", "write_annotations"]


def annotate_run(
    config: ExperimentConfig, root: Path, run_dir: Path, task_dir: Path
) -> AnnotationRecord:
    errors: list[str] = []
    calls = trace_calls(run_dir, errors)
    taxonomy = load_taxonomy(root / config.taxonomy)
    info = annotator_info(config, root)
    if info.kind == "rule-based":
        annotations = [
            CallAnnotation(call_id=c.call_id, status="ok", codes=rule_codes(c, taxonomy.codes))
            for c in calls
        ]
    else:
        # Here: the model client (httpx, the image code) is no cost to the rule-based annotator.
        from veriharness.annotate.annotators import ModelAnnotator

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


def write_annotations(run_dir: Path, record: AnnotationRecord) -> Path:
    path = INFERRED_TAGS.path(run_dir)
    atomic.write_text(path, record.model_dump_json(indent=2) + "\n")
    return path
