"""The model proxy through its boundary: a real HTTP client (httpx, and the real `claude` CLI) on
one side, a real HTTP server standing in for the provider on the other. Each fault is sent once
straight to the stub and once through the proxy, and the agent's side must see the same thing
both ways."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from veriharness.agent import proxy as proxy_module
from veriharness.agent.proxy import SseUsage, Upstream, running_proxy
from veriharness.agent.request_record import Refusal, RequestFacts, read_requests
from veriharness.pace.provider_pace import Held, PaceState, ProviderPace
from veriharness.runfolder.agent_requests import AgentRequest

TOKEN = "session-token-0123456789abcdef"
REAL_KEY = "sk-real-provider-key-fedcba9876543210"
BODY: dict[str, Any] = {"model": "claude-test-1", "max_tokens": 10, "stream": True, "messages": []}
PAYLOAD = json.dumps(BODY).encode()
# The model the stub answers with: a snapshot id of the one the request names, as the real API
# answers an alias.
SNAPSHOT = "claude-test-1-20250101"
EVENTS = [
    ("message_start", {"type": "message_start", "message": {"id": "m1", "model": SNAPSHOT,
     "usage": {"input_tokens": 120, "output_tokens": 1, "cache_read_input_tokens": 80,
               "cache_creation_input_tokens": 7}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
     "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
     "delta": {"type": "text_delta", "text": "Hello"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
     "usage": {"output_tokens": 42}}),
    ("message_stop", {"type": "message_stop"}),
]  # fmt: skip
SSE = [f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in EVENTS]
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


class Stub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _StubHandler)
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        self.first_event_read = threading.Event()  # set by a test once it has the first event
        self.holding = threading.Event()  # a /hang request arrived and is held
        self.dropped = threading.Event()  # the held request's connection was closed by the client

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _StubHandler(BaseHTTPRequestHandler):
    server: Stub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.received.append((self.path, dict(self.headers.items()), body))
        if "/status500" in self.path:
            self._json(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})
        elif "/status529" in self.path:
            self._json(529, OVERLOADED)
        elif "/hang" in self.path:
            self._hold()
        elif "/json" in self.path:
            self._json(200, {"id": "m", "model": SNAPSHOT, "stop_reason": "max_tokens",
                             "usage": {"input_tokens": 3, "output_tokens": 4}})  # fmt: skip
        else:
            self._stream(cut="/cut" in self.path, wait="/wait" in self.path)

    def _hold(self) -> None:
        """Accept the request and never answer; note when the client closes the connection."""
        self.server.holding.set()
        self.close_connection = True
        self.connection.settimeout(30)
        try:
            closed = self.rfile.read(1) == b""
        except OSError:
            closed = False
        if closed:
            self.server.dropped.set()

    def _json(self, status: int, value: Any) -> None:
        payload = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, cut: bool, wait: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index, event in enumerate(SSE):
            self.wfile.write(b"%x\r\n%b\r\n" % (len(event), event))
            if index == 0 and wait:  # the rest only after the client has seen the first event
                assert self.server.first_event_read.wait(10)
            if index == 2 and cut:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(base: str, path: str, key: str | None = TOKEN) -> httpx.Response:
    headers = {"x-api-key": key} if key else {}
    headers["content-type"] = "application/json"
    return httpx.post(f"{base}{path}", content=PAYLOAD, headers=headers, timeout=10)


def _records(tmp_path: Path) -> list[AgentRequest]:
    return read_requests(tmp_path / "agent_requests.jsonl")


def test_a_request_without_the_token_is_refused_recorded_and_not_forwarded(
    stub: Stub, tmp_path: Path
) -> None:
    with running_proxy(
        Upstream(stub.base, REAL_KEY), TOKEN, tmp_path / "agent_requests.jsonl"
    ) as url:
        for key in (None, "wrong-token"):
            answer = _post(url, "/v1/messages", key=key)
            assert answer.status_code == 401
            assert answer.json()["error"]["type"] == "authentication_error"
    assert stub.received == []
    records = _records(tmp_path)
    assert [(r.status, r.model) for r in records] == [(401, "claude-test-1")] * 2
    assert all("session token" in (r.error or "") for r in records)


def test_the_real_key_goes_upstream_and_the_token_never_does(stub: Stub, tmp_path: Path) -> None:
    with running_proxy(Upstream(stub.base + "/gw", REAL_KEY), TOKEN, tmp_path / "r.jsonl") as url:
        via_key = _post(url, "/v1/messages")
        via_bearer = httpx.post(
            f"{url}/v1/messages", content=PAYLOAD, headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert via_key.status_code == via_bearer.status_code == 200
    assert [path for path, _, _ in stub.received] == ["/gw/v1/messages"] * 2
    for _, headers, body in stub.received:
        assert headers["x-api-key"] == REAL_KEY
        assert TOKEN not in json.dumps(headers) and TOKEN.encode() not in body
        assert "authorization" not in {name.lower() for name in headers}


def test_a_stream_passes_unchanged_and_unbuffered_and_its_usage_is_recorded(
    stub: Stub, tmp_path: Path
) -> None:
    direct = _post(stub.base, "/v1/messages").content
    with running_proxy(
        Upstream(stub.base, REAL_KEY), TOKEN, tmp_path / "agent_requests.jsonl"
    ) as url:
        assert _post(url, "/v1/messages").content == direct == b"".join(SSE)
        # The stub holds the rest of the stream until the first event has reached the client:
        # a proxy that buffered would never deliver it.
        with httpx.stream(
            "POST", f"{url}/v1/messages/wait", content=PAYLOAD, headers={"x-api-key": TOKEN}
        ) as response:
            chunks = response.iter_raw()
            first = next(chunks)
            assert first.startswith(SSE[0][:20])
            stub.first_event_read.set()
            assert first + b"".join(chunks) == b"".join(SSE)
    record = _records(tmp_path)[-1]
    assert (record.status, record.streamed, record.stop_reason) == (200, True, "end_turn")
    assert (record.model, record.response_model) == ("claude-test-1", SNAPSHOT)
    assert (record.input_tokens, record.output_tokens) == (120, 42)
    assert (record.cache_read_input_tokens, record.cache_creation_input_tokens) == (80, 7)
    assert record.response_bytes == len(b"".join(SSE))
    assert record.request_bytes == len(PAYLOAD)
    assert record.time_to_first_byte_ms is not None and record.error is None
    assert record.total_ms >= record.time_to_first_byte_ms


@pytest.mark.parametrize(("path", "status", "error"), [
    ("/status500", 500, "api_error: boom"),
    ("/status529", 529, "overloaded_error: Overloaded"),
])  # fmt: skip
def test_an_http_error_upstream_reaches_the_agent_as_it_came(
    stub: Stub, tmp_path: Path, path: str, status: int, error: str
) -> None:
    direct = _post(stub.base, path)
    with running_proxy(
        Upstream(stub.base, REAL_KEY), TOKEN, tmp_path / "agent_requests.jsonl"
    ) as url:
        proxied = _post(url, path)
    assert (proxied.status_code, proxied.content) == (direct.status_code, direct.content)
    assert proxied.headers["content-type"] == direct.headers["content-type"]
    record = _records(tmp_path)[-1]
    assert (record.status, record.error) == (status, error)


@pytest.mark.parametrize("path", ["/status500", "/v1/messages"])
def test_an_answer_the_agent_has_whole_is_recorded_as_answered_when_the_proxy_closes_at_once(
    stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """The session may end the moment the agent has its answer; the handler, slow after the
    last byte, must still be the one that records it, and before `running_proxy` returns."""
    plain_chunks, plain_finish = proxy_module._chunks, proxy_module._finish

    def slow_after_the_end(response: Any) -> Iterator[bytes]:
        yield from plain_chunks(response)
        time.sleep(0.5)

    def slow_finish(*args: Any) -> None:
        time.sleep(0.5)
        plain_finish(*args)

    monkeypatch.setattr(proxy_module, "_chunks", slow_after_the_end)
    monkeypatch.setattr(proxy_module, "_finish", slow_finish)
    with running_proxy(
        Upstream(stub.base, REAL_KEY), TOKEN, tmp_path / "agent_requests.jsonl"
    ) as url:
        answer = _post(url, path)
    [record] = _records(tmp_path)
    assert not record.open_at_end
    assert (record.status, record.response_bytes) == (answer.status_code, len(answer.content))
    assert record.error == ("api_error: boom" if path == "/status500" else None)


def test_a_handler_stuck_after_the_answer_is_recorded_once_by_the_closing_proxy(
    stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing waits a bounded time for a settled request's own record; one whose handler never
    gets there is recorded by the closer, named so, and the handler adds no second line."""
    release = threading.Event()
    plain_finish = proxy_module._finish

    def stuck_finish(*args: Any) -> None:
        release.wait(30)
        plain_finish(*args)

    monkeypatch.setattr(proxy_module, "_finish", stuck_finish)
    monkeypatch.setattr(proxy_module, "_FINISH_GRACE_SECONDS", 0.3)
    path = tmp_path / "agent_requests.jsonl"
    with running_proxy(Upstream(stub.base, REAL_KEY), TOKEN, path) as url:
        answer = _post(url, "/status500")  # a Content-Length answer: whole before _finish
    [record] = read_requests(path)
    assert answer.status_code == 500 and record.status == 500 and not record.open_at_end
    assert "its answer's last bytes were still being written" in (record.error or "")
    release.set()
    time.sleep(0.5)  # the handler, released, finds its request recorded and writes nothing
    assert len(read_requests(path)) == 1


