"""The model proxy: the only way a session reaches its model, and the only holder of the key.

`run-agent` starts one per session on a loopback port and gives the session that address as
`ANTHROPIC_BASE_URL` and a per-session random token as its API key. For each request the proxy:

1. checks the token (`x-api-key`, or `Authorization: Bearer`); without it the request is
   answered 401 in Anthropic's error shape, recorded, and goes nowhere;
2. refuses it when its `tools` name a server tool that `allow_server_tools` does not name
   (`agent/server_tools.py`: web search, web fetch, code execution and the like run at the
   provider, outside the sandbox), naming each in the error and in `server_tools_refused`;
   then asks the admission check, if one was given (`admit`), which may refuse it (`Refusal`);
   then, with a `ProviderPace`, holds it until the provider's shared pace allows it (`held_ms`);
   a request whose agent closed its connection, or whose session ended, while it was held is
   never sent, and is recorded with the time it was held;
3. sends it upstream (Anthropic, a gateway, or the embedded offline model) with the real key in
   `x-api-key` and without the session's token or any other credential header of the session;
4. streams the answer back as it arrives: every chunk read from upstream is written to the agent
   before it is looked at, so server-sent events pass unchanged and unbuffered; usage, the
   stop reason and the model the provider answered with are read from the events as they pass;
5. appends one `AgentRequest` line to the record file, with the provider's `request-id` header
   as `request_id`, and tells the pace what the answer said (its status, rate-limit headers and
   usage).

Only model requests (`POST .../messages`) are paced, snapshotted and priced; Claude Code's other
calls (`/v1/messages/count_tokens` among them) pass through and are recorded with their path and
status, and nothing else.

Faults upstream reach the agent as they would from the provider itself: an HTTP error passes
through as it came; a refused or failed connection ends the agent's connection without an answer
(a connection error, as a direct one would be); a stream cut in the middle cuts the agent's
stream at the same point. Nothing is retried. Upstream connections are kept alive for reuse, but
only for a few idle seconds, so a reused connection is never one the upstream has dropped.

A request still open when the proxy closes (the session ended, by its wall clock or a kill, while
the upstream had not answered or was still answering) is recorded then, with `open_at_end` and
how long it had waited, and its upstream connection is closed; that record is what tells a hung
upstream from a slow agent (`outcome.py`). A request stops being open just before the agent can
see the end of its answer (before its last byte), so an answer the agent has whole is never
recorded as open; and closing waits for such requests' own records, so every request has its one
line in the file when `running_proxy` returns.
"""

from __future__ import annotations

import hmac
import http.client
import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from veriharness.agent.request_record import UNANSWERED, Refusal, RequestFacts, is_model_request
from veriharness.agent.server_tools import refusal_message, refused_server_tools
from veriharness.pace.provider_pace import Abandoned, ProviderPace
from veriharness.runfolder.agent_requests import AgentRequest
from veriharness.spend.prices import unpriced_reason

__all__ = [
    "ANTHROPIC_URL",
    "Admit",
    "Upstream",
    "ModelProxy",
    "running_proxy",
    "SseUsage",
]

ANTHROPIC_URL = "https://api.anthropic.com"
Admit = Callable[[RequestFacts], Refusal | None]
# Told of each authorised model request (`POST .../messages`) as it arrives, with its arrival
# number, before the admission check: the answer snapshots (agent/snapshots.py).
OnArrival = Callable[[int, bytes], None]

# Hop-by-hop headers (RFC 9110 7.6.1) and the ones the proxy sets itself.
_REQUEST_DROP = {
    "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
    "x-api-key", "authorization",
}  # fmt: skip
_RESPONSE_DROP = {
    "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
    "upgrade", "content-length",
}  # fmt: skip
_IDLE_REUSE_SECONDS = 4.0
# How long closing waits for an answered request's record before it ends the agent's connection.
_FINISH_GRACE_SECONDS = 5.0
_CHUNK = 65536
_LEADING_MODEL = re.compile(rb'\{\s*"model"\s*:\s*"([^"\\]{1,200})"')
_ERROR_BODY_LIMIT = 1 << 20  # a JSON answer is parsed for usage / error up to this size


