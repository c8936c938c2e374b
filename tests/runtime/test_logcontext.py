"""Which run the current code works for (runtime/logcontext.py): ``RUN_CONTEXT`` is set
around each run's task and reaches the tools it calls (a sync tool too, in its worker
thread); the caller's own context is left unset. (The log records that carry it:
``bot/logging.py``.)"""

from __future__ import annotations

from typing import Any

from runtime import RUN_CONTEXT, tool
from tests.scripted import call


async def test_run_context_reaches_sync_tools(make_runtime: Any) -> None:
    @tool
    def where() -> list[str | None]:
        current = RUN_CONTEXT.get()
        assert current is not None
        return list(current)

    async with make_runtime([call("where"), {"text": "ok"}], [where]) as (rt, _):
        run = await rt.send("thread-x", "go")
        entries = await rt.records.entries("thread-x")
    assert entries[2].content == ["thread-x", run.id]


async def test_an_async_tool_knows_its_run_and_the_caller_is_no_run(make_runtime: Any) -> None:
    @tool
    async def where() -> list[str | None]:
        current = RUN_CONTEXT.get()
        assert current is not None
        return list(current)

    async with make_runtime([call("where"), {"text": "ok"}], [where]) as (rt, _):
        run = await rt.send("thread-y", "go")
        entries = await rt.records.entries("thread-y")
        assert RUN_CONTEXT.get() is None  # the caller's context is not the run's
    assert entries[2].content == ["thread-y", run.id]