def test_a_refused_connection_upstream_is_a_connection_error_for_the_agent_too(
    tmp_path: Path,
) -> None:
    down = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(httpx.TransportError):
        _post(down, "/v1/messages")
    with running_proxy(Upstream(down, REAL_KEY), TOKEN, tmp_path / "agent_requests.jsonl") as url:
        with pytest.raises(httpx.TransportError):  # no HTTP answer at all, as without the proxy
            _post(url, "/v1/messages")
    record = _records(tmp_path)[-1]
    assert record.status is None
    assert "upstream connection failed: ConnectionRefusedError" in (record.error or "")


def test_a_stream_cut_upstream_is_cut_at_the_same_point_for_the_agent(
    stub: Stub, tmp_path: Path
) -> None:
    def read(base: str) -> tuple[bytes, type[Exception] | None]:
        got = b""
        try:
            with httpx.stream(
                "POST", f"{base}/v1/messages/cut", content=PAYLOAD, headers={"x-api-key": TOKEN}
            ) as response:
                for chunk in response.iter_raw():
                    got += chunk
        except httpx.TransportError as error:
            return got, type(error)
        return got, None

    direct = read(stub.base)
    with running_proxy(
        Upstream(stub.base, REAL_KEY), TOKEN, tmp_path / "agent_requests.jsonl"
    ) as url:
        proxied = read(url)
    assert direct == proxied == (b"".join(SSE[:3]), httpx.RemoteProtocolError)
    record = _records(tmp_path)[-1]
    assert record.status == 200 and record.input_tokens == 120 and record.stop_reason is None
    assert (
        record.error == f"upstream stream cut after {len(b''.join(SSE[:3]))} bytes: IncompleteRead"
    )


