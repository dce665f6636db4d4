"""Server tools: the tools a request asks the model provider to run itself.

A Messages API request's `tools` may hold, besides the client's own tools (a name and an input
schema, which the session runs in its sandbox), tools Anthropic defines by a versioned `type`:
web search (`web_search_20250305`), web fetch, code execution, the MCP connector (`mcp_toolset`),
the advisor, tool search, and the schema-defined computer use, bash, text editor and memory
tools. The provider executes its server tools on its own machines, outside the sandbox's network
rules, so a session could reach the open web through its model whatever `agent.network` says.
The model proxy refuses every request naming one (docs/decisions.md P-66) unless
`agent.allow_server_tools` names it: by its type (`web_search_20250305`) or by the type without
its date (`web_search`, every version).

What counts is the type as the provider reads it, so the body is parsed (escapes decoded), not
searched as bytes: a session's own shell can reach the proxy and send what it likes. The
requests looked at are every JSON body's top-level `tools` and a batch's per-request
`params.tools`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

__all__ = [
    "ALLOW_SETTING",
    "KINDS",
    "allowed",
    "provider_tools",
    "refusal_message",
    "refused_server_tools",
]

ALLOW_SETTING = "agent.allow_server_tools"
_DATED = re.compile(r"^(?P<stem>[a-z][a-z0-9_]*?)_(?P<date>\d{8})$")
# What each known type stem is, for the refusal's message; an unknown type is refused too.
KINDS = {
    "web_search": "web search, run by the provider",
    "web_fetch": "web fetch, run by the provider",
    "code_execution": "code execution, run by the provider",
    "mcp_toolset": "MCP connector: the provider calls remote MCP servers",
    "advisor": "the provider's advisor model",
    "tool_search_tool_regex": "the provider's tool search",
    "tool_search_tool_bm25": "the provider's tool search",
    "computer": "computer use",
    "bash": "Anthropic's bash tool",
    "text_editor": "Anthropic's text editor tool",
    "memory": "Anthropic's memory tool",
}


def _tool_types(tools: Any) -> list[str]:
    if not isinstance(tools, list):
        return []
    types = [tool.get("type") for tool in tools if isinstance(tool, dict)]
    return [kind if isinstance(kind, str) else repr(kind) for kind in types if kind is not None]


def provider_tools(body: bytes) -> list[str]:
    """The `type` of every tool the request defines by type (not `custom`), in order; none for
    a body that is not a JSON object."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(value, dict):
        return []
    found = _tool_types(value.get("tools"))
    requests = value.get("requests")  # a message batch: each request's params
    for request in requests if isinstance(requests, list) else []:
        params = request.get("params") if isinstance(request, dict) else None
        if isinstance(params, dict):
            found += _tool_types(params.get("tools"))
    return [kind for kind in found if kind != "custom"]


def _stem(kind: str) -> str:
    dated = _DATED.match(kind)
    return dated.group("stem") if dated else kind


def allowed(kind: str, allow: Iterable[str]) -> bool:
    """Whether `allow` names the type `kind`: as it is, or by its stem (the type without its
    date, which allows every version)."""
    return any(kind == name or _stem(kind) == name for name in allow)


def refused_server_tools(body: bytes, allow: Iterable[str]) -> list[str]:
    """The server tool types of the request that `allow` does not name, each once, in order."""
    names = list(allow)
    refused: list[str] = []
    for kind in provider_tools(body):
        if not allowed(kind, names) and kind not in refused:
            refused.append(kind)
    return refused


def refusal_message(refused: list[str]) -> str:
    """What the refused request is answered: each tool, what it is, and the setting that
    allows it."""
    named = ", ".join(f"{kind} ({KINDS.get(_stem(kind), 'a tool the provider defines')})"
                      for kind in refused)  # fmt: skip
    return (
        f"the model proxy refuses server tools, which the model provider runs outside the "
        f"session's sandbox and its network rules: {named}. A session may have one only when "
        f"{ALLOW_SETTING} names it (e.g. {_stem(refused[0])!r})"
    )
