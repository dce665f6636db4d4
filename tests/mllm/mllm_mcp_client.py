"""A real MCP stdio client (the SDK's) on its own event-loop thread, with a blocking API.

One server process can then serve a whole test session while the tests stay plain functions.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

__all__ = ["BlockingMcpClient", "server_parameters"]

_WAIT_SECONDS = 60


class BlockingMcpClient:
    def __init__(self, params: StdioServerParameters, errlog: Any) -> None:
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
        async with stdio_client(self._params, errlog=self._errlog) as (read, write):
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
        return self._run(self._session.call_tool(tool, arguments, meta=meta))

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
