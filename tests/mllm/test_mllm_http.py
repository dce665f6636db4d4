"""The server's protocol surface as plain JSON-RPC over real HTTP (no MCP client in between):
the 401 challenge, serverInfo, the one capability advertised, and the errors for methods and
tools it does not have."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mllm.mllm_mcp_client import http_server
from mllm.mllm_provider_stub import ProviderStub
from veriharness import __version__

TOKEN = "mllm-session-token-http-0123456789"


class RawSession:
    """One MCP session spoken by hand: initialize, then numbered requests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/json, text/event-stream",
        }
        self.next_id = 1

    def post(self, message: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.url, json=message, headers=self.headers, timeout=30)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.next_id += 1
        response = self.post(message)
        if method == "initialize":
            self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        return _one_message(response)

    def initialize(self) -> dict[str, Any]:
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-http-test", "version": "1"},
        }
        answer = self.request("initialize", hello)
        ready = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert ready.status_code == 202, ready.text
        return answer


def _one_message(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, (response.status_code, response.text)
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        [message] = [json.loads(d) for d in data if d.strip()]
        return message
    return response.json()


@pytest.fixture
def served(
    stub: ProviderStub, workspace: Path, catalog_file: Path, tmp_path: Path
) -> Iterator[tuple[str, Path]]:
    """A real `mllm-server --transport http`; yields its URL and its stderr log."""
    env = dict(os.environ) | {"VH_STUB_URL": stub.base}
    log = tmp_path / "server.log"
    with http_server(workspace, catalog_file, tmp_path / "trace.jsonl", env, TOKEN, log) as url:
        yield url, log


def test_a_refused_request_carries_a_bearer_challenge(served) -> None:
    url, _ = served
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    missing = httpx.post(url, json=hello)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer realm="veriharness-mllm"'
    assert "send Authorization: Bearer" in missing.json()["error"]
    assert "this server has no OAuth" in missing.json()["error"]
    wrong = httpx.post(url, json=hello, headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401
    challenge = wrong.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="veriharness-mllm", error="invalid_token"')
    # Every path is behind the token, the OAuth discovery ones included: there is nothing to find.
    probe = httpx.get(url.rsplit("/", 1)[0] + "/.well-known/oauth-protected-resource")
    assert probe.status_code == 401 and probe.headers["www-authenticate"].startswith("Bearer")


def test_server_info_names_the_package_version_and_only_tools_are_offered(served) -> None:
    url, log = served
    session = RawSession(url)
    answer = session.initialize()["result"]
    assert answer["serverInfo"] == {"name": "mllm", "version": __version__}
    assert set(answer["capabilities"]) == {"tools"}
    tools = session.request("tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == ["call"]
    for method, params in (
        ("prompts/get", {"name": "anything"}),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/read", {"uri": "file:///etc/hostname"}),
        ("resources/templates/list", {}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "x"},
                                 "argument": {"name": "a", "value": "b"}}),
        ("logging/setLevel", {"level": "debug"}),
    ):  # fmt: skip
        error = session.request(method, params)["error"]
        assert (error["code"], error["message"]) == (-32601, "Method not found"), method
    unknown = session.request("tools/call", {"name": "nope", "arguments": {}})["error"]
    assert unknown["code"] == -32602 and "unknown tool 'nope'" in unknown["message"]
    assert "one tool, 'call'" in unknown["message"]
    assert session.request("ping")["result"] == {}
    assert "Traceback" not in log.read_text(), log.read_text()
