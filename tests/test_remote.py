"""Decisions and cancels reach a run wherever it lives: another runtime on the same store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import (
    AgentConfig,
    RunState,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    ToolCallStarted,
    ToolRegistry,
    tool,
)

S = RunState
FAST = RuntimeConfig(poll_interval_s=0.05)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def test_cancel_from_another_runtime_stops_the_tool_where_it_runs(
    tmp_path: Path,
) -> None:
    stopped = asyncio.Event()

    @tool
    async def forever() -> str:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    db = tmp_path / "m.db"
    script = [call("forever"), {"text": "after"}]
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        server = Runtime(store_a, ScriptedProvider(script), ToolRegistry([forever]),
                         settings=FAST)
        cli = Runtime(store_b, ScriptedProvider(script), settings=FAST)
        async with server:
            await cli.start(recover=False, serve=False)
            async with server.subscribe() as events:
                run = await server.submit("t", "go")
                while not isinstance(await asyncio.wait_for(events.next(), 5), ToolCallStarted):
                    pass
            assert [i.id for i in await cli.servers()] == [server.instance_id]
            answer = await cli.ask("cancel", run.id, by="ops")
            assert answer.ok and answer.handled_by == server.instance_id
            assert stopped.is_set()
            ended = await server.get_run(run.id)
            assert ended.state is S.CANCELLED and ended.reason == "cancelled by ops"
        await cli.close()
        assert await cli.servers() == []  # the server's heartbeat left with it


async def test_approval_from_another_runtime_runs_in_the_server(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def restart(service: str) -> str:
        ran.append(service)
        return "ok"

    db = tmp_path / "m.db"
    script = [call("restart", service="db"), {"text": "restarted"}]
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        server = Runtime(store_a, ScriptedProvider(script), ToolRegistry([restart]),
                         agent=AgentConfig(approvers=["alice"]), settings=FAST)
        cli = Runtime(store_b, ScriptedProvider([]), settings=FAST)
        async with server:
            paused = await server.send("t", "restart the db")
            assert paused.pending_approval is not None
            call_id = paused.pending_approval.tool_call_id
            refused = await cli.ask("decide", paused.id, tool_call_id=call_id, approve=True,
                                    by="mallory")
            assert refused.ok is False and "may not decide" in (refused.result or "")
            answer = await cli.ask("decide", paused.id, tool_call_id=call_id, approve=True,
                                   by="alice")
            assert answer.ok
            done = await server.wait(paused.id)
        await cli.close()
    assert done.state is S.COMPLETED and ran == ["db"]


async def test_a_request_nobody_serves_times_out_clearly(tmp_path: Path) -> None:
    import pytest

    from runtime import RunError
    from runtime.control import ControlRequest, ask

    async with SQLiteStore(tmp_path / "m.db") as store:
        with pytest.raises(RunError, match="no serving process answered"):
            await ask(store, ControlRequest(kind="cancel", run_id="x"), timeout_s=0.2,
                      poll_s=0.05)
