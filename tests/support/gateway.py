"""A real HTTP stand-in for a gateway in front of the offline model, for sessions that name
another model: on the way in it puts the offline model's name in place of the one the agent
named, and on the way back it names the model that answered as `answered` (by default the name
the agent sent), in the JSON body or the event stream alike. An `answered` other than `named` is
a provider answering with a snapshot id of the name it was asked for, as Anthropic's API answers
an alias. `gateway_plan` is a real `claude` session through such a gateway."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from support.sessions import TASK, offline_plan
from veriharness.agent.plan import SessionPlan
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL
from veriharness.experiment.prices import TokenPrice

__all__ = ["GATEWAY_KEY_ENV", "gateway_plan", "renaming_gateway"]

# The variable holding the gateway's key (any value: the stand-in checks none).
GATEWAY_KEY_ENV = "VH_TEST_GATEWAY_KEY"


def gateway_plan(
    tmp_path: Path,
    gateway: str,
    model: str,
    agent_price: TokenPrice,
    system_prompt: str = TASK,
    **overrides: Any,
) -> SessionPlan:
    """A session naming `model` through `gateway` at `agent_price`; unsandboxed, with the
    network open (the gateway is this process's loopback port)."""
    return offline_plan(
        tmp_path,
        system_prompt,
        endpoint="gateway",
        base_url=gateway,
        api_key_env=GATEWAY_KEY_ENV,
        model=model,
        agent_price=agent_price,
        isolation="none",
        network="open",
        **overrides,
    )


@contextmanager
def renaming_gateway(upstream: str, named: str, answered: str | None = None) -> Iterator[str]:
    """Serve the gateway on 127.0.0.1 at a free port in a background thread; yield its URL."""
    target = urlsplit(upstream)
    assert target.hostname is not None, upstream
    host: str = target.hostname  # narrowed for the handler below
    answer_name = (answered or named).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            body = body.replace(f'"{named}"'.encode(), f'"{OFFLINE_AGENT_MODEL}"'.encode())
            conn = http.client.HTTPConnection(host, target.port, timeout=120)
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            conn.request(self.command, self.path, body, headers)
            answer = conn.getresponse()
            data = answer.read().replace(OFFLINE_AGENT_MODEL.encode(), answer_name)
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.getheader("Content-Type") or "")
            if answer.getheader("request-id"):  # passed on, as a gateway passes the provider's
                self.send_header("request-id", answer.getheader("request-id") or "")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            conn.close()

        do_GET = do_POST = _forward  # noqa: N815 - stdlib names

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
