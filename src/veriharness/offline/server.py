"""The offline model's HTTP server: Anthropic Messages for the agent, OpenAI chat for CallMLLM.

One loopback port serves both APIs, so a session needs one address (`ANTHROPIC_BASE_URL` for
`claude -p`, `VERIHARNESS_OFFLINE_URL` for the catalog's offline profile). Any API key is
accepted: nothing here is secret and nothing leaves the machine.

With a request log, every request is appended as one JSON line (`method`, `path`, `body`) before
it is answered, so a test can prove what the model was (and was not) sent. A body that is not
JSON is logged as text.

Every answer carries a `request-id` header (`req_offline_...`), as every answer of the real API
does, and an error's body names it too (`request_id`). The stream modes a scripted task asks for
(`offline/stream_modes.py`: pings, thinking blocks, split usage, an `overloaded_error` in the
middle of a stream, HTTP 529) shape the answers of the offline agent's model; `count_tokens`
answers the request's approximate size.

`running_offline_server()` runs the same server in a background thread for the agent stage and
for tests; the `serve-offline` verb runs it in the foreground until terminated.

`Faults` make the server misbehave the way a real upstream does, for tests and benchmarks: refuse
(reset the connection), answer an HTTP status (500, 529, 429 with `retry-after`), cut a streamed
answer in the middle, or hang, or answer normally but without ``usage`` (`no_usage`, as a
gateway that drops the token counts does); and a latency before each answer. They apply to the first
`first` requests of the chosen API (all when `first` is null) and are read from the
`VERIHARNESS_OFFLINE_FAULTS` environment variable (JSON) when the server is started without any,
so a test can set them for a whole `run-agent` or Snakemake run.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from veriharness._util import atomic
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL, OFFLINE_VISION_MODEL
from veriharness.offline.agent_policy import PolicyInputError, next_message
from veriharness.offline.sse import OVERLOADED, approx_tokens, encode_sse
from veriharness.offline.stream_modes import (
    check_thinking,
    modes_of,
    reasoned,
    shape_of,
    take_failure,
)

__all__ = [
    "FAULTS_ENV",
    "Faults",
    "OfflineServer",
    "running_offline_server",
    "models_listing",
    "serve_until_ended",
]

_CREATED = "2026-01-01T00:00:00Z"
_CREATED_UNIX = 1767225600


FAULTS_ENV = "VERIHARNESS_OFFLINE_FAULTS"
_FAULTED: dict[str, int] = {}
_FAULTS_LOCK = threading.Lock()


class Faults(BaseModel):
    """How the offline server misbehaves (see the module notes)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["none", "refuse", "status", "cut", "hang", "no_usage"] = "none"
    api: Literal["messages", "chat", "all"] = "messages"
    first: int | None = Field(default=None, ge=0)
    status: int = Field(default=500, ge=400, le=599)
    retry_after_s: float | None = Field(default=None, ge=0)
    hang_s: float = Field(default=3600.0, gt=0)
    latency_s: float = Field(default=0.0, ge=0)

    @classmethod
    def from_environment(cls) -> Faults:
        raw = os.environ.get(FAULTS_ENV)
        if not raw:
            return cls()
        try:
            return cls.model_validate_json(raw)
        except ValidationError as bad:
            raise ValueError(f"{FAULTS_ENV} is not valid: {bad}") from bad


