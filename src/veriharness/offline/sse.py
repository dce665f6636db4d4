"""Assistant messages of the offline agent and their two wire forms (SSE stream, plain JSON).

The models mirror the Anthropic Messages API, so their discriminator is the wire field `type`
(`text` | `tool_use`) rather than the project's usual `kind`: renaming it would only add a
translation step at the one boundary where the field name is fixed by the protocol.

`claude -p` streams: `message_start`, then per content block `content_block_start`, one
`content_block_delta` (`text_delta`, or `input_json_delta` carrying the whole tool input as
JSON) and `content_block_stop`, then `message_delta` (stop reason and output usage) and
`message_stop`. One delta per block is enough for the CLI and keeps the stream deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "TextBlock",
    "ToolUseBlock",
    "ContentBlock",
    "MessageUsage",
    "AssistantMessage",
    "sse_events",
    "encode_sse",
    "approx_tokens",
]


class TextBlock(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


ContentBlock = Annotated[TextBlock | ToolUseBlock, Field(discriminator="type")]


class MessageUsage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)


class AssistantMessage(BaseModel):
    """One assistant turn: what the scripted policy decided, before any wire encoding."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    model: str
    content: list[ContentBlock]
    stop_reason: Literal["end_turn", "tool_use", "max_tokens"]
    usage: MessageUsage

    def to_json(self) -> dict[str, Any]:
        """The non-streaming response body."""
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [block.model_dump() for block in self.content],
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": self.usage.model_dump(),
        }


def approx_tokens(text: str) -> int:
    """A rough token count (about four characters a token); the offline model has no tokenizer."""
    return max(1, (len(text) + 3) // 4) if text else 0


def sse_events(message: AssistantMessage) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs of one streamed message, in protocol order."""
    start = message.to_json()
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = {"input_tokens": message.usage.input_tokens, "output_tokens": 0}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message.content):
        if isinstance(block, TextBlock):
            opening: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block.text}
        else:
            opening = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block.input)}
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": opening,
            },
        )
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": message.usage.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def encode_sse(message: AssistantMessage, usage: bool = True) -> bytes:
    """The whole SSE body of one streamed message; without `usage`, as a gateway that drops the
    token counts sends it (no ``usage`` in any event)."""
    events = list(sse_events(message))
    if not usage:
        events = [(name, _without_usage(data)) for name, data in events]
    parts = [
        f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
        for name, data in events
    ]
    return "".join(parts).encode("utf-8")


def _without_usage(data: dict[str, Any]) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k != "usage"}
    if isinstance(data.get("message"), dict):
        data["message"] = {k: v for k, v in data["message"].items() if k != "usage"}
    return data
