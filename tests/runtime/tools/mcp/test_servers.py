"""MCP servers' tools, against a real MCP server (tests/fakes/mcp_server.py, written with the
official SDK) started over stdio or served over streamable HTTP on loopback: calls through
the loop, outages and restarts (the servers of a process together: ``test_group.py``; one
connection: ``test_connection.py``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import RunState, Runtime, SQLiteStore, ToolRegistry, ToolResult
from runtime.model.runs import idempotency_key
from runtime.tools.mcp import McpServerConfig
from runtime.tools.mcp.server import McpServer, McpServerDown, McpToolError
from tests.fakes.vendors import ANTHROPIC
from tests.runtime.tools.mcp.fake import ALL_TOOLS, CTX, FAKE, fake, served
from tests.scripted import call


def error(result: Any) -> tuple[str, str]:
    assert isinstance(result, ToolResult) and result.is_error, result
    return result.content["error"]["type"], result.content["error"]["message"]


async def appears(path: Path, timeout_s: float = 30) -> None:
    """Wait for a mark the server process writes (an event in another process)."""

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            assert time.monotonic() < deadline, f"{path.name} never appeared"
            time.sleep(0.02)

    await asyncio.to_thread(watch)


async def until(server: McpServer, predicate: Callable[[McpServer], bool]) -> None:
    async with asyncio.timeout(30):
        await server.wait_until(predicate)


# -- calls through the loop -----------------------------------------------------------------


async def test_an_mcp_tool_through_the_loop(make_runtime: Any, tmp_path: Path) -> None:
    script = [call("srv__echo", text="hello from maiden"), call("srv__key"), {"text": "done"}]
    async with served(fake(tmp_path), base=tmp_path) as servers, \
            make_runtime(script) as (rt, provider):
        servers.offer_to(rt.operator.agents.default.tools)
        run = await rt.send("t", "say hello")
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED and run.reply == "done"
    echoed, keyed = [e for e in entries if isinstance(e, ToolResult)]
    assert echoed.name == "srv__echo" and not echoed.is_error
    assert echoed.content == "hello from maiden"
    # The call's idempotency key reaches the server (in the request's _meta).
    assert keyed.content == idempotency_key(run.id, keyed.tool_call_id)
    offered = {spec.name: spec for spec in provider.calls[0].tools}
    assert offered["srv__echo"].parameters["properties"]["text"]["type"] == "string"
    provider.assert_complete()


async def test_an_mcp_image_reaches_a_model_that_sees_as_an_image(
        tmp_path: Path, client: httpx.AsyncClient) -> None:
    async with served(fake(tmp_path), base=tmp_path) as servers, \
            ANTHROPIC.server() as api, SQLiteStore(tmp_path / "m.db") as store:
        api.queue(ANTHROPIC.stream(calls=[("toolu_1", "srv__chart", ["{}"])]),
                  ANTHROPIC.stream(["Sales rose."]))
        rt = Runtime(store, ANTHROPIC.provider(api, client))
        servers.offer_to(rt.operator.agents.default.tools)
        async with rt:
            run = await rt.send("t", "how are sales?")
            result = next(e for e in await rt.records.entries("t") if isinstance(e, ToolResult))
    assert run.reply == "Sales rose.", run.error
    (image,) = result.images
    assert (image.name, image.media_type, image.width, image.height) == (
        "srv__chart-1.png", "image/png", 120, 80)
    assert result.content[1]["note"] == "shown to you with this result"
    sent = api.requests[-1].json["messages"][-1]["content"][0]
    assert sent["type"] == "tool_result"
    assert [b["type"] for b in sent["content"]] == ["text", "image"]
    assert sent["content"][1]["source"]["media_type"] == "image/png"


async def test_tool_errors_become_the_loops_error_results(
    make_runtime: Any, tmp_path: Path
) -> None:
    script = [{"tool_calls": [{"name": "srv__fail", "arguments": {"why": "disk full"}},
                              {"name": "srv__echo", "arguments": {"text": 3}},
                              {"name": "srv__count", "arguments": {"n": 2}}]},
              {"text": "noted"}]
    async with served(fake(tmp_path), base=tmp_path) as servers, \
            make_runtime(script) as (rt, _):
        servers.offer_to(rt.operator.agents.default.tools)
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED
    failed, invalid, counted = [e for e in entries if isinstance(e, ToolResult)]
    assert error(failed) == ("exception", "McpToolError: Error executing tool fail: disk full")
    kind, message = error(invalid)
    assert kind == "invalid_arguments" and "3 is not of type 'string'" in message
    assert not counted.is_error and '"numbers"' in counted.content


async def test_a_protocol_error_becomes_an_error_result_and_the_server_carries_on(
    make_runtime: Any, tmp_path: Path
) -> None:
    script = [call("srv__pid"),
              call("srv__refuse", code=-32602, message="no widget of that name"),
              call("srv__pid"), {"text": "noted"}]
    async with served(fake(tmp_path), base=tmp_path) as servers, \
            make_runtime(script) as (rt, _):
        (server,) = servers.servers
        servers.offer_to(rt.operator.agents.default.tools)
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
        assert server.state == "up" and server.starts == 1  # not taken for an outage
    assert run.state is RunState.COMPLETED and run.reply == "noted"
    before, refused, after = [e for e in entries if isinstance(e, ToolResult)]
    # A JSON-RPC error response, not an isError result: the same JSON error for the model.
    assert refused.content == {"error": {
        "type": "exception",
        "message": "McpToolError: mcp server 'srv': MCP error -32602: no widget of that name"}}
    assert not after.is_error and after.content == before.content  # the same process


async def test_a_slow_call_is_cancelled_mid_call(make_runtime: Any, tmp_path: Path) -> None:
    script = [call("srv__slow", seconds=120), {"text": "fresh answer"}]
    async with served(fake(tmp_path), base=tmp_path) as servers, \
            make_runtime(script) as (rt, _):
        servers.offer_to(rt.operator.agents.default.tools)
        run = await rt.submit("t", "go")
        await appears(tmp_path / "slow.started")
        ended = await rt.cancel(run.id, by="alice")
        assert ended.state is RunState.CANCELLED
        assert error((await rt.records.entries("t"))[-1])[0] == "cancelled"
        # The server heard of it (notifications/cancelled) and stopped the tool.
        await appears(tmp_path / "slow.cancelled")
        after = await rt.send("t", "and now?")
    assert after.state is RunState.COMPLETED and after.reply == "fresh answer"


async def test_a_call_past_its_timeout_gets_a_timeout_result(
    make_runtime: Any, tmp_path: Path
) -> None:
    script = [call("srv__slow", seconds=120), call("srv__echo", text="still here"),
              {"text": "ok"}]
    async with served(fake(tmp_path, timeout_s=0.5), base=tmp_path) as servers, \
            make_runtime(script) as (rt, _):
        servers.offer_to(rt.operator.agents.default.tools)
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
        await appears(tmp_path / "slow.cancelled")  # cut off at the server too
    assert run.state is RunState.COMPLETED
    slow, echo = [e for e in entries if isinstance(e, ToolResult)]
    assert error(slow) == ("timeout", "srv__slow did not finish within 0.5 s")
    assert echo.content == "still here"


# -- outages and restarts ----------------------------------------------------------------------


async def test_a_server_that_dies_mid_call_is_restarted(make_runtime: Any, tmp_path: Path) -> None:
    script = [call("srv__die"), {"text": "it fell over"}]
    async with served(fake(tmp_path, restart_backoff_s=0.05), base=tmp_path) as servers, \
            make_runtime(script) as (rt, _):
        (server,) = servers.servers
        servers.offer_to(rt.operator.agents.default.tools)
        pid = rt.operator.agents.default.tools.get("srv__pid")
        assert pid is not None
        first = await pid.invoke(CTX, {})
        run = await rt.send("t", "go")
        assert run.state is RunState.COMPLETED
        assert error((await rt.records.entries("t"))[2]) == (
            "exception", "McpServerDown: mcp server 'srv' stopped during the call (restarting); "
            "the call's outcome is unknown")
        await until(server, lambda s: s.state == "up" and s.starts == 2)
        second = await pid.invoke(CTX, {})
    assert int(first) != int(second)  # a new process


async def test_calls_while_a_server_is_down_fail_at_once(
    make_runtime: Any, tmp_path: Path
) -> None:
    script = [call("srv__echo", text="anyone?"), {"text": "it is down"}]
    async with served(fake(tmp_path, restart_backoff_s=600), base=tmp_path) as servers, \
            make_runtime(script) as (rt, _):
        (server,) = servers.servers
        servers.offer_to(rt.operator.agents.default.tools)
        die = rt.operator.agents.default.tools.get("srv__die")
        assert die is not None
        with pytest.raises(McpServerDown, match="stopped during the call"):
            await die.invoke(CTX, {})
        await until(server, lambda s: s.state == "down")
        assert server.status().startswith("srv: down: the server stopped")
        async with asyncio.timeout(5):  # no waiting for the restart (600 s away)
            run = await rt.send("t", "go")
        result = (await rt.records.entries("t"))[2]
    assert run.state is RunState.COMPLETED
    assert error(result)[1].startswith(
        "McpServerDown: mcp server 'srv' is down (restarting): the server stopped")


FLAKY = """
import os, runpy, sys
flag, server = sys.argv[1], sys.argv[2]
if not os.path.exists(flag):
    open(flag, "w").close()
    sys.exit("not ready yet: the first start always fails")
