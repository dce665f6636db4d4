"""CallMLLM prices and caps through the real server process: each call's cost at its profile's
price lands in the trace and the ledger, and at the cap a call is refused before any provider
request, with a message naming the cap, and the run is marked to stop."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from mllm.mllm_mcp_client import BlockingMcpClient
from mllm.mllm_provider_stub import ProviderStub
from mllm.mllm_test_data import request
from veriharness.spend.ledger import ledger_path, read_stop

PRICE = {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 0.0}
# The stub's OpenAI-style usage: 13 prompt and 5 completion tokens.
CALL_COST = (13 * 2.0 + 5 * 8.0) / 1_000_000


def _server(workspace: Path, catalog: Path, trace: Path, spend: dict, stub: ProviderStub):
    args = ["-m", "veriharness", "mllm-server", "--workspace", str(workspace),
            "--catalog", str(catalog), "--trace", str(trace),
            "--spend-json", json.dumps(spend)]  # fmt: skip
    env = {**os.environ, "VH_STUB_URL": stub.base}
    return StdioServerParameters(command=sys.executable, args=args, env=env)


def test_calls_are_priced_charged_and_refused_at_the_cap(
    tmp_path: Path, stub: ProviderStub, workspace: Path, catalog_file: Path
) -> None:
    exp_dir, run_dir = tmp_path / "exp", tmp_path / "exp" / "c" / "t" / "r1"
    run_dir.mkdir(parents=True)
    trace = run_dir / "mllm_trace.jsonl"
    spend = {
        "prices": {"default": PRICE, "native": None},
        "ledger": {
            "experiment_dir": str(exp_dir),
            "run_dir": str(run_dir),
            "condition": "c",
            "task": "t",
            "replicate": 1,
            "max_usd": 1.5 * CALL_COST,  # the second call crosses it, the third is refused
        },
    }
    params = _server(workspace, catalog_file, trace, spend, stub)
    with open(tmp_path / "stderr.log", "w") as errlog, BlockingMcpClient(params, errlog) as mllm:
        results = [mllm.call(request()) for _ in range(3)]
        before = len(stub.received)
        unpriced = mllm.call(request() | {"model_profile": "native"})
    assert [r.is_error for r in results] == [False, False, True]
    refusal = results[2].content[0].text
    assert "spending cap reached" in refusal and "execution.max_usd" in refusal
    assert unpriced.is_error and "spending cap reached" in unpriced.content[0].text
    assert len(stub.received) == before  # refused before any provider request

    events = [json.loads(line) for line in trace.read_text().splitlines()]
    completed = [e for e in events if e["event"] == "mllm_call_completed"]
    assert [e["cost_usd"] for e in completed] == [CALL_COST, CALL_COST]
    rejected = [e for e in events if e["event"] == "mllm_call_rejected"]
    assert [e["budget"] for e in rejected] == [True, True]

    lines = [json.loads(x) for x in ledger_path(exp_dir).read_text().splitlines()]
    assert [x["source"] for x in lines] == ["mllm", "mllm"]
    assert lines[-1]["total_usd"] == 2 * CALL_COST
    assert lines[-1]["by_condition"] == {"c": {"agent": 0.0, "mllm": 2 * CALL_COST}}
    assert [x["request_id"] for x in lines] == [e["call_id"] for e in completed]
    stop = read_stop(run_dir)
    assert stop is not None and stop.cap == "max_usd" and stop.spent_usd == 2 * CALL_COST
