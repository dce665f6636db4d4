"""A real MCP client (the SDK's, over stdio or streamable HTTP) on its own event-loop thread,
with a blocking API.

One server process can then serve a whole test session while the tests stay plain functions.
`http_server` starts the real `veriharness mllm-server --transport http` as run-agent does.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import RequestParamsMeta

from veriharness.mllm import MLLM_HTTP_PATH, MLLM_TOKEN_ENV

__all__ = ["BlockingMcpClient", "HttpEndpoint", "server_parameters", "http_server"]

_WAIT_SECONDS = 60


class HttpEndpoint:
    """Where a streamable-HTTP server listens, and the token to send (None: send none)."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url, self.token = url, token


class BlockingMcpClient:
    def __init__(self, params: StdioServerParameters | HttpEndpoint, errlog: Any = None) -> None:
        self._params = params
        self._errlog = errlog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: ClientSession | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def __enter__(self) -> BlockingMcpClient:
        self._thread.start()
        self._ready.wait(_WAIT_SECONDS)
        if self._session is None:
            raise RuntimeError(f"MCP server did not start: {self._failure!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(_WAIT_SECONDS)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:  # noqa: BLE001 - reported by __enter__
            self._failure = error
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if isinstance(self._params, HttpEndpoint):
            token = self._params.token
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with (
                create_mcp_http_client(headers=headers) as http,
                streamable_http_client(self._params.url, http_client=http) as (read, write),
            ):
                await self._session_on(read, write)
        else:
            async with stdio_client(self._params, errlog=self._errlog) as (read, write):
                await self._session_on(read, write)

    async def _session_on(self, read: Any, write: Any) -> None:
        assert self._stop is not None
        async with ClientSession(read, write) as session:
            await session.initialize()
            self._session = session
            self._ready.set()
            await self._stop.wait()

    def _run(self, coroutine: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_WAIT_SECONDS)

    def list_tools(self) -> Any:
        assert self._session is not None
        return self._run(self._session.list_tools())

    def call(
        self, arguments: dict[str, Any], tool: str = "call", meta: dict[str, Any] | None = None
    ) -> Any:
        assert self._session is not None
        # RequestParamsMeta is an open TypedDict (extra_items=Any), which mypy cannot yet match
        # against a dict with other keys such as "claudecode/toolUseId".
        wire_meta = cast(RequestParamsMeta, meta)
        return self._run(self._session.call_tool(tool, arguments, meta=wire_meta))

    def start_call(self, arguments: dict[str, Any]) -> Future[Any]:
        """Send a call and return at once; the future holds its result."""
        assert self._session is not None and self._loop is not None
        return asyncio.run_coroutine_threadsafe(
            self._session.call_tool("call", arguments), self._loop
        )


def server_parameters(
    workspace: Path, catalog: Path, trace: Path, env: dict[str, str]
) -> StdioServerParameters:
    """The real `veriharness mllm-server` process, as Claude Code would start it."""
    args = ["-m", "veriharness", "mllm-server", "--workspace", str(workspace),
            "--catalog", str(catalog), "--trace", str(trace)]  # fmt: skip
    return StdioServerParameters(command=sys.executable, args=args, env=env)


@contextmanager
def http_server(
    workspace: Path,
    catalog: Path,
    trace: Path,
    env: dict[str, str],
    token: str,
    log: Path,
    extra: tuple[str, ...] = (),
) -> Iterator[str]:
    """The real `veriharness mllm-server --transport http` process (with `extra` arguments);
    yields its MCP URL."""
    port_file = log.with_suffix(".port")
    port_file.unlink(missing_ok=True)
    args = [sys.executable, "-m", "veriharness", "mllm-server", "--transport", "http",
            "--workspace", str(workspace), "--catalog", str(catalog), "--trace", str(trace),
            "--port-file", str(port_file), *extra]  # fmt: skip
    with open(log, "w") as errors:
        server = subprocess.Popen(args, env=env | {MLLM_TOKEN_ENV: token}, stderr=errors)
    try:
        deadline = time.monotonic() + _WAIT_SECONDS
        while not port_file.exists():
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{int(port_file.read_text())}{MLLM_HTTP_PATH}"
    finally:
        server.terminate()
        server.wait(_WAIT_SECONDS)
