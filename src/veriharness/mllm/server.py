"""The ``mllm`` MCP server: one tool, ``call`` (Claude sees ``mcp__mllm__call``; the concept is
CallMLLM), served by ``veriharness mllm-server``.

The agent stage runs it outside the session's sandbox over MCP's streamable HTTP transport on a
loopback port (``--transport http``): every request must carry ``Authorization: Bearer <token>``
with the per-session token from ``VERIHARNESS_MLLM_TOKEN``, else it is refused with 401 and
``WWW-Authenticate: Bearer`` (RFC 6750) before the MCP layer sees it. The trace, the catalog and
the provider keys thus stay with this process; the session holds only the address and the token.
``--transport stdio`` (one client, the parent process) remains for tests and
``bench/mllm_overhead.py``.

A call runs: validate the request (``CallRequest``, tags against the taxonomy), resolve the model
profile (unknown is an error, never a fallback), prepare the inputs inside the workspace, write
``mllm_call_started`` (with ``--call-images``, keep the bytes of each image it attaches in the
run folder by digest: ``mllm/call_images.py``), post once to the provider, check the reply
against the output contract, write ``mllm_call_completed`` or ``mllm_call_failed``. A refusal
before the model call writes ``mllm_call_rejected``. Refusals and provider faults reach the agent
as MCP error results (``ToolError``) with a message it can act on; the server keeps serving.

The server is the SDK's low-level ``Server`` with two handlers, ``tools/list`` and ``tools/call``
(P-39): it advertises the tools capability only, any other method (``prompts/get``,
``resources/list``, ...) is answered with JSON-RPC's -32601 "method not found", and
``serverInfo.version`` is the package's version. The tool receives its arguments exactly as the
client sent them and validates them itself, so every malformed request leaves a trace line and
a message naming the field and value. The advertised input schema is ``CallRequest``'s, with the
taxonomy's codes as an enum (``request_json_schema``).

``CallService.call`` is plain synchronous code and the tool runs it in a worker thread: reading,
hashing and cropping an image and the HTTP request then never block the event loop that serves
the transport, concurrent calls proceed side by side, and the whole call costs one thread hop
(cheaper, measured, than the async HTTP client on the loop; see ``bench/mllm_overhead.py``).
One HTTP client per profile lives as long as the server, so a call opens no new client.
A call the client cancels (``notifications/cancelled``, as Claude Code sends when its tool
timeout passes) is left to its thread: while it is still held by the provider's pace it is
dropped unsent (``mllm_call_failed``, error type ``cancelled``); once sent it runs to its end, so
what was paid for reaches the trace, and no answer goes back to the client.
"""

from __future__ import annotations

import hmac
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import httpx
import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from veriharness import __version__
from veriharness._util import atomic
from veriharness._util.programs import project_root
from veriharness._util.redaction import Redactor
from veriharness.experiment.catalog import (
    CatalogError,
    ModelCatalog,
    ProviderSettings,
    load_catalog,
)
from veriharness.experiment.prices import TokenPrice
from veriharness.experiment.taxonomy import DEFAULT_TAXONOMY_PATH, Taxonomy, load_taxonomy
from veriharness.experiment.tool_contract import (
    TOOL_DESCRIPTION,
    CallRequest,
    ReplyCheck,
    RequestRefused,
    TextInput,
    check_reply,
    describe_validation_error,
    request_json_schema,
)
from veriharness.mllm import MLLM_HTTP_PATH
from veriharness.mllm.backends import (
    ModelReply,
    ModelRequest,
    PreparedText,
    ProviderError,
    backend_for,
    make_client,
)
from veriharness.mllm.call_images import CallImageKeeper
from veriharness.mllm.images import PreparedImage, prepare_image
from veriharness.mllm.trace import TraceWriter, now
from veriharness.pace.provider_pace import Abandoned, ProviderPace, pace_dir
from veriharness.runfolder.mllm_trace import (
    CallCompleted,
    CallFailed,
    CallRejected,
    CallStarted,
    CallUsage,
    TaxonomyRef,
    TracedImage,
    TracedText,
)
from veriharness.runfolder.spend import TokenCounts
from veriharness.spend.ledger import BudgetExhausted, SpendGate, SpendSettings
from veriharness.spend.prices import cost_usd, estimate_tokens, unpriced_reason

__all__ = [
    "MllmSpend",
    "CallService",
    "ToolError",
    "build_server",
    "token_guard",
    "open_service",
    "serve",
]


