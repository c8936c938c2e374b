"""A turn's tool calls (runtime/engine/calls.py), through the loop with the scripted model:
each refused with an error result the model can act on (too many, a repeat, bad
arguments, an unknown tool), or run, its failure or timeout a result too; a tool gets its
call's context."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime import RunState, ToolContext, ToolResult, tool
from tests.scripted import call, error_type, make_counter


async def test_too_many_calls_in_one_turn(make_runtime: Any) -> None:
    seen, lookup = make_counter()
    turn = {"tool_calls": [{"name": "lookup", "arguments": {"q": str(i)}} for i in range(3)]}
    async with make_runtime([turn, {"text": "ok"}], [lookup],
                            max_tool_calls_per_turn=2) as (rt, _):
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert run.state is RunState.COMPLETED
    assert [r.is_error for r in results] == [False, False, True]
    assert error_type(results[2]) == "too_many_calls"
    assert seen == [{"q": "0"}, {"q": "1"}]


async def test_repeated_identical_calls_are_refused(make_runtime: Any) -> None:
    seen, lookup = make_counter()
    script = [call("lookup", q="same"), call("lookup", q="same"), call("lookup", q="same"),
              call("lookup", q="other"), {"text": "gave up"}]
    async with make_runtime(script, [lookup], repeat_limit=3) as (rt, provider):
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert run.state is RunState.COMPLETED
    assert [r.is_error for r in results] == [False, False, True, False]
    assert error_type(results[2]) == "loop_detected"
    assert seen == [{"q": "same"}, {"q": "same"}, {"q": "other"}]
    provider.assert_complete()


async def test_repeat_guard_counts_calls_within_one_turn(make_runtime: Any) -> None:
    seen, lookup = make_counter()
    turn = {"tool_calls": [{"name": "lookup", "arguments": {"q": "z"}, "id": f"c{i}"}
                           for i in range(3)]}
    async with make_runtime([turn, {"text": "ok"}], [lookup], repeat_limit=2) as (rt, _):
        await rt.send("t", "go")
        entries = await rt.records.entries("t")
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [False, True, True]
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"q": 5}, "invalid_arguments"),
        ({}, "invalid_arguments"),
        ({"q": "x", "extra": 1}, "invalid_arguments"),
        ("not an object", "invalid_arguments"),
        ([1, 2], "invalid_arguments"),
    ],
)
async def test_bad_arguments_become_error_results(
    make_runtime: Any, arguments: Any, expected: str
) -> None:
    seen, lookup = make_counter()
    script = [{"tool_calls": [{"name": "lookup", "arguments": arguments}]}, {"text": "sorry"}]
    async with make_runtime(script, [lookup]) as (rt, _):
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED
    assert error_type(entries[2]) == expected
    assert seen == []


async def test_unknown_tool(make_runtime: Any) -> None:
    async with make_runtime([call("nope"), {"text": "ok"}]) as (rt, _):
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED
    assert error_type(entries[2]) == "unknown_tool"
    assert "nope" in entries[2].content["error"]["message"]


async def test_tool_exception_and_timeout_are_results(make_runtime: Any) -> None:
    @tool
    async def boom() -> None:
        raise RuntimeError("disk on fire")

    hang = asyncio.Event()

    @tool(timeout_s=0.05)
    async def slow() -> str:
        await hang.wait()  # never set: the timeout must cut it off
        return "never"

    script = [{"tool_calls": [{"name": "boom"}, {"name": "slow"}]}, {"text": "both failed"}]
    async with make_runtime(script, [boom, slow]) as (rt, _):
        run = await rt.send("t", "go")
        entries = await rt.records.entries("t")
    assert run.state is RunState.COMPLETED
    assert error_type(entries[2]) == "exception"
    assert entries[2].content["error"]["message"] == "RuntimeError: disk on fire"
    assert error_type(entries[3]) == "timeout"


async def test_sync_tool_and_context(make_runtime: Any) -> None:
    contexts: list[ToolContext] = []

    @tool(effect="idempotent_write")
    def record(ctx: ToolContext, note: str) -> str:
        contexts.append(ctx)
        return f"noted {note}"

    async with make_runtime([call("record", note="n"), {"text": "ok"}], [record]) as (rt, p):
        run = await rt.send("thread-9", "go")
    assert run.state is RunState.COMPLETED
    (ctx,) = contexts
    assert ctx.run_id == run.id and ctx.thread_id == "thread-9"
    assert ctx.tool_call_id == "call_0_0" and len(ctx.idempotency_key) == 64
    assert "ctx" not in p.calls[0].tools[0].parameters["properties"]