sys.argv = [server]
runpy.run_path(server, run_name="__main__")
"""


async def test_a_server_that_fails_to_start_is_retried_and_offers_its_tools_later(
    tmp_path: Path,
) -> None:
    flaky = McpServerConfig(name="flaky", command=sys.executable,
                            args=["-c", FLAKY, str(tmp_path / "started-once"), str(FAKE)],
                            restart_backoff_s=0.3)
    async with served(flaky, base=tmp_path) as servers:
        (server,) = servers.servers
        registry = ToolRegistry()
        servers.offer_to(registry)
        assert server.status() == (
            "flaky: failed to start: the server closed the connection (stderr: not ready yet: "
            "the first start always fails), retrying")
        assert len(registry) == 0  # the model sees none of its tools yet
        with pytest.raises(McpServerDown) as down:
            await server.call("echo", CTX, {"text": "x"})
        # The model is told why, without the server's stderr (which may say anything).
        assert str(down.value) == \
            "mcp server 'flaky' is down (restarting): the server closed the connection"
        await until(server, lambda s: s.state == "up")
        echo = registry.get("flaky__echo")
        assert echo is not None and await echo.invoke(CTX, {"text": "x"}) == "x"


# -- streamable HTTP --------------------------------------------------------------------------


@pytest.fixture
def http_process() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The fake server on loopback over streamable HTTP (it wants ``X-Token: s3cret``): its
    URL and its process."""
    proc = subprocess.Popen([sys.executable, str(FAKE), "--http", "s3cret"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("port "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


@pytest.fixture
def http_server(http_process: tuple[str, subprocess.Popen[str]]) -> str:
    return http_process[0]


async def test_an_http_server_with_a_header_from_the_environment(
    http_server: str, tmp_path: Path
) -> None:
    good = McpServerConfig(name="web", url=http_server, headers_env={"X-Token": "WEB_TOKEN"})
    unset = McpServerConfig(name="unset", url=http_server, headers_env={"X-Token": "NOT_SET"},
                            restart_backoff_s=600)
    wrong = McpServerConfig(name="wrong", url=http_server, headers_env={"X-Token": "WRONG"},
                            restart_backoff_s=600)
    environ = {"WEB_TOKEN": "s3cret", "WRONG": "guess"}
    async with served(good, unset, wrong, base=tmp_path, environ=environ) as servers:
        web = servers.servers[0]
        assert await web.call("echo", CTX, {"text": "over http"}) == "over http"
        with pytest.raises(McpToolError, match="Error executing tool fail: nope"):
            await web.call("fail", CTX, {"why": "nope"})
        lines = servers.status_lines()
    assert lines[0] == f"web: {len(ALL_TOOLS)} tools"
    assert lines[1] == ("unset: failed to start: the environment variable NOT_SET "
                        "(headers_env.X-Token) is not set, retrying")
    assert lines[2] == ("wrong: failed to start: MCP error -32603: Server returned an error "
                        "response (HTTP 401 Unauthorized), retrying")


async def test_a_call_to_an_http_server_that_refuses_the_connection_never_started(
    http_process: tuple[str, subprocess.Popen[str]], tmp_path: Path,
) -> None:
    url, proc = http_process
    cfg = McpServerConfig(name="web", url=url, headers_env={"X-Token": "WEB_TOKEN"},
                          restart_backoff_s=600)
    async with served(cfg, base=tmp_path, environ={"WEB_TOKEN": "s3cret"}) as servers:
        (web,) = servers.servers
        assert await web.call("echo", CTX, {"text": "up"}) == "up"
        proc.kill()  # nothing listens on the port any more: connections are refused
        await asyncio.to_thread(proc.wait, 10)
        with pytest.raises(McpServerDown) as down:
            await web.call("put", CTX, {"key": "k", "value": "v"})
    message = str(down.value)
    assert message.startswith("mcp server 'web' could not be reached (cannot connect: ")
    assert message.endswith("); the call never started (restarting)")
    assert "unknown" not in message
