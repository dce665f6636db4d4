"""The model annotator (the rule-based one is `rules`), and what both write (`inferred_tags.json`).

Design notes:

- The annotator is named by `annotation.profile` in the config: null gives the rule-based
  annotator (`rules`), a catalog profile gives the model annotator, which sends the frozen
  annotator prompt module (with the taxonomy filled in) and the call's request, and asks for
  `{"codes": [...]}` through a JSON Schema whose enum is the taxonomy's codes. A profile whose key
  is not set is an error, never a silent switch to the rules.
- `AnnotatorInfo` says which annotator wrote a record (kind, id, version, prompt hash, profile
  and its config hash, taxonomy); its `digest` is what the workflow reruns annotation on.
- A model reply is kept whole. One that is not JSON, breaks the schema or names codes outside the
  taxonomy is recorded with status `invalid` (the codes it gave split into `codes` and
  `invalid_codes`), not dropped and not repaired; a provider fault is status `failed`. Nothing is
  retried.
- Images a call sent are attached when the file is still there: the task's `reference.png` or a
  file kept under the run's `answer/`, matched by sha256, cropped to the call's region as the
  server did. Others are only described (label, path, region, size).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import validators

from veriharness._util.hashing import sha256_file
from veriharness.annotate.calls import CallView
from veriharness.annotate.identity import annotator_prompt
from veriharness.experiment.catalog import ModelCatalog, ModelProfile
from veriharness.experiment.taxonomy import Taxonomy
from veriharness.experiment.tool_contract import ImageInput, JsonOutput, RequestRefused
from veriharness.mllm.backends import (
    ModelRequest,
    PreparedText,
    ProviderError,
    backend_for,
    make_client,
)
from veriharness.mllm.images import PreparedImage, prepare_image
from veriharness.runfolder.inferred_tags import CallAnnotation

__all__ = [
    "RECORD_KIND",
    "codes_schema",
    "ModelAnnotator",
    "judge_reply",
]

RECORD_KIND = "inferred_capability_tags"


def codes_schema(taxonomy: Taxonomy) -> dict[str, Any]:
    """The JSON Schema the model annotator's reply must satisfy: codes from the taxonomy only."""
    return {
        "type": "object",
        "properties": {
            "codes": {
                "type": "array",
                "items": {"type": "string", "enum": list(taxonomy.codes)},
                "minItems": 1,
                "uniqueItems": True,
            }
        },
        "required": ["codes"],
        "additionalProperties": False,
    }


def judge_reply(call_id: str, text: str, taxonomy: Taxonomy) -> CallAnnotation:
    """The codes of a reply, kept whatever their validity; see the module notes."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return CallAnnotation(
            call_id=call_id, status="invalid", codes=[], reply=text, error=f"not JSON: {error.msg}"
        )
    given = value.get("codes") if isinstance(value, dict) else None
    given = [str(c) for c in given] if isinstance(given, list) else []
    valid = [c for c in given if c in taxonomy.codes]
    outside = [c for c in given if c not in taxonomy.codes]
    schema = codes_schema(taxonomy)
    problems = [e.message for e in validators.validator_for(schema)(schema).iter_errors(value)]
    if outside:
        problems.insert(0, f"codes outside taxonomy {taxonomy.id} {taxonomy.version}: {outside}")
    return CallAnnotation(
        call_id=call_id,
        status="invalid" if problems else "ok",
        codes=valid,
        invalid_codes=outside,
        reply=text,
        error="; ".join(problems) or None,
    )


class ModelAnnotator:
    """Labels calls with one catalog profile; one HTTP client for all calls of a run."""

    def __init__(
        self,
        catalog: ModelCatalog,
        profile: ModelProfile,
        prompts_dir: Path,
        prompt_id: str,
        taxonomy: Taxonomy,
    ) -> None:
        self.profile = profile
        self.taxonomy = taxonomy
        self.prompt, _, _ = annotator_prompt(prompts_dir, prompt_id, taxonomy)
        self.backend = backend_for(profile.provider)  # a CatalogError when the key is not set
        self.output = JsonOutput.model_validate({"kind": "json", "schema": codes_schema(taxonomy)})

    def annotate(
        self, calls: list[CallView], task_dir: Path, run_dir: Path
    ) -> list[CallAnnotation]:
        known = _available_images(task_dir, run_dir)
        out = []
        with make_client(self.profile.provider) as client:
            for call in calls:
                request = json.dumps(call.request(), ensure_ascii=False, indent=1)
                inputs: list[PreparedText | PreparedImage] = [PreparedText("request", request)]
                inputs += _images(call, known)
                try:
                    reply = self.backend.send(
                        client, ModelRequest(self.prompt, tuple(inputs), self.output)
                    )
                except ProviderError as error:
                    out.append(
                        CallAnnotation(
                            call_id=call.call_id,
                            status="failed",
                            codes=[],
                            error=f"model request failed ({error.error_type}): {error}",
                        )
                    )
                    continue
                out.append(judge_reply(call.call_id, reply.text, self.taxonomy))
        return out


def _available_images(task_dir: Path, run_dir: Path) -> dict[str, tuple[Path, str]]:
    """sha256 -> (workspace, relative path) of the images an annotator can still open."""
    found: dict[str, tuple[Path, str]] = {}
    answer = run_dir / "answer"
    if answer.is_dir():
        for path in sorted(answer.rglob("*")):
            if path.is_file():
                found[sha256_file(path)] = (answer, path.relative_to(answer).as_posix())
    reference = task_dir / "reference.png"
    if reference.is_file():
        found[sha256_file(reference)] = (task_dir, "reference.png")
    return found


def _images(call: CallView, known: dict[str, tuple[Path, str]]) -> list[PreparedImage]:
    images = []
    for item in call.inputs:
        if item.get("kind") != "image" or item.get("file_sha256") not in known:
            continue
        workspace, relative = known[item["file_sha256"]]
        try:
            spec = ImageInput(
                kind="image", label=str(item["label"]), path=relative, region=item.get("region")
            )
            images.append(prepare_image(workspace, spec))
        except (RequestRefused, ValueError):
            continue  # described in the request text instead
    return images
