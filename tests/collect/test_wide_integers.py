"""An integer past 64 bits in any run file `collect` reads is a named read error, not a crash.

No table column, orjson, pandas' Int64 nor parquet holds such an integer; the run-folder reader
drops the field that holds one and names it, and the rest of the run is read. One synthetic run
folder gets one in each JSON file kind, and the real `veriharness collect` reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from support.cli import veriharness
from support.synthetic_runs import write_experiment
from veriharness.runfolder.agent_requests import AgentRequest

RUN = ("base", "task-000", 1)

# file -> (where the integer goes, the integer): past int64 above and below, past uint64, huge.
PLANTED: dict[str, tuple[tuple[str | int, ...], int]] = {
    "outcome.json": (("usage", "input_tokens"), 2**63),
    "metrics.json": (("metrics", "ssim"), 10**30),
    "run.json": (("written_at_ns",), 2**64),
    "audit.json": (("evidence", "count"), 10**19),
    "render/render.json": (("dom_nodes",), 10**39),
    "agent_requests.jsonl": (("output_tokens",), -(2**63) - 1),
    "mllm_trace.jsonl": (("usage", "input_tokens"), 10**25),
    "transcript.jsonl": (("num_turns",), 2**64 - 1),
    "snapshots/index.jsonl": (("turn",), 10**20),
    "trajectory.json": (("snapshots", 0, "scored_as"), 2**70),
}


def _plant(value: dict[str, Any], place: tuple[str | int, ...], number: int) -> None:
    for part in place[:-1]:
        value = value[part]  # type: ignore[index]
    value[place[-1]] = number  # type: ignore[index]


def _line_of(path: Path, lines: list[dict[str, Any]]) -> int:
    """The line a number is planted in: a completed call's (it has usage), the result event,
    else the first."""
    for index, line in enumerate(lines):
        if line.get("event") == "mllm_call_completed" or line.get("type") == "result":
            return index
    assert path.name in ("agent_requests.jsonl", "index.jsonl"), path
    return 0


def _agent_request() -> dict[str, Any]:
    record = AgentRequest(seq=1, time="2026-11-30T10:00:00Z", method="POST", path="/v1/messages",
                          status=200, total_ms=5.0, input_tokens=10, output_tokens=20)  # fmt: skip
    return record.model_dump(mode="json")


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("wide")
    exp = write_experiment(root / "results", tasks=1, snapshots=2)
    run_dir = exp.exp_dir.joinpath(RUN[0], RUN[1], f"r{RUN[2]}")
    (run_dir / "agent_requests.jsonl").write_text(json.dumps(_agent_request()) + "\n")
    for name, (place, number) in PLANTED.items():
        path = run_dir / name
        if name.endswith(".jsonl"):
            lines = [json.loads(line) for line in path.read_text().splitlines()]
            _plant(lines[_line_of(path, lines)], place, number)
            path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        else:
            value = json.loads(path.read_text())
            _plant(value, place, number)
            path.write_text(json.dumps(value))
    expected = exp.write_expected(root / "expected.json")
    proc = veriharness("collect", "--experiment-dir", exp.exp_dir, "--expected", expected)
    return exp, proc


def _frame(exp: Any, name: str) -> pd.DataFrame:
    return pd.read_parquet(exp.exp_dir / "tables" / f"{name}.parquet")


def _ours(frame: pd.DataFrame) -> pd.DataFrame:
    keys = (frame.condition == RUN[0]) & (frame.task == RUN[1]) & (frame.replicate == RUN[2])
    return frame[keys]


def test_collect_reads_a_run_with_a_wide_integer_in_every_file_kind(collected) -> None:
    _, proc = collected
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("name", list(PLANTED))
def test_each_wide_integer_is_a_named_read_error(collected, name: str) -> None:
    exp, proc = collected
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = _ours(_frame(exp, "runs")).iloc[0].read_errors
    place, number = PLANTED[name]
    field = ".".join(map(str, place))
    assert f"{field}: {number} is outside the 64-bit integer range; dropped" in errors, errors
    assert errors.count(f" {number} is outside") == 1  # named once, by the reader
    # Only the planted run has read errors.
    others = _frame(exp, "runs").drop(index=_ours(_frame(exp, "runs")).index)
    assert (others.read_errors.fillna("") == "").all()


def test_a_dropped_integer_leaves_its_column_null_and_the_rest_of_the_run_read(collected) -> None:
    exp, proc = collected
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = _ours(_frame(exp, "runs")).iloc[0]
    assert pd.isna(run.metric_ssim) and not pd.isna(run.metric_mae)
    assert pd.isna(run.input_tokens) and run.output_tokens == 4000
    requests = _ours(_frame(exp, "agent_requests"))
    assert len(requests) == 1 and pd.isna(requests.iloc[0].output_tokens)
    assert requests.iloc[0].input_tokens == 10
    snapshots = _ours(_frame(exp, "trajectory")).sort_values("snapshot")
    assert list(snapshots.snapshot) == [1, 2]
    assert pd.isna(snapshots.iloc[0].turn) and not pd.isna(snapshots.iloc[1].turn)
    assert pd.isna(snapshots.iloc[0].scored_as)
    calls = _ours(_frame(exp, "mllm_calls"))
    assert calls.input_tokens.isna().sum() == 1 and calls.output_tokens.notna().all()
