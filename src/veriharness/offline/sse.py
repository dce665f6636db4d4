"""Assistant messages of the offline agent and their two wire forms (SSE stream, plain JSON).

The models mirror the Anthropic Messages API, so their discriminator is the wire field `type`
(`text` | `tool_use` | `thinking` | `redacted_thinking`) rather than the project's usual `kind`:
renaming it would only add a translation step at the one boundary where the field name is fixed
by the protocol.

`claude -p` streams: `message_start`, then per content block `content_block_start`, one
`content_block_delta` (`text_delta`, `input_json_delta` carrying the whole tool input as JSON,
or for a thinking block a `thinking_delta` then a `signature_delta`; a redacted thinking block
has none) and `content_block_stop`, then `message_delta` (stop reason and output usage) and
`message_stop`. One delta per block is enough for the CLI and keeps the stream deterministic.

A `StreamShape` adds what the real API also sends (`offline/stream_modes.py` picks it from the
scripted task): `ping` events, usage split as the real API splits it (the input side and a
provisional output count in `message_start`, the final output count in `message_delta`), and an
`error` event in the middle of the stream, which then ends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "TextBlock",
    "ToolUseBlock",
    "ThinkingBlock",
    "RedactedThinkingBlock",
    "StreamShape",
    "OVERLOADED",
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


class ThinkingBlock(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str


class RedactedThinkingBlock(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock, Field(discriminator="type")
]


class MessageUsage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    input_tokens: int = Field(ge=0)  # the uncached part of the input when cache counts are set
    output_tokens: int = Field(ge=0)
    cache_creation_input_tokens: int | None = Field(default=None, ge=0)
    cache_read_input_tokens: int | None = Field(default=None, ge=0)

    def input_side(self) -> dict[str, int]:
        """The counts the real API reports in message_start: input and any cache counts."""
        return self.model_dump(exclude={"output_tokens"}, exclude_none=True)


class StreamShape(BaseModel):
    """What a stream carries besides the message (see the module notes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ping: bool = False
    split_usage: bool = False
    # The stream ends with an `overloaded_error` event after its first content block's delta.
    overloaded: bool = False


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
            "usage": self.usage.model_dump(exclude_none=True),
        }


def approx_tokens(text: str) -> int:
    """A rough token count (about four characters a token); the offline model has no tokenizer."""
    return max(1, (len(text) + 3) // 4) if text else 0


def _block_events(index: int, block: ContentBlock) -> list[tuple[str, dict[str, Any]]]:
    """content_block_start, its deltas and content_block_stop of one block."""
    deltas: list[dict[str, Any]]
    if isinstance(block, TextBlock):
        opening: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": block.text}]
    elif isinstance(block, ToolUseBlock):
        opening = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block.input)}]
    elif isinstance(block, ThinkingBlock):
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": block.thinking},
            {"type": "signature_delta", "signature": block.signature},
        ]
    else:  # a redacted block arrives whole in its start event, with no delta
        opening, deltas = {"type": "redacted_thinking", "data": block.data}, []
    start = {"type": "content_block_start", "index": index, "content_block": opening}
    events = [("content_block_start", start)]
    for delta in deltas:
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


_PING: tuple[str, dict[str, Any]] = ("ping", {"type": "ping"})
# The error the real API reports when it is overloaded (HTTP 529, or an `error` event mid-stream).
OVERLOADED: dict[str, str] = {"type": "overloaded_error", "message": "Overloaded"}


def sse_events(
    message: AssistantMessage, shape: StreamShape | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs of one streamed message, in protocol order."""
    shape = shape or StreamShape()
    start = message.to_json()
    start["content"] = []
    start["stop_reason"] = None
    if shape.split_usage:
        # As the real API: the input side whole, the output count provisional (message_delta
        # repeats it cumulatively, so the last count is the one that holds).
        start["usage"] = message.usage.input_side() | {"output_tokens": 1}
    else:
        start["usage"] = {"input_tokens": message.usage.input_tokens, "output_tokens": 0}
    yield "message_start", {"type": "message_start", "message": start}
    if shape.ping:
        yield _PING
    for index, block in enumerate(message.content):
        events = _block_events(index, block)
        if shape.overloaded:
            yield from events[:2]  # the block opened and its first delta, then the fault
            yield "error", {"type": "error", "error": OVERLOADED}
            return
        yield from events
        if shape.ping:
            yield _PING
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": message.usage.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def encode_sse(
    message: AssistantMessage, usage: bool = True, shape: StreamShape | None = None
) -> bytes:
    """The whole SSE body of one streamed message; without `usage`, as a gateway that drops the
    token counts sends it (no ``usage`` in any event)."""
    events = list(sse_events(message, shape))
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
