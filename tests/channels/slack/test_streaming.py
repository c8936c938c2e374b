"""Live replies in Slack (docs/guides/live-replies.md): the real channel against the fake
Slack's streaming methods — native streaming with tool calls as tasks, the post-and-edit
fallback where Slack refuses, `stream = "edit"` and `"off"`, a store that fails to record
a stream's ids."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from channels.slack.channel import SlackChannel, SlackOutbound
from runtime import (
    AgentConfig,
    Records,
    Runtime,
    RuntimeConfig,
    ScriptedProvider,
    SQLiteStore,
    StoreError,
    StreamDelivery,
    ToolRegistry,
    tool,
)
from runtime.model.runs import StreamState
from tests.channels.slack.test_channel import C, config, running, secrets
from tests.fakes.slack import BOT_USER, FakeSlack
from tests.fakes.slack.payloads import TEAM

ANSWER = "The deploy went out at 09:14; every check is green."
released = asyncio.Event()
"""Lets ``lookup`` finish; made anew by each test (``hold``): an event is bound to the
loop it was first awaited on, and each test has its own."""


def hold() -> None:
    """``lookup`` waits from now until ``released`` is set."""
    global released
    released = asyncio.Event()


@tool
async def lookup(service: str) -> str:
    """Look a service up (waits until the test lets it finish)."""
    await released.wait()
    return f"{service}: green"


def scripted() -> ScriptedProvider:
    return ScriptedProvider([
        {"text": "Let me look that up. ", "chunks": 2,
         "tool_calls": [{"name": "lookup", "arguments": {"service": "api"}}]},
        {"text": ANSWER, "chunks": 5}])


def bot_messages(fake: FakeSlack) -> list[dict[str, Any]]:
    return [m for m in fake.messages(C) if m.get("user") == BOT_USER]


async def ask(fake: FakeSlack, tmp_path: Path, **config: Any) -> tuple[list[dict[str, Any]],
                                                                        dict[str, Any]]:
    """A mention answered by the scripted model; the bot's messages, and what was seen of
    the stream while its tool ran."""
    hold()
    seen: dict[str, Any] = {}
    async with running(fake, tmp_path / "m.db", provider=scripted(), tools=(lookup,),
                       **config) as s:
        sent = fake.user_event(C, "U1", f"<@{BOT_USER}> how did the deploy go?",
                               mention=True)
        await fake.acked(await fake.socket_event(sent))
        await fake.until(lambda: any("Let me look" in m.get("text", "")
                                     for m in bot_messages(fake)), what="the first text")
        seen["while"] = [dict(m) for m in bot_messages(fake)]
        released.set()
        await s.runtime.idle()
    return bot_messages(fake), seen


async def test_a_reply_streams_natively_with_its_tool_as_a_task(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        messages, seen = await ask(fake, tmp_path)
        streams = fake.api.streams
        (message,) = messages
        assert seen["while"][0]["ts"] == message["ts"]  # the same message, grown
        assert message["text"] == "Let me look that up. " + ANSWER
        where = (C, message["ts"])
        assert where not in streams.streaming  # stopped
        (task,) = streams.tasks[where].values()
        assert task["status"] == "complete" and task["title"] == "lookup(service=api)"
        (start,) = fake.calls("chat.startStream")
        # In a channel Slack streams to one person: the one who asked, and their team.
        assert (start["recipient_user_id"], start["recipient_team_id"]) == ("U1", TEAM)
        assert not fake.calls("chat.postMessage")
        assert message["metadata"]["event_type"] == "maiden_delivery"


async def test_a_stream_slack_stops_taking_goes_on_by_edits_and_the_next_streams(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An error answered to ``chat.appendStream`` (not a refusal): that reply goes on by
    ``chat.update`` in the same message, never posted whole at the end; said once for the
    channel; the channel's next reply streams natively again."""
    caplog.set_level(logging.WARNING, "maiden.slack")
    hold()
    async with FakeSlack() as fake:
        fake.fail("chat.appendStream", error="streaming_state_conflict")
        async with running(fake, tmp_path / "m.db", provider=scripted(), tools=(lookup,)) as s:
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> how did the deploy go?",
                                   mention=True)
            await fake.acked(await fake.socket_event(sent))
            await fake.until(lambda: bool(fake.calls("chat.startStream")), what="the stream")
            released.set()  # the answer comes in appends: the first is refused
            await fake.until(lambda: bool(fake.calls("chat.update")), what="an edit")
            await s.runtime.idle()
            (message,) = bot_messages(fake)
            assert message["text"] == "Let me look that up. " + ANSWER
            assert (C, message["ts"]) not in fake.api.streams.streaming
            assert not fake.calls("chat.postMessage")
            assert [r.message for r in caplog.records].count(next(
                r.message for r in caplog.records if "streaming_state_conflict" in r.message)) \
                == 1
            hold()  # (else a reply done before its stream begins is posted whole)
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> and now?", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await fake.until(lambda: len(fake.calls("chat.startStream")) == 2,
                             what="the next stream")
            released.set()
            await fake.wait_messages(C, 4)
            await s.runtime.idle()
        assert len(fake.calls("chat.startStream")) == 2
        assert len(bot_messages(fake)) == 2 and not fake.calls("chat.postMessage")


async def test_a_refused_start_is_edited_in_place_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Any error Slack answers to ``chat.startStream`` posts the reply and edits it (not a
    whole post at the end), with one log line naming Slack's reason."""
    caplog.set_level(logging.WARNING, "maiden.slack")
    async with FakeSlack() as fake:
        fake.fail("chat.startStream", error="missing_recipient_user_id")
        messages, seen = await ask(fake, tmp_path)
        (message,) = messages
        assert "⏳ lookup(service=api)…" in seen["while"][0]["text"]  # edited while it ran
        assert message["text"] == "Let me look that up. " + ANSWER
        assert len([r for r in caplog.records
                    if "missing_recipient_user_id" in r.message]) == 1


