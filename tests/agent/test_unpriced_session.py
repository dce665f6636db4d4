"""The agent model answering without usage is never priced at $0 (P-36), through a real
`run_session`: the real `claude` CLI in its sandbox, the real proxy, and the offline model made
to drop ``usage`` from its Messages answers. Each answered request's record names the reason and
the request's max_tokens, the run's spend.jsonl has null costs and the estimates the caps counted,
the outcome marks its cost as estimated; and with a small cap the estimates stop the session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.test_faults import _faults, _plan
from veriharness.agent.charges import spend_settings
from veriharness.agent.request_record import REQUESTS_FILE, read_requests
from veriharness.agent.session import run_session
from veriharness.experiment.prices import TokenPrice
from veriharness.spend.ledger import read_stop
from veriharness.spend.prices import NO_USAGE, cost_usd, estimate_tokens

pytestmark = pytest.mark.slow

TASK = "Recreate the screenshot `reference.png` as a single answer.html in the working directory.\n"
PRICE = TokenPrice(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


def _with_task(plan_dir: Path) -> None:
    (plan_dir / "system_prompt.md").write_text(TASK)  # the offline agent then works several turns


def _answered(run_dir: Path) -> list:
    records = read_requests(run_dir / REQUESTS_FILE)
    return [r for r in records if r.path.endswith("/v1/messages") and r.status == 200]


def test_agent_replies_without_usage_are_unpriced_and_charged_at_the_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _faults(monkeypatch, kind="no_usage", api="messages")
    plan = _plan(tmp_path, agent_price=PRICE)
    _with_task(plan.run_dir)
    outcome = run_session(plan)
    answered = _answered(plan.run_dir)
    assert len(answered) >= 2, outcome
    for record in answered:
        assert record.input_tokens is None and record.output_tokens is None
        assert record.cost_unpriced_reason == NO_USAGE
        assert record.max_tokens is not None and record.max_tokens > 0
    lines = [json.loads(x) for x in (plan.run_dir / "spend.jsonl").read_text().splitlines()]
    agent = [x for x in lines if x["source"] == "agent"]
    assert len(agent) == len(answered)
    for line, record in zip(agent, answered, strict=True):
        assert line["cost_usd"] is None and line["cost_unpriced_reason"] == NO_USAGE
        tokens = estimate_tokens(record.request_bytes, record.max_tokens)
        assert line["estimated_tokens"] == tokens.model_dump()
        assert line["estimated_usd"] == pytest.approx(cost_usd(PRICE, tokens))
    assert outcome.spend.cost_estimated is True
    assert outcome.spend.agent_usd == pytest.approx(sum(x["estimated_usd"] for x in agent))
    assert outcome.spend.estimated_usd == pytest.approx(outcome.spend.agent_usd)


def test_a_small_cap_still_stops_a_session_whose_replies_report_no_usage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _faults(monkeypatch, kind="no_usage", api="messages")
    run_dir = tmp_path / "results" / "exp" / "cond" / "task" / "r1"
    # One request's estimate (its max_tokens alone at $15/M) is far above this cap.
    spend = spend_settings(run_dir, max_usd=0.01)
    plan = _plan(tmp_path, agent_price=PRICE, spend=spend)
    _with_task(plan.run_dir)
    outcome = run_session(plan)
    assert outcome.status == "budget_exhausted" and outcome.reason == "budget"
    stop = read_stop(plan.run_dir)
    assert stop is not None and stop.cap == "max_usd" and stop.spent_usd > 0.01
    assert outcome.spend.cost_estimated is True
    assert len(_answered(plan.run_dir)) == 1  # the first estimate crossed the cap