def test_the_admission_check_can_refuse_before_anything_goes_upstream(
    stub: Stub, tmp_path: Path
) -> None:
    seen: list[RequestFacts] = []
    recorded: list[AgentRequest] = []

    def admit(facts: RequestFacts) -> Refusal | None:
        seen.append(facts)
        if len(seen) == 1:
            return None
        return Refusal(status=429, error_type="rate_limit_error", message="spend cap reached")

    path = tmp_path / "agent_requests.jsonl"
    with running_proxy(Upstream(stub.base, REAL_KEY), TOKEN, path, admit, recorded.append) as url:
        first, second = _post(url, "/v1/messages"), _post(url, "/v1/messages/json")
    assert (first.status_code, second.status_code) == (200, 429)
    assert second.json()["error"] == {"type": "rate_limit_error", "message": "spend cap reached"}
    assert len(stub.received) == 1
    assert [f.model for f in seen] == ["claude-test-1"] * 2 and seen[0].body == json.dumps(
        BODY
    ).encode()
    assert [r.status for r in recorded] == [200, 429] == [r.status for r in _records(tmp_path)]
    assert "spend cap reached" in (recorded[1].error or "")


def test_a_json_answer_gives_its_usage_and_connections_are_reused(
    stub: Stub, tmp_path: Path
) -> None:
    upstream = Upstream(stub.base, REAL_KEY)
    with running_proxy(upstream, TOKEN, tmp_path / "agent_requests.jsonl") as url:
        with httpx.Client(headers={"x-api-key": TOKEN}) as client:
            for _ in range(3):
                assert client.post(f"{url}/v1/messages/json", content=PAYLOAD).status_code == 200
                time.sleep(0.05)
        assert len(upstream._idle) == 1  # one upstream connection served all three
    record = _records(tmp_path)[-1]
    assert (record.input_tokens, record.output_tokens, record.stop_reason) == (3, 4, "max_tokens")
    assert (record.model, record.response_model) == ("claude-test-1", SNAPSHOT)
    assert record.streamed is False


