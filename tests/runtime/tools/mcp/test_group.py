"""Every MCP server of one process (runtime/tools/mcp/group.py), against the real fake
server (tests/fakes/mcp_server.py): started together, their tools offered and their status
said, stopped together; and ``maiden check``'s one-off look at each."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from runtime import ToolRegistry
from runtime.tools.mcp import McpServerConfig, check_servers
from tests.runtime.tools.mcp.fake import ALL_TOOLS, CTX, fake, served


async def test_tools_are_offered_namespaced_with_effects_and_approval(tmp_path: Path) -> None:
    main = fake(tmp_path, effects={"count": "idempotent_write"}, approval={"put": True})
    few = fake(tmp_path, "few", tools=["echo", "gone"])
    async with served(main, few, base=tmp_path) as servers:
        registry = ToolRegistry()
        servers.offer_to(registry)
        srv, small = servers.servers
        assert servers.status_lines() == [f"srv: {len(ALL_TOOLS)} tools", "few: 1 tool"]
    assert sorted(t.name for t in registry) == sorted(
        [f"srv__{n}" for n in ALL_TOOLS] + ["few__echo"])
    effects = {t.name: t.effect for t in registry}
    assert effects["srv__echo"] == "read_only"  # readOnlyHint
    assert effects["srv__put"] == "idempotent_write"  # idempotentHint, destructiveHint false
    assert effects["srv__drop"] == "non_idempotent"  # idempotent, but destructive by default
    assert effects["srv__count"] == "idempotent_write"  # no annotations; the config says so
    assert [t.name for t in registry if t.requires_approval] == ["srv__put"]
    echo = registry.get("srv__echo")
    assert echo is not None and echo.description == "Say the text back."
    assert echo.spec.parameters["required"] == ["text"] and "title" not in echo.spec.parameters
    assert small.notes == ["tools lists gone, which the server does not offer"]
    assert srv.state == small.state == "stopped"


async def test_stopping_ends_the_server_process(tmp_path: Path) -> None:
    async with served(fake(tmp_path), base=tmp_path) as servers:
        (server,) = servers.servers
        pid = int(await server.call("pid", CTX, {}))
        os.kill(pid, 0)  # alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert server.status() == "srv: stopped"


async def test_a_command_that_does_not_exist(tmp_path: Path) -> None:
    missing = McpServerConfig(name="nope", command=str(tmp_path / "no-such-server"),
                              restart_backoff_s=600)
    async with served(missing, base=tmp_path) as servers:
        (line,) = servers.status_lines()
    assert line == f"nope: failed to start: command not found: {tmp_path}/no-such-server, " \
        "retrying"


async def test_a_server_that_did_not_start_is_said_even_where_warnings_are_not_shown(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = McpServerConfig(name="nope", command=str(tmp_path / "no-such-server"),
                              restart_backoff_s=600)
    with caplog.at_level(logging.ERROR, logger="maiden.mcp"):
        async with served(fake(tmp_path), missing, base=tmp_path) as servers:
            up, down = servers.servers
            assert (up.state, down.state) == ("up", "down")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [f"mcp server 'nope' did not start (command not found: {tmp_path}/"
                      "no-such-server); its tools are offered once it does (retrying in the "
                      "background)"]


async def test_check_reports_each_servers_tools_or_why_it_failed_and_stops_them(
        tmp_path: Path) -> None:
    exits = McpServerConfig(name="exits", command=sys.executable,
                            args=["-c", "import sys; sys.exit('no config file')"])
    unset = McpServerConfig(name="unset", command=sys.executable, env_from=["NOT_SET"])
    few = fake(tmp_path, "few", tools=["echo", "pid", "gone"])
    reports = await check_servers([few, exits, unset], tmp_path, environ={})
    assert [r.config.name for r in reports] == ["few", "exits", "unset"]
    listed, exited, not_set = reports
    assert listed.problem is None
    assert sorted(t.name for t in listed.tools) == ["few__echo", "few__pid"]
    assert listed.notes == ["tools lists gone, which the server does not offer"]
    pid = int((tmp_path / "server.pid").read_text())  # (the fake notes it as it starts)
    with pytest.raises(ProcessLookupError):  # ...and it was stopped after
        os.kill(pid, 0)
    assert exited.problem == ("the server closed the connection "
                              "(stderr: no config file)") and exited.tools == []
    assert not_set.problem == "the environment variable NOT_SET (env_from) is not set"