async def test_where_slack_refuses_to_stream_the_reply_is_posted_and_edited(
        tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        fake.api.streams.refuse("not_allowed")
        messages, seen = await ask(fake, tmp_path)
        (message,) = messages
        assert "⏳ lookup(service=api)…" in seen["while"][0]["text"]  # the running tool
        assert message["text"] == "Let me look that up. " + ANSWER
        assert len(fake.calls("chat.postMessage")) == 1 and fake.calls("chat.update")
        assert fake.api.streams.tasks == {}


async def test_stream_edit_and_stream_off(tmp_path: Path) -> None:
    async with FakeSlack() as fake:
        messages, _ = await ask(fake, tmp_path / "edit", stream="edit")
        assert [m["text"] for m in messages] == ["Let me look that up. " + ANSWER]
        assert not fake.calls("chat.startStream") and fake.calls("chat.update")
    async with FakeSlack() as fake:
        hold()
        released.set()
        async with running(fake, tmp_path / "off.db", provider=scripted(), tools=(lookup,),
                           stream="off") as s:
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> hi", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await fake.wait_messages(C, 2)
            await s.runtime.idle()
        assert [m["text"] for m in bot_messages(fake)] == [ANSWER]
        assert not fake.calls("chat.startStream") and not fake.calls("chat.update")


async def test_a_long_reply_edited_goes_on_in_new_messages(tmp_path: Path) -> None:
    """Edit mode past Slack's length (``chat.update`` takes 4,000 characters: the fake
    refuses more, ``msg_too_long``): the reply goes on in new messages, all of it shown."""
    long = " ".join(f"line {i} of the report, with its figures." for i in range(160))
    provider = ScriptedProvider([{"text": long, "chunks": 8}])
    async with FakeSlack() as fake:
        async with running(fake, tmp_path / "m.db", provider=provider, stream="edit") as s:
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> the report?", mention=True)
            await fake.acked(await fake.socket_event(sent))
            await s.runtime.idle()
            (run,) = await s.runtime.records.runs()
            assert run.state == "completed"
        messages = bot_messages(fake)
        assert len(messages) >= 2 and all(len(m["text"]) <= 4_000 for m in messages)
        assert " ".join(m["text"] for m in messages).split() == long.split()
        assert not [c for c in fake.requests if c.method == "chat.update"
                    and len(str(c.params.get("text"))) > 4_000]


class CutStore(SQLiteStore):
    """A real store whose writes of a stream's message ids fail, as PostgreSQL's do while
    the connection to it is cut: the first ``cut`` of them (None: every one)."""

    def __init__(self, path: Path, cut: int | None) -> None:
        super().__init__(path)
        self.cut = cut
        self.refused = 0
        self.cutting = asyncio.Event()
        """Set once a write was refused."""

    async def stream_progress(self, key: str, state: StreamState, remote_ids: Sequence[str],
                              at: float) -> None:
        if state == "streaming" and (self.cut is None or self.refused < self.cut):
            self.refused += 1
            self.cutting.set()
            raise StoreError("the connection to the database was lost")
        await super().stream_progress(key, state, remote_ids, at)


@pytest.mark.parametrize("cut", [1, None], ids=["store-back-mid-run", "store-back-for-the-reply"])
async def test_a_stream_whose_ids_the_store_refused_is_finished_not_posted_again(
        tmp_path: Path, cut: int | None) -> None:
    """Chaos finding 6: Slack opens the stream and the store fails to record its ids. The
    process keeps them: the stream goes on once the store takes them, or, if it never
    does, the run's reply finishes that message. One message shows the answer, once, and
    no stream is left open. maiden's clock is 5.3 s ahead of Slack's (as the replica's
    was in the soak), so looking the message up in the thread afterwards would miss it:
    only the ids this process kept find it."""
    hold()
    async with FakeSlack() as fake, CutStore(tmp_path / "m.db", cut) as store:
        slack = SlackOutbound(config(fake), secrets(fake), Records(store), pace_s=0)
        runtime = Runtime(store, scripted(), ToolRegistry([lookup]), agent=AgentConfig(),
                          settings=RuntimeConfig(poll_interval_s=0.1),
                          clock=lambda: time.time() + 5.3,
                          deliverers={"slack": slack.deliverer})
        async with runtime, SlackChannel(runtime, slack):
            await fake.wait_connected()
            sent = fake.user_event(C, "U1", f"<@{BOT_USER}> how did the deploy go?",
                                   mention=True)
            await fake.acked(await fake.socket_event(sent))
            await asyncio.wait_for(store.cutting.wait(), 10)
            released.set()
            await runtime.idle()
            await runtime.operator.flush_deliveries()
            (run,) = await runtime.records.runs()
            records = {d.kind: d for d in await runtime.records.deliveries(run_id=run.id)}
        assert run.state == "completed" and run.reply == ANSWER
        shown = ANSWER if cut is None else "Let me look that up. " + ANSWER
        assert [m["text"] for m in bot_messages(fake)] == [shown]  # the answer, once
        assert fake.api.streams.streaming == set()  # no stream left open
        (message,) = bot_messages(fake)
        assert len(fake.calls("chat.startStream")) == 1 and fake.calls("chat.stopStream")
        assert not fake.calls("chat.postMessage")
        assert not fake.calls("conversations.replies")  # its ids kept, not looked for
        stream, reply = records["stream"], records["reply"]
        assert isinstance(stream, StreamDelivery) and stream.state == "finished"
        assert stream.remote_ids == (message["ts"],) and reply.remote_id == message["ts"]
