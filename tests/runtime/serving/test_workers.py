"""Who drives which run, when (runtime/serving/workers.py): a thread's runs strictly in
order, one behind a paused run waiting for it; ``concurrency`` "global" one loop at a
time, "thread" threads side by side."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from runtime import RunState, UserMessage, tool
from tests.scripted import call


def kinds(entries: list[Any]) -> list[str]:
    return [e.kind for e in entries]


async def test_messages_on_one_thread_run_in_order(make_runtime: Any) -> None:
    script = [{"text": f"reply {i}"} for i in range(5)]
    async with make_runtime(script) as (rt, _):
        runs = [await rt.submit("t", f"m{i}") for i in range(5)]
        done = [await rt.wait(r.id) for r in runs]
        entries = await rt.records.entries("t")
    assert [r.reply for r in done] == [f"reply {i}" for i in range(5)]
    users = [e.text for e in entries if isinstance(e, UserMessage)]
    assert users == [f"m{i}" for i in range(5)]
    assert kinds(entries) == ["user", "assistant"] * 5


async def test_runs_queue_behind_a_paused_run(make_runtime: Any) -> None:
    @tool(requires_approval=True)
    def risky() -> str:
        return "done"

    script = [call("risky"), {"text": "after risky"}, {"text": "second answer"}]
    async with make_runtime(script, [risky]) as (rt, _):
        paused = await rt.send("t", "do the risky thing")
        second = await rt.submit("t", "and then this")
        await rt.idle()
        assert (await rt.records.get_run(second.id)).state is RunState.QUEUED
        assert paused.pending_approval is not None
        await rt.decide(paused.id, paused.pending_approval.tool_call_id, approve=True)
        assert (await rt.wait(paused.id)).reply == "after risky"
        assert (await rt.wait(second.id)).reply == "second answer"


async def _concurrency_probe(make_runtime: Any, mode: str) -> int:
    active = 0
    peak = 0
    gate = asyncio.Event()

    @tool
    async def probe() -> int:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        if peak >= 2:
            gate.set()
        # In thread mode both runs get here together; in global mode the gate
        # never opens and the bounded wait ends the call.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gate.wait(), 0.5 if mode == "global" else 5)
        active -= 1
        return peak

    script = [call("probe"), {"text": "ok"}]
    async with make_runtime(script, [probe], concurrency=mode) as (rt, _):
        a = await rt.submit("a", "go")
        b = await rt.submit("b", "go")
        for run in (a, b):
            assert (await rt.wait(run.id)).state is RunState.COMPLETED
    return peak


async def test_global_concurrency_runs_one_loop_at_a_time(make_runtime: Any) -> None:
    assert await _concurrency_probe(make_runtime, "global") == 1


async def test_thread_concurrency_runs_threads_in_parallel(make_runtime: Any) -> None:
    assert await _concurrency_probe(make_runtime, "thread") == 2


async def test_send_behind_a_paused_run_returns_queued(make_runtime: Any) -> None:
    @tool(requires_approval=True)
    def risky() -> str:
        return "done"

    async with make_runtime([call("risky")], [risky]) as (rt, _):
        paused = await rt.send("t", "do the risky thing")
        assert paused.state is RunState.AWAITING_APPROVAL
        queued = await asyncio.wait_for(rt.send("t", "hello?"), 5)
    assert queued.state is RunState.QUEUED




async def test_a_paused_run_holds_up_only_its_own_thread(make_runtime: Any) -> None:
    @tool(requires_approval=True)
    def risky() -> str:
        return "done"

    # The scripted model plays each thread's turns from the script's start.
    script = [call("risky"), {"text": "answered"}]
    async with make_runtime(script, [risky]) as (rt, _):  # concurrency "global"
        first = await rt.send("a", "do the risky thing")
        assert first.state is RunState.AWAITING_APPROVAL
        other = await asyncio.wait_for(rt.send("b", "you too"), 10)
        assert other.state is RunState.AWAITING_APPROVAL  # reached its own pause
        assert other.pending_approval is not None
        await rt.decide(other.id, other.pending_approval.tool_call_id, approve=True)
        assert (await rt.wait(other.id)).reply == "answered"
        assert (await rt.records.get_run(first.id)).state is RunState.AWAITING_APPROVAL
        assert first.pending_approval is not None
        await rt.decide(first.id, first.pending_approval.tool_call_id, approve=True)
        assert (await rt.wait(first.id)).reply == "answered"