def test_the_event_reader_takes_events_split_anywhere() -> None:
    whole = b"".join(SSE)
    for cut in range(1, len(whole), 7):
        reader = SseUsage()
        reader.feed(whole[:cut])
        reader.feed(whole[cut:])
        record: dict[str, Any] = {}
        reader.apply(record)
        assert record["output_tokens"] == 42 and record["stop_reason"] == "end_turn"
        assert record["response_model"] == SNAPSHOT


def test_the_answering_model_is_read_from_message_start_fed_a_byte_at_a_time() -> None:
    # Only message_start names it: a later event's "model" (here in a text delta and in a
    # message_delta) changes nothing, and a stream without message_start names none.
    later = [
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"\\"model\\": \\"other\\""}}\n\n',
        b'event: message_delta\ndata: {"type":"message_delta","model":"other",'
        b'"delta":{"stop_reason":"end_turn"}}\n\n',
    ]
    whole = SSE[0] + b"".join(later)
    reader = SseUsage()
    for index in range(len(whole)):
        reader.feed(whole[index : index + 1])
    assert reader.model == SNAPSHOT and reader.stop_reason == "end_turn"
    headless = SseUsage()
    headless.feed(b"".join(later))
    record: dict[str, Any] = {}
    headless.apply(record)
    assert record["response_model"] is None


@pytest.mark.parametrize(
    ("status", "body", "answered"),
    [
        (200, {"type": "message", "model": SNAPSHOT, "usage": {"input_tokens": 1}}, SNAPSHOT),
        (200, {"type": "message", "model": 7, "usage": {"input_tokens": 1}}, None),
        (200, {"input_tokens": 12}, None),  # count_tokens: no model in its answer
        (529, OVERLOADED, None),
    ],
)
def test_a_json_answer_gives_the_model_it_names_and_only_a_string(
    status: int, body: dict[str, Any], answered: str | None
) -> None:
    record: dict[str, Any] = {"status": status}
    proxy_module._finish(record, None, bytearray(json.dumps(body).encode()))
    assert record["response_model"] == answered


