"""Stream modes: the parts of the real Messages API a scripted task asks the offline model for.

A system prompt holding `<veriharness-offline-stream>MODE ...</veriharness-offline-stream>`
(`stream_mode()` writes it; only tests put one there) makes every answer of the offline agent's
model carry what the real API also sends, one mode per feature:

- `ping`: `ping` events after `message_start` and after each content block;
- `thinking`: a `thinking` block first, streamed as a `thinking_delta` and a `signature_delta`;
- `redacted_thinking`: a `redacted_thinking` block first (its `data` whole in the block's start);
- `split_usage`: the usage as the real API splits it: the input side in `message_start`, part of
  it as prompt-cache reads and writes, with a provisional output count, and the final output
  count in `message_delta`;
- `overloaded_error[:N]`: the stream stops after its first block's first delta with an `error`
  event of type `overloaded_error` (HTTP 200 already sent), the first N times (default 1) each
  request arrives;
- `http_529[:N]`: HTTP 529 `overloaded_error` instead of an answer, the first N times each request
  arrives.

"Each request" is told by the element's text and the request's place in the conversation (its
number of messages), not by its bytes: Claude Code's system prompt names the session's private
folder, which each attempt of a session makes anew. So a client's retry of a request counts
towards N, a later turn starts again at none, and the counts, kept per process, span the attempts
of one `run-agent` (whose every attempt starts its own server): N failures of a session's first
request are N failures in all, however they are retried. A word starting with `#` is a label,
not a mode: two sessions in one process whose elements differ by a label keep separate counts.

Thinking blocks are signed (`signature`, or the redacted block's `data`) by what they say; a
request whose conversation carries a thinking block that is not one of ours, or was altered, is
refused as the real API refuses it (400, naming the message and the block), so a session that
passes its thinking back unchanged is what a test sees succeed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from veriharness._util.hashing import sha256_json
from veriharness.offline.agent_policy import PolicyInputError, system_text
from veriharness.offline.sse import (
    AssistantMessage,
    ContentBlock,
    MessageUsage,
    RedactedThinkingBlock,
    StreamShape,
    TextBlock,
    ThinkingBlock,
    approx_tokens,
)

__all__ = [
    "STREAM_ELEMENT",
    "MODES",
    "StreamModes",
    "stream_mode",
    "modes_of",
    "check_thinking",
    "reasoned",
    "shape_of",
    "take_failure",
]

STREAM_ELEMENT = "veriharness-offline-stream"
_ELEMENT = re.compile(f"<{STREAM_ELEMENT}>(.*?)</{STREAM_ELEMENT}>", re.DOTALL)
_FLAGS = ("ping", "thinking", "redacted_thinking", "split_usage")
_COUNTED = ("overloaded_error", "http_529")
MODES = (*_FLAGS, *_COUNTED)
_SIGNED = b"veriharness-offline-thinking\0"
_REDACTED = b"veriharness-offline-redacted\0"

_FAILED: dict[tuple[str, str], int] = {}
_FAILED_LOCK = threading.Lock()


class StreamModes(BaseModel):
    """The modes one request asked for; a failing mode holds how often each request fails."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ping: bool = False
    thinking: bool = False
    redacted_thinking: bool = False
    split_usage: bool = False
    overloaded_error: int = Field(default=0, ge=0)
    http_529: int = Field(default=0, ge=0)


def stream_mode(*modes: str) -> str:
    """The system prompt element that asks the offline model for `modes` (e.g. "thinking",
    "overloaded_error:2")."""
    return f"<{STREAM_ELEMENT}>{' '.join(modes)}</{STREAM_ELEMENT}>"


