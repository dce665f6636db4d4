"""The real Messages API stream through the real `claude` CLI and the model proxy: a session meets
each of the offline model's stream modes (`offline/stream_modes.py`), and its transcript, its
`agent_requests.jsonl` and its prices are right for them.

- Thinking, redacted thinking, pings and usage split between `message_start` and
  `message_delta`, in one session whose agent also reads a file too large for Claude Code to
  take unmeasured, so the CLI calls `/v1/messages/count_tokens`. It runs as `claude-sonnet-4-5`
  through a renaming gateway (`support/gateway.py`), so Claude Code prices its usage with its own
  table and our price can be compared with its `total_cost_usd`.
- An `overloaded_error` in the middle of a stream: Claude Code asks again at once without
  streaming, even with its retries set to none, and the session ends ok.
- HTTP 529: Claude Code retries it (its own retries), and the session ends ok; with its retries
  set to none the session ends `infra_error`, and run-agent's next attempt (`infra_retries`) ends
  ok.

Each session is one or two model requests of a scripted agent (`ONLY_FIRST`), a few seconds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.test_claude_cost import KNOWN, SONNET
from support.gateway import GATEWAY_KEY_ENV, gateway_plan, renaming_gateway
from support.sessions import TASK, offline_plan
from veriharness.agent.charges import AgentCharges, spend_settings
from veriharness.agent.request_record import REQUESTS_FILE, is_model_request, read_requests
from veriharness.agent.session import run_session
from veriharness.offline.agent_policy import ONLY_FIRST, runs_first, uses_first
from veriharness.offline.server import running_offline_server
from veriharness.offline.stream_modes import stream_mode
from veriharness.runfolder.agent_requests import AgentRequest
from veriharness.runfolder.outcome import AgentOutcome
from veriharness.runfolder.spend import TokenCounts
from veriharness.spend.ledger import SpendGate
from veriharness.spend.prices import cost_usd

pytestmark = pytest.mark.slow

# About 70 KB: more than Claude Code reads without measuring it, less than it refuses to read.
BIG_FILE = runs_first("seq -f 'line %g of a file Claude Code measures first' 2000 > big.txt")
READ_BIG = uses_first("Read", {"file_path": "big.txt"})


@dataclass
class Session:
    outcome: AgentOutcome
    requests: list[AgentRequest]
    run_dir: Path
    received: list[dict[str, Any]]  # what the offline model received, in order

    def transcript(self) -> list[dict[str, Any]]:
        lines = (self.run_dir / "transcript.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    def ledger(self) -> list[dict[str, Any]]:
        path = self.run_dir.parents[2] / "spend" / "ledger.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


def _modes(*modes: str) -> str:
    # A label of the test run's own keeps each session's failure counts apart in this process.
    return stream_mode(*modes, f"#{uuid.uuid4().hex}")


def _received(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _through_gateway(tmp_path: Path, prompt: str, **overrides: Any) -> Session:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(GATEWAY_KEY_ENV, "gateway-key")
        with (
            running_offline_server(tmp_path / "received.jsonl") as offline,
            renaming_gateway(offline, KNOWN) as gateway,
        ):
            plan = gateway_plan(tmp_path, gateway, KNOWN, SONNET, prompt, **overrides)
            outcome = run_session(plan)
    requests = read_requests(plan.run_dir / REQUESTS_FILE)
    return Session(outcome, requests, plan.run_dir, _received(tmp_path / "received.jsonl"))


def _offline(tmp_path: Path, prompt: str, **overrides: Any) -> Session:
    plan = offline_plan(tmp_path, prompt, isolation="none", network="open", **overrides)
    outcome = run_session(plan)
    requests = read_requests(plan.run_dir / REQUESTS_FILE)
    return Session(
        outcome, requests, plan.run_dir, _received(plan.run_dir / "model_requests.jsonl")
    )


def _priced(request: AgentRequest) -> float:
    tokens = TokenCounts.of(
        request.input_tokens,
        request.output_tokens,
        request.cache_read_input_tokens,
        request.cache_creation_input_tokens,
    )
    return cost_usd(SONNET, tokens)


def _model_requests(session: Session) -> list[AgentRequest]:
    return [r for r in session.requests if is_model_request(r.method, r.path)]


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    prompt = TASK + _modes("thinking", "redacted_thinking", "ping", "split_usage")
    yield _through_gateway(
        tmp_path_factory.mktemp("whole"), prompt + BIG_FILE + READ_BIG + ONLY_FIRST
    )


def test_thinking_blocks_reach_the_transcript_and_come_back_signed(whole: Session) -> None:
    assert whole.outcome.status == "ok", whole.outcome.error
    blocks = [
        block
        for event in whole.transcript()
        if event.get("type") == "assistant"
        for block in event["message"]["content"]
    ]
    thinking = [b for b in blocks if b["type"] == "thinking"]
    redacted = [b for b in blocks if b["type"] == "redacted_thinking"]
    turns = {e["message"]["id"] for e in whole.transcript() if e.get("type") == "assistant"}
    # One of each per answer of the model: the Bash call, the Read and the end.
    assert len(thinking) == len(redacted) == len(turns) == 3
    assert all(b["signature"] and b["thinking"] for b in thinking)
    # Each later request carried the earlier turns' blocks as they came (the offline model
    # refuses a block it did not sign, so the session's ok says the same).
    last = [r["body"] for r in whole.received if r["path"].startswith("/v1/messages?")][-1]
    sent = [
        block
        for message in last["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] in ("thinking", "redacted_thinking")
    ]
    assert sent == [b for pair in zip(thinking[:2], redacted[:2], strict=True) for b in pair]


def test_split_usage_and_thinking_are_priced_as_claude_code_prices_them(whole: Session) -> None:
    answered = [r for r in _model_requests(whole) if r.input_tokens]
    assert answered and all(r.cache_read_input_tokens and r.cache_creation_input_tokens
                            for r in answered)  # fmt: skip
    # The provisional output count of message_start was replaced by message_delta's.
    assert all((r.output_tokens or 0) > 1 and r.stop_reason for r in answered)
    ours, theirs = whole.outcome.spend.agent_usd, whole.outcome.total_cost_usd
    assert ours is not None and theirs is not None
    assert ours == pytest.approx(theirs, rel=1e-6)
    assert ours == pytest.approx(sum(_priced(r) for r in answered), rel=1e-9)
    ledger = [x for x in whole.ledger() if x["source"] == "agent"]
    assert len(ledger) == len(answered)
    assert sum(x["cost_usd"] for x in ledger) == pytest.approx(ours)


def test_every_answer_has_its_request_id_recorded(whole: Session) -> None:
    ids = [r.request_id for r in whole.requests]
    assert all(i is not None and i.startswith("req_offline_") for i in ids), ids
    assert len(set(ids)) == len(ids)


def test_count_tokens_is_passed_recorded_and_neither_charged_nor_paced(whole: Session) -> None:
    counted = [r for r in whole.requests if r.path == "/v1/messages/count_tokens"]
    assert counted, [r.path for r in whole.requests]
    for one in counted:
        assert (one.method, one.status, one.error) == ("POST", 200, None)
        assert one.input_tokens is one.output_tokens is None
        assert one.held_ms is None  # not held to the pace, while every model request was
    assert all(r.held_ms is not None for r in _model_requests(whole))
    assert any(r["path"].startswith("/v1/messages/count_tokens") for r in whole.received)
    # The ledger charged the model requests alone (previous test), and the caps count the ledger.
    assert not any("count_tokens" in x["request_id"] for x in whole.ledger())


def test_a_count_tokens_record_is_never_charged_whatever_it_holds(tmp_path: Path) -> None:
    run_dir = tmp_path / "exp" / "cond" / "task" / "r1"
    run_dir.mkdir(parents=True)
    charges = AgentCharges(SpendGate(spend_settings(run_dir)), KNOWN, SONNET, {})
    fields: dict[str, Any] = dict(time="t", method="POST", total_ms=1.0, input_tokens=900)
    charges.charge(AgentRequest(path="/v1/messages/count_tokens", output_tokens=0, **fields))
    assert charges.total == 0 and not (tmp_path / "exp" / "spend").exists()
    charges.charge(AgentRequest(path="/v1/messages", output_tokens=10, **fields))
    assert charges.total == pytest.approx(cost_usd(SONNET, TokenCounts.of(900, 10)))


@pytest.fixture(scope="module")
def overloaded(tmp_path_factory: pytest.TempPathFactory) -> Session:
    prompt = TASK + _modes("overloaded_error") + ONLY_FIRST
    return _through_gateway(tmp_path_factory.mktemp("overloaded"), prompt, api_retries=0)


def test_a_mid_stream_overload_is_asked_again_unstreamed_by_the_cli(overloaded: Session) -> None:
    outcome = overloaded.outcome
    assert outcome.status == "ok", outcome.error
    assert [a.status for a in outcome.attempts] == ["ok"]
    cut, whole = _model_requests(overloaded)
    assert (cut.status, cut.streamed, cut.error) == (200, True, "overloaded_error: Overloaded")
    assert (whole.status, whole.streamed, whole.error) == (200, False, None)
    assert whole.stop_reason == "end_turn" and cut.request_id != whole.request_id


def test_a_cut_stream_is_charged_at_the_usage_it_reported(overloaded: Session) -> None:
    cut, whole = _model_requests(overloaded)
    assert cut.input_tokens and cut.output_tokens == 0  # message_start's counts
    ours, theirs = overloaded.outcome.spend.agent_usd, overloaded.outcome.total_cost_usd
    assert ours is not None and theirs is not None
    # Claude Code counts only the answer it used; the cut stream's input is ours to count too.
    assert theirs == pytest.approx(_priced(whole), rel=1e-6)
    assert ours == pytest.approx(_priced(cut) + _priced(whole), rel=1e-9)


def test_http_529_is_retried_by_the_cli_and_the_session_ends_ok(tmp_path: Path) -> None:
    session = _offline(tmp_path, TASK + _modes("http_529") + ONLY_FIRST)
    assert session.outcome.status == "ok", session.outcome.error
    assert [a.status for a in session.outcome.attempts] == ["ok"]
    refused, answered = _model_requests(session)
    assert (refused.status, refused.error) == (529, "overloaded_error: Overloaded")
    assert refused.request_id and refused.input_tokens is None
    assert answered.status == 200 and answered.stop_reason == "end_turn"


def test_http_529_without_cli_retries_is_an_infra_error_attempted_again(tmp_path: Path) -> None:
    prompt = TASK + _modes("http_529") + ONLY_FIRST
    session = _offline(tmp_path, prompt, api_retries=0, infra_retries=1)
    assert session.outcome.status == "ok", session.outcome.error
    first, second = session.outcome.attempts
    assert first.status == "infra_error" and "HTTP 529" in (first.cause or "")
    assert (second.status, first.files) == ("ok", "attempts/1")
    (kept,) = read_requests(session.run_dir / "attempts" / "1" / REQUESTS_FILE)
    assert (kept.status, kept.error) == (529, "overloaded_error: Overloaded")
    assert [r.status for r in _model_requests(session)] == [200]
