"""inferred_tags.json through its run-folder module: the annotator's record, read leniently."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.runfolder.inferred_tags import (
    INFERRED_TAGS,
    AnnotationRecord,
    AnnotatorInfo,
    CallAnnotation,
    read_inferred_tags,
)


def _record() -> AnnotationRecord:
    annotator = AnnotatorInfo(
        kind="model", id="a", version="1", profile="p", taxonomy_id="t", taxonomy_version="2"
    )
    calls = [
        CallAnnotation(call_id="c1", status="ok", codes=["A1"]),
        CallAnnotation(call_id="c2", status="invalid", codes=[], invalid_codes=["Z9"]),
    ]
    return AnnotationRecord(annotator=annotator, annotator_digest=annotator.digest, calls=calls)


def test_what_the_writer_wrote_reads_back_equal(tmp_path: Path) -> None:
    INFERRED_TAGS.write(tmp_path, _record())
    errors: list[str] = []
    assert read_inferred_tags(tmp_path, errors) == _record()
    assert errors == []


def test_a_field_of_the_wrong_type_is_dropped_and_named(tmp_path: Path) -> None:
    data = _record().model_dump(mode="json")
    data["annotator"]["profile"] = 7
    data["calls"][1]["status"] = "maybe"
    (tmp_path / "inferred_tags.json").write_text(json.dumps(data))
    errors: list[str] = []
    read = read_inferred_tags(tmp_path, errors)
    assert read is not None
    assert read.annotator.profile is None
    assert [c.call_id for c in read.calls] == ["c1"]  # the call without a usable status goes
    assert any(e.startswith("inferred_tags.json: annotator.profile: ") for e in errors)
    assert any(e.startswith("inferred_tags.json: calls.1.status: ") for e in errors)
    assert "inferred_tags.json: calls.1: dropped (status: Field required)" in errors


def test_absent_and_broken_files_are_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_inferred_tags(tmp_path, errors) is None
    (tmp_path / "inferred_tags.json").write_text('{"calls": ')
    assert read_inferred_tags(tmp_path, errors) is None
    assert errors[0] == "inferred_tags.json: absent"
    assert errors[1].startswith("inferred_tags.json: invalid JSON")