class MllmSpend(BaseModel):
    """How calls are priced and capped (``--spend-json``): the price of each profile (None when
    unpriced: its calls get no cost) and the run's ledger settings (None: no ledger)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    prices: dict[str, TokenPrice | None] = Field(default_factory=dict)
    ledger: SpendSettings | None = None
    # Hold each call to its profile's provider pace (pace/), shared through the ledger's
    # experiment folder; needs the ledger.
    paced: bool = False


class CallService:
    """Everything a call needs; one instance per server process."""

    def __init__(
        self,
        workspace: Path,
        catalog: ModelCatalog,
        taxonomy: Taxonomy,
        trace: TraceWriter,
        spend: MllmSpend | None = None,
        images: CallImageKeeper | None = None,
    ) -> None:
        self.workspace = workspace
        self.images = images
        self.catalog = catalog
        self.taxonomy = taxonomy
        self.trace = trace
        self.spend = spend or MllmSpend()
        self.gate = SpendGate(self.spend.ledger) if self.spend.ledger is not None else None
        self._lock = threading.Lock()
        self._clients: dict[str, httpx.Client] = {}
        self._paces: dict[str, ProviderPace] = {}

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def _reject(
        self,
        call_id: str,
        arguments: dict[str, Any],
        message: str,
        tool_use_id: str | None,
        budget: bool = False,
    ) -> ToolError:
        self.trace.write(
            CallRejected(
                call_id=call_id,
                time=now(),
                error=message,
                budget=budget,
                request=arguments,
                tool_use_id=tool_use_id,
            )
        )
        return ToolError(message)

    def _failed(self, call_id: str, begun: float, error_type: str, error: str) -> None:
        self.trace.write(
            CallFailed(
                call_id=call_id,
                time=now(),
                latency_ms=_ms(begun),
                error_type=error_type,
                error=error,
            )
        )

    def call(
        self,
        arguments: dict[str, Any],
        tool_use_id: str | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> str:
        """One CallMLLM call, start to finish; raises ``ToolError`` for the agent to read.

        `tool_use_id` is the agent's id for this tool use, when the client sends one: it links
        the trace to the transcript exactly."""
        call_id = uuid.uuid4().hex
        codes = self.taxonomy.codes
        try:
            request = CallRequest.model_validate(arguments, context={"taxonomy_codes": codes})
        except ValidationError as error:
            raise self._reject(
                call_id, arguments, describe_validation_error(error), tool_use_id
            ) from None
        try:
            profile = self.catalog.resolve(request.model_profile)
            backend = backend_for(profile.provider)
            inputs = tuple(self._prepare(item) for item in request.inputs)
        except (CatalogError, RequestRefused) as error:
            raise self._reject(call_id, arguments, str(error), tool_use_id) from None
        if self.gate is not None:
            try:
                self.gate.admit()
            except BudgetExhausted as error:
                message = f"CallMLLM refused: {error}"
                raise self._reject(call_id, arguments, message, tool_use_id, True) from None
        started = self._started(
            call_id, request, inputs, profile.name, self.catalog.profile_config_hash(profile)
        )
        self.trace.write(started.model_copy(update={"tool_use_id": tool_use_id}))
        if self.images is not None:
            for item in inputs:
                if isinstance(item, PreparedImage):
                    self.images.keep(item.attached_sha256, item.media_type, item.data)
        model_request = ModelRequest(request.instruction, inputs, request.output)
        client = self._client(profile.name, profile.provider)
        begun = time.perf_counter()
        try:
            reply = backend.send(client, model_request, self._pace(profile.name), cancelled)
        except Abandoned as gone:
            self._failed(call_id, begun, "cancelled", f"the client cancelled the call: {gone}")
            raise ToolError(f"CallMLLM cancelled: {gone}") from None
        except ProviderError as error:
            self._failed(call_id, begun, error.error_type, str(error))
            raise ToolError(
                f"model request failed ({error.error_type}): {error}; nothing was retried"
            ) from None
        latency = _ms(begun)
        cost, unpriced, estimated = self._charge(
            call_id, profile.name, profile.provider.max_output_tokens, reply
        )
        try:
            check = check_reply(request.output, reply.text)
        except Exception as error:  # the reply is paid for: it reaches the trace whatever happens
            check = ReplyCheck(
                "check_failed", f"the reply could not be checked: {type(error).__name__}: {error}"
            )
        self.trace.write(
            CallCompleted(
                call_id=call_id,
                time=now(),
                latency_ms=latency,
                raw_response=reply.text,
                parse_status=check.parse_status,
                diagnostic=check.diagnostic,
                usage=CallUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens),
                provider_model=reply.provider_model,
                stop_reason=reply.stop_reason,
                truncated=reply.truncated,
                held_ms=reply.held_ms,
                cost_usd=cost,
                cost_unpriced_reason=unpriced,
                estimated_usd=estimated,
            )
        )
        cut = (
            f"\n[CallMLLM: the model stopped at its output limit of "
            f"{profile.provider.max_output_tokens} tokens; the reply above is cut off.]"
            if reply.truncated
            else ""
        )
        if check.parse_status in ("ok", "not_applicable"):
            return reply.text + cut
        return (
            f"The reply does not meet the requested JSON output ({check.parse_status}): "
            f"{check.diagnostic}\nRaw reply:\n{reply.text}{cut}"
        )

    def _charge(
        self, call_id: str, profile: str, max_output_tokens: int, reply: ModelReply
    ) -> tuple[float | None, str | None, float | None]:
        """The call's cost at its profile's price, charged to the ledger, with why it has none
        and what the caps counted instead: (None, None, None) when the profile has no price;
        (None, reason, estimate) when the reply reported no usage, charged at the estimate of
        `estimate_tokens` (the profile's max_output_tokens out, request bytes / 4 in)."""
        price = self.spend.prices.get(profile)
        if price is None:
            return None, None, None
        reason = unpriced_reason(reply.input_tokens, reply.output_tokens)
        if reason is not None:
            tokens = estimate_tokens(reply.request_bytes, max_output_tokens)
            estimate = cost_usd(price, tokens)
            if self.gate is not None:
                self.gate.charge("mllm", profile, call_id, tokens, estimate, reason)
            return None, reason, estimate
        tokens = TokenCounts.of(reply.input_tokens, reply.output_tokens)
        cost = cost_usd(price, tokens)
        if self.gate is not None:
            self.gate.charge("mllm", profile, call_id, tokens, cost)
        return cost, None, None

    def _pace(self, profile: str) -> ProviderPace | None:
        ledger = self.spend.ledger
        if not self.spend.paced or ledger is None:
            return None
        with self._lock:
            if profile not in self._paces:
                self._paces[profile] = ProviderPace(
                    pace_dir(ledger.experiment_dir), f"mllm-{profile}"
                )
            return self._paces[profile]

    def _client(self, name: str, settings: ProviderSettings) -> httpx.Client:
        with self._lock:
            client = self._clients.get(name)
            if client is None:
                client = self._clients[name] = make_client(settings)
            return client

    def _prepare(self, item: Any) -> PreparedText | PreparedImage:
        if isinstance(item, TextInput):
            return PreparedText(item.label, item.content)
        return prepare_image(self.workspace, item)

    def _started(
        self,
        call_id: str,
        request: CallRequest,
        inputs: tuple[PreparedText | PreparedImage, ...],
        profile: str,
        config_hash: str,
    ) -> CallStarted:
        traced: list[TracedText | TracedImage] = [
            TracedText(label=i.label, content=i.content)
            if isinstance(i, PreparedText)
            else TracedImage(
                label=i.label,
                path=i.path,
                file_sha256=i.file_sha256,
                region=i.region,
                attached_sha256=i.attached_sha256,
                attached_bytes=i.attached_bytes,
                media_type=i.media_type,
                width=i.width,
                height=i.height,
            )
            for i in inputs
        ]
        return CallStarted(
            call_id=call_id,
            time=now(),
            instruction=request.instruction,
            inputs=traced,
            declared_capability_tags=request.capability_tags,
            taxonomy=TaxonomyRef(id=self.taxonomy.id, version=self.taxonomy.version),
            output=request.output.model_dump(by_alias=True, exclude_none=True),
            requested_model_profile=request.model_profile,
            resolved_model_profile=profile,
            resolved_model_config_hash=config_hash,
        )


def _ms(begun: float) -> float:
    return round((time.perf_counter() - begun) * 1000, 3)


class ToolError(Exception):
    """A refusal or a provider fault: the agent reads the message as the tool's error result."""


# Claude Code sends the id of the tool use in the request's `_meta` under this key.
_TOOL_USE_ID_KEY = "claudecode/toolUseId"
_TOOL_NAME = "call"


def _tool_use_id(meta: Any) -> str | None:
    if meta is None:
        return None
    data = meta if isinstance(meta, dict) else meta.model_dump(by_alias=True)
    value = data.get(_TOOL_USE_ID_KEY)
    return value if isinstance(value, str) else None


def _error_result(message: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=message)], is_error=True
    )


