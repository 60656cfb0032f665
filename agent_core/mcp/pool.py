"""One open connection per MCP server per process, shared by every call (SPEC §18).

The SDK is async; the runners are threads. A daemon thread of the process runs one event loop;
each server's connection lives in a task of its own there (the SDK's context managers must be
left by the task that entered them), and a call from any thread is a coroutine submitted to that
loop and waited on with a deadline. A stdio server is therefore started once per process, not per
call. A connection that failed (the server exited, a call timed out, the network dropped) is
dropped, and the next call opens a new one: a server that is down fails calls with
``McpUnavailable``, quickly and clearly, and never holds a run.

The pool belongs to the process that made it: a forked child (a Celery prefork worker) makes its
own at its first call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TextIO, TypeVar

import httpx2
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult, Tool

from ..exceptions import McpUnavailable
from .servers import ServerConfig

logger = logging.getLogger(__name__)
T = TypeVar("T")


class _Connection:
    """A server's connection, owned by one task of the pool's loop."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._opened: asyncio.Future[Client] | None = None
        self._owner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()

    async def client(self) -> Client:
        if self._opened is None:
            self._opened = asyncio.get_running_loop().create_future()
            self._closing = asyncio.Event()
            self._owner = asyncio.create_task(self._serve(self._opened, self._closing))
        try:
            return await asyncio.wait_for(
                asyncio.shield(self._opened), timeout=self.config.connect_timeout
            )
        except TimeoutError:
            self.discard()
            raise McpUnavailable(
                f"MCP server {self.config.name!r} did not answer within "
                f"{self.config.connect_timeout:g}s of being started or reached"
            ) from None
        except Exception as exc:  # whatever stops it opening: the server is unavailable
            self.discard()
            raise McpUnavailable(
                f"MCP server {self.config.name!r} is unavailable: {_said(exc)}"
            ) from exc

    def discard(self) -> None:
        """Close this connection (a stdio server exits); the next call opens a new one."""
        if self._opened is not None and not self._opened.done():
            self._opened.cancel()
        if self._owner is not None and not self._opened_cleanly():
            self._owner.cancel()
        self._closing.set()
        self._opened, self._owner = None, None

    def _opened_cleanly(self) -> bool:
        return self._opened is not None and self._opened.done() and not self._opened.cancelled()

    async def _serve(self, opened: asyncio.Future[Client], closing: asyncio.Event) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(self._transport(stack), read_timeout_seconds=self.config.timeout)
                )
                if not opened.done():
                    opened.set_result(client)
                await closing.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc if isinstance(exc, Exception) else OSError(str(exc)))
            logger.info("MCP server %s: connection closed (%r)", self.config.name, exc)
        finally:
            if self._opened is opened:  # the server went away by itself: reconnect next time
                self._opened, self._owner = None, None

    def _transport(self, stack: AsyncExitStack) -> Any:
        config = self.config
        if config.transport == "stdio":
            command, *args = config.command
            params = StdioServerParameters(
                command=command, args=args, env=config.env, cwd=config.cwd
            )
            return stdio_client(params, errlog=_errlog())
        timeout = httpx2.Timeout(config.connect_timeout, read=config.timeout)
        http = httpx2.AsyncClient(headers=config.headers, timeout=timeout)
        stack.push_async_callback(http.aclose)
        return streamable_http_client(config.url, http_client=http)


def _errlog() -> TextIO:
    """Where a stdio server's stderr goes: this process's stderr (the real one where a Celery
    worker has replaced ``sys.stderr`` with a logger, which has no file descriptor)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or open(os.devnull, "w")
    return sys.stderr


def _said(exc: BaseException) -> str:
    """The cause of a failure in words (an ``ExceptionGroup`` of the SDK's tasks: its first)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _failed_during(config: ServerConfig, exc: BaseException) -> McpUnavailable:
    # The server may have acted before it failed: the model (and whoever reads the call) is told
    # so, and the call is never repeated on its own.
    return McpUnavailable(
        f"MCP server {config.name!r} failed during the call ({_said(exc)}); whether the call took "
        "effect is unknown: check before doing it again"
    )


class Pool:
    """The process's MCP connections and the event loop they live on."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        thread = threading.Thread(target=self._loop.run_forever, name="mcp-pool", daemon=True)
        thread.start()
        self._connections: dict[str, _Connection] = {}

    def list_tools(self, config: ServerConfig) -> list[Tool]:
        """Every tool the server lists now (all pages)."""

        async def listing(client: Client) -> list[Tool]:
            tools: list[Tool] = []
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools

        return self._run(config, listing)

    def call_tool(self, config: ServerConfig, name: str, args: dict[str, Any]) -> CallToolResult:
        """The server's result of calling ``name`` with ``args``."""

        async def call(client: Client) -> CallToolResult:
            return await client.call_tool(name, args, read_timeout_seconds=config.timeout)

        return self._run(config, call)

    def close(self) -> None:
        """Close every connection (stdio servers exit)."""

        async def close_all() -> None:
            for connection in self._connections.values():
                connection.discard()
            await asyncio.sleep(0)

        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=5)

    def _run(self, config: ServerConfig, work: Callable[[Client], Awaitable[T]]) -> T:
        future = asyncio.run_coroutine_threadsafe(self._with_client(config, work), self._loop)
        try:
            # The loop's own deadlines come first; this one only guards a loop that is stuck.
            return future.result(timeout=config.connect_timeout + config.timeout + 5)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpUnavailable(
                f"MCP server {config.name!r} did not answer within {config.timeout:g}s"
            ) from None

    async def _with_client(self, config: ServerConfig, work: Callable[[Client], Awaitable[T]]) -> T:
        connection = self._connections.get(config.name)
        if connection is None or connection.config != config:
            if connection is not None:
                connection.discard()
            connection = self._connections[config.name] = _Connection(config)
        client = await connection.client()
        try:
            return await work(client)
        except MCPError as exc:
            if exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                raise  # the server answered: a protocol error, said by the caller
            connection.discard()
            raise _failed_during(config, exc) from exc
        except (OSError, TimeoutError, httpx2.HTTPError, ExceptionGroup) as exc:
            connection.discard()
            raise _failed_during(config, exc) from exc


_lock = threading.Lock()
_pools: dict[int, Pool] = {}


def pool() -> Pool:
    """This process's pool (made at its first use, in each process: see the module's doc)."""
    pid = os.getpid()
    with _lock:
        if pid not in _pools:
            _pools.clear()  # a parent's pool, inherited over fork: its thread is not here
            _pools[pid] = Pool()
        return _pools[pid]
