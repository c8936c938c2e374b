"""One connection to an MCP server (runtime/tools/mcp/connection.py), against the real fake
server (tests/fakes/mcp_server.py) over stdio: the handshake and the listing, a call's
idempotency key, ``lost`` set when the server goes away by itself, the process stopped on
leaving, and why a server could not be started, said in a line."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import mcp_types
import pytest

from runtime.tools.mcp import McpServerConfig
from runtime.tools.mcp.connection import (
    CONNECTION_CLOSED,
    MCPError,
    StartError,
    connect,
    describe,
)
from tests.runtime.tools.mcp.fake import ALL_TOOLS, fake


def _text(result: mcp_types.CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, mcp_types.TextContent), content
    return content.text


async def test_a_session_lists_every_tool_and_sends_each_calls_key(tmp_path: Path) -> None:
    async with asyncio.timeout(30), connect(fake(tmp_path), tmp_path) as conn:
        assert sorted(t.name for t in await conn.list_tools()) == ALL_TOOLS
        for key in ("run-1:call-1", "run-1:call-2"):
            assert _text(await conn.call("key", {}, key=key, timeout_s=10)) == key
        assert not conn.lost.is_set()


async def test_lost_is_set_when_the_server_goes_away_by_itself(tmp_path: Path) -> None:
    async with asyncio.timeout(30), connect(fake(tmp_path), tmp_path) as conn:
        with pytest.raises(MCPError) as died:
            await conn.call("die", {}, key="k", timeout_s=10)
        assert died.value.code == CONNECTION_CLOSED
        assert describe(died.value) == "the server closed the connection"
        await conn.lost.wait()


async def test_leaving_stops_the_server_process(tmp_path: Path) -> None:
    async with asyncio.timeout(30):
        async with connect(fake(tmp_path), tmp_path) as conn:
            pid = int(_text(await conn.call("pid", {}, key="k", timeout_s=10)))
            os.kill(pid, 0)  # alive
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_a_server_that_exits_at_once_is_described_with_its_last_words(
        tmp_path: Path) -> None:
    exits = McpServerConfig(name="exits", command=sys.executable,
                            args=["-c", "import sys; sys.exit('no config file')"])
    with pytest.raises(BaseException) as failed:  # (whatever the SDK raises)
        async with asyncio.timeout(30), connect(exits, tmp_path):
            pass
    assert describe(failed.value) == "the server closed the connection (stderr: no config file)"
    assert describe(failed.value, notes=False) == "the server closed the connection"


async def test_a_command_that_does_not_exist_is_described_as_such(tmp_path: Path) -> None:
    missing = McpServerConfig(name="nope", command=str(tmp_path / "no-such-server"))
    with pytest.raises(BaseException) as failed:  # (whatever the SDK raises)
        async with asyncio.timeout(30), connect(missing, tmp_path):
            pass
    assert describe(failed.value) == f"command not found: {tmp_path}/no-such-server"


@pytest.mark.parametrize(("cfg", "why"), [
    (McpServerConfig(name="s", command=sys.executable, env_from=["NOT_SET"]),
     "the environment variable NOT_SET (env_from) is not set"),
    (McpServerConfig(name="h", url="http://127.0.0.1:1/mcp", headers_env={"X-Token": "EMPTY"}),
     "the environment variable EMPTY (headers_env.X-Token) is not set"),
])
async def test_a_variable_the_server_needs_that_is_not_set_is_a_start_error(
        tmp_path: Path, cfg: McpServerConfig, why: str) -> None:
    with pytest.raises(StartError) as refused:
        async with connect(cfg, tmp_path, environ={"EMPTY": ""}):
            pass
    assert str(refused.value) == why and describe(refused.value) == why