class OfflineServer(ThreadingHTTPServer):
    """A threading HTTP server that knows where to log requests."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        request_log: Path | None = None,
        faults: Faults | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.request_log = request_log
        self.log_lock = threading.Lock()
        self.faults = faults if faults is not None else Faults.from_environment()

    def take_fault(self, api: str) -> str | None:
        """The fault to apply to this request of `api` ("messages" or "chat"), if any."""
        faults = self.faults
        if faults.kind == "none" or faults.api not in (api, "all"):
            return None
        key = faults.model_dump_json()
        with _FAULTS_LOCK:
            # Counted per process across servers, so `first` spans a session's later attempts.
            if faults.first is not None and _FAULTED.get(key, 0) >= faults.first:
                return None
            _FAULTED[key] = _FAULTED.get(key, 0) + 1
        return faults.kind

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def log_request_body(self, method: str, path: str, body: Any) -> None:
        if self.request_log is None:
            return
        line = json.dumps({"method": method, "path": path, "body": body}, ensure_ascii=False)
        with self.log_lock, open(self.request_log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def _model_entry(model_id: str) -> dict[str, Any]:
    # One object that satisfies both list shapes: Anthropic reads type/display_name/created_at,
    # OpenAI clients read object/created/owned_by.
    return {
        "id": model_id,
        "type": "model",
        "object": "model",
        "display_name": f"{model_id} (VeriHarness offline stand-in)",
        "created_at": _CREATED,
        "created": _CREATED_UNIX,
        "owned_by": "veriharness-offline",
    }


def models_listing() -> dict[str, Any]:
    """GET /v1/models: both offline model names, in Anthropic and OpenAI shape at once."""
    ids = [OFFLINE_AGENT_MODEL, OFFLINE_VISION_MODEL]
    return {
        "object": "list",
        "data": [_model_entry(model_id) for model_id in ids],
        "has_more": False,
        "first_id": ids[0],
        "last_id": ids[-1],
    }


class _Handler(BaseHTTPRequestHandler):
    server: OfflineServer
    protocol_version = "HTTP/1.1"
    _cut = False
    _no_usage = False
    _request_id = ""

    def setup(self) -> None:
        super().setup()
        # Headers and body are two writes: without this the body waits on a delayed ACK (~40 ms).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def parse_request(self) -> bool:
        self._request_id = f"req_offline_{secrets.token_hex(12)}"  # one per request
        return super().parse_request()

    def send_response(self, code: int, message: str | None = None) -> None:
        super().send_response(code, message)
        self.send_header("request-id", self._request_id)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # requests go to the request log, not stderr

    # -- plumbing ---------------------------------------------------------------------------

    def _read_body(self) -> tuple[Any, str | None]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None, None
        text = raw.decode("utf-8", errors="replace")
        try:
            return json.loads(text), None
        except json.JSONDecodeError as error:
            return text, f"request body is not valid JSON: {error}"

    def _send(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self._cut:
            # The headers promise the whole answer; half of it arrives, then the connection ends.
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value).encode("utf-8"), "application/json")

    def _error(self, status: int, kind: str, message: str) -> None:
        self._json(status, self._error_body(kind, message))

    def _error_body(self, kind: str, message: str) -> dict[str, Any]:
        # Anthropic's error shape; OpenAI clients read error.message and error.type from it too.
        error = {"type": kind, "message": message}
        return {"type": "error", "error": error, "request_id": self._request_id}

    # -- routes -----------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = urlsplit(self.path).path.rstrip("/")
        self.server.log_request_body("GET", self.path, None)
        if path == "/v1/models":
            self._json(200, models_listing())
        elif path.startswith("/v1/models/"):
            model_id = unquote(path.removeprefix("/v1/models/"))
            if model_id in (OFFLINE_AGENT_MODEL, OFFLINE_VISION_MODEL):
                self._json(200, _model_entry(model_id))
            else:
                self._error(404, "not_found_error", f"model {model_id!r} is not served here")
        elif path == "":
            self._json(200, {"service": "veriharness offline model", "models": models_listing()})
        else:
            self._error(404, "not_found_error", f"no such path: GET {path}")

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        self.server.log_request_body("HEAD", self.path, None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        path = urlsplit(self.path).path.rstrip("/")
        body, problem = self._read_body()
        self.server.log_request_body("POST", self.path, body)
        if problem is not None:
            self._error(400, "invalid_request_error", problem)
        elif not isinstance(body, dict):
            self._error(400, "invalid_request_error", "request body must be a JSON object")
        elif path == "/v1/messages":
            self._messages(body)
        elif path == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": approx_tokens(json.dumps(body))})
        elif path == "/v1/chat/completions":
            self._chat(body)
        else:
            self._error(404, "not_found_error", f"no such path: POST {path}")

    def _fault(self, api: str) -> bool:
        """Apply the configured fault; True when the request has been dealt with."""
        faults = self.server.faults
        if faults.latency_s and (api == "messages" or faults.api == "all"):
            time.sleep(faults.latency_s)
        kind = self.server.take_fault(api)
        if kind is None or kind in ("cut", "no_usage"):
            self._cut = kind == "cut"
            self._no_usage = kind == "no_usage"
            return False
        if kind == "refuse":
            # A reset, as from a host whose service is down.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
        elif kind == "hang":
            time.sleep(faults.hang_s)
            self.close_connection = True
        else:
            self.send_response(faults.status)
            if faults.retry_after_s is not None:
                self.send_header("retry-after", f"{faults.retry_after_s:g}")
            kinds = {429: "rate_limit_error", 529: "overloaded_error"}
            payload = json.dumps(
                self._error_body(
                    kinds.get(faults.status, "api_error"),
                    f"offline model fault: HTTP {faults.status}",
                )
            ).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        return True

    def _messages(self, body: dict[str, Any]) -> None:
        if self._fault("messages"):
            return
        model = body.get("model")
        if model != OFFLINE_AGENT_MODEL:
            # Answering under another model's name would put a scripted reply in its place.
            self._error(
                404,
                "not_found_error",
                f"model {model!r} is not served here; "
                f"the offline agent model is {OFFLINE_AGENT_MODEL!r}",
            )
            return
        streamed = body.get("stream") is True
        try:
            modes = modes_of(body)
            check_thinking(body)
            if take_failure("http_529", body, modes.http_529):
                self._json(529, self._error_body(OVERLOADED["type"], OVERLOADED["message"]))
                return
            message = reasoned(next_message(body), modes)
        except PolicyInputError as error:
            self._error(400, "invalid_request_error", str(error))
            return
        if streamed:
            cut = take_failure("overloaded_error", body, modes.overloaded_error)
            payload = encode_sse(message, not self._no_usage, shape_of(modes, cut))
        else:
            payload = json.dumps(_usage_dropped(message.to_json(), self._no_usage)).encode()
        kind = "text/event-stream; charset=utf-8" if streamed else "application/json"
        self._send(200, payload, kind)

    def _chat(self, body: dict[str, Any]) -> None:
        # Imported on the first CallMLLM request, not at start: the image analysis needs scipy
        # (about 0.6 s of CPU to import), which would otherwise delay every session's start.
        from veriharness.offline.vision import VisionRequestError, chat_completion

        if self._fault("chat"):
            return
        try:
            reply = chat_completion(body)
        except VisionRequestError as error:
            self._error(400, "invalid_request_error", str(error))
            return
        self._json(200, _usage_dropped(reply, self._no_usage))


def _usage_dropped(reply: dict[str, Any], drop: bool) -> dict[str, Any]:
    return {k: v for k, v in reply.items() if k != "usage"} if drop else reply


@contextmanager
def running_offline_server(
    request_log: Path | None = None, faults: Faults | None = None
) -> Iterator[str]:
    """Serve on 127.0.0.1 at a free port in a background thread; yield the base URL."""
    server = OfflineServer(("127.0.0.1", 0), request_log, faults)
    thread = threading.Thread(target=server.serve_forever, name="veriharness-offline", daemon=True)
    thread.start()
    try:
        yield server.base_url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def serve_until_ended(server: OfflineServer, port_file: Path | None = None) -> None:
    """Serve in the foreground until SIGTERM or Ctrl-C; the port goes to `port_file` first."""
    # SIGTERM ends serve_forever cleanly, so the port file's reader sees an orderly exit.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    if port_file is not None:
        # Written whole, so a reader polling for it never sees a partial port.
        atomic.write_text(port_file, f"{server.server_address[1]}\n")
    print(f"serve-offline: listening on {server.base_url}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
