"""The provider's pace: a session that meets 429s finishes `ok` without a redo, its proxy holding
Claude Code's retries until the provider's retry-after has passed, and never re-sending a
request itself; the shared pace's rules on their own."""

from __future__ import annotations

import json
import multiprocessing
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from support.sessions import TASK, offline_plan
from veriharness.agent.request_record import REQUESTS_FILE, read_requests
from veriharness.agent.session import AGENT_PACE, run_session
from veriharness.offline.server import Faults, running_offline_server
from veriharness.pace.provider_pace import (
    HEADROOM,
    Held,
    PaceState,
    ProviderPace,
    Sent,
    read_signals,
)

RETRY_AFTER_S = 2.0


@pytest.mark.slow
def test_a_session_that_meets_429s_ends_ok_without_a_redo(tmp_path: Path) -> None:
    faults = Faults(kind="status", status=429, first=2, retry_after_s=RETRY_AFTER_S)
    log = tmp_path / "received.jsonl"
    with running_offline_server(log, faults) as gateway:
        plan = offline_plan(
            tmp_path, TASK, endpoint="gateway", base_url=gateway, api_key_env="VH_PACE_KEY",
            infra_retries=2,
        )  # fmt: skip
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("VH_PACE_KEY", "gateway-key")
            outcome = run_session(plan)
    assert (outcome.status, len(outcome.attempts)) == ("ok", 1), outcome.error
    records = [
        r for r in read_requests(plan.run_dir / REQUESTS_FILE) if r.path.endswith("messages")
    ]
    statuses = [r.status for r in records]
    assert statuses[:2] == [429, 429] and set(statuses[2:]) == {200}, statuses
    # Claude Code retried on its own, and no retry went out before the retry-after had passed
    # (Claude Code waits for it too; what it did not wait, the proxy held).
    assert all(r.held_ms is not None for r in records)
    for refused, retry in zip(records[:2], records[1:3], strict=True):
        gap = datetime.fromisoformat(retry.time) - datetime.fromisoformat(refused.time)
        sent_after = gap.total_seconds() + (retry.held_ms or 0) / 1000
        assert sent_after >= RETRY_AFTER_S * 0.95, (refused, retry)
    # Every request the proxy sent reached the provider once: the proxy re-sent nothing.
    received = [json.loads(line) for line in log.read_text().splitlines()]
    sent = [r for r in received if urlsplit(r["path"]).path.endswith("/messages")]
    assert len(sent) == len(records)
    assert outcome.paced_seconds is not None and outcome.admission_wait_seconds is not None
    events = (plan.ledger.experiment_dir / "pace" / f"{AGENT_PACE}.jsonl").read_text()
    assert events.count('"status":429') == 2


def test_a_429_blocks_every_requester_until_its_retry_after(tmp_path: Path) -> None:
    first, second = ProviderPace(tmp_path, "p"), ProviderPace(tmp_path, "p")
    held = first.hold(40)
    assert held.seconds < 0.1
    first.observe(held, 429, {"retry-after": "1.5"}, None)
    waited, reason = second.saturated_for()
    assert 1.0 < waited <= 1.5 and reason is not None and "retry-after" in reason
    began = time.monotonic()
    second.hold(40)
    assert time.monotonic() - began >= 1.0


def test_a_stated_token_limit_is_kept_to_across_the_minute() -> None:
    state = PaceState(limit_tokens=1000, answered=1)
    now = 1000.0
    assert state.wait_for(400, now) == (0.0, None)
    state.sent = [Sent(at=now - 50, tokens=500, id="1"), Sent(at=now - 10, tokens=300, id="2")]
    wait, reason = state.wait_for(200, now)  # 1000 > 0.9 x 1000: the oldest must leave first
    assert reason == "tokens per minute" and wait == pytest.approx(10.0)
    assert state.wait_for(int(HEADROOM * 1000) - 800, now) == (0.0, None)


def test_the_first_request_goes_alone_until_the_provider_has_answered(tmp_path: Path) -> None:
    # Sixty-four sessions starting together must not send sixty-four first requests before the
    # provider has said its limits; new sessions wait to start too.
    first, second = ProviderPace(tmp_path, "p"), ProviderPace(tmp_path, "p")
    probe = first.hold(4000)
    waited, reason = second.saturated_for()
    assert waited > 50 and reason == "the provider's first answer is awaited"
    first.observe(probe, 200, {"anthropic-ratelimit-requests-limit": "50"}, 1000)
    assert second.saturated_for() == (0.0, None)
    assert second.hold(4000).seconds < 0.5
    # A first request never answered (its session killed) holds the others a minute at most.
    state = PaceState(sent=[Sent(at=1000.0, tokens=10, id="lost")])
    assert state.wait_for(10, 1030.0)[0] == pytest.approx(30.0)
    assert state.wait_for(10, 1061.0) == (0.0, None)


def test_rate_limit_headers_of_both_providers_are_read() -> None:
    anthropic = read_signals(
        200,
        {"anthropic-ratelimit-tokens-limit": "80000", "anthropic-ratelimit-requests-limit": "50"},
        0.0,
    )
    assert (anthropic.limit_tokens, anthropic.limit_requests) == (80000, 50)
    openai = read_signals(
        429,
        {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s",
         "Retry-After-Ms": "1500"},
        0.0,
    )  # fmt: skip
    assert (openai.retry_after_s, openai.reset_s) == (1.5, 360.0)


def _hold_many(folder: str, count: int) -> None:
    pace = ProviderPace(Path(folder), "shared")
    for _ in range(count):
        pace.hold(400)


def test_processes_share_one_pace_through_the_folder(tmp_path: Path) -> None:
    """Two processes send under a stated limit of 10 requests a minute: together they get
    HEADROOM x 10 through at once, not 10 each."""
    pace = ProviderPace(tmp_path, "shared")
    # An answer to a request counted elsewhere: only its stated limit is learnt.
    pace.observe(Held(0.0, "elsewhere"), 200, {"x-ratelimit-limit-requests": "10"}, None)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        held = pool.starmap_async(_hold_many, [(str(tmp_path), 6), (str(tmp_path), 6)])
        deadline = time.time() + 40
        while len(_sent(tmp_path)) < int(HEADROOM * 10) and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # long enough for a tenth to slip through if the pace were not shared
        assert len(_sent(tmp_path)) == int(HEADROOM * 10)
        assert not held.ready()
        pool.terminate()


def _sent(folder: Path) -> list[Sent]:
    """The last minute's requests; read without the writers' lock, so a read that meets a write
    under way is read again."""
    for _ in range(50):
        try:
            state = PaceState.model_validate_json((folder / "shared.json").read_text())
        except ValueError:
            time.sleep(0.01)
            continue
        return state.recent(time.time())
    raise AssertionError("the shared pace state stayed unreadable")