def _claude_result(base: str, key: str, home: Path) -> dict[str, Any]:
    """The result event of a one-turn `claude -p` against `base`, retries off."""
    from veriharness._util.programs import find_claude

    home.mkdir()
    env = {
        "PATH": os.environ["PATH"], "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home),
        "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": key, "CLAUDE_CODE_MAX_RETRIES": "0",
        "IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }  # fmt: skip
    done = subprocess.run(
        [str(find_claude()), "-p", "hi", "--output-format", "stream-json", "--verbose",
         "--model", BODY["model"], "--tools", ""],
        env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    (result,) = [e for e in events if e.get("type") == "result"]
    return result


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "recorded"),
    [
        ("/status529", "overloaded_error: Overloaded"),
        ("/status500", "api_error: boom"),
        ("/cut", "upstream stream cut after"),
        ("", None),
    ],
)
def test_claude_code_gets_the_same_error_through_the_proxy_as_from_the_provider(
    stub: Stub, tmp_path: Path, fault: str, recorded: str | None
) -> None:
    """The real CLI, retries off, once straight at the stub and once through the proxy; the
    last case (no fault) is the control: an ordinary answer both ways."""
    upstream = stub.base + fault
    direct = _claude_result(upstream, "direct-key", tmp_path / "direct")
    with running_proxy(Upstream(upstream, REAL_KEY), TOKEN, tmp_path / "r.jsonl") as url:
        proxied = _claude_result(url, TOKEN, tmp_path / "proxied")
    fields = ("subtype", "is_error", "api_error_status")
    assert [proxied[k] for k in fields] == [direct[k] for k in fields]
    port = re.compile(r"127\.0\.0\.1:\d+")
    assert port.sub("HOST", proxied["result"]) == port.sub("HOST", direct["result"])
    assert proxied["is_error"] is (fault != "")
    record = read_requests(tmp_path / "r.jsonl")[-1]
    if recorded is None:
        assert record.error is None and record.output_tokens == 42
    else:
        assert recorded in (record.error or "")


@pytest.mark.slow
def test_claude_code_gets_a_connection_error_when_the_provider_refuses_through_the_proxy(
    tmp_path: Path,
) -> None:
    """Refused straight, Claude Code says ECONNREFUSED; through the proxy, whose own port did
    accept, the connection is dropped without an answer (ECONNRESET). Both are connection
    errors to Claude Code (no HTTP status, handled alike), which is as close as a proxy can be."""
    down = f"http://127.0.0.1:{_closed_port()}"
    direct = _claude_result(down, "direct-key", tmp_path / "direct")
    with running_proxy(Upstream(down, REAL_KEY), TOKEN, tmp_path / "r.jsonl") as url:
        proxied = _claude_result(url, TOKEN, tmp_path / "proxied")
    for result in (direct, proxied):
        assert result["is_error"] is True and result["api_error_status"] is None
        assert result["result"].startswith("API Error: Connection")
    assert "ECONNREFUSED" in direct["result"] and "ECONNRESET" in proxied["result"]
    assert "upstream connection failed" in (read_requests(tmp_path / "r.jsonl")[-1].error or "")


def test_a_request_open_when_the_proxy_closes_is_recorded_and_its_upstream_dropped(
    stub: Stub, tmp_path: Path
) -> None:
    answers: list[object] = []

    def agent(url: str) -> None:
        try:
            answers.append(_post(url, "/hang/v1/messages"))
        except httpx.HTTPError as error:
            answers.append(error)

    with running_proxy(
        Upstream(stub.base, REAL_KEY), TOKEN, tmp_path / "agent_requests.jsonl"
    ) as url:
        client = threading.Thread(target=agent, args=(url,), daemon=True)
        client.start()
        assert stub.holding.wait(10)
    # The proxy closed: the upstream connection it held is closed, and the agent's too.
    assert stub.dropped.wait(10)
    client.join(10)
    assert len(answers) == 1 and isinstance(answers[0], httpx.HTTPError), answers
    [record] = _records(tmp_path)
    assert record.open_at_end and record.status is None
    assert "no answer from the model provider" in (record.error or "")


class _WatchedPace(ProviderPace):
    """A real pace that tells the test when a request has begun to be held."""

    def __init__(self, folder: Path, provider: str) -> None:
        super().__init__(folder, provider)
        self.holding = threading.Event()

    def hold(self, request_bytes: int, abandoned: Callable[[], bool] | None = None) -> Held:
        self.holding.set()
        return super().hold(request_bytes, abandoned)