class Upstream:
    """Where requests go and with which key; keeps idle connections for reuse."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float = 600.0) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"upstream base URL must be http(s)://host[:port][/path], not {parts.scheme!r}"
            )
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path
        self.api_key = api_key
        self.timeout = timeout
        self._idle: list[tuple[float, http.client.HTTPConnection]] = []
        self._lock = threading.Lock()

    def connection(self) -> http.client.HTTPConnection:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                since, conn = self._idle.pop()
                if now - since < _IDLE_REUSE_SECONDS:
                    return conn
                conn.close()
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append((time.monotonic(), conn))

    def close(self) -> None:
        with self._lock:
            for _, conn in self._idle:
                conn.close()
            self._idle.clear()

    def headers(self, received: Any) -> dict[str, str]:
        out = {k: v for k, v in received.items() if k.lower() not in _REQUEST_DROP}
        out["Accept-Encoding"] = "identity"  # usage is read from the bytes as they pass
        if self.api_key:
            out["x-api-key"] = self.api_key
        return out


class SseUsage:
    """Reads usage, the answering model, stop reason and errors from Anthropic's event stream
    as it passes.

    Fed raw chunks in order; only `data:` lines of the events that carry these facts are parsed,
    so the cost per chunk stays small whatever the stream holds. The model is the snapshot id
    message_start names (`message.model`), which may differ from the one the request named."""

    _WANTED = (b'"message_start"', b'"message_delta"', b'"error"')

    def __init__(self) -> None:
        self._partial = b""
        self.usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.model: str | None = None
        self.error: str | None = None

    def feed(self, chunk: bytes) -> None:
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if line.startswith(b"data:") and any(w in line for w in self._WANTED):
                self._event(line[5:])

    def _event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict):
                self._usage(message.get("usage"))
                self.model = _text(message.get("model")) or self.model
        elif kind == "message_delta":
            self._usage(event.get("usage"))
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
        elif kind == "error":
            self.error = _error_text(event)

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):  # message_delta repeats counts cumulatively: last one wins
            self.usage.update({k: v for k, v in usage.items() if isinstance(v, int)})

    def apply(self, record: dict[str, Any]) -> None:
        for field in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            if field in self.usage:
                record[field] = self.usage[field]
        record["stop_reason"] = self.stop_reason
        record["response_model"] = self.model


def _text(value: Any) -> str | None:
    """A non-empty string as it is, anything else None."""
    return value if isinstance(value, str) and value else None


def _error_text(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        return f"{error.get('type')}: {error.get('message')}"
    return None


@dataclass
class _OpenRequest:
    """A request being handled: its record, when it arrived, its upstream connection once made."""

    record: dict[str, Any]
    began: float
    upstream: http.client.HTTPConnection | None = None
    held: bool = False  # waiting on the provider's pace, not yet sent


class ModelProxy(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        upstream: Upstream,
        token: str,
        record_path: Path,
        admit: Admit | None = None,
        on_record: Callable[[AgentRequest], None] | None = None,
        pace: ProviderPace | None = None,
        on_arrival: OnArrival | None = None,
        allow_server_tools: tuple[str, ...] = (),
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.on_arrival = on_arrival
        self.allow_server_tools = allow_server_tools
        self._arrivals = 0
        self.pace = pace
        self.upstream = upstream
        self.token = token
        self.record_path = record_path
        self.admit = admit
        self.on_record = on_record
        self._record_lock = threading.Lock()
        self._recorded = threading.Condition(self._record_lock)
        # Requests being handled, by id of their record.
        self._open: dict[int, _OpenRequest] = {}
        # Requests no longer open whose handler has not yet recorded them, with the agent's socket.
        self._finishing: dict[int, tuple[_OpenRequest, socket.socket]] = {}
        self.closing = False  # set by close_open: a request still held is not sent

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def authorized(self, headers: Any) -> bool:
        key = headers.get("x-api-key") or ""
        bearer = (headers.get("authorization") or "").removeprefix("Bearer ").strip()
        return any(
            hmac.compare_digest(given.encode(), self.token.encode()) for given in (key, bearer)
        )

    def record(self, fields: dict[str, Any]) -> None:
        entry = AgentRequest(**fields)
        with self._record_lock, open(self.record_path, "a", encoding="utf-8") as handle:
            handle.write(entry.model_dump_json() + "\n")
        if self.on_record is not None:
            self.on_record(entry)

    def opened(self, record: dict[str, Any], began: float) -> None:
        with self._record_lock:
            self._arrivals += 1
            record["seq"] = self._arrivals
            self._open[id(record)] = _OpenRequest(record, began)

    def holding(self, record: dict[str, Any], held: bool) -> None:
        with self._record_lock:
            if id(record) in self._open:
                self._open[id(record)].held = held

    def upstream_connected(self, record: dict[str, Any], conn: http.client.HTTPConnection) -> None:
        with self._record_lock:
            if id(record) in self._open:
                self._open[id(record)].upstream = conn

    def settled(self, record: dict[str, Any], agent: socket.socket) -> bool:
        """Take a finished request off the open list; False when `close_open` recorded it."""
        with self._record_lock:
            request = self._open.pop(id(record), None)
            if request is None:
                return False
            self._finishing[id(record)] = (request, agent)
            return True

    def record_settled(self, record: dict[str, Any]) -> None:
        """The handler's own record of a request it settled, unless closing gave up on it."""
        with self._record_lock:
            if self._finishing.pop(id(record), None) is None:
                return
        try:
            self.record(record)
        finally:
            with self._recorded:
                self._recorded.notify_all()

    def close_open(self) -> None:
        """Record every request still open and close its upstream connection (the handler,
        unblocked, then records nothing more); then wait for the records of answered ones."""
        with self._record_lock:
            self.closing = True
            still_open = list(self._open.values())
            self._open.clear()
        for request in still_open:
            entry = dict(request.record)
            waited = time.perf_counter() - request.began
            entry.update(open_at_end=True, total_ms=_ms(request.began))
            if request.held:
                entry["error"] = (
                    f"{UNANSWERED}: held {waited:.1f} s by the provider's pace when the session "
                    "ended; never sent"
                )
            elif entry.get("status") is None:
                entry["error"] = (
                    f"{UNANSWERED}: no answer from the model provider after {waited:.1f} s"
                )
            else:
                entry.setdefault("error", f"{UNANSWERED}: the answer was still arriving")
            self.record(entry)
            conn = request.upstream
            if conn is not None and conn.sock is not None:
                _shut(conn.sock)
        self._await_finishing()

    def _await_finishing(self) -> None:
        """Wait for handlers to record what they settled. One still writing its answer's last
        bytes to an agent that reads nothing has that connection ended, then one more grace; a
        request still unrecorded after it is recorded here, named as such."""
        with self._recorded:
            if self._recorded.wait_for(lambda: not self._finishing, _FINISH_GRACE_SECONDS):
                return
            agents = [agent for _, agent in self._finishing.values()]
        for agent in agents:
            _shut(agent)
        with self._recorded:
            self._recorded.wait_for(lambda: not self._finishing, _FINISH_GRACE_SECONDS)
            stuck = [request for request, _ in self._finishing.values()]
            self._finishing.clear()
        for request in stuck:
            entry = dict(request.record)
            entry.setdefault("total_ms", _ms(request.began))
            entry.setdefault(
                "error", f"{UNANSWERED}: its answer's last bytes were still being written"
            )
            self.record(entry)


