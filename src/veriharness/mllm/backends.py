"""Model backends: one HTTP request to a provider API per CallMLLM call.

A backend turns a ``ModelRequest`` (instruction, labelled inputs, output contract; there is no
field for capability tags, so they cannot reach a provider) into that API's JSON body, posts it
once, and reads the reply text and token usage back. Two API styles exist: ``openai-chat``
(``POST {base}/chat/completions``) and ``anthropic-messages`` (``POST {base}/v1/messages``).

The body is built without passing image bytes through the JSON encoder: ``encode`` serialises the
payload with a unique placeholder where each image's base64 goes, then joins the base64 bytes in
at those points. Base64 text needs no JSON escaping, so the bytes are exactly what
``json.dumps(payload(...))`` would give, while a screenshot's megabytes skip the encoder's
character scan and two string copies (profiling showed that scan as the largest single cost of a
call with a full screenshot). A placeholder carries a fresh random nonce and must occur exactly
once in the skeleton, so no user text can be mistaken for it.

The HTTP client is synchronous: the server runs each call in a worker thread (see ``server``),
where a plain ``httpx.Client`` does the one POST with less per-request overhead than the async
client on the event loop.

Every provider fault is mapped to ``ProviderError`` in ``Backend.send`` and nowhere else:
connection failures, timeouts, HTTP error statuses (with the status and a short excerpt of the
body) and bodies that are not in the API's shape. The HTTP transport is built with
``retries=0`` and nothing above it retries, repairs or reprompts (D-0011). Messages never include
the base URL or the key.
"""

from __future__ import annotations

import base64
import json
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import httpx

from veriharness.experiment.catalog import ProviderSettings
from veriharness.experiment.tool_contract import JsonOutput, TextOutput
from veriharness.mllm.images import PreparedImage
from veriharness.pace.provider_pace import ProviderPace

__all__ = [
    "ANTHROPIC_VERSION",
    "ProviderError",
    "PreparedText",
    "ModelRequest",
    "ModelReply",
    "Backend",
    "OpenAIChatBackend",
    "AnthropicMessagesBackend",
    "backend_for",
    "make_client",
    "splice_images",
    "contract_text",
]

ANTHROPIC_VERSION = "2023-06-01"
_BODY_EXCERPT_CHARS = 300
ErrorType = Literal["connection", "timeout", "http_status", "bad_response"]


