"""The annotate stage: the rule-based annotator on planted calls, the model annotator through a
real HTTP provider stub, the verb on real trace files, and the agreement statistics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from mllm.mllm_provider_stub import ProviderStub
from support.cli import ROOT, veriharness
from support.synthetic_runs import write_experiment
from veriharness._util.hashing import sha256_file
from veriharness.annotate.calls import CallView
from veriharness.annotate.rules import rule_codes
from veriharness.collect.agreement import agreement_rows, jaccard
from veriharness.experiment.taxonomy import load_taxonomy

TAXONOMY = load_taxonomy(ROOT / "prompts" / "taxonomy" / "capabilities-v0.1.yaml")
TASK = ROOT / "tasks" / "landing-page"
IMAGE = {"kind": "image", "label": "ref", "path": "reference.png"}
SHOT = {"kind": "image", "label": "mine", "path": "shot.png"}

# (instruction, inputs, output, the codes the rules must give)
PLANTED: list[tuple[str, list[dict[str, Any]], dict[str, Any], list[str]]] = [
    ("Transcribe the heading word for word.", [IMAGE], {"kind": "text"}, ["B1"]),
    (
        "Give the bounding boxes of every button as pixel coordinates.",
        [IMAGE],
        {"kind": "json"},
        ["C1", "E2"],
    ),
    (
        "List the visible differences between the two screenshots.",
        [IMAGE, SHOT],
        {"kind": "text"},
        ["G1"],
    ),
    ("List the visible differences.", [IMAGE], {"kind": "text"}, ["Z1"]),  # G1 needs two images
    (
        "Estimate the font sizes and the hex codes of the text colours.",
        [IMAGE],
        {"kind": "text"},
        ["E1", "H1"],
    ),
    (
        "Which parts of this markup does the image show?",
        [IMAGE, {"kind": "text", "label": "code", "content": "<div class='card'>x</div>"}],
        {"kind": "text"},
        ["F2"],
    ),
    ("Read the axis ticks of the chart.", [IMAGE], {"kind": "text"}, ["B2", "E3"]),
    ("Describe the layout: sections and columns.", [IMAGE], {"kind": "text"}, ["D1"]),
    ("Look at this.", [IMAGE], {"kind": "text"}, ["Z1"]),
]


def _call(instruction: str, inputs: list[dict[str, Any]], output: dict[str, Any]) -> CallView:
    return CallView("c", instruction, inputs, output, [])


@pytest.mark.parametrize(("instruction", "inputs", "output", "expected"), PLANTED)
def test_the_rule_based_annotator_gives_the_planted_codes(
    instruction: str, inputs: list[dict[str, Any]], output: dict[str, Any], expected: list[str]
) -> None:
    assert rule_codes(_call(instruction, inputs, output), TAXONOMY.codes) == expected


def _started(call_id: str, instruction: str, tags: list[str], region: dict | None) -> dict:
    image = {
        "kind": "image",
        "label": "ref",
        "path": "reference.png",
        "file_sha256": sha256_file(TASK / "reference.png"),
        "region": region,
        "attached_sha256": "sha256:" + "0" * 64,
        "attached_bytes": 1,
        "media_type": "image/png",
        "width": 1280,
        "height": 800,
    }
    return {
        "event": "mllm_call_started",
        "call_id": call_id,
        "time": "2026-01-01T00:00:00Z",
        "instruction": instruction,
        "inputs": [image],
        "declared_capability_tags": tags,
        "taxonomy": {"id": TAXONOMY.id, "version": TAXONOMY.version},
        "output": {"kind": "text"},
        "requested_model_profile": None,
        "resolved_model_profile": "default",
        "resolved_model_config_hash": "sha256:" + "1" * 64,
    }


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    region = {"x": 0, "y": 0, "width": 40, "height": 30}
    events = [
        _started("c1", "Transcribe the heading word for word.", ["B1"], None),
        _started("c2", "Describe the colours and fonts of the header.", ["E1", "D1"], region),
        {
            "event": "mllm_call_rejected",
            "call_id": "c3",
            "time": "2026-01-01T00:00:01Z",
            "error": "invalid",
            "request": {
                "instruction": "Where is the logo?",
                "inputs": [{"kind": "text", "label": "t", "content": "x"}],
                "capability_tags": ["A1"],
                "output": {"kind": "text"},
            },
        },
    ]
    (run / "mllm_trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


def _config(tmp_path: Path, profile: str | None, base: str = "") -> Path:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        yaml.safe_dump(
            {
                "profiles": [
                    {
                        "name": "default",
                        "description": "stub",
                        "provider": {
                            "api_style": "openai-chat",
                            "base_url": f"{base}/ok/v1",
                            "model": "stub-annotator",
                        },
                    }
                ]
            }
        )
    )
    config = tmp_path / "config.yaml"
    data = {
        "model_catalog": str(catalog),
        "taxonomy": str(ROOT / "prompts/taxonomy/capabilities-v0.1.yaml"),
        "prompts_dir": str(ROOT / "prompts"),
        "annotation": {"profile": profile},
    }
    config.write_text(yaml.safe_dump(data))
    return config


def _annotate(config: Path, run: Path) -> Any:
    done = veriharness("annotate", "--config", config, "--run-dir", run, "--task-dir", TASK)
    assert done.returncode == 0, done.stderr
    return done


def test_the_verb_labels_every_call_with_the_rules_and_leaves_the_trace_alone(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path)
    trace = (run / "mllm_trace.jsonl").read_bytes()
    done = _annotate(_config(tmp_path, None), run)
    assert "rule-based" in done.stdout
    record = json.loads((run / "inferred_tags.json").read_text())
    assert record["kind"] == "inferred_capability_tags"
    assert record["annotator"]["kind"] == "rule-based" and record["annotator"]["version"] == "0.1"
    assert record["annotator"]["prompt_sha256"] is None
    codes = {c["call_id"]: c["codes"] for c in record["calls"]}
    assert codes == {"c1": ["B1"], "c2": ["E1"], "c3": ["A1", "B3"]}  # the rejected call too
    assert (run / "mllm_trace.jsonl").read_bytes() == trace


def test_a_model_annotator_answers_through_the_taxonomy_schema_and_an_off_taxonomy_reply_is_kept(
    tmp_path: Path,
) -> None:
    stub = ProviderStub().start()
    try:
        stub.replies.extend(['{"codes": ["B1"]}', '{"codes": ["E1", "Q7"]}', "not json"])
        run = _run(tmp_path)
        _annotate(_config(tmp_path, "default", stub.base), run)
        received = [r.json() for r in stub.received]
    finally:
        stub.stop()
    assert len(received) == 3  # one request per call, none retried
    first = received[0]["messages"][0]["content"]
    texts = "\n".join(p["text"] for p in first if p["type"] == "text")
    assert "capability codes" in texts and "- H3 explain cause:" in texts
    assert '"enum": ["A1", "A2"' in texts  # the reply schema, built from the taxonomy
    assert "Transcribe the heading word for word." in texts
    assert '"B1"' not in texts.split("The codes:")[0]  # the declared tags are never shown
    images = [p for p in first if p["type"] == "image_url"]
    assert len(images) == 1  # the task's reference, found by its sha256
    record = json.loads((run / "inferred_tags.json").read_text())
    annotator = record["annotator"]
    assert annotator["kind"] == "model" and annotator["profile"] == "default"
    assert annotator["prompt_id"] == "annotator-v0.1" and annotator["prompt_sha256"].startswith(
        "sha256:"
    )
    calls = {c["call_id"]: c for c in record["calls"]}
    assert (calls["c1"]["status"], calls["c1"]["codes"]) == ("ok", ["B1"])
    off = calls["c2"]
    assert (off["status"], off["codes"], off["invalid_codes"]) == ("invalid", ["E1"], ["Q7"])
    assert off["reply"] == '{"codes": ["E1", "Q7"]}' and "Q7" in off["error"]
    assert calls["c3"]["status"] == "invalid" and calls["c3"]["reply"] == "not json"


def test_a_profile_whose_key_is_not_set_is_an_error_not_the_rules(tmp_path: Path) -> None:
    config = _config(tmp_path, "default", "http://127.0.0.1:9")
    catalog = yaml.safe_load((tmp_path / "catalog.yaml").read_text())
    catalog["profiles"][0]["provider"]["api_key_env"] = "VH_TEST_ANNOTATOR_KEY_UNSET"
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump(catalog))
    run = _run(tmp_path)
    done = veriharness("annotate", "--config", config, "--run-dir", run, "--task-dir", TASK)
    assert done.returncode == 2 and "VH_TEST_ANNOTATOR_KEY_UNSET" in done.stderr
    assert not (run / "inferred_tags.json").exists()


def test_agreement_statistics_on_known_calls() -> None:
    assert jaccard(["A1", "B1"], ["B1"]) == 0.5 and np.isnan(jaccard([], ["B1"]))
    rows = pd.DataFrame(
        {
            "annotator": ["r"] * 5,
            "status": ["ok", "ok", "ok", "ok", "invalid"],
            "declared": [["B1"], ["B1", "E1"], ["E1"], ["C1"], ["B1"]],
            "codes": [["B1"], ["B1"], ["E1", "H1"], ["B1"], ["Q7"]],
        }
    )
    rows["jaccard"] = [jaccard(d, c) for d, c in zip(rows.declared, rows.codes, strict=True)]
    table = pd.DataFrame(agreement_rows(rows)).set_index(["level", "key"])
    b1 = table.loc[("code", "B1")]
    assert (b1.n_calls, b1.n_declared, b1.n_inferred, b1.n_both) == (4, 2, 3, 2)
    assert b1.precision == 1.0 and b1.recall == pytest.approx(2 / 3)
    # family B per call: declared [1,1,0,0], inferred [1,1,0,1] -> po 3/4, pe 1/2*3/4+1/2*1/4
    assert table.loc[("family", "B")].kappa == pytest.approx((0.75 - 0.5) / 0.5)
    assert table.loc[("all", "all")].mean_jaccard == pytest.approx((1 + 0.5 + 0.5 + 0) / 4)


def test_collect_keeps_inferred_apart_and_the_report_shows_the_agreement(tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "results", tasks=3)
    config = ROOT / "config" / "config.yaml"
    runs = sorted(exp.exp_dir.glob("*/*/r1"))
    declared_before = {r: (r / "mllm_trace.jsonl").read_bytes() for r in runs}
    for run in runs:
        _annotate(config, run)
    assert veriharness("collect", "--experiment-dir", exp.exp_dir).returncode == 0
    tables = exp.exp_dir / "tables"
    calls = pd.read_parquet(tables / "mllm_calls.parquet")
    inferred = pd.read_parquet(tables / "inferred_tags.parquet")
    assert len(inferred) == len(calls) and set(inferred["annotator_kind"]) == {"rule-based"}
    tags = pd.read_parquet(tables / "capability_tags.parquet")
    assert set(tags["source"]) == {"declared", "inferred"}
    assert tags[tags["source"] == "declared"]["annotator"].isna().all()
    declared = tags[tags["source"] == "declared"]
    assert len(declared) == sum(len(t) for t in calls["tags"])  # declared rows are unchanged
    agreement = pd.read_parquet(tables / "tag_agreement.parquet")
    assert {"code", "family", "all"} == set(agreement["level"])
    assert all((r / "mllm_trace.jsonl").read_bytes() == b for r, b in declared_before.items())
    out = tmp_path / "report"
    done = veriharness("report", "--experiment-dir", exp.exp_dir, "--out", out)
    assert done.returncode == 0, done.stderr
    index = (out / "index.html").read_text()
    assert "<h2>Declared vs inferred capability tags</h2>" in index
    assert "rule-based: a weak baseline, no model" in index and "<th>kappa</th>" in index
