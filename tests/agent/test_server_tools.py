"""Server tools refused (P-66): a request whose `tools` name a tool the model provider runs itself
(web search, web fetch, code execution, ...) is refused by the model proxy, naming the tool,
recorded, and named in the run's outcome and the runs table, whatever `agent.network` says; only
`agent.allow_server_tools` lets one through, and it is hashed into the run's identity.

The real `claude` CLI sends one: its WebSearch tool asks the model with a `web_search_20250305`
tool. The session here (network open, so only the proxy stands in the way) scripts the offline
agent to search once; the CLI shows the proxy's refusal as the tool's error. The proxy boundary
is also spoken to directly over HTTP, with requests the CLI never sends but a session's own shell
could (an escaped type, a message batch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from pydantic import ValidationError

from support.sessions import TASK, offline_plan, tool_results
from veriharness import cli
from veriharness.agent.proxy import Upstream, running_proxy
from veriharness.agent.request_record import REQUESTS_FILE, read_requests
from veriharness.agent.server_tools import allowed, provider_tools, refused_server_tools
from veriharness.agent.session import run_session
from veriharness.experiment.config import AgentSettings
from veriharness.experiment.offline_model import OFFLINE_AGENT_MODEL
from veriharness.offline.agent_policy import ONLY_FIRST, uses_first
from veriharness.offline.server import running_offline_server
from veriharness.runfolder.agent_requests import AgentRequest
from veriharness.runfolder.outcome import AgentOutcome

WEB_SEARCH = "web_search_20250305"
SEARCHES = TASK + uses_first("WebSearch", {"query": "landing page hero layout"}) + ONLY_FIRST
TOOLS = ["Read", "Write", "WebSearch", "mcp__mllm__call"]
TOKEN = "session-token-for-the-server-tool-tests"


def _body(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": OFFLINE_AGENT_MODEL,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "search the web for me"}],
        "tools": tools,
    }


def test_the_types_are_read_as_the_provider_reads_them() -> None:
    custom = {"name": "Read", "input_schema": {}}
    typed = {"type": WEB_SEARCH, "name": "web_search"}
    assert provider_tools(json.dumps(_body([custom, typed])).encode()) == [WEB_SEARCH]
    # An escaped type is the same type to the provider's JSON parser.
    escaped = json.dumps(_body([typed])).replace("web_search", "web\\u005fsearch").encode()
    assert provider_tools(escaped) == [WEB_SEARCH]
    batch = {"requests": [{"custom_id": "a", "params": _body([{"type": "mcp_toolset"}])}]}
    assert provider_tools(json.dumps(batch).encode()) == ["mcp_toolset"]
    assert provider_tools(json.dumps(_body([{"type": "custom", **custom}])).encode()) == []
    assert provider_tools(b"not json") == provider_tools(b"") == []
    # An entry allows a type as it is, or every version of it by the type without its date.
    assert allowed(WEB_SEARCH, ["web_search"]) and allowed(WEB_SEARCH, [WEB_SEARCH])
    assert not allowed(WEB_SEARCH, ["web_search_20260209", "web", "web_fetch"])
    two = json.dumps(_body([typed, typed, {"type": "code_execution_20250825"}])).encode()
    assert refused_server_tools(two, ["web_search"]) == ["code_execution_20250825"]


def test_the_setting_is_hashed_only_when_it_names_a_tool() -> None:
    default = AgentSettings().identity()
    assert "allow_server_tools" not in default  # the runs made before it keep their identity
    allowing = AgentSettings(allow_server_tools=("web_search",)).identity()
    assert allowing["allow_server_tools"] == ["web_search"]
    assert {k: v for k, v in allowing.items() if k != "allow_server_tools"} == default
    with pytest.raises(ValidationError, match="allow_server_tools"):
        AgentSettings(allow_server_tools=("Web Search",))


@contextmanager
def _proxy(tmp_path: Path, allow: tuple[str, ...] = ()) -> Iterator[str]:
    """The real proxy in front of the real offline model, allowing `allow`; yields its URL. Its
    records are whole once the block ends (the proxy writes a request's line after its answer)."""
    received, records = tmp_path / "received.jsonl", tmp_path / REQUESTS_FILE
    with (
        running_offline_server(received) as offline,
        running_proxy(Upstream(offline, None), TOKEN, records, allow_server_tools=allow) as url,
    ):
        yield url


def _post(url: str, body: bytes, path: str = "/v1/messages") -> httpx.Response:
    headers = {"x-api-key": TOKEN, "content-type": "application/json"}
    return httpx.post(url + path, content=body, headers=headers, timeout=60)


def _received(tmp_path: Path) -> list[dict[str, Any]]:
    log = tmp_path / "received.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_proxy_refuses_a_server_tool_by_name_and_sends_nothing(tmp_path: Path) -> None:
    escaped = json.dumps(_body([{"type": WEB_SEARCH, "name": "web_search"}]))
    escaped = escaped.replace("web_search_", "web\\u005fsearch_")
    batch = {"requests": [{"custom_id": "a", "params": _body([{"type": "web_fetch_20250910"}])}]}
    with _proxy(tmp_path) as url:
        answers = [
            _post(url, escaped.encode()),
            _post(url, json.dumps(batch).encode(), "/v1/messages/batches"),
        ]
    for answer, kind in zip(answers, [WEB_SEARCH, "web_fetch_20250910"], strict=True):
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert kind in error["message"] and "agent.allow_server_tools" in error["message"]
    lines = sorted(read_requests(tmp_path / REQUESTS_FILE), key=lambda r: r.seq or 0)
    assert [r.server_tools_refused for r in lines] == [[WEB_SEARCH], ["web_fetch_20250910"]]
    assert all(r.request_id is None and "refused by the proxy" in (r.error or "") for r in lines)
    assert _received(tmp_path) == []  # neither reached the model


def test_a_named_server_tool_passes_with_the_providers_request_id(tmp_path: Path) -> None:
    with _proxy(tmp_path, ("web_search",)) as url:
        body = _body([{"type": WEB_SEARCH, "name": "web_search"}])
        answer = _post(url, json.dumps(body).encode())
    assert answer.status_code == 200
    (line,) = read_requests(tmp_path / REQUESTS_FILE)
    assert line.server_tools_refused is None
    assert line.request_id == answer.headers["request-id"] and line.request_id.startswith("req_")
    (sent,) = _received(tmp_path)
    assert sent["body"]["tools"] == [{"type": WEB_SEARCH, "name": "web_search"}]


@dataclass
class Searched:
    outcome: AgentOutcome
    requests: list[AgentRequest]
    run_dir: Path


def _search_session(tmp_path: Path, **overrides: Any) -> Searched:
    plan = offline_plan(
        tmp_path, SEARCHES, allowed_tools=TOOLS, isolation="none", network="open", **overrides
    )
    outcome = run_session(plan)
    return Searched(outcome, read_requests(plan.run_dir / REQUESTS_FILE), plan.run_dir)


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> Searched:
    """A real session whose agent searches the web once, with the network open."""
    return _search_session(tmp_path_factory.mktemp("refused"))


@pytest.mark.slow
def test_the_clis_web_search_is_refused_and_the_session_is_told_why(refused: Searched) -> None:
    assert refused.outcome.status == "ok", refused.outcome.error
    assert refused.outcome.session_network == "open"  # the network does not lift the refusal
    assert refused.outcome.server_tools_refused == [WEB_SEARCH]
    searches = [r for r in refused.requests if r.server_tools_refused]
    assert searches and all(r.status == 400 for r in searches)
    assert all(r.server_tools_refused == [WEB_SEARCH] for r in searches)
    (result,) = tool_results(refused.run_dir)
    assert result.startswith("API Error: 400") and WEB_SEARCH in result
    assert "agent.allow_server_tools" in result
    # The offline model (upstream of the proxy) never saw a request with the tool.
    sent = [json.loads(line)["body"] for line in
            (refused.run_dir / "model_requests.jsonl").read_text().splitlines()]  # fmt: skip
    tools = [tool for body in sent for tool in body.get("tools", [])]
    assert tools and all("type" not in tool for tool in tools)


@pytest.mark.slow
def test_the_runs_and_requests_tables_name_the_refused_tool(refused: Searched) -> None:
    exp_dir = refused.run_dir.parents[2]
    (exp_dir / "experiment.json").unlink()  # the plan's placeholder is no experiment record
    assert cli.main(["collect", "--experiment-dir", str(exp_dir)]) == 0
    (run,) = pd.read_parquet(exp_dir / "tables" / "runs.parquet").itertuples()
    assert list(run.server_tools_refused) == [WEB_SEARCH]
    requests = pd.read_parquet(exp_dir / "tables" / "agent_requests.parquet")
    named = [list(v) for v in requests.server_tools_refused if v is not None]
    assert named and all(v == [WEB_SEARCH] for v in named)
    answered = requests[requests.http_status == 200]
    assert answered.request_id.str.startswith("req_offline_").all()


@pytest.mark.slow
def test_a_session_allowed_the_tool_sends_it_to_its_model(tmp_path: Path) -> None:
    searched = _search_session(tmp_path, allow_server_tools=("web_search",))
    assert searched.outcome.status == "ok", searched.outcome.error
    assert searched.outcome.server_tools_refused == []
    assert all(r.server_tools_refused is None for r in searched.requests)
    sent = [json.loads(line)["body"] for line in
            (searched.run_dir / "model_requests.jsonl").read_text().splitlines()]  # fmt: skip
    assert any(t.get("type") == WEB_SEARCH for body in sent for t in body.get("tools", []))
    (result,) = tool_results(searched.run_dir)
    assert result.startswith("Web search results")  # the offline model answered the search
