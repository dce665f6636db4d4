"""`veriharness collect`: tables from synthetic run folders, through the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, TypedDict

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.cli import veriharness
from support.synthetic_runs import SHARED_INSTRUCTION, write_experiment, write_repeated_calls
from veriharness import cli
from veriharness.collect import call_links as call_records
from veriharness.collect import matrix as experiment_runs
from veriharness.collect import run_rows as trace_reading
from veriharness.collect import tables
from veriharness.collect.columns import (
    MLLM_CALLS,
    RUNS,
    RUNS_FAMILIES,
    TABLES,
    Col,
    columns_of,
    schema_markdown,
)
from veriharness.runfolder.inferred_tags import (
    INFERRED_TAGS,
    AnnotationRecord,
    AnnotatorInfo,
    CallAnnotation,
)
from veriharness.runfolder.metrics import read_metrics

ROOT = Path(__file__).resolve().parents[2]
FAULTS = {
    ("base", "task-000", 1): "timeout",
    ("treat", "task-001", 2): "missing",
    ("base", "task-002", 1): "corrupt_transcript",
    ("base", "task-003", 2): "not_started",
    ("treat", "task-003", 1): "bad_type",
    ("treat", "task-002", 1): "bad_outcome",
    ("treat", "task-000", 2): "missing_answer",
    ("base", "task-001", 1): "max_turns",
    ("base", "task-001", 2): "no_metrics",
}


def _collect(*args: str) -> subprocess.CompletedProcess[str]:
    return veriharness("collect", *args)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("collect")
    exp = write_experiment(root / "results", tasks=4, replicates=2, faults=FAULTS)
    expected = exp.write_expected(root / "expected.json")
    proc = _collect("--experiment-dir", str(exp.exp_dir), "--expected", str(expected))
    assert proc.returncode == 0, proc.stderr
    out = exp.exp_dir / "tables"
    frames = {name: pd.read_parquet(out / f"{name}.parquet") for name in TABLES}
    return exp, proc, frames


def _row(runs: pd.DataFrame, key: tuple[str, str, int]) -> pd.Series:
    hit = runs[(runs.condition == key[0]) & (runs.task == key[1]) & (runs.replicate == key[2])]
    assert len(hit) == 1
    return hit.iloc[0]


def test_every_table_is_written_as_parquet_and_csv_with_its_declared_columns(collected) -> None:
    exp, _, frames = collected
    for name, columns in TABLES.items():
        assert (exp.exp_dir / "tables" / f"{name}.csv").is_file()
        declared = [c.name for c in columns]
        assert list(frames[name].columns[: len(declared)]) == declared


def test_every_expected_run_has_a_row_with_its_status_and_reason(collected) -> None:
    exp, proc, frames = collected
    runs = frames["runs"]
    assert len(runs) == len(exp.expected) == 16
    want = {
        "timeout": ("timeout", "wall clock limit"),
        "missing": ("missing", "run folder is absent"),
        "not_started": ("not_started", "no outcome.json"),
        "bad_outcome": ("failed", "outcome.json is unreadable"),
        "missing_answer": ("missing_answer", "answer/answer.html is absent"),
        "max_turns": ("max_turns", "error_max_turns"),
    }
    for key, fault in FAULTS.items():
        row = _row(runs, key)
        if fault in want:
            assert row.status == want[fault][0]
            assert want[fault][1] in row.reason
        else:
            assert row.status == "ok" and row.reason == ""
    assert "missing treat/task-001/r2" in proc.stderr
    missing = pd.read_csv(exp.exp_dir / "tables" / "missing.csv")
    assert missing.to_dict("records") == [
        {"condition": "treat", "task": "task-001", "replicate": 2}
    ]
    assert runs["in_matrix"].all()


def test_unreadable_content_is_named_in_read_errors_not_dropped(collected) -> None:
    _, _, frames = collected
    runs = frames["runs"]
    corrupt = _row(runs, ("base", "task-002", 1))
    assert "transcript.jsonl: 1 line(s) not a JSON object (line 4)" in corrupt.read_errors
    bad_type = _row(runs, ("treat", "task-003", 1))
    assert "num_turns: expected Int64, got 'many'" in bad_type.read_errors
    assert pd.isna(bad_type.turns) and not pd.isna(bad_type.cost_usd)
    assert "duration_ms: " + str(10**24) + " is outside the 64-bit integer range" in (
        bad_type.read_errors
    )
    assert pd.isna(bad_type.duration_ms)
    no_metrics = _row(runs, ("base", "task-001", 2))
    assert "metrics.json: absent" in no_metrics.read_errors
    assert pd.isna(no_metrics.metric_ssim)


def test_runs_values_match_what_the_run_folders_hold(collected) -> None:
    exp, _, frames = collected
    runs = frames["runs"]
    for key, spec in exp.runs.items():
        if spec.fault in ("missing", "not_started", "bad_outcome", "corrupt_transcript"):
            continue
        row = _row(runs, key)
        assert row.mllm_calls == len(spec.mllm_calls)
        assert row.mllm_calls_failed == sum(c["failed"] for c in spec.mllm_calls)
        assert row.agent_tool_calls == len(spec.tool_names)
        for tool in ("Read", "Write", "Edit", "Bash", "mcp__mllm__call"):
            assert row[f"tool_calls_{tool}"] == spec.tool_names.count(tool)
        assert row.cost_usd == pytest.approx(spec.cost_usd)
        for name, value in spec.metrics.items():
            got = row[f"metric_{name}"]
            assert (pd.isna(got) and value is None) or got == pytest.approx(value)
    not_started = _row(runs, ("base", "task-003", 2))
    assert pd.isna(not_started.tool_calls_Write) and pd.isna(not_started.mllm_calls)


def test_agent_tool_calls_rows_follow_the_transcript(collected) -> None:
    exp, _, frames = collected
    calls = frames["agent_tool_calls"]
    spec = exp.runs[("treat", "task-002", 2)]
    mine = calls[(calls.condition == "treat") & (calls.task == "task-002") & (calls.replicate == 2)]
    assert mine.tool.tolist() == spec.tool_names
    assert mine.seq.tolist() == list(range(len(spec.tool_names)))
    assert mine.has_result.all()
    writes = mine[mine.tool == "Write"]
    for summary in writes.input_summary:
        assert "…[" in summary and " chars]" in summary


def test_each_result_marks_the_tool_use_it_answers_when_uses_run_in_parallel() -> None:
    uses = [
        {"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {}},
        {"type": "tool_use", "id": "toolu_b", "name": "Read", "input": {}},
    ]
    events = [
        {"type": "assistant", "message": {"id": "m1", "content": uses}},
        {
            "type": "user",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_a"}]},
        },
    ]
    rows, _ = call_records.transcript_tool_uses(events)
    assert [(r["tool_use_id"], r["has_result"], r["is_error"]) for r in rows] == [
        ("toolu_a", True, False),
        ("toolu_b", False, None),
    ]


def test_mllm_calls_and_capability_tables_agree_with_the_trace(collected) -> None:
    exp, _, frames = collected
    calls, tags, combos = (
        frames["mllm_calls"],
        frames["capability_tags"],
        frames["capability_combinations"],
    )
    spec = exp.runs[("base", "task-000", 2)]
    mine = calls[(calls.condition == "base") & (calls.task == "task-000") & (calls.replicate == 2)]
    assert mine.call_id.tolist() == [c["call_id"] for c in spec.mllm_calls]
    for (_, row), call in zip(mine.iterrows(), spec.mllm_calls, strict=True):
        assert list(row.tags) == call["tags"]
        assert row.combination == "+".join(sorted(call["tags"]))
        assert row.image_count == sum(i["kind"] == "image" for i in call["inputs"])
        assert row.region_count == sum("region" in i for i in call["inputs"])
        assert row.outcome == ("failed" if call["failed"] else "completed")
        assert row.schema_present == ("schema" in call["output"])
    assert len(tags) == sum(len(t) for t in calls.tags)
    for condition, group in calls.groupby("condition"):
        counts = Counter(group.combination)
        got = combos[combos.condition == condition].set_index("combination")["calls"].to_dict()
        assert got == dict(counts)
    assert combos.groupby("condition").share_of_calls.sum().round(9).eq(1).all()
    uses = frames["agent_tool_calls"]
    for key, group in calls.groupby(["condition", "task", "replicate"]):
        mine = uses[(uses.condition == key[0]) & (uses.task == key[1]) & (uses.replicate == key[2])]
        callmllm = mine[mine.tool == "mcp__mllm__call"].tool_use_id.tolist()
        assert group.sort_values("seq").tool_use_id.tolist() == callmllm
        assert set(group.tool_use_link) == {"order"}
    csv = pd.read_csv(exp.exp_dir / "tables" / "mllm_calls.csv")
    assert json.loads(csv.tags.iloc[0]) == list(calls.tags.iloc[0])


def test_condition_summary_has_one_row_per_run_of_that_condition(collected, tmp_path) -> None:
    exp, _, _ = collected
    summary = tmp_path / "treat" / "summary.csv"
    proc = _collect(
        "--experiment-dir", str(exp.exp_dir), "--condition", "treat", "--summary", str(summary)
    )
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(summary)
    assert set(df.condition) == {"treat"}
    # Without an explicit matrix, the missing folder is not known to be expected.
    assert len(df) == 7 and "missing" not in set(df.status)


def test_task_summary_has_one_row_per_run_of_that_task_across_conditions(
    collected, tmp_path
) -> None:
    exp, _, _ = collected
    summary = tmp_path / "task-001.csv"
    expected = exp.write_expected(tmp_path / "expected.json")
    proc = _collect(
        "--experiment-dir",
        str(exp.exp_dir),
        "--expected",
        str(expected),
        "--task",
        "task-001",
        "--summary",
        str(summary),
    )
    assert proc.returncode == 0, proc.stderr
    assert "4 runs of task task-001" in proc.stdout
    df = pd.read_csv(summary)
    assert set(df.task) == {"task-001"}
    got = sorted(zip(df.condition, df.replicate, df.status, strict=True))
    assert got == [
        ("base", 1, "max_turns"),
        ("base", 2, "ok"),
        ("treat", 1, "ok"),
        ("treat", 2, "missing"),
    ]
    assert not (exp.exp_dir / "task-001").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--condition", "base", "--task", "task-000", "--summary", "S"],
            "--summary needs exactly one of --condition or --task, got --condition 'base' "
            "and --task 'task-000'",
        ),
        (["--summary", "S"], "--summary needs exactly one of --condition or --task, got neither"),
        (["--task", "task-000"], "--task 'task-000' only applies with --summary FILE"),
        (["--task", "../base", "--summary", "S"], "--task must name a folder of the experiment"),
        (["--task", "task-0", "--summary", "S"], "--task 'task-0' matches no run folder"),
    ],
)
def test_summary_slice_arguments_are_checked(tmp_path, capsys, args, message) -> None:
    # The command's own entry point in-process: a subprocess per case only adds start-up time
    # (the summary tests above run it as a subprocess).
    exp = write_experiment(tmp_path / "results", tasks=1)
    args = [str(tmp_path / "s.csv") if a == "S" else a for a in args]
    assert cli.main(["collect", "--experiment-dir", str(exp.exp_dir), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s.csv").exists() and not (exp.exp_dir / "tables").exists()


def _linked(exp_dir: Path) -> pd.DataFrame:
    proc = _collect("--experiment-dir", str(exp_dir))
    assert proc.returncode == 0, proc.stderr
    return pd.read_parquet(exp_dir / "tables" / "mllm_calls.parquet")


def test_calls_sharing_an_instruction_are_linked_to_tool_uses_by_order(tmp_path) -> None:
    exp = write_experiment(tmp_path / "results", conditions=("base",), tasks=1)
    run_dir = exp.exp_dir / "base" / "task-000" / "r1"
    ids = write_repeated_calls(run_dir, "sha256:" + "ab" * 32, ["first", "second"])
    calls = _linked(exp.exp_dir)
    assert calls.call_id.tolist() == ["rep-0", "rep-1"]
    assert calls.tool_use_id.tolist() == ids
    assert calls.tool_use_link.tolist() == ["order", "order"]
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet")
    assert runs.read_errors.iloc[0] == ""


def test_a_doubtful_link_is_marked_and_named_in_read_errors(tmp_path) -> None:
    exp = write_experiment(tmp_path / "results", conditions=("base",), tasks=1)
    run_dir = exp.exp_dir / "base" / "task-000" / "r1"
    ids = write_repeated_calls(
        run_dir,
        "sha256:" + "ab" * 32,
        ["first", "second"],
        extra_uses=1,
        trace_instructions=[SHARED_INSTRUCTION, "something else"],
    )
    calls = _linked(exp.exp_dir)
    assert calls.tool_use_id.tolist() == ids[:2]
    assert calls.tool_use_link.tolist() == ["order", "order_instruction_differs"]
    errors = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet").read_errors.iloc[0]
    assert "transcript.jsonl has 3 mcp__mllm__call tool use(s) but mllm_trace.jsonl has 2" in errors
    assert "instruction differs from the tool use linked by order for call(s) rep-1" in errors


def test_a_tool_use_id_recorded_in_the_trace_wins_over_order() -> None:
    uses = [call_records.ToolUse("toolu_a", "x"), call_records.ToolUse("toolu_b", "x")]
    calls = [
        call_records.TraceCall("c1", started={"instruction": "x", "tool_use_id": "toolu_b"}),
        call_records.TraceCall("c2", started={"instruction": "x", "tool_use_id": "toolu_a"}),
        call_records.TraceCall("c3", end={"event": "mllm_call_rejected", "request": {}}),
    ]
    errors: list[str] = []
    links = call_records.link_calls(uses, calls, errors)
    assert links == [
        call_records.CallLink("toolu_b", "tool_use_id"),
        call_records.CallLink("toolu_a", "tool_use_id"),
        call_records.CallLink(None, "unmatched"),
    ]
    assert errors and "2 mcp__mllm__call tool use(s) but mllm_trace.jsonl has 3" in errors[0]


def test_a_recorded_tool_use_id_the_transcript_lacks_is_named() -> None:
    uses = [call_records.ToolUse("toolu_a", "x")]
    calls = [call_records.TraceCall("c1", started={"instruction": "x", "tool_use_id": "toolu_z"})]
    errors: list[str] = []
    links = call_records.link_calls(uses, calls, errors)
    assert links == [call_records.CallLink("toolu_z", "tool_use_id_unknown")]
    assert errors == [
        "mllm_trace.jsonl: call c1 records tool_use_id 'toolu_z', which no mcp__mllm__call "
        "tool use of transcript.jsonl has"
    ]


def test_a_malformed_expected_file_names_the_field_and_value(tmp_path) -> None:
    exp = write_experiment(tmp_path / "results", tasks=1)
    bad = tmp_path / "expected.json"
    bad.write_text(json.dumps([{"condition": "base", "task": "task-000", "replicate": "one"}]))
    proc = _collect("--experiment-dir", str(exp.exp_dir), "--expected", str(bad))
    assert proc.returncode == 2
    assert "field 'replicate' must be a whole number, got 'one'" in proc.stderr
    assert not (exp.exp_dir / "tables").exists()


def test_experiment_json_matrix_is_used_when_present(tmp_path) -> None:
    exp = write_experiment(
        tmp_path / "results", tasks=2, faults={("base", "task-001", 1): "missing"}
    )
    matrix = {"conditions": ["base", "treat"], "tasks": ["task-000", "task-001"], "replicates": 1}
    (exp.exp_dir / "experiment.json").write_text(
        json.dumps({"kind": "experiment_record", "matrix": matrix})
    )
    extraction = experiment_runs.collect_runs(exp.exp_dir)
    assert extraction.missing == [trace_reading.RunKey("base", "task-001", 1)]
    assert len(tables.runs_df(extraction)) == 4


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        ({"conditions": ["base"], "replicates": 1}, "field 'matrix.tasks' is missing"),
        ("all of them", "field 'matrix' must be a list or an object, got 'all of them'"),
        (
            {"conditions": ["base"], "tasks": ["task-000"], "replicates": "two"},
            "field 'matrix.replicates' must be a count or a list, got 'two'",
        ),
    ],
)
def test_a_malformed_experiment_json_matrix_stops_collect_with_its_field(
    tmp_path, matrix, message
) -> None:
    exp = write_experiment(tmp_path / "results", tasks=1)
    (exp.exp_dir / "experiment.json").write_text(
        json.dumps({"kind": "experiment_record", "matrix": matrix})
    )
    proc = _collect("--experiment-dir", str(exp.exp_dir))
    assert proc.returncode == 2
    assert "experiment.json" in proc.stderr and message in proc.stderr
    assert not (exp.exp_dir / "tables").exists()


def test_parallel_and_serial_collection_give_the_same_tables(tmp_path) -> None:
    exp = write_experiment(tmp_path / "results", tasks=110, replicates=1, seed=3)
    serial = tables.collect_tables(experiment_runs.collect_runs(exp.exp_dir, jobs=1))
    parallel = tables.collect_tables(experiment_runs.collect_runs(exp.exp_dir, jobs=2))
    assert len(serial.runs) == 220
    for name in ("runs", "agent_tool_calls", "mllm_calls", "capability_combinations"):
        pd.testing.assert_frame_equal(getattr(serial, name), getattr(parallel, name))


@pytest.mark.parametrize(
    ("value", "summary"),
    [
        ({"x": 1e16, "y": float("nan")}, '{"x":1e+16,"y":NaN}'),  # orjson: 1e16, null
        ({"n": 2**70, "s": "\ud800é"}, '{"n":1180591620717411303424,"s":"\ud800é"}'),
        ({"ctl": "a\u0000\n\x7f"}, '{"ctl":"a\\u0000\\n\x7f"}'),
    ],
)
def test_input_summary_writes_what_the_standard_writer_writes(value, summary) -> None:
    assert call_records.summarize_input(value) == summary
    assert summary == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_the_forked_writer_writes_the_tables_the_inline_one_does(tmp_path, monkeypatch) -> None:
    exp = write_experiment(tmp_path / "results", tasks=30, replicates=2, seed=5, snapshots=4)
    extraction = experiment_runs.collect_runs(exp.exp_dir, jobs=1)
    monkeypatch.setattr(tables, "_FORK_FROM", 10**9)
    inline = tables.write_tables(exp.exp_dir, extraction)
    written = {p.name: p.read_bytes() for p in (exp.exp_dir / "tables").iterdir()}
    for path in (exp.exp_dir / "tables").iterdir():
        path.unlink()
    monkeypatch.setattr(tables, "_FORK_FROM", 1)
    forked = tables.write_tables(exp.exp_dir, extraction)
    pd.testing.assert_frame_equal(inline, forked)
    assert {p.name: p.read_bytes() for p in (exp.exp_dir / "tables").iterdir()} == written
    assert len(pd.read_csv(exp.exp_dir / "tables" / "agent_tool_calls.csv")) > 100
    assert len(pd.read_csv(exp.exp_dir / "tables" / "trajectory.csv")) > 60
    assert len(pd.read_csv(exp.exp_dir / "tables" / "call_effects.csv")) > 0


def test_a_failed_forked_table_write_is_an_error_naming_the_table(tmp_path, monkeypatch) -> None:
    exp = write_experiment(tmp_path / "results", tasks=2)
    extraction = experiment_runs.collect_runs(exp.exp_dir, jobs=1)

    def refuse(extraction: object) -> pd.DataFrame:
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(tables, "_FORK_FROM", 1)
    monkeypatch.setattr(tables, "agent_tool_calls_df", refuse)
    failed = "agent_tool_calls, trajectory, call_effects and call_effects_by_combination tables"
    with pytest.raises(tables.TableWriteError, match=failed):
        tables.write_tables(exp.exp_dir, extraction)
    assert (exp.exp_dir / "tables" / "runs.parquet").is_file()  # the others were written
    assert not (exp.exp_dir / "tables" / "agent_tool_calls.parquet").exists()


def test_docs_embed_the_declared_schema() -> None:
    assert schema_markdown() in (ROOT / "docs" / "tables.md").read_text(encoding="utf-8")


@given(
    st.recursive(
        st.text(max_size=400)
        | st.text(st.characters(categories=["Cs", "Cc", "Ll"]), max_size=4)
        | st.integers()
        | st.floats()
        | st.booleans()
        | st.none(),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
        max_leaves=20,
    )
)
def test_input_summary_marks_every_cut_with_the_original_length(value) -> None:
    text = call_records.summarize_input(value)
    full = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if "…[" not in text:
        assert text == full
    assert len(text) <= 400 + len(f"…[{10**9} chars]")


def test_run_reading_loads_no_other_stage() -> None:
    probe = (
        "import sys, veriharness.collect.run_rows; "
        "print(sorted(m for m in sys.modules if m.startswith('veriharness')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    modules = json.loads(loaded.replace("'", '"'))
    stages = {m.split(".")[1] for m in modules if m.count(".")}
    # The run folder's package and what it reads (the run record is the experiment's model).
    assert stages <= {"_util", "collect", "runfolder", "experiment"}, stages
    assert "veriharness.runfolder._files" in modules


def test_a_json_file_that_is_not_utf8_is_named_not_a_crash(tmp_path) -> None:
    (tmp_path / "metrics.json").write_bytes(b'{"metrics": "\xff"}')
    errors: list[str] = []
    assert read_metrics(tmp_path, errors) is None
    assert errors == ["metrics.json: not UTF-8 text (invalid start byte at byte 13)"]


def test_collect_builds_the_runs_table_once_and_lists_missing_runs(tmp_path, monkeypatch) -> None:
    exp = write_experiment(
        tmp_path / "results", tasks=2, faults={("base", "task-001", 1): "missing"}
    )
    built = []
    original = tables.runs_df

    def counting(extraction):
        built.append(len(extraction.extracts))
        return original(extraction)

    monkeypatch.setattr(tables, "runs_df", counting)
    expected = exp.write_expected(tmp_path / "expected.json")
    assert (
        cli.main(["collect", "--experiment-dir", str(exp.exp_dir), "--expected", str(expected)])
        == 0
    )
    assert built == [4]
    missing = pd.read_csv(exp.exp_dir / "tables" / "missing.csv")
    assert missing.to_dict("records") == [{"condition": "base", "task": "task-001", "replicate": 1}]


def test_the_model_proxys_records_become_agent_requests_rows_and_runs_sums(
    tmp_path: Path,
) -> None:
    exp = write_experiment(tmp_path / "results", tasks=2, replicates=1, faults={})
    run_dir = exp.exp_dir / "base" / "task-000" / "r1"
    base = {"kind": "agent_request", "method": "POST", "path": "/v1/messages", "model": "m"}
    lines = [
        base | {"time": "t0", "status": 401, "total_ms": 2.0, "request_bytes": 10,
                "response_bytes": 90, "error": "refused by the proxy: authentication_error: x"},
        base | {"time": "t1", "status": 200, "total_ms": 1500.0, "time_to_first_byte_ms": 20.0,
                "streamed": True, "input_tokens": 100, "output_tokens": 7,
                "cache_read_input_tokens": 50, "cache_creation_input_tokens": 3,
                "stop_reason": "end_turn", "request_bytes": 1000, "response_bytes": 800},
        base | {"time": "t2", "status": None, "total_ms": "slow", "request_bytes": 5,
                "response_bytes": 0, "error": "upstream connection failed: ConnectionRefusedError"},
    ]  # fmt: skip
    (run_dir / "agent_requests.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    proc = _collect("--experiment-dir", str(exp.exp_dir))
    assert proc.returncode == 0, proc.stderr
    tables_dir = exp.exp_dir / "tables"
    requests = pd.read_parquet(tables_dir / "agent_requests.parquet")
    assert list(requests.seq) == [0, 1, 2] and set(requests.task) == {"task-000"}
    assert list(requests.http_status[:2]) == [401, 200] and pd.isna(requests.http_status[2])
    assert requests.cache_read_tokens.iloc[1] == 50 and requests.stop_reason.iloc[1] == "end_turn"
    runs = pd.read_parquet(tables_dir / "runs.parquet")
    row = _row(runs, ("base", "task-000", 1))
    assert (row.agent_requests, row.agent_request_errors) == (3, 2)
    assert (row.proxy_input_tokens, row.proxy_output_tokens) == (100, 7)
    assert (row.proxy_cache_read_tokens, row.proxy_cache_write_tokens) == (50, 3)
    assert (row.agent_request_bytes, row.agent_response_bytes) == (1015, 890)
    assert row.agent_request_seconds == 1.502  # the unreadable total_ms counts as nothing...
    assert "agent_requests.jsonl line 3 total_ms" in row.read_errors  # ...and is named
    other = _row(runs, ("base", "task-001", 1))
    assert pd.isna(other.agent_requests) and "agent_requests" not in other.read_errors


def test_the_models_the_provider_answered_with_are_kept_per_request_and_listed_per_run(
    tmp_path: Path,
) -> None:
    # The provider switched snapshots within one run: both are listed, sorted, once each.
    exp = write_experiment(tmp_path / "results", tasks=2, replicates=1, faults={})
    run_dir = exp.exp_dir / "base" / "task-000" / "r1"
    base = {"kind": "agent_request", "method": "POST", "path": "/v1/messages", "model": "m",
            "status": 200, "total_ms": 1.0}  # fmt: skip
    answered = ["m-20250929", "m-20250101", "m-20250929", None]
    lines = [base | {"time": f"t{i}", "response_model": m} for i, m in enumerate(answered)]
    (run_dir / "agent_requests.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    proc = _collect("--experiment-dir", str(exp.exp_dir))
    assert proc.returncode == 0, proc.stderr
    tables_dir = exp.exp_dir / "tables"
    requests = pd.read_parquet(tables_dir / "agent_requests.parquet")
    assert list(requests.model) == ["m"] * 4
    assert list(requests.response_model[:3]) == answered[:3]
    assert pd.isna(requests.response_model[3])
    runs = pd.read_parquet(tables_dir / "runs.parquet")
    row = _row(runs, ("base", "task-000", 1))
    assert list(row.agent_response_models) == ["m-20250101", "m-20250929"]
    assert row.agent_response_model_count == 2 and not row.read_errors
    other = _row(runs, ("base", "task-001", 1))  # no agent_requests.jsonl: nothing known
    assert other.agent_response_models is None and pd.isna(other.agent_response_model_count)
    csv = pd.read_csv(tables_dir / "runs.csv")
    shown = csv[(csv.task == "task-000")].agent_response_models.iloc[0]
    assert json.loads(shown) == ["m-20250101", "m-20250929"]


def test_every_row_an_extraction_builds_holds_only_its_tables_declared_columns(
    tmp_path: Path,
) -> None:
    exp = write_experiment(tmp_path / "results", tasks=2, replicates=1, faults={})
    run_dir = exp.exp_dir / "base" / "task-000" / "r1"
    request = {"kind": "agent_request", "time": "t0", "status": 200, "total_ms": 3.0}
    (run_dir / "agent_requests.jsonl").write_text(json.dumps(request) + "\n")
    call_id = pd.read_json(run_dir / "mllm_trace.jsonl", lines=True).call_id.iloc[0]
    annotator = AnnotatorInfo(
        kind="rule-based", id="rules", version="1", taxonomy_id="t", taxonomy_version="1"
    )
    annotation = CallAnnotation(call_id=call_id, status="ok", codes=["A1"])
    INFERRED_TAGS.write(
        run_dir,
        AnnotationRecord(annotator=annotator, annotator_digest="d", calls=[annotation]),
    )
    extraction = experiment_runs.collect_runs(exp.exp_dir, jobs=1)
    extracts = extraction.extracts
    row_tables: dict[str, Sequence[Mapping[str, object]]] = {
        "runs": [ex.run for ex in extracts],
        "agent_tool_calls": [r for ex in extracts for r in ex.tool_calls],
        "mllm_calls": [r for ex in extracts for r in ex.mllm_calls],
        "agent_requests": [r for ex in extracts for r in ex.agent_requests],
        "inferred_tags": [r for ex in extracts for r in ex.inferred],
    }
    for table, rows in row_tables.items():
        declared = {c.name for c in TABLES[table]}
        assert rows and all(set(row) <= declared for row in rows), table
    families = {k for ex in extracts for k in ex.families}
    assert families and all(k.startswith(tuple(f.prefix for f in RUNS_FAMILIES)) for k in families)


def test_a_row_field_without_a_column_type_or_declaration_is_refused_by_name() -> None:
    class Untyped(TypedDict):
        blob: Annotated[dict[str, int], Col("derived:blob", "a mapping")]

    class Undeclared(TypedDict):
        count: int

    with pytest.raises(TypeError, match=r"Untyped\.blob: no column dtype for the type"):
        columns_of(Untyped)
    with pytest.raises(TypeError, match=r"Undeclared\.count: a column needs Annotated"):
        columns_of(Undeclared)


def test_column_dtypes_follow_the_row_types() -> None:
    by_name = {c.name: c.dtype for c in MLLM_CALLS}
    assert by_name["call_id"] == "string" and by_name["seq"] == "Int64"
    assert by_name["latency_ms"] == "Float64" and by_name["truncated"] == "boolean"
    assert by_name["tags"] == "list<string>"
    assert [c.name for c in RUNS[:4]] == ["experiment", "condition", "task", "replicate"]


def test_an_estimated_run_cost_is_null_in_cost_usd_and_marked_never_summed_as_a_cost(
    tmp_path: Path,
) -> None:
    exp = write_experiment(tmp_path / "results", tasks=2, replicates=1, faults={})
    run_dir = exp.exp_dir / "base" / "task-000" / "r1"
    outcome = json.loads((run_dir / "outcome.json").read_text())
    spend = {"agent_usd": 0.4, "mllm_usd": 0.1, "total_usd": 0.5, "agent_source": "proxy"}
    outcome["spend"] = spend | {"cost_estimated": True, "estimated_usd": 0.3}
    (run_dir / "outcome.json").write_text(json.dumps(outcome))
    request = {"kind": "agent_request", "method": "POST", "path": "/v1/messages", "time": "t",
               "status": 200, "total_ms": 5.0, "request_bytes": 4000, "max_tokens": 512,
               "cost_unpriced_reason": "the provider reported no usage"}  # fmt: skip
    (run_dir / "agent_requests.jsonl").write_text(json.dumps(request) + "\n")
    proc = _collect("--experiment-dir", str(exp.exp_dir))
    assert proc.returncode == 0, proc.stderr
    runs = pd.read_parquet(exp.exp_dir / "tables" / "runs.parquet")
    row = _row(runs, ("base", "task-000", 1))
    assert pd.isna(row.cost_usd) and pd.isna(row.agent_cost_usd) and pd.isna(row.mllm_cost_usd)
    assert row.cost_estimated and row.charged_usd == 0.5 and row.estimated_usd == 0.3
    assert row.agent_requests_unpriced == 1
    requests = pd.read_parquet(exp.exp_dir / "tables" / "agent_requests.parquet")
    assert requests.cost_unpriced_reason.iloc[0] == "the provider reported no usage"
    assert requests.max_tokens.iloc[0] == 512


def test_an_imported_answer_whose_scoring_failed_is_score_failed_not_ok(tmp_path) -> None:
    run_dir = tmp_path / "external:ref" / "t" / "r1"
    (run_dir / "answer").mkdir(parents=True)
    (run_dir / "answer" / "answer.html").write_text("<p>hi</p>")
    outcome = {
        "kind": "external_answer",
        "status": "ok",
        "set": "ref",
        "condition": "external:ref",
        "task": "t",
        "source": "dir",
        "source_path": "answers/<task>/answer.html",
        "answer_present": True,
    }
    (run_dir / "outcome.json").write_text(json.dumps(outcome))
    failed = {"status": "score_failed", "metrics": {}, "details": {"reason": "states.json: absent"}}
    (run_dir / "metrics.json").write_text(json.dumps(failed))
    row = trace_reading.extract_run(tmp_path, "x", trace_reading.RunKey("external:ref", "t", 1)).run
    assert (row["status"], row["reason"]) == ("score_failed", "score_failed: states.json: absent")
