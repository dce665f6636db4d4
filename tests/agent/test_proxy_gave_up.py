"""A request the provider's pace holds is released as soon as its agent gives up, through the
real proxy and a real provider stub: the hold ends, the request is recorded unsent with the time
it was held, and it is counted against no limit (the pace's slot is free for the next request).

The agent gives up in the ways a client does: a real HTTP client's timeout, and a client that
had already sent its next request on the same connection (HTTP/1.1 pipelining) before hanging
up, whose unread bytes stand before the end of the connection."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from agent.test_proxy import PAYLOAD, REAL_KEY, TOKEN, Stub, _blocked_pace
from agent.test_proxy import stub as stub  # the provider stub fixture
from veriharness.agent.proxy import Upstream, running_proxy
from veriharness.agent.request_record import read_requests
from veriharness.pace.provider_pace import PaceState
from veriharness.runfolder.agent_requests import AgentRequest

_REQUEST = (
    b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: %b\r\n"
    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
    % (TOKEN.encode(), len(PAYLOAD), PAYLOAD)
)


def _record_while_blocked(path: Path, count: int) -> list[AgentRequest]:
    """The proxy's records once it has `count`, the pace still blocking every request."""
    for _ in range(100):
        if path.is_file() and len(records := read_requests(path)) >= count:
            return records
        time.sleep(0.1)
    raise AssertionError(f"the held request was not released within 10 s ({path})")


def _released(stub: Stub, tmp_path: Path, record: AgentRequest) -> None:
    """What a released request leaves: nothing sent, its hold recorded, nothing counted."""
    _blocked_pace(tmp_path / "pace", blocked=False)  # a proxy still holding would now send
    time.sleep(2.0)
    assert stub.received == []
    assert record.status is None and (record.held_ms or 0) >= 900
    assert "the agent closed its connection" in (record.error or "")
    assert "not sent" in (record.error or "")
    state = PaceState.model_validate_json((tmp_path / "pace" / "provider.json").read_text())
    assert state.sent == []


def test_a_held_request_is_released_when_the_http_clients_timeout_passes(
    stub: Stub, tmp_path: Path
) -> None:
    pace = _blocked_pace(tmp_path / "pace", blocked=True)
    record_path = tmp_path / "agent_requests.jsonl"
    with running_proxy(Upstream(stub.base, REAL_KEY), TOKEN, record_path, pace=pace) as url:
        headers = {"x-api-key": TOKEN, "content-type": "application/json"}
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/v1/messages", content=PAYLOAD, headers=headers, timeout=1.5)
        [record] = _record_while_blocked(record_path, 1)
        _released(stub, tmp_path, record)


def test_a_held_request_is_released_when_its_client_hangs_up_after_pipelining_another(
    stub: Stub, tmp_path: Path
) -> None:
    pace = _blocked_pace(tmp_path / "pace", blocked=True)
    record_path = tmp_path / "agent_requests.jsonl"
    with running_proxy(Upstream(stub.base, REAL_KEY), TOKEN, record_path, pace=pace) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as agent:
            agent.sendall(_REQUEST)
            assert pace.holding.wait(10)
            agent.sendall(_REQUEST)  # the next request, pipelined behind the held one
            time.sleep(1.0)  # held by the blocked pace
        [record] = _record_while_blocked(record_path, 1)
        _released(stub, tmp_path, record)