class _Handler(BaseHTTPRequestHandler):
    server: ModelProxy
    protocol_version = "HTTP/1.1"
    _mine: bool | None = None  # the request being handled is this handler's to record

    def setup(self) -> None:
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # every request goes to the record file instead

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._proxy()

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self._proxy()

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        self._proxy()

    def do_PUT(self) -> None:  # noqa: N802 - stdlib name
        self._proxy()

    def do_DELETE(self) -> None:  # noqa: N802 - stdlib name
        self._proxy()

    def _proxy(self) -> None:
        began = time.perf_counter()
        record: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "method": self.command,
            "path": urlsplit(self.path).path,
        }
        self.server.opened(record, began)
        self._mine = None
        try:
            body = self._read_body()
            record["request_bytes"] = len(body)
            record["model"] = _model_of(body)
            self._arrived(record, body)
            refusal = self._refusal(record, body)
            if refusal is not None:
                self._refuse(refusal, record)
            elif self.server.pace is None or not _paced(record):
                self._forward(body, record, began)
            else:
                self._forward_paced(self.server.pace, body, record, began)
        except Exception as error:  # a fault here ends this request, never the proxy
            record.setdefault("error", f"proxy: {type(error).__name__}: {error}")
            self.close_connection = True
        finally:
            record["total_ms"] = _ms(began)
            if self._settle(record):
                self.server.record_settled(record)

    def _settle(self, record: dict[str, Any]) -> bool:
        """End the request's open state before the agent sees its end, so a proxy closing
        after that never records it as open; False when the closing proxy recorded it."""
        if self._mine is None:
            self._mine = self.server.settled(record, self.connection)
        return self._mine

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _arrived(self, record: dict[str, Any], body: bytes) -> None:
        hook = self.server.on_arrival
        if hook is None or not _is_messages(record) or not self.server.authorized(self.headers):
            return
        try:
            hook(record["seq"], body)
        except Exception as error:  # a snapshot's fault is recorded, never the request's end
            record["arrival_error"] = f"{type(error).__name__}: {error}"

    def _refusal(self, record: dict[str, Any], body: bytes) -> Refusal | None:
        if not self.server.authorized(self.headers):
            return Refusal(
                status=401,
                error_type="authentication_error",
                message="missing or wrong session token",
            )
        refused = refused_server_tools(body, self.server.allow_server_tools)
        if refused:
            record["server_tools_refused"] = refused
            return Refusal(
                status=400, error_type="invalid_request_error", message=refusal_message(refused)
            )
        if self.server.admit is None:
            return None
        facts = RequestFacts(
            method=self.command,
            path=record["path"],
            model=record["model"],
            request_bytes=len(body),
            body=body,
        )
        return self.server.admit(facts)

    def _refuse(self, refusal: Refusal, record: dict[str, Any]) -> None:
        self._settle(record)
        payload = json.dumps(
            {"type": "error", "error": {"type": refusal.error_type, "message": refusal.message}}
        ).encode()
        # Recorded before it is written: a session ended meanwhile breaks the write, and the
        # record must still say why the request was refused.
        record.update(
            status=refusal.status,
            response_bytes=len(payload),
            error=f"refused by the proxy: {refusal.error_type}: {refusal.message}",
        )
        self.send_response(refusal.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _forward_paced(
        self, pace: ProviderPace, body: bytes, record: dict[str, Any], began: float
    ) -> None:
        self.server.holding(record, True)
        try:
            held = pace.hold(len(body), abandoned=self._given_up)
        except Abandoned as gone:
            record["held_ms"] = round(gone.held_s * 1000, 3)
            record["error"] = f"the agent closed its connection: {gone}"
            self._settle(record)
            self.close_connection = True
            return
        self.server.holding(record, False)
        record["held_ms"] = round(held.seconds * 1000, 3)
        self._answer_headers: dict[str, str] = {}
        try:
            self._forward(body, record, began)
        finally:
            pace.observe(held, record.get("status"), self._answer_headers, _tokens(record))

    def _given_up(self) -> bool:
        """The session ended, or the agent closed its connection. The kernel's hang-up flag
        (POLLRDHUP) is set even behind bytes the agent sent on before closing (a pipelined
        request), which a peek at the next byte would stop at; poll has no descriptor limit."""
        if self.server.closing:
            return True
        poller = select.poll()
        poller.register(self.connection, select.POLLRDHUP)
        return bool(poller.poll(0))  # POLLRDHUP, or POLLHUP, POLLERR, POLLNVAL: given up

    def _forward(self, body: bytes, record: dict[str, Any], began: float) -> None:
        upstream = self.server.upstream
        try:
            conn = upstream.connection()
            self.server.upstream_connected(record, conn)
            conn.request(
                self.command, upstream.prefix + self.path, body, upstream.headers(self.headers)
            )
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as error:
            record["error"] = f"upstream connection failed: {type(error).__name__}: {error}"
            self._settle(record)
            self._drop_connection()
            return
        record["status"] = response.status
        record["request_id"] = response.getheader("request-id")
        self._answer_headers = dict(response.getheaders())
        streamed = "text/event-stream" in (response.getheader("Content-Type") or "")
        record["streamed"] = streamed
        length = response.getheader("Content-Length")
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _RESPONSE_DROP:
                self.send_header(name, value)
        chunked = length is None and self.command != "HEAD"
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", length or "0")
        if response.length == 0:  # no body (HEAD, 204, 304, an empty one): the headers end it
            self._settle(record)
        self.end_headers()
        sse = SseUsage() if streamed else None
        kept = bytearray()
        sent = 0
        failure = None
        try:
            for chunk in _chunks(response):
                if response.length == 0:  # this chunk completes a Content-Length answer
                    self._settle(record)
                try:
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
                except OSError as error:
                    failure = f"the agent closed its connection after {sent} bytes: {error}"
                    break
                if sent == 0:
                    record["time_to_first_byte_ms"] = _ms(began)
                sent += len(chunk)
                if sse is not None:
                    sse.feed(chunk)
                elif len(kept) < _ERROR_BODY_LIMIT:
                    kept += chunk
        except (OSError, http.client.HTTPException) as error:
            failure = f"upstream stream cut after {sent} bytes: {type(error).__name__}"
        self._settle(record)
        if failure is not None:
            record["response_bytes"] = sent
            record["error"] = failure
            conn.close()
            self._drop_connection()
            _finish(record, sse, kept)
            return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        if record.get("time_to_first_byte_ms") is None:
            record["time_to_first_byte_ms"] = _ms(began)
        record["response_bytes"] = sent
        _finish(record, sse, kept)
        _mark_unpriced(record, body)
        if response.will_close:
            conn.close()
        else:
            upstream.release(conn)

    def _drop_connection(self) -> None:
        """End the agent's connection without an answer (or mid-answer), as a failed
        connection to the provider would."""
        self.close_connection = True
        _shut(self.request)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _chunks(response: http.client.HTTPResponse) -> Iterator[bytes]:
    """The body as it arrives; the response is closed at its end, so the connection can serve
    the next request (http.client leaves it open after a body with a Content-Length)."""
    while response.length != 0:
        chunk = response.read1(_CHUNK)
        if not chunk:
            if response.length is not None:  # the upstream closed before Content-Length
                raise http.client.IncompleteRead(b"", response.length)
            break
        yield chunk
    response.close()


def _finish(record: dict[str, Any], sse: SseUsage | None, kept: bytearray) -> None:
    if sse is not None:
        sse.apply(record)
        if sse.error and not record.get("error"):
            record["error"] = sse.error
        return
    try:
        body = json.loads(bytes(kept)) if kept else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        usage = body.get("usage")
        if isinstance(usage, dict):
            for field, value in usage.items():
                if field in AgentRequest.model_fields and isinstance(value, int):
                    record[field] = value
        if isinstance(body.get("stop_reason"), str):
            record["stop_reason"] = body["stop_reason"]
        record["response_model"] = _text(body.get("model"))
        if (record.get("status") or 0) >= 400 and not record.get("error"):
            record["error"] = _error_text(body) or f"HTTP {record['status']}"
    elif (record.get("status") or 0) >= 400 and not record.get("error"):
        record["error"] = f"HTTP {record['status']}"


def _mark_unpriced(record: dict[str, Any], body: bytes) -> None:
    """Name why a model answer has no cost when it reported no usage (P-36), with the request's
    `max_tokens`, which the caps then count as its output (`agent/charges.py`). Only a complete
    2xx answer to a messages request can be priced; anything else used nothing or says why."""
    status = record.get("status") or 0
    if not _is_messages(record):
        return
    if not 200 <= status < 300 or record.get("error"):
        return
    reason = unpriced_reason(record.get("input_tokens"), record.get("output_tokens"))
    if reason is None:
        return
    record["cost_unpriced_reason"] = reason
    try:
        value = json.loads(body)
    except ValueError:
        return
    limit = value.get("max_tokens") if isinstance(value, dict) else None
    if isinstance(limit, int) and not isinstance(limit, bool):
        record["max_tokens"] = limit


def _is_messages(record: dict[str, Any]) -> bool:
    """A model request (`POST .../messages`), not count_tokens or Claude Code's other calls."""
    return is_model_request(str(record.get("method")), str(record.get("path", "")))


def _paced(record: dict[str, Any]) -> bool:
    """Only model requests count against a provider's pace (not Claude Code's other calls)."""
    return _is_messages(record)


def _tokens(record: dict[str, Any]) -> int | None:
    """The tokens a provider's per-minute limit counts of an answered request: input, output
    and cache writes (cache reads are not counted by Anthropic's limits)."""
    tokens_in, tokens_out = record.get("input_tokens"), record.get("output_tokens")
    if tokens_in is None or tokens_out is None:
        return None
    return int(tokens_in) + int(tokens_out) + int(record.get("cache_creation_input_tokens") or 0)


def _model_of(body: bytes) -> str | None:
    """The request's `model`. Claude Code's bodies start with it, and a body with images can
    run to megabytes, so it is read from the start when it is there and parsed only otherwise."""
    first = _LEADING_MODEL.match(body)
    if first is not None:
        return first.group(1).decode("utf-8", errors="replace")
    if not body.startswith(b"{"):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    model = value.get("model") if isinstance(value, dict) else None
    return model if isinstance(model, str) else None


def _ms(began: float) -> float:
    return round((time.perf_counter() - began) * 1000, 3)


@contextmanager
def running_proxy(
    upstream: Upstream,
    token: str,
    record_path: Path,
    admit: Admit | None = None,
    on_record: Callable[[AgentRequest], None] | None = None,
    pace: ProviderPace | None = None,
    on_arrival: OnArrival | None = None,
    allow_server_tools: tuple[str, ...] = (),
) -> Iterator[str]:
    """Serve the proxy on 127.0.0.1 at a free port in a background thread; yield its URL."""
    proxy = ModelProxy(
        upstream, token, record_path, admit, on_record, pace, on_arrival, allow_server_tools
    )
    thread = threading.Thread(target=proxy.serve_forever, name="veriharness-proxy", daemon=True)
    thread.start()
    try:
        yield proxy.base_url
    finally:
        proxy.close_open()
        proxy.shutdown()
        proxy.server_close()
        thread.join()
        upstream.close()