class ProviderError(RuntimeError):
    """The provider could not be reached or did not answer in its API's shape."""

    def __init__(self, error_type: ErrorType, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.error_type: ErrorType = error_type
        self.status = status  # the HTTP status, when the provider answered one


@dataclass(frozen=True)
class PreparedText:
    label: str
    content: str


@dataclass(frozen=True)
class ModelRequest:
    """Everything that reaches the provider; capability tags deliberately have no place here."""

    instruction: str
    inputs: tuple[PreparedText | PreparedImage, ...]
    output: TextOutput | JsonOutput


@dataclass(frozen=True)
class ModelReply:
    text: str
    input_tokens: int | None
    output_tokens: int | None
    provider_model: str | None
    stop_reason: str | None = None  # as the provider says it (finish_reason / stop_reason)
    truncated: bool = False  # the provider stopped at the output token limit
    request_bytes: int = 0  # the size of the request body sent (for the estimate of P-36)
    held_ms: float | None = None  # held before it was sent, to keep to the provider's pace


def contract_text(output: TextOutput | JsonOutput) -> str | None:
    """What the request text says about the reply format (nothing for plain text)."""
    if isinstance(output, TextOutput):
        return None
    text = "Reply with one JSON value only, without prose or code fences."
    if output.json_schema is not None:
        schema = json.dumps(output.json_schema, ensure_ascii=False)
        text += f" The JSON must validate against this JSON Schema:\n{schema}"
    return text


def _label_line(item: PreparedText | PreparedImage) -> str:
    kind = "text" if isinstance(item, PreparedText) else "image"
    return f'Input "{item.label}" ({kind}):'


def make_client(settings: ProviderSettings) -> httpx.Client:
    """A client with the profile's explicit timeouts and no transport-level retries."""
    timeout = httpx.Timeout(settings.timeout_seconds, connect=settings.connect_timeout_seconds)
    return httpx.Client(timeout=timeout, transport=httpx.HTTPTransport(retries=0), trust_env=False)


ImageData = Callable[[PreparedImage], str]


def _base64_text(item: PreparedImage) -> str:
    return base64.b64encode(item.data).decode("ascii")


def splice_images(skeleton: str, placeholders: dict[str, PreparedImage]) -> bytes:
    """``skeleton`` (JSON text) as UTF-8 with each placeholder replaced by its image's base64."""
    pieces: list[bytes] = []
    rest = skeleton
    for token, item in placeholders.items():
        if rest.count(token) != 1:
            raise ValueError(f"image placeholder occurs {rest.count(token)} times in the body")
        before, rest = rest.split(token)
        pieces += [before.encode("utf-8"), base64.b64encode(item.data)]
    pieces.append(rest.encode("utf-8"))
    return b"".join(pieces)


class Backend(ABC):
    """One provider API style. Subclasses build the body and read the reply; nothing else."""

    path: str

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self._base_url = settings.resolved_base_url()
        self._api_key = settings.api_key()

    @property
    def url(self) -> str:
        return self._base_url + self.path

    @abstractmethod
    def headers(self) -> dict[str, str]: ...

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        """The request body as a JSON-ready dict, image data inline as base64 text."""
        return self.body(request, _base64_text)

    @abstractmethod
    def body(self, request: ModelRequest, image_data: ImageData) -> dict[str, Any]:
        """The request body, taking each image's base64 text from ``image_data``."""

    @abstractmethod
    def parse(self, body: Any) -> ModelReply:
        """Read the reply; raise KeyError, TypeError or ValueError when the shape is wrong."""

    def encode(self, request: ModelRequest) -> bytes:
        """The exact bytes of ``json.dumps(payload(request), ensure_ascii=False)`` in UTF-8."""
        nonce = secrets.token_hex(16)
        placeholders: dict[str, PreparedImage] = {}

        def placeholder(item: PreparedImage) -> str:
            token = f"<vh-image-{nonce}-{len(placeholders)}>"
            placeholders[token] = item
            return token

        skeleton = json.dumps(self.body(request, placeholder), ensure_ascii=False)
        return splice_images(skeleton, placeholders)

    def _scrub(self, text: str) -> str:
        return text.replace(self._base_url, "<base_url>")

    def send(
        self,
        client: httpx.Client,
        request: ModelRequest,
        pace: ProviderPace | None = None,
        abandoned: Callable[[], bool] | None = None,
    ) -> ModelReply:
        """Exactly one POST, held first until the provider's shared pace allows it (`pace`);
        every fault becomes a ``ProviderError``. A caller that gave up while the request was
        held (`abandoned`) gets `Abandoned`, and nothing is sent."""
        headers = {"content-type": "application/json", **self.headers()}
        content = self.encode(request)
        if pace is None:
            return self._post(client, content, headers)
        held = pace.hold(len(content), abandoned)
        status: int | None = None
        answer_headers: dict[str, str] = {}
        tokens = None
        try:
            reply = self._post(client, content, headers, answer_headers)
            status = 200
            if reply.input_tokens is not None and reply.output_tokens is not None:
                tokens = reply.input_tokens + reply.output_tokens
            return replace(reply, held_ms=round(held.seconds * 1000, 3))
        except ProviderError as error:
            status = error.status
            raise
        finally:
            pace.observe(held, status, answer_headers, tokens)

    def _post(
        self,
        client: httpx.Client,
        content: bytes,
        headers: dict[str, str],
        answer_headers: dict[str, str] | None = None,
    ) -> ModelReply:
        try:
            response = client.post(self.url, content=content, headers=headers)
        except httpx.TimeoutException as error:
            raise ProviderError(
                "timeout",
                f"the model provider did not answer in time ({type(error).__name__}; "
                f"timeout {self.settings.timeout_seconds}s, connect "
                f"{self.settings.connect_timeout_seconds}s)",
            ) from None
        except httpx.TransportError as error:
            raise ProviderError(
                "connection",
                self._scrub(f"cannot reach the model provider: {type(error).__name__}: {error}"),
            ) from None
        if answer_headers is not None:
            answer_headers.update(response.headers)
        if response.status_code >= 400:
            excerpt = response.text[:_BODY_EXCERPT_CHARS]
            raise ProviderError(
                "http_status",
                self._scrub(f"the model provider answered HTTP {response.status_code}: {excerpt}"),
                status=response.status_code,
            )
        try:
            reply = self.parse(response.json())
        except (KeyError, IndexError, TypeError, ValueError) as error:
            excerpt = response.text[:_BODY_EXCERPT_CHARS]
            raise ProviderError(
                "bad_response",
                self._scrub(
                    f"the model provider's reply is not in the {self.settings.api_style} shape "
                    f"({type(error).__name__}: {error}); body starts: {excerpt}"
                ),
            ) from None
        return replace(reply, request_bytes=len(content))


def _usage(body: dict[str, Any], input_key: str, output_key: str) -> tuple[int | None, int | None]:
    usage = body.get("usage") or {}
    if not isinstance(usage, dict):
        raise TypeError("usage is not an object")
    return usage.get(input_key), usage.get(output_key)


def _require_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is {type(value).__name__}, not a string")
    return value


class OpenAIChatBackend(Backend):
    path = "/chat/completions"

    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def body(self, request: ModelRequest, image_data: ImageData) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"type": "text", "text": request.instruction}]
        for item in request.inputs:
            if isinstance(item, PreparedText):
                parts.append({"type": "text", "text": f"{_label_line(item)}\n{item.content}"})
            else:
                data = image_data(item)
                parts.append({"type": "text", "text": _label_line(item)})
                url = f"data:{item.media_type};base64,{data}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
        contract = contract_text(request.output)
        if contract:
            parts.append({"type": "text", "text": contract})
        body: dict[str, Any] = {
            "model": self.settings.model,
            "max_tokens": self.settings.max_output_tokens,
            "messages": [{"role": "user", "content": parts}],
        }
        if self.settings.native_json and isinstance(request.output, JsonOutput):
            if request.output.json_schema is None:
                body["response_format"] = {"type": "json_object"}
            else:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "reply", "schema": request.output.json_schema},
                }
        return body

    def parse(self, body: Any) -> ModelReply:
        choice = body["choices"][0]
        text = _require_str(choice["message"]["content"], "choices[0].message.content")
        tokens_in, tokens_out = _usage(body, "prompt_tokens", "completion_tokens")
        stop = choice.get("finish_reason")
        stop = stop if isinstance(stop, str) else None
        return ModelReply(text, tokens_in, tokens_out, body.get("model"), stop, stop == "length")


