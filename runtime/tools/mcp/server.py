"""One MCP server kept running: started with the app, restarted with backoff, stopped with it.

A supervisor task owns the connection (the SDK's sessions must be entered and left in one
task): connect, list the tools, then wait until the server goes away or the app stops;
after a failure wait ``restart_backoff_s``, doubling up to ``restart_backoff_max_s``, and
start it again. Calls come from the runs' own tasks and use whichever connection is up:

- up: the call goes to the server; an ``isError`` result, an MCP error or a timeout is
  raised, so the loop records its standard JSON error result;
- down (failed to start, died, restarting): the call fails at once with "mcp server 'x'
  is down (restarting): why" - it never waits for the restart, so no run hangs;
- the server dies during the call: the call fails at once with "... stopped during the
  call"; whatever it did before dying is not known;
- an HTTP server refuses the connection (or cannot be reached): the call fails at once
  with "... could not be reached (why); the call never started": nothing ran.

The tools are known once the server has listed them; until then none are offered. A
restart lists them again (new ones are added, changed ones replaced).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio

from ...errors import MaidenError
from ...retry import doubling
from ..base import Tool, ToolContext
from ..registry import ToolRegistry
from .config import McpServerConfig
from .connection import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    Connection,
    MCPError,
    connect,
    describe,
)
from .listing import build_tools
from .mapping import error_text, result_content

__all__ = ["McpServer", "McpServerDown", "McpToolError", "backoff_delay"]

log = logging.getLogger("maiden.mcp")

State = Literal["starting", "up", "down", "stopped"]


class McpToolError(MaidenError):
    """A call the MCP server answered with an error (``isError``, or an MCP error)."""


class McpServerDown(MaidenError):
    """A call to a server that is not running (or stopped while answering)."""


def backoff_delay(failures: int, initial_s: float, max_s: float) -> float:
    """The wait before the next start, after ``failures`` failed starts or deaths in a row."""
    return doubling(max(0, failures - 1), initial_s, max_s)


class McpServer:
    """A configured server, its connection kept up, and the tools it offers."""

    def __init__(
        self, cfg: McpServerConfig, base_dir: Path, environ: Mapping[str, str] | None = None
    ) -> None:
        self.cfg = cfg
        self.base_dir = base_dir
        self.environ = os.environ if environ is None else environ
        self.state: State = "starting"
        self.problem: str | None = None
        """Why it is down (or failed to start)."""
        self.tools: dict[str, Tool] = {}
        """The tools offered, by maiden name; empty until the server has listed them."""
        self.listed = False
        """Whether the tool list was ever obtained."""
        self.notes: list[str] = []
        """Config keys naming tools it does not offer, names already taken."""
        self.starts = 0
        self._conn: Connection | None = None
        self._registry: ToolRegistry | None = None
        self._mine: set[str] = set()
        self._stop = asyncio.Event()
        self._attempted = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._reason: str | None = None

    def __repr__(self) -> str:
        return f"<McpServer {self.cfg.name} {self.state}>"

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"maiden-mcp-{self.cfg.name}")

    async def first_attempt(self) -> None:
        """Wait until the first start succeeded or failed."""
        await self._attempted.wait()

    async def wait_until(self, predicate: Callable[[McpServer], bool]) -> None:
        """Wait until ``predicate(self)`` holds (checked at each change of state)."""
        while not predicate(self):
            await self._changed.wait()

    def _set(self, state: State, problem: str | None = None) -> None:
        self.state, self.problem = state, problem
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def offer_to(self, registry: ToolRegistry) -> None:
        """Put its tools in ``registry`` now, and again whenever a restart lists them."""
        self._registry = registry
        self._publish()

    async def aclose(self, timeout_s: float = 15.0) -> None:
        """Stop the server (its process ends) and the supervisor."""
        self._stop.set()
        if self._scope is not None and self._conn is None:
            self._scope.cancel()  # still starting: no need to wait for the handshake
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait([task], timeout=timeout_s)
        if not done:  # a shutdown the SDK could not finish in time
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self._set("stopped")

    def status(self) -> str:
        """One line: its tools, or why it is down."""
        name = self.cfg.name
        if self.state == "up":
            count = len(self.tools)
            return f"{name}: {count} tool{'' if count == 1 else 's'}"
        if self.state == "starting":
            return f"{name}: starting"
        if self.state == "stopped":
            return f"{name}: stopped"
        if not self.listed:
            return f"{name}: failed to start: {self.problem}, retrying"
        return f"{name}: down: {self.problem}, restarting"

    async def _supervise(self) -> None:
        failures = 0
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            self.starts += 1
            began = loop.time()
            why, self._reason = await self._run_once()
            if self._stop.is_set():
                break
            if loop.time() - began >= self.cfg.restart_backoff_max_s:
                failures = 0  # it ran a good while: a new failure starts the backoff again
            failures += 1
            delay = backoff_delay(failures, self.cfg.restart_backoff_s,
                                  self.cfg.restart_backoff_max_s)
            self._set("down", why)
            self._attempted.set()
            log.warning("mcp server %r: %s; starting it again in %.3g s", self.cfg.name, why,
                        delay)
            await self._until(None, timeout_s=delay)
        self._set("stopped")

    async def _run_once(self) -> tuple[str, str]:
        """Start the server, and keep the connection until it is lost or the app stops;
        say why it ended (for people, with its last stderr lines; and for the model).
        Stopping while it starts cancels the start (``_scope``)."""
        why = reason = "stopped"
        with anyio.CancelScope() as self._scope:
            try:
                async with connect(self.cfg, self.base_dir, self.environ) as conn:
                    self.adopt(await conn.list_tools())
                    self._conn = conn
                    self._set("up")
                    self._attempted.set()
                    log.info("mcp server %r up: %d tool(s)", self.cfg.name, len(self.tools))
                    await self._until(conn.lost)
                    self._conn = None
                    tail = await conn.stderr_tail()
                    reason = "the server stopped"
                    why = reason + (f" (stderr: {tail})" if tail else "")
            except Exception as exc:
                why, reason = describe(exc), describe(exc, notes=False)
            finally:
                self._conn = None
        self._scope = None
        return why, reason

    async def _until(self, lost: asyncio.Event | None, timeout_s: float | None = None) -> None:
        """Wait for the app to stop, ``lost`` to be set, or ``timeout_s``."""
        waits = [asyncio.create_task(self._stop.wait())]
        if lost is not None:
            waits.append(asyncio.create_task(lost.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    # -- tools -------------------------------------------------------------------------

    def adopt(self, listed: list[Any]) -> None:
        """Make maiden tools of the server's listing (allowlist, names, effects)."""
        self.tools, self.notes = build_tools(self.cfg, listed,
                                             lambda name: partial(self.call, name))
        self.listed = True
        self._publish()

    def _publish(self) -> None:
        registry = self._registry
        if registry is None:
            return
        for name, made in list(self.tools.items()):
            present = registry.get(name)
            if present is None or name in self._mine:  # new, or ours from an earlier list
                registry.replace(made)
                self._mine.add(name)
            else:
                del self.tools[name]
                note = f"{name} is left out: another tool has that name"
                if note not in self.notes:
                    self.notes.append(note)
                    log.warning("mcp server %r: %s", self.cfg.name, note)

    def _why_down(self, conn: Connection | None) -> str:
        """Why it is down, for the model (its stderr, which may say anything, stays out)."""
        if conn is not None:
            return "the server stopped"  # and the supervisor has yet to hear of it
        return self._reason or "it is starting"

    async def call(self, tool: str, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        """Call ``tool`` on the server: its result's content, or an exception the loop turns
        into a JSON error result."""
        name = self.cfg.name
        conn = self._conn
        if conn is None or conn.lost.is_set():
            raise McpServerDown(f"mcp server {name!r} is down (restarting): "
                                f"{self._why_down(conn)}")
        try:
            result = await conn.call(tool, arguments, key=ctx.idempotency_key,
                                     timeout_s=self.cfg.timeout_s + 1)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                conn.lost.set()  # an HTTP server gone: the supervisor reconnects
                why = conn.unreached.pop(ctx.idempotency_key, None)
                if why is not None:
                    raise McpServerDown(f"mcp server {name!r} could not be reached ({why}); "
                                        "the call never started (restarting)") from None
                raise McpServerDown(f"mcp server {name!r} stopped during the call "
                                    "(restarting); the call's outcome is unknown") from None
            if exc.code == REQUEST_TIMEOUT:
                raise TimeoutError(f"mcp server {name!r} did not answer in time") from None
            raise McpToolError(f"mcp server {name!r}: MCP error {exc.code}: {exc.message}") \
                from None
        if result.is_error:
            raise McpToolError(error_text(result))
        return result_content(result)

