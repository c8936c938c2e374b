"""One connection to an MCP server, through the official ``mcp`` SDK (imported only here).

``connect(cfg, ...)`` starts a stdio server (or reaches an HTTP one), does the MCP
handshake and yields a ``Connection``. Leaving it ends the session and stops the process
the SDK's way: stdin closed, then SIGTERM, then SIGKILL to its whole process group.
``Connection.lost`` is set when the server goes away by itself (its stdout closed: it
died; or a call found the connection closed), which is how the supervisor learns it must
restart it. A stdio server's stderr is logged line by line (debug) and its last lines are
kept, so "failed to start" can say why.

Over HTTP, a call whose request could not even connect (``httpx.ConnectError``: the server
refused or could not be reached) is noted by its idempotency key (``Connection.unreached``):
the SDK reports it like any lost connection, but nothing of it reached the server, so the
call is known not to have run.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from ...errors import MaidenError
from .config import McpServerConfig
from .stderr import StderrLog

__all__ = ["CONNECTION_CLOSED", "REQUEST_TIMEOUT", "Connection", "MCPError", "StartError",
           "connect", "describe"]

CONNECTION_CLOSED = mcp_types.CONNECTION_CLOSED
REQUEST_TIMEOUT = mcp_types.REQUEST_TIMEOUT
IDEMPOTENCY_META_KEY = "maiden/idempotency_key"
"""The ``_meta`` key carrying a call's idempotency key (the same on every retry of it)."""


class StartError(MaidenError):
    """A server that cannot be started as configured (a variable it needs is not set)."""


@dataclass(frozen=True, slots=True)
class Connection:
    """An open MCP session."""

    client: Client
    lost: asyncio.Event
    stderr: StderrLog | None
    unreached: dict[str, str]
    """Idempotency key -> why: the calls whose request never reached the server."""

    async def list_tools(self) -> list[mcp_types.Tool]:
        """Every tool the server lists, page by page."""
        found: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server whose cursor never ends cannot hang the start
            page = await self.client.list_tools(cursor=cursor)
            found += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        return found

    async def call(
        self, name: str, arguments: dict[str, Any], *, key: str, timeout_s: float
    ) -> mcp_types.CallToolResult:
        meta = cast(Any, {IDEMPOTENCY_META_KEY: key})
        self.unreached.pop(key, None)  # an earlier attempt's note says nothing of this one
        return await self.client.call_tool(name, arguments, read_timeout_seconds=timeout_s,
                                           meta=meta)

    async def stderr_tail(self) -> str:
        return "" if self.stderr is None else await self.stderr.tail()


@asynccontextmanager
async def connect(
    cfg: McpServerConfig, base_dir: Path, environ: Mapping[str, str] | None = None
) -> AsyncIterator[Connection]:
    """Start (or reach) the server and open a session; ``StartError`` if a variable it
    needs is not set, the SDK's errors otherwise (``describe`` says them plainly)."""
    environ = os.environ if environ is None else environ
    lost = asyncio.Event()
    refused: list[str] = []  # the SDK says "an error response": these say which
    unreached: dict[str, str] = {}

    async def on_response(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refused.append(f"HTTP {response.status_code} {response.reason_phrase}".strip())

    async with AsyncExitStack() as stack:
        stderr: StderrLog | None = None
        if cfg.url is not None:
            headers = {h: _env(environ, var, f"headers_env.{h}") for h, var in
                       cfg.headers_env.items()}
            timeout = httpx2.Timeout(cfg.startup_timeout_s, read=max(300, cfg.timeout_s + 5))
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=headers, timeout=timeout, event_hooks={"response": [on_response]},
                transport=_NotingUnreached(httpx2.AsyncHTTPTransport(), unreached)))
            inner: Any = streamable_http_client(cfg.url, http_client=http)
        else:
            env = dict(cfg.env)
            env.update({var: _env(environ, var, "env_from") for var in cfg.env_from})
            params = StdioServerParameters(command=cfg.command or "", args=cfg.args, env=env,
                                           cwd=base_dir)
            stderr = await stack.enter_async_context(StderrLog(cfg.name))
            inner = stdio_client(params, errlog=stderr.writer)
        client = Client(_watched(inner, lost, stderr),
                        read_timeout_seconds=cfg.startup_timeout_s,
                        client_info=mcp_types.Implementation(name="maiden", version="0.1.0"),
                        cache=None)
        try:
            await stack.enter_async_context(client)
        except BaseException as exc:
            if stderr is not None and (tail := await stderr.tail()):
                exc.add_note(f"stderr: {tail}")
            if refused:
                exc.add_note(refused[-1])
            raise
        yield Connection(client, lost, stderr, unreached)


def describe(exc: BaseException, *, notes: bool = True) -> str:
    """Why a server could not be started or reached, in a line; with ``notes``, what was
    noted on the way (its last stderr lines, the HTTP status)."""
    noted = list(getattr(exc, "__notes__", ()))
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
        noted += getattr(exc, "__notes__", ())
    if isinstance(exc, StartError):
        why = str(exc)
    elif isinstance(exc, FileNotFoundError):
        why = f"command not found: {exc.filename}"
    elif isinstance(exc, PermissionError):
        why = f"cannot run {exc.filename}: permission denied"
    elif isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        why = "the server closed the connection"
    elif isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
        why = "the server did not answer in time"
    elif isinstance(exc, MCPError):
        why = f"MCP error {exc.code}: {exc.message}"
    elif isinstance(exc, httpx2.ConnectError):
        why = f"cannot connect: {exc}"
    elif isinstance(exc, httpx2.TimeoutException):
        why = "the server did not answer in time"
    else:
        why = f"{type(exc).__name__}: {exc}"
    return why + ("".join(f" ({n})" for n in noted) if notes else "")


class _NotingUnreached(httpx2.AsyncBaseTransport):
    """A transport that notes, by idempotency key, each ``tools/call`` that could not
    connect: a ``ConnectError`` is raised before any byte of the request is sent."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, unreached: dict[str, str]) -> None:
        self._inner = inner
        self._unreached = unreached

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.ConnectError as exc:
            key = _call_key(request)
            if key is not None:
                self._unreached[key] = describe(exc)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


def _call_key(request: httpx2.Request) -> str | None:
    """The idempotency key of the ``tools/call`` a request carries, if it is one."""
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    key = meta.get(IDEMPOTENCY_META_KEY) if isinstance(meta, dict) else None
    return key if isinstance(key, str) else None


def _env(environ: Mapping[str, str], var: str, key: str) -> str:
    value = environ.get(var)
    if not value:
        raise StartError(f"the environment variable {var} ({key}) is not set")
    return value


@asynccontextmanager
async def _watched(
    inner: Any, lost: asyncio.Event, stderr: StderrLog | None
) -> AsyncIterator[tuple[Any, Any]]:
    """The transport ``inner``, with ``lost`` set when its read side ends by itself."""
    async with inner as (read, write):
        if stderr is not None:
            stderr.spawned()
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            try:
                async for item in read:
                    await send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                lost.set()  # before the session hears of it: no call starts on a dead one
                send.close()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                try:
                    yield receive, write
                finally:
                    tg.cancel_scope.cancel()
        finally:
            send.close()
            receive.close()
