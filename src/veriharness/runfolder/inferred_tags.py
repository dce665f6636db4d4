"""`inferred_tags.json`: `annotate`'s capability tags for each CallMLLM call of the run."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from veriharness._util.hashing import sha256_json
from veriharness.runfolder._files import JsonFile

__all__ = [
    "INFERRED_TAGS",
    "NAME",
    "AnnotationRecord",
    "AnnotationStatus",
    "AnnotatorInfo",
    "CallAnnotation",
    "read_inferred_tags",
]

NAME = "inferred_tags.json"

AnnotationStatus = Literal["ok", "invalid", "failed"]


class AnnotatorInfo(BaseModel):
    kind: Literal["rule-based", "model"]
    id: str
    version: str
    prompt_id: str | None = None
    prompt_sha256: str | None = None
    profile: str | None = None
    profile_config_hash: str | None = None
    taxonomy_id: str
    taxonomy_version: str

    @property
    def digest(self) -> str:
        return sha256_json(self.model_dump())


class CallAnnotation(BaseModel):
    call_id: str
    status: AnnotationStatus
    codes: list[str]
    invalid_codes: list[str] = []
    reply: str | None = None
    error: str | None = None


class AnnotationRecord(BaseModel):
    kind: Literal["inferred_capability_tags"] = "inferred_capability_tags"
    annotator: AnnotatorInfo
    annotator_digest: str
    calls: list[CallAnnotation]
    read_errors: list[str] = []


INFERRED_TAGS = JsonFile(NAME, AnnotationRecord)


def read_inferred_tags(run_dir: Path, errors: list[str]) -> AnnotationRecord | None:
    """The run's annotation, leniently (`_files`)."""
    return INFERRED_TAGS.read(run_dir, errors)
