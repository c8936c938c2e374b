"""The fake MCP server (tests/fakes/mcp_server.py, written with the official SDK) as the MCP
tests configure it: its tools, a config that starts it over stdio, and servers entered."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from runtime import ToolContext
from runtime.tools.mcp import McpServerConfig, open_servers
from runtime.tools.mcp.group import McpServers

FAKE = Path(__file__).resolve().parents[3] / "fakes" / "mcp_server.py"
CTX = ToolContext(run_id="r", thread_id="t", tool_call_id="c", idempotency_key="k")
ALL_TOOLS = ["chart", "count", "die", "drop", "echo", "fail", "key", "nap", "pid", "put",
             "refuse", "slow"]


def fake(marks: Path, name: str = "srv", **settings: Any) -> McpServerConfig:
    """The fake server over stdio; it notes what happens in ``marks``."""
    return McpServerConfig(name=name, command=sys.executable, args=[str(FAKE)],
                           env={"MCP_MARKS": str(marks)}, **settings)


@asynccontextmanager
async def served(*configs: McpServerConfig, base: Path,
                 environ: dict[str, str] | None = None) -> AsyncIterator[McpServers]:
    async with open_servers(configs, base, environ) as servers:
        yield servers