def build_server(service: CallService) -> Server[None]:
    """The MCP server of one call service: the tool ``call`` and nothing else."""
    tool = mcp_types.Tool(
        name=_TOOL_NAME,
        description=TOOL_DESCRIPTION,
        input_schema=request_json_schema(service.taxonomy.codes),
    )

    async def list_tools(
        ctx: ServerRequestContext[None], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=[tool])

    async def call_tool(
        ctx: ServerRequestContext[None], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        if params.name != _TOOL_NAME:
            raise MCPError(
                code=mcp_types.INVALID_PARAMS,
                message=f"unknown tool {params.name!r}; this server has one tool, {_TOOL_NAME!r}",
            )
        arguments = dict(params.arguments or {})
        cancelled = threading.Event()
        try:
            text = await anyio.to_thread.run_sync(
                service.call,
                arguments,
                _tool_use_id(ctx.meta),
                cancelled.is_set,
                abandon_on_cancel=True,  # the thread is told, and ends the call itself
            )
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        except ToolError as error:
            return _error_result(str(error))
        except Exception as error:  # a fault of this server: the agent is told, serving goes on
            logging.getLogger(__name__).exception("CallMLLM failed unexpectedly")
            return _error_result(f"CallMLLM failed inside the server: {type(error).__name__}")
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])

    @asynccontextmanager
    async def lifespan(_: Server[None]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            service.close()

    return Server(
        "mllm",
        version=__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        lifespan=lifespan,
    )


# RFC 6750 3.1: without credentials the challenge names only the realm; with wrong ones it adds
# error="invalid_token". The body is what an MCP client shows: Claude Code configured without
# the header (never so in run-agent) still tries OAuth client registration on any 401 and
# reports this body as the registration's refusal (measured, P-39), so it says what to send.
_REALM = b'Bearer realm="veriharness-mllm"'
_WRONG_TOKEN = _REALM + b', error="invalid_token", error_description="wrong session token"'
_REFUSAL = (
    b'{"error": "missing or wrong session token: send Authorization: Bearer <the session\'s '
    b'token>; this server has no OAuth"}'
)


def token_guard(app: Any, token: str) -> Any:
    """An ASGI wrapper that answers 401 with a Bearer challenge to any HTTP request without
    ``Bearer <token>``."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                body = _REFUSAL
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", _WRONG_TOKEN if given else _REALM),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def open_service(
    workspace: Path,
    catalog_path: Path,
    trace_path: Path,
    taxonomy_path: Path | None = None,
    spend_json: str | None = None,
    call_images: Path | None = None,
) -> CallService:
    """The call service of one server: the catalog, the taxonomy (default: the config's default
    taxonomy in the checkout), the trace (redacting the catalog's secrets), the spend settings and
    the folder the attached images are kept in (None: none kept).
    Raises CatalogError, OSError or ValueError naming what could not be read."""
    catalog = load_catalog(catalog_path)
    taxonomy = load_taxonomy(taxonomy_path or project_root() / DEFAULT_TAXONOMY_PATH)
    spend = MllmSpend.model_validate_json(spend_json) if spend_json else None
    trace = TraceWriter(trace_path, Redactor(catalog.secrets(os.environ)))
    images = CallImageKeeper(call_images) if call_images is not None else None
    return CallService(workspace.resolve(), catalog, taxonomy, trace, spend, images)


def serve(
    service: CallService,
    transport: Literal["stdio", "http"],
    token: str,
    port: int = 0,
    port_file: Path | None = None,
) -> None:
    """Serve CallMLLM over stdio, or over streamable HTTP on 127.0.0.1 behind `token`, until
    ended; the trace is closed at the end."""
    server = build_server(service)
    # httpx logs every request URL at INFO, and a provider URL may be private: keep it out of
    # the server's stderr.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        if transport == "stdio":
            anyio.run(_serve_stdio, server)
        else:
            _serve_http(server, token, port, port_file)
    finally:
        service.trace.close()


async def _serve_stdio(server: Server[None]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _serve_http(server: Server[None], token: str, port: int, port_file: Path | None) -> None:
    import uvicorn

    host = "127.0.0.1"
    # Bound here, before uvicorn starts, so the chosen port can be reported once it listens.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    app = server.streamable_http_app(streamable_http_path=MLLM_HTTP_PATH, host=host)
    guarded = token_guard(app, token)
    config = uvicorn.Config(guarded, log_level="warning", access_log=False, lifespan="on")
    if port_file is not None:
        atomic.write_text(port_file, f"{sock.getsockname()[1]}\n")
    uvicorn.Server(config).run(sockets=[sock])
