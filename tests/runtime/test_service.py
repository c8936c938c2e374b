"""The runtime's public API (runtime/service.py, ``Runtime``) as a channel uses it: the
outbox, its surface, a message's conversation before it (``follow``:
``serving/test_waiting``; reads: ``serving/test_records``; the services a tool is given:
``test_assembly``)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from runtime import (
    ApprovalRequested,
    EchoProvider,
    Origin,
    RunState,
    Runtime,
    Said,
    ScriptedProvider,
    SQLiteStore,
    ToolContext,
    ToolRegistry,
    tool,
)
from runtime.tools.base import CancelFlag
from tests.fakes.chat import MemoryChat
from tests.scripted import call, events_until

S = RunState
ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")



@tool(requires_approval=True)
def deploy(env: str) -> str:
    """Deploy somewhere."""
    return f"deployed to {env}"


async def test_a_long_reply_is_posted_in_parts_in_order(make_runtime: Any) -> None:
    text = "\n\n".join(f"Section {i}. " + "word " * 80 for i in range(10))
    chat = MemoryChat(max_chars=1000)
    async with make_runtime([{"text": text}], deliverers={"chat": chat}) as (rt, _):
        run = await rt.send("t", "write a lot", origin=ROOM)
    assert run.reply == text
    assert len(chat.posted) > 1 and all(len(m.text) <= 1000 for m in chat.posted)
    assert "\n\n".join(m.text for m in chat.posted) == text


async def test_a_runtime_built_with_a_deliverer_posts_with_nothing_added_later(
        tmp_path: Path) -> None:
    """Built whole: the deliverer given to the constructor is where a run's reply goes,
    with no registration after construction (nor any way to make one)."""
    chat = MemoryChat()
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), deliverers={"chat": chat}) as rt:
        run = await rt.send("t", "hi", origin=ROOM)
        await rt.idle()
        (sent,) = await rt.records.deliveries(run_id=run.id)
        added = [n for n in (*dir(rt), *dir(rt.operator), *dir(rt.kept.files))
                 if n.startswith("add_")]
    assert run.state is S.COMPLETED and [p.text for p in chat.posted] == [run.reply]
    assert sent.remote_id == chat.posted[0].id and added == []


async def test_a_runtime_without_channels_answers_and_keeps_replies_in_the_outbox(
        tmp_path: Path) -> None:
    """Built with no deliverer (a command that opens no channels): runs are answered, and a
    reply for a chat channel waits in the outbox for a runtime that has its deliverer."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        async with Runtime(store, EchoProvider()) as rt:
            asked = await rt.send("t", "hi", origin=ROOM)
            direct = await rt.send("u", "hello")  # no origin: answered to the caller only
            (waiting,) = await rt.records.deliveries(pending=True)
        chat = MemoryChat()
        async with Runtime(store, EchoProvider(), deliverers={"chat": chat}) as later:
            left = await later.records.deliveries(pending=True)
    assert asked.state is S.COMPLETED and asked.reply == "echo: hi"
    assert direct.state is S.COMPLETED and direct.reply == "echo: hello"
    assert waiting.run_id == asked.id and waiting.remote_id is None
    assert [p.text for p in chat.posted] == ["echo: hi"] and left == []


async def test_an_approval_prompt_goes_to_the_channel_once(make_runtime: Any) -> None:
    chat = MemoryChat()
    script = [call("deploy", env="prod"), {"text": "shipped"}]
    async with make_runtime(script, [deploy], deliverers={"chat": chat}) as (rt, _):
        async with rt.subscribe() as events:
            paused = await rt.send("t", "ship it", origin=ROOM)
            asked = [e async for e in events_until(events, ApprovalRequested)][-1]
        assert paused.state is S.AWAITING_APPROVAL and paused.pending_approval is not None
        assert isinstance(asked, ApprovalRequested)
        assert asked.arguments_hash == paused.pending_approval.arguments_hash
        assert (asked.channel, asked.target) == ("chat", {"room": "r1"})
        await rt.idle()  # the outbox is sent once the run has stopped
        ((prompt, kind),) = [(m.text, m.kind) for m in chat.posted]
        assert kind == "approval" and "deploy" in prompt and '"prod"' in prompt
        assert [r.id for r in await rt.records.pending_approvals(channel="chat")] == [paused.id]
        assert await rt.records.pending_approvals(channel="elsewhere") == []
        assert (await rt.records.active_run("t")) == paused

        await rt.operator.flush_deliveries()  # nothing is posted twice
        await rt.decide(paused.id, paused.pending_approval.tool_call_id, approve=True,
                        by="u2", arguments_hash=asked.arguments_hash)
        done = await rt.wait(paused.id)
        assert done.reply == "shipped"
        assert await rt.records.active_run("t") is None
    assert [m.kind for m in chat.posted] == ["approval", "reply"]


async def test_the_runtime_surface_is_its_verbs_its_reads_and_the_operators_levers(
        tmp_path: Path) -> None:
    """Pinned, so that a name is added on purpose (and to the docs' runtime-API page, which
    tests/docs/test_pages.py holds to the class): the verbs a channel needs, ``records``,
    ``kept`` (what it keeps beside runs, shared with tools), and ``operator``; plain data is
    private."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        rt = Runtime(store, EchoProvider())
        public = {n for n in dir(rt) if not n.startswith("_")}
        levers = {n for n in dir(rt.operator) if not n.startswith("_")}
        kept = {n for n in dir(rt.kept) if not n.startswith("_")}
    assert public == {"start", "close", "idle", "spawn", "submit", "send", "wait", "follow",
                      "subscribe", "listen", "decide", "cancel", "stop", "resume",
                      "delete_thread", "records", "kept", "operator"}
    assert levers == {"agents", "settings", "instance_id", "recovered", "take_lease",
                      "release_lease", "holds", "health", "check_writable", "trace_link",
                      "flush_deliveries"}
    assert kept == {"notes", "memories", "feedback", "files"}


async def test_a_sync_tool_given_up_sees_its_cancelled_flag(tmp_path: Path) -> None:
    flags: list[CancelFlag] = []
    gone = threading.Event()

    @tool(timeout_s=0.2)
    def slow(ctx: ToolContext) -> str:
        flags.append(ctx.cancelled)
        if ctx.cancelled.wait(10):  # stops early once the loop gives up on it
            gone.set()
        return "late"

    script = [call("slow"), {"text": "after"}]
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, ScriptedProvider(script), ToolRegistry([slow])) as rt:
        run = await rt.send("t", "go")
        assert await asyncio.to_thread(gone.wait, 10)
    (flag,) = flags
    assert flag.is_set() and run.reply == "after"


async def test_a_message_may_bring_the_conversation_before_it(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store, Runtime(store, EchoProvider()) as rt:
        earlier = [Said(role="user", text="hi"), Said(role="assistant", text="hello!")]
        run = await rt.wait((await rt.submit("t", "and now?", context=earlier)).id)
        entries = await rt.records.entries("t")
    assert run.reply == "echo: and now?"
    assert [(e.kind, e.text) for e in entries] == [  # type: ignore[union-attr]
        ("user", "hi"), ("assistant", "hello!"), ("user", "and now?"),
        ("assistant", "echo: and now?")]
    assert run.first_entry == 0 and run.context == tuple(earlier)
