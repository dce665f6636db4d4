"""run.json through its run-folder module: the record prepare writes, read leniently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_config import make_project
from test_record import BASE, CELL
from veriharness.experiment.definition import load_definition
from veriharness.experiment.prompts import AssembledPrompt
from veriharness.experiment.record import RunRecord
from veriharness.prepare.run_folder import prepare_run, write_run
from veriharness.runfolder.run_record import read_run_record


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunRecord, AssembledPrompt]:
    root = make_project(tmp_path_factory.mktemp("record"))
    return prepare_run(load_definition(BASE, root), *CELL, 1)


@pytest.fixture
def record(prepared: tuple[RunRecord, AssembledPrompt]) -> RunRecord:
    return prepared[0]


def test_what_prepare_wrote_reads_back_equal(
    prepared: tuple[RunRecord, AssembledPrompt], tmp_path: Path
) -> None:
    write_run(tmp_path, *prepared)
    errors: list[str] = []
    assert read_run_record(tmp_path, errors) == prepared[0]
    assert errors == []


def test_a_field_of_the_wrong_type_is_dropped_and_named(record: RunRecord, tmp_path: Path) -> None:
    data = record.model_dump(mode="json")
    data["provenance"]["harness"] = 2
    (tmp_path / "run.json").write_text(json.dumps(data))
    errors: list[str] = []
    read = read_run_record(tmp_path, errors)
    assert read is not None and read.identity_hash == record.identity_hash
    assert read.provenance.harness is None
    assert len(errors) == 1
    assert errors[0].startswith("run.json: provenance.harness: ")


def test_absent_and_broken_files_are_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_run_record(tmp_path, errors) is None
    (tmp_path / "run.json").write_text(json.dumps({"kind": "run_record", "replicate": "one"}))
    assert read_run_record(tmp_path, errors) is None
    assert errors[0] == "run.json: absent"
    assert errors[1].startswith("run.json: replicate: Input should be a valid integer")
