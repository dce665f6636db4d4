"""metrics.json and audit.json through their run-folder modules, read leniently."""

from __future__ import annotations

import json
from pathlib import Path

from veriharness.runfolder.audit import AUDIT, AuditRecord, AuditThresholds, read_audit
from veriharness.runfolder.metrics import METRICS, MetricsRecord, read_metrics


def _metrics() -> MetricsRecord:
    return MetricsRecord(
        scorer_version="2",
        status="ok",
        metrics={"ssim": 0.5, "position": None},
        details={"render_status": "ok"},
        versions={"ocr": "1", "tesseract": None},
    )


def _audit() -> AuditRecord:
    return AuditRecord(
        flags={"remote_dependencies": False, "text_in_images": None},
        evidence={"remote_dependencies": {"blocked": []}},
        thresholds=AuditThresholds(),
    )


def test_what_score_wrote_reads_back_equal(tmp_path: Path) -> None:
    METRICS.write(tmp_path, _metrics())
    AUDIT.write(tmp_path, _audit())
    errors: list[str] = []
    assert read_metrics(tmp_path, errors) == _metrics()
    assert read_audit(tmp_path, errors) == _audit()
    assert errors == []


def test_a_value_of_the_wrong_type_is_dropped_and_named(tmp_path: Path) -> None:
    metrics = _metrics().model_dump(mode="json")
    metrics["metrics"]["ssim"] = "high"
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    audit = _audit().model_dump(mode="json")
    audit["flags"]["remote_dependencies"] = "maybe"
    (tmp_path / "audit.json").write_text(json.dumps(audit))
    errors: list[str] = []
    read = read_metrics(tmp_path, errors)
    assert read is not None and read.metrics == {"position": None}
    flags = read_audit(tmp_path, errors)
    assert flags is not None and flags.flags == {"text_in_images": None}
    assert errors[0].startswith("metrics.json: metrics.ssim: ") and "'high'" in errors[0]
    assert errors[1].startswith("audit.json: flags.remote_dependencies: ")
    assert len(errors) == 2


def test_absent_and_broken_files_are_named(tmp_path: Path) -> None:
    errors: list[str] = []
    assert read_metrics(tmp_path, errors) is None
    (tmp_path / "audit.json").write_text('"audit"')
    assert read_audit(tmp_path, errors) is None
    (tmp_path / "metrics.json").write_text(json.dumps({"kind": "metrics", "status": "ok"}))
    assert read_metrics(tmp_path, errors) is None
    assert errors[0] == "metrics.json: absent"
    assert errors[1] == "audit.json: expected a JSON object, got str"
    assert errors[2].startswith("metrics.json: unusable (scorer_version: Field required")
