"""A local stand-in for the provider APIs, on 127.0.0.1, recording exactly what it received.

The first path segment picks a behaviour, so one server covers every case:
``/ok/...`` answers in the API's shape (OpenAI chat or Anthropic messages, from the path's end),
``/status500/...`` answers HTTP 500, ``/hang/...`` sleeps past any test timeout,
``/malformed/...`` answers 200 with a body in neither API's shape, ``/status529/...`` answers
HTTP 529 (overloaded), ``/status429/...`` HTTP 429 with ``retry-after: 1``, and ``/truncated/...``
promises a whole reply but closes the connection after half of it.
Replies for ``/ok`` come from ``replies`` (a queue the test fills) or default to ``"stub reply"``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Received", "ProviderStub"]

HANG_SECONDS = 5.0


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    handling_ms: float = 0.0

    def json(self) -> Any:
        return json.loads(self.body)


class _Handler(BaseHTTPRequestHandler):
    server: ProviderStub

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        begun = time.perf_counter()
        length = int(self.headers.get("content-length", "0"))
        record = Received(
            self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)
        )
        self.server.record(record)
        behaviour = self.path.strip("/").split("/", 1)[0]
        if behaviour == "hang":
            time.sleep(HANG_SECONDS)
            return
        if behaviour == "status500":
            self._send(500, b'{"error": "stub internal failure"}')
        elif behaviour == "status529":
            self._send(529, b'{"error": {"type": "overloaded_error"}}')
        elif behaviour == "status429":
            self._send(429, b'{"error": {"type": "rate_limit_error"}}', {"retry-after": "1"})
        elif behaviour == "truncated":
            body = json.dumps(self._reply()).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
        elif behaviour == "malformed":
            self._send(200, b'{"unexpected": true}')
        else:
            self._send(200, json.dumps(self._reply()).encode())
        record.handling_ms = (time.perf_counter() - begun) * 1000

    def _reply(self) -> dict[str, Any]:
        text = self.server.next_reply()
        cut = self.path.strip("/").startswith("cut")  # stopped at the output token limit
        if self.path.endswith("/v1/messages"):
            return {
                "model": "stub-anthropic",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if cut else "end_turn",
                "usage": {"input_tokens": 11, "output_tokens": 7},
            }
        return {
            "model": "stub-openai",
            "choices": [
                {"message": {"content": text}, "finish_reason": "length" if cut else "stop"}
            ],
            "usage": {"prompt_tokens": 13, "completion_tokens": 5},
        }

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class ProviderStub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[Received] = []
        self.replies: deque[str] = deque()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def record(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)

    def next_reply(self) -> str:
        with self._lock:
            return self.replies.popleft() if self.replies else "stub reply"

    def start(self) -> ProviderStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
