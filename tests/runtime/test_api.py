"""The runtime's public API as a channel uses it: submit, follow, reads, the outbox."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime import (
    ApprovalRequested,
    Origin,
    RunEnded,
    RunState,
    TextDelta,
    ToolCallStarted,
    tool,
)
from tests.fakes.chat import MemoryChat

S = RunState
ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


async def test_a_long_reply_is_posted_in_parts_in_order(make_runtime: Any) -> None:
    text = "\n\n".join(f"Section {i}. " + "word " * 80 for i in range(10))
    chat = MemoryChat(max_chars=1000)
    async with make_runtime([{"text": text}]) as (rt, _):
        rt.add_deliverer("chat", chat)
        run = await rt.send("t", "write a lot", origin=ROOM)
    assert run.reply == text
    assert len(chat.posted) > 1 and all(len(m.text) <= 1000 for m in chat.posted)
    assert "\n\n".join(m.text for m in chat.posted) == text


async def test_an_approval_prompt_goes_to_the_channel_once(make_runtime: Any) -> None:
    chat = MemoryChat()
    script = [call("deploy", env="prod"), {"text": "shipped"}]
    async with make_runtime(script, [deploy]) as (rt, _):
        rt.add_deliverer("chat", chat)
        async with rt.subscribe() as events:
            paused = await rt.send("t", "ship it", origin=ROOM)
            asked = [e async for e in _until(events, ApprovalRequested)][-1]
        assert paused.state is S.AWAITING_APPROVAL and paused.pending_approval is not None
        assert isinstance(asked, ApprovalRequested)
        assert asked.arguments_hash == paused.pending_approval.arguments_hash
        assert (asked.channel, asked.target) == ("chat", {"room": "r1"})
        await rt.idle()  # the outbox is sent once the run has stopped
        ((prompt, kind),) = [(m.text, m.kind) for m in chat.posted]
        assert kind == "approval" and "deploy" in prompt and '"prod"' in prompt
        assert [r.id for r in await rt.pending_approvals(channel="chat")] == [paused.id]
        assert await rt.pending_approvals(channel="elsewhere") == []
        assert (await rt.active_run("t")) == paused

        await rt.flush_deliveries()  # nothing is posted twice
        await rt.decide(paused.id, paused.pending_approval.tool_call_id, approve=True,
                        by="u2", arguments_hash=asked.arguments_hash)
        done = await rt.wait(paused.id)
        assert done.reply == "shipped"
        assert await rt.active_run("t") is None
    assert [m.kind for m in chat.posted] == ["approval", "reply"]


async def test_follow_streams_a_run_from_its_start_and_ends_with_its_end(
    make_runtime: Any,
) -> None:
    gate = asyncio.Event()

    @tool
    async def wait_here() -> str:
        await gate.wait()
        return "ok"

    async with make_runtime([call("wait_here"), {"text": "finished"}], [wait_here]) as (rt, _):
        async with rt.subscribe() as events:
            run = await rt.submit("t", "go")
            await anext(_until(events, ToolCallStarted))
        # Following after the run started still shows it from its start.
        follower = rt.follow(run.id)
        first = await anext(follower)
        gate.set()
        rest = [event async for event in follower]
        ended = rest[-1]
        assert first.kind == "run.started"
        assert isinstance(ended, RunEnded) and ended.kind == "run.completed"
        assert ended.reply == "finished"
        assert any(isinstance(e, ToolCallStarted) for e in [first, *rest])
        # A run that has ended: only its end.
        assert [e.kind async for e in rt.follow(run.id)] == ["run.completed"]


async def test_reads_cover_what_adapters_show(make_runtime: Any) -> None:
    async with make_runtime([{"text": "one"}, {"text": "two"}]) as (rt, _):
        first = await rt.send("a", "hi")
        second = await rt.send("b", "hello")
        assert [t.id for t in await rt.threads()] == ["b", "a"]
        assert [r.id for r in await rt.runs()] == [first.id, second.id]
        assert [r.id for r in await rt.runs(thread_id="a")] == [first.id]
        assert [e.kind for e in await rt.entries("a")] == ["user", "assistant"]
        assert [t.target for t in await rt.transitions(first.id)] == [S.RUNNING, S.COMPLETED]
        stats = await rt.stats()
        assert stats.threads == 2 and stats.runs == {S.COMPLETED: 2}


async def test_a_follower_after_submit_misses_nothing(make_runtime: Any) -> None:
    async with make_runtime([{"text": "streamed words"}]) as (rt, _):
        run = await rt.submit("t", "hi")
        await asyncio.sleep(0)  # the worker may start before the follower subscribes
        events = [e async for e in rt.follow(run.id)]
    assert [e.kind for e in events] == ["run.started", "run.state", "text.delta", "run.state",
                                        "run.completed"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "streamed words"


async def _until(events: Any, kind: type) -> Any:
    while True:
        event = await asyncio.wait_for(events.next(), 5)
        yield event
        if isinstance(event, kind):
            return