def _blocked_pace(folder: Path, blocked: bool) -> _WatchedPace:
    """A pace whose shared state blocks every request (or, unblocked, lets one through)."""
    state = PaceState(blocked_until=time.time() + 600 if blocked else 0.0, answered=1)
    folder.mkdir(exist_ok=True)
    (folder / "provider.json").write_text(state.model_dump_json())
    return _WatchedPace(folder, "provider")


def _wait_for_records(path: Path, count: int) -> list[AgentRequest]:
    for _ in range(100):
        if path.is_file() and len(records := read_requests(path)) >= count:
            return records
        time.sleep(0.1)
    raise AssertionError(f"{path}: fewer than {count} records after 10 s")


def test_a_held_request_whose_agent_hung_up_is_never_sent(stub: Stub, tmp_path: Path) -> None:
    pace = _blocked_pace(tmp_path / "pace", blocked=True)
    record_path = tmp_path / "agent_requests.jsonl"
    with running_proxy(Upstream(stub.base, REAL_KEY), TOKEN, record_path, pace=pace) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as agent:
            agent.sendall(
                b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: %b\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
                % (TOKEN.encode(), len(PAYLOAD), PAYLOAD)
            )
            assert pace.holding.wait(10)
            time.sleep(1.0)  # held by the blocked pace
        _blocked_pace(tmp_path / "pace", blocked=False)  # a proxy still holding would now send
        [record] = _wait_for_records(record_path, 1)
        time.sleep(2.0)
    assert stub.received == []
    assert record.status is None and (record.held_ms or 0) >= 900
    assert "the agent closed its connection" in (record.error or "")
    assert "not sent" in (record.error or "")
    state = (tmp_path / "pace" / "provider.json").read_text()
    assert PaceState.model_validate_json(state).sent == []  # counted against no limit


def test_a_request_held_when_the_session_ends_is_recorded_and_never_sent(
    stub: Stub, tmp_path: Path
) -> None:
    pace = _blocked_pace(tmp_path / "pace", blocked=True)
    record_path = tmp_path / "agent_requests.jsonl"
    answers: list[object] = []

    def agent(url: str) -> None:
        try:
            answers.append(_post(url, "/v1/messages"))
        except httpx.HTTPError as error:
            answers.append(error)

    with running_proxy(Upstream(stub.base, REAL_KEY), TOKEN, record_path, pace=pace) as url:
        client = threading.Thread(target=agent, args=(url,), daemon=True)
        client.start()
        assert pace.holding.wait(10)
        time.sleep(0.5)
    _blocked_pace(tmp_path / "pace", blocked=False)  # a handler still holding would now send
    time.sleep(2.5)
    client.join(10)
    assert stub.received == []
    [record] = read_requests(record_path)
    assert record.open_at_end and record.status is None
    assert "by the provider's pace when the session ended; never sent" in (record.error or "")


def test_each_request_has_its_arrival_number_and_model_requests_reach_the_snapshots(
    stub: Stub, tmp_path: Path
) -> None:
    arrived: list[tuple[int, bytes]] = []

    def on_arrival(seq: int, body: bytes) -> None:
        arrived.append((seq, body))
        if seq == 3:
            raise OSError("disk full")

    path = tmp_path / "agent_requests.jsonl"
    with running_proxy(Upstream(stub.base, REAL_KEY), TOKEN, path, on_arrival=on_arrival) as url:
        _post(url, "/v1/messages", key=None)  # 1: no token, not the session's
        _post(url, "/v1/messages")  # 2
        third = _post(url, "/v1/messages")  # 3: the hook fails, the request goes on
        _post(url, "/v1/messages/count_tokens")  # 4: not a model request
    assert [seq for seq, _ in arrived] == [2, 3]
    assert arrived[0][1] == PAYLOAD
    assert third.status_code == 200
    records = sorted(_records(tmp_path), key=lambda r: r.seq or 0)
    assert [r.seq for r in records] == [1, 2, 3, 4]
    assert [r.arrival_error for r in records] == [None, None, "OSError: disk full", None]
