"""Our price of a session agrees with Claude Code's own `total_cost_usd` for a model Claude Code
knows. The session runs the real claude CLI as `claude-sonnet-4-5` against a real HTTP stand-in
for a gateway: it renames the model to the offline model on the way in and back on the way out,
so Claude Code sees a known model name and prices the usage with its own list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.gateway import GATEWAY_KEY_ENV, gateway_plan, renaming_gateway
from support.sessions import TASK, offline_plan
from veriharness.agent.request_record import REQUESTS_FILE, read_requests
from veriharness.agent.session import run_session
from veriharness.experiment.prices import TokenPrice
from veriharness.offline.server import running_offline_server

pytestmark = pytest.mark.slow

KNOWN = "claude-sonnet-4-5"
# Its list price per million tokens, as Claude Code's own table has it (tier 3/15).
SONNET = TokenPrice(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)


def test_our_agent_cost_equals_claude_codes_for_a_model_it_knows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GATEWAY_KEY_ENV, "gateway-key")
    with running_offline_server() as offline, renaming_gateway(offline, KNOWN) as gateway:
        plan = gateway_plan(tmp_path, gateway, KNOWN, SONNET)
        outcome = run_session(plan)
    assert outcome.status == "ok", outcome.error
    records = [r for r in read_requests(plan.run_dir / REQUESTS_FILE) if r.input_tokens]
    assert records and all(r.model == KNOWN for r in records)
    ours, theirs = outcome.spend.agent_usd, outcome.total_cost_usd
    assert ours is not None and theirs is not None and theirs > 0
    assert ours == pytest.approx(theirs, rel=1e-6)
    assert outcome.spend.agent_source == "proxy"
    ledger_file = tmp_path / "results" / "exp" / "spend" / "ledger.jsonl"
    ledger = [json.loads(x) for x in ledger_file.read_text().splitlines()]
    assert sum(x["cost_usd"] for x in ledger if x["source"] == "agent") == pytest.approx(ours)


def test_the_proxy_refuses_the_request_after_the_cap_and_the_session_ends(
    tmp_path: Path,
) -> None:
    from veriharness.spend.ledger import SpendSettings

    run_dir = tmp_path / "results" / "exp" / "cond" / "task" / "r1"
    capped = SpendSettings(
        experiment_dir=tmp_path / "results" / "exp",
        run_dir=run_dir,
        condition="cond",
        task="task",
        replicate=1,
        max_usd=1e-6,  # the first request is admitted and crosses it
    )
    plan = offline_plan(
        tmp_path, TASK, agent_price=SONNET, spend=capped, isolation="none", network="open"
    )
    outcome = run_session(plan)
    assert (outcome.status, outcome.reason) == ("budget_exhausted", "budget")
    assert "spending cap reached" in (outcome.error or "")
    records = read_requests(run_dir / REQUESTS_FILE)
    # One request answered, and none after the cap reached the model. Whether the CLI sends a
    # second request before run-agent ends the session at the cap is the timing's choice: a
    # session may end first, so the guarantee is only that any later request was refused (a 400
    # naming the cap, recorded as such even when the session ended while the refusal was being
    # written) or got no answer at all.
    assert records[0].status == 200 and records[0].input_tokens
    later = records[1:]
    assert all(r.status in (400, None) for r in later), [(r.status, r.error) for r in later]
    assert all(r.input_tokens is None and r.output_tokens is None for r in later)
    refused = [r for r in later if r.status == 400]
    assert all("spending cap reached" in (r.error or "") for r in refused)
    ledger_file = tmp_path / "results" / "exp" / "spend" / "ledger.jsonl"
    ledger = [json.loads(x) for x in ledger_file.read_text().splitlines()]
    assert [x["source"] for x in ledger] == ["agent"]
    assert outcome.spend.agent_usd == pytest.approx(ledger[0]["cost_usd"])