class AnthropicMessagesBackend(Backend):
    path = "/v1/messages"

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def body(self, request: ModelRequest, image_data: ImageData) -> dict[str, Any]:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": request.instruction}]
        for item in request.inputs:
            if isinstance(item, PreparedText):
                blocks.append({"type": "text", "text": f"{_label_line(item)}\n{item.content}"})
            else:
                data = image_data(item)
                blocks.append({"type": "text", "text": _label_line(item)})
                blocks.append(
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": item.media_type, "data": data},
                    }
                )
        contract = contract_text(request.output)
        if contract:
            blocks.append({"type": "text", "text": contract})
        return {
            "model": self.settings.model,
            "max_tokens": self.settings.max_output_tokens,
            "messages": [{"role": "user", "content": blocks}],
        }

    def parse(self, body: Any) -> ModelReply:
        content = body["content"]
        if not isinstance(content, list):
            raise TypeError("content is not a list of blocks")
        texts = [_require_str(b["text"], "content[].text") for b in content if b["type"] == "text"]
        if not texts:
            raise ValueError("no text block in content")
        tokens_in, tokens_out = _usage(body, "input_tokens", "output_tokens")
        stop = body.get("stop_reason")
        stop = stop if isinstance(stop, str) else None
        return ModelReply(
            "".join(texts), tokens_in, tokens_out, body.get("model"), stop, stop == "max_tokens"
        )


_STYLES: dict[str, type[Backend]] = {
    "openai-chat": OpenAIChatBackend,
    "anthropic-messages": AnthropicMessagesBackend,
}


def backend_for(settings: ProviderSettings) -> Backend:
    """The backend of a profile; raises ``CatalogError`` for an unset URL or key variable."""
    return _STYLES[settings.api_style](settings)
