"""A provider reply without usage is never priced at $0 (P-36), through the real mllm server
process, a real MCP client and the embedded offline model answering without ``usage``: the
trace's completed event has a null cost and the reason, the ledger charges the conservative
estimate (the profile's max_output_tokens out, request bytes / 4 in) and marks it, and that
estimate is what the cap counts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from mllm.mllm_mcp_client import BlockingMcpClient
from mllm.mllm_test_data import request
from veriharness.offline.server import Faults, running_offline_server
from veriharness.spend.ledger import ledger_path, read_stop
from veriharness.spend.prices import NO_USAGE

PRICE = {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 0.0}
MAX_OUTPUT = 300

CATALOG = f"""
profiles:
  - name: default
    description: the offline vision model
    provider: {{api_style: openai-chat, base_url: "${{VERIHARNESS_OFFLINE_URL}}/v1",
                model: veriharness-offline-vision-1, max_output_tokens: {MAX_OUTPUT}}}
"""


def test_a_reply_without_usage_is_unpriced_and_charged_at_the_estimate(
    tmp_path: Path, workspace: Path
) -> None:
    exp_dir, run_dir = tmp_path / "exp", tmp_path / "exp" / "c" / "t" / "r1"
    run_dir.mkdir(parents=True)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(CATALOG)
    trace = run_dir / "mllm_trace.jsonl"
    # The output tokens alone cost MAX_OUTPUT * 8 / 1e6: the first call crosses this cap.
    spend = {
        "prices": {"default": PRICE},
        "ledger": {"experiment_dir": str(exp_dir), "run_dir": str(run_dir), "condition": "c",
                   "task": "t", "replicate": 1, "max_usd": MAX_OUTPUT * 8.0 / 1_000_000},
    }  # fmt: skip
    with running_offline_server(faults=Faults(kind="no_usage", api="chat")) as url:
        args = ["-m", "veriharness", "mllm-server", "--workspace", str(workspace),
                "--catalog", str(catalog), "--trace", str(trace),
                "--spend-json", json.dumps(spend)]  # fmt: skip
        env = {**os.environ, "VERIHARNESS_OFFLINE_URL": url}
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        with open(tmp_path / "stderr.log", "w") as errlog, BlockingMcpClient(params, errlog) as m:
            first = m.call(request())
            second = m.call(request())
    assert not first.is_error
    assert second.is_error and "spending cap reached" in second.content[0].text

    events = [json.loads(line) for line in trace.read_text().splitlines()]
    (done,) = [e for e in events if e["event"] == "mllm_call_completed"]
    assert done["usage"] == {"input_tokens": None, "output_tokens": None}
    assert done["cost_usd"] is None and done["cost_unpriced_reason"] == NO_USAGE

    (line,) = [json.loads(x) for x in ledger_path(exp_dir).read_text().splitlines()]
    assert line["cost_usd"] is None and line["cost_unpriced_reason"] == NO_USAGE
    estimated = line["estimated_tokens"]
    assert estimated["output_tokens"] == MAX_OUTPUT
    assert estimated["input_tokens"] > 1000  # the base64 screenshot's bytes / 4
    cost = (estimated["input_tokens"] * 2.0 + MAX_OUTPUT * 8.0) / 1_000_000
    assert line["estimated_usd"] == cost == done["estimated_usd"]
    assert line["total_usd"] == cost and line["request_id"] == done["call_id"]
    (run_line,) = [json.loads(x) for x in (run_dir / "spend.jsonl").read_text().splitlines()]
    assert run_line["cost_usd"] is None and run_line["estimated_usd"] == cost
    stop = read_stop(run_dir)
    assert stop is not None and stop.cap == "max_usd" and stop.spent_usd == cost