def modes_of(body: dict[str, Any]) -> StreamModes:
    """The stream modes the request's system prompt asks for (none without the element)."""
    found: dict[str, Any] = {}
    for text in _ELEMENT.findall(system_text(body)):
        for word in text.replace(",", " ").split():
            if word.startswith("#"):
                continue  # a label: it only sets the element's counts apart
            name, _, count = word.partition(":")
            if name in _FLAGS and not count:
                found[name] = True
            elif name in _COUNTED and (not count or count.isdigit()):
                found[name] = int(count or 1)
            else:
                raise PolicyInputError(
                    f"{STREAM_ELEMENT}: unknown stream mode {word!r}; the modes are "
                    f"{', '.join(_FLAGS)}, and {', '.join(_COUNTED)} with an optional ':N'"
                )
    return StreamModes(**found)


def _signature(thinking: str) -> str:
    return base64.b64encode(hashlib.sha256(_SIGNED + thinking.encode()).digest()).decode()


def _redacted_data(text: str) -> str:
    payload = text.encode()
    tag = hashlib.sha256(_REDACTED + payload).digest()[:16]
    return base64.b64encode(_REDACTED + tag + payload).decode()


def _redacted_ours(data: Any) -> bool:
    try:
        raw = base64.b64decode(str(data), validate=True)
    except ValueError:
        return False
    if not raw.startswith(_REDACTED):
        return False
    tag, payload = raw[len(_REDACTED) : len(_REDACTED) + 16], raw[len(_REDACTED) + 16 :]
    return tag == hashlib.sha256(_REDACTED + payload).digest()[:16]


def check_thinking(body: dict[str, Any]) -> None:
    """Refuse a conversation whose assistant turns carry a thinking block we did not sign, or
    one changed since (as the real API checks each block's signature)."""
    for m, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        for b, block in enumerate(message["content"]):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "thinking":
                good = block.get("signature") == _signature(str(block.get("thinking")))
            elif kind == "redacted_thinking":
                good = _redacted_ours(block.get("data"))
            else:
                continue
            if not good:
                field = "signature" if kind == "thinking" else "data"
                raise PolicyInputError(
                    f"messages.{m}.content.{b}: Invalid `{field}` in `{kind}` block"
                )


def reasoned(message: AssistantMessage, modes: StreamModes) -> AssistantMessage:
    """`message` with the thinking the modes ask for put first, its output count including it
    (thinking is output the provider bills), and with `split_usage` its input partly read from
    and written to the prompt cache."""
    said = " ".join(b.text for b in message.content if isinstance(b, TextBlock))
    thought = f"My script's next step: {said}"
    first: list[ContentBlock] = []
    if modes.thinking:
        first.append(ThinkingBlock(thinking=thought, signature=_signature(thought)))
    if modes.redacted_thinking:
        first.append(RedactedThinkingBlock(data=_redacted_data(thought)))
    content = [*first, *message.content]
    usage = message.usage
    if first:  # counted as the policy counts a message's output (agent_policy._message)
        output = approx_tokens(json.dumps([block.model_dump() for block in content]))
        usage = usage.model_copy(update={"output_tokens": output})
    if modes.split_usage:
        total = usage.input_tokens
        read, written = total // 2, total // 4
        usage = MessageUsage(
            input_tokens=total - read - written,
            output_tokens=usage.output_tokens,
            cache_read_input_tokens=read,
            cache_creation_input_tokens=written,
        )
    return message.model_copy(update={"content": content, "usage": usage})


def shape_of(modes: StreamModes, overloaded: bool) -> StreamShape:
    """How the stream of an answer under `modes` is shaped; `overloaded`: this one is cut."""
    return StreamShape(ping=modes.ping, split_usage=modes.split_usage, overloaded=overloaded)


def take_failure(mode: str, body: dict[str, Any], times: int) -> bool:
    """Whether this arrival of the request fails under `mode`: one of its first `times`."""
    if times <= 0:
        return False
    messages = body.get("messages")
    place = len(messages) if isinstance(messages, list) else 0
    key = (mode, sha256_json([_ELEMENT.findall(system_text(body)), place]))
    with _FAILED_LOCK:
        seen = _FAILED.get(key, 0)
        _FAILED[key] = seen + 1
    return seen < times
