"""Which annotator a config names, and the digest the workflow reruns annotation on.

Kept apart from the annotators themselves: the workflow computes the digest while Snakemake parses
it (in every cluster job too), and this module needs neither the model client nor the image
code that annotating takes.
"""

from __future__ import annotations

from pathlib import Path

from veriharness.annotate.rules import RULES_ID, RULES_VERSION
from veriharness.experiment.catalog import ModelCatalog, ModelProfile, load_catalog
from veriharness.experiment.config import ExperimentConfig, config_from_mapping
from veriharness.experiment.prompts import load_module, resolve_module
from veriharness.experiment.taxonomy import Taxonomy, load_taxonomy
from veriharness.runfolder.inferred_tags import AnnotatorInfo

__all__ = [
    "annotator_digest",
    "annotator_info",
    "annotator_prompt",
    "model_info",
    "rules_info",
    "taxonomy_text",
]


def taxonomy_text(taxonomy: Taxonomy) -> str:
    """Every code with its name and definition, by family (fills the annotator prompt)."""
    lines = []
    for family in taxonomy.families:
        lines.append(f"{family.code} {family.name}: {family.definition}")
        lines += [f"- {c.code} {c.name}: {c.definition}" for c in family.capabilities]
    lines += [f"- {c.code} {c.name}: {c.definition}" for c in taxonomy.escape]
    return "\n".join(lines)


def rules_info(taxonomy: Taxonomy) -> AnnotatorInfo:
    return AnnotatorInfo(
        kind="rule-based",
        id=RULES_ID,
        version=RULES_VERSION,
        taxonomy_id=taxonomy.id,
        taxonomy_version=taxonomy.version,
    )


def annotator_prompt(prompts_dir: Path, prompt_id: str, taxonomy: Taxonomy) -> tuple[str, str, str]:
    """(resolved text, its sha256, version) of the annotator prompt module."""
    module = load_module(prompts_dir, prompt_id)
    resolved = resolve_module(module, {"TAXONOMY": taxonomy_text(taxonomy)})
    return resolved.text, resolved.resolved_sha256, resolved.version


def model_info(
    catalog: ModelCatalog,
    profile: ModelProfile,
    prompts_dir: Path,
    prompt_id: str,
    taxonomy: Taxonomy,
) -> AnnotatorInfo:
    _, sha, version = annotator_prompt(prompts_dir, prompt_id, taxonomy)
    return AnnotatorInfo(
        kind="model",
        id=f"model:{profile.name}",
        version=version,
        prompt_id=prompt_id,
        prompt_sha256=sha,
        profile=profile.name,
        profile_config_hash=catalog.profile_config_hash(profile),
        taxonomy_id=taxonomy.id,
        taxonomy_version=taxonomy.version,
    )


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
