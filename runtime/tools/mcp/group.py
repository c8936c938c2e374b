"""Every configured MCP server of one process: started together, stopped together; and
``maiden check``'s one-off look at each."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..base import Tool
from ..registry import ToolRegistry
from .config import McpServerConfig
from .connection import connect, describe
from .server import McpServer

__all__ = ["CheckReport", "McpServers", "check_servers"]

log = logging.getLogger("maiden.mcp")

_START_SLACK_S = 10.0
"""Beyond a server's ``startup_timeout_s``, how long the app waits for its first start
(a failed start includes stopping the process, which the SDK bounds at a few seconds)."""


class McpServers:
    """The ``[[mcp_servers]]`` of one process, as an async context manager.

    Entering starts each server and waits for its first attempt (up, or failed: it is
    then retried in the background); leaving stops them all.
    """

    def __init__(
        self, configs: Sequence[McpServerConfig], base_dir: Path,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.servers = [McpServer(c, base_dir, environ) for c in configs]

    async def __aenter__(self) -> McpServers:
        for server in self.servers:
            server.start()
        try:
            waits = [asyncio.create_task(s.first_attempt()) for s in self.servers]
            limit = _START_SLACK_S + max((s.cfg.startup_timeout_s for s in self.servers),
                                         default=0)
            _, pending = await asyncio.wait(waits, timeout=limit)
            for task in pending:  # still starting: it comes up in the background
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        except BaseException:
            await self.aclose()
            raise
        for server in self.servers:
            if server.state != "up":  # said even where warnings are not shown (`maiden send`)
                log.error("mcp server %r did not start (%s); its tools are offered once it "
                          "does (retrying in the background)", server.cfg.name,
                          server.problem or "still starting")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self.servers))

    def offer_to(self, registry: ToolRegistry) -> None:
        """Put every server's tools in ``registry``, now and after each restart."""
        for server in self.servers:
            server.offer_to(registry)

    def status_lines(self) -> list[str]:
        """One line per server: its tools, or why it is down."""
        return [s.status() for s in self.servers]


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What ``maiden check`` found of one server."""

    config: McpServerConfig
    problem: str | None = None
    """Why it failed to start; None if it started."""
    tools: list[Tool] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


async def check_servers(
    configs: Sequence[McpServerConfig], base_dir: Path,
    environ: Mapping[str, str] | None = None,
) -> list[CheckReport]:
    """Start each server (all at once), list its tools, stop it."""
    environ = os.environ if environ is None else environ

    async def one(cfg: McpServerConfig) -> CheckReport:
        server = McpServer(cfg, base_dir, environ)
        try:  # bounded by startup_timeout_s: the session's timeout for each request
            async with connect(cfg, base_dir, environ) as conn:
                server.adopt(await conn.list_tools())
        except Exception as exc:
            return CheckReport(cfg, problem=describe(exc))
        return CheckReport(cfg, tools=list(server.tools.values()), notes=server.notes)

    return list(await asyncio.gather(*(one(c) for c in configs)))
