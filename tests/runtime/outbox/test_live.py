"""Live replies through the runtime (``runtime/outbox/live.py``): a reply shown while it is written,
finished by the run's end, exactly one message whatever happens — with the reference
chat channel's streamer (tests/fakes/chat.py); Slack and Discord have their own tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    DeliveryError,
    EchoProvider,
    Origin,
    ReplyDelivery,
    Run,
    RunState,
    Runtime,
    ScriptedProvider,
    ScriptedTurn,
    SQLiteStore,
    StaleWrite,
    StreamDelivery,
    ToolRegistry,
    tool,
)
from runtime.model.entries import AssistantTurn
from runtime.model.events import RunEnded, RunStarted, TextDelta
from runtime.model.runs import new_run_id
from runtime.outbox.live import LiveReplies
from runtime.outbox.streamer import ToolUpdate
from runtime.outbox.stretch import WAITING_NOTE
from runtime.stores.base import Checkpoint
from tests.fakes.chat import MemoryChat, MemoryStreamer
from tests.scripted import call

S = RunState
ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")
ANSWER = "The deploy went out at 09:14 and every check is green."



@tool
def lookup(service: str) -> str:
    """Look a service up."""
    return f"{service}: green"


@tool(requires_approval=True)
def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


async def test_a_reply_streams_into_one_message_with_its_tool_work(make_runtime: Any) -> None:
    chat = MemoryChat(stream=True)
    assert chat.streamer is not None
    streamer = chat.streamer

    @tool(name="lookup")
    async def looked_up(service: str) -> str:
        """Look a service up, once the reply shows (a loaded machine's first flush may
        come late, and a run that ends before it posts its reply whole)."""
        await asyncio.wait_for(streamer.opened.wait(), 10)
        return f"{service}: green"

    script = [{"text": "Let me look. ", "chunks": 2, **call("lookup", service="api")},
              {"text": ANSWER, "chunks": 6}]
    async with make_runtime(script, [looked_up], deliverers={"chat": chat}) as (rt, _):
        run = await rt.send("t", "how did the deploy go?", origin=ROOM)
        await rt.idle()  # the reply goes out once the run has ended
        deliveries = {d.kind: d for d in await rt.records.deliveries(run_id=run.id)}
    assert run.state is S.COMPLETED and run.reply == ANSWER
    assert chat.posted == []  # no message of its own: the stream shows the reply
    (message,) = chat.streamer.messages.values()
    assert message.text == "Let me look. " + ANSWER
    assert not message.streaming
    assert message.tasks == {"lookup:call_0_0": "complete"}
    stream, reply = deliveries["stream"], deliveries["reply"]
    assert isinstance(stream, StreamDelivery) and stream.state == "finished"
    assert stream.remote_ids == (message.id,) and stream.remote_id == message.id
    assert isinstance(reply, ReplyDelivery) and reply.remote_id == message.id


async def test_a_channel_without_a_streamer_gets_one_finished_message(
        make_runtime: Any) -> None:
    chat = MemoryChat()
    async with make_runtime([{"text": ANSWER, "chunks": 4}], deliverers={"chat": chat}) as (rt, _):
        run = await rt.send("t", "hi", origin=ROOM)
        await rt.idle()
        kinds = [d.kind for d in await rt.records.deliveries(run_id=run.id)]
    assert [p.text for p in chat.posted] == [ANSWER] and kinds == ["reply"]


async def test_an_approval_ends_the_stream_and_the_answer_streams_after(
        make_runtime: Any) -> None:
    chat = MemoryChat(stream=True)
    script = [{"text": "I will deploy the api. ", **call("deploy", service="api")},
              {"text": "Deployed.", "chunks": 3}]
    async with make_runtime(script, [deploy], deliverers={"chat": chat}) as (rt, _):
        paused = await rt.send("t", "ship it", origin=ROOM)
        await rt.idle()
        assert paused.pending_approval is not None
        first = list(chat.streamer.messages.values())  # type: ignore[union-attr]
        assert [m.text for m in first] == [f"I will deploy the api. \n{WAITING_NOTE}"]
        assert [p.kind for p in chat.posted] == ["approval"]  # the prompt, on its own
        await rt.decide(paused.id, paused.pending_approval.tool_call_id, approve=True)
        done = await rt.wait(paused.id)
        await rt.idle()
        streams = [d for d in await rt.records.deliveries(run_id=done.id)
                   if isinstance(d, StreamDelivery)]
    assert done.reply == "Deployed."
    texts = [m.text for m in chat.streamer.messages.values()]  # type: ignore[union-attr]
    replies = [p.text for p in chat.posted if p.kind == "reply"]
    # The answer streams into a message of its own, or, when the run ended before its
    # stream's first flush, is posted whole (no stream opens after the end): once either way.
    assert texts[0] == f"I will deploy the api. \n{WAITING_NOTE}"
    assert texts[1:] + replies == ["Deployed."]
    assert [s.state for s in streams] == ["finished"] * len(texts)
    assert len({s.key for s in streams}) == len(texts)


async def test_a_failed_run_ends_its_stream_with_the_reason(make_runtime: Any) -> None:
    chat = MemoryChat(stream=True)
    assert chat.streamer is not None
    streamer = chat.streamer

    @tool(name="lookup")
    async def looked_up(service: str) -> str:
        """Look a service up, once the reply shows (a run that fails before its stream's
        first flush, on a loaded machine, says why in a message of its own)."""
        await asyncio.wait_for(streamer.opened.wait(), 10)
        return f"{service}: green"

    script = [{"text": "Looking. ", **call("lookup", service="api")},
              {"error": "overloaded"}]
    async with make_runtime(script, [looked_up], deliverers={"chat": chat}) as (rt, _):
        run = await rt.send("t", "status?", origin=ROOM)
        await rt.idle()
    assert run.state is S.FAILED
    (message,) = chat.streamer.messages.values()
    assert message.text == "Looking. \nSorry, I could not finish this (the model service " \
                           "failed)."
    assert chat.posted == [] and not message.streaming


async def test_a_platform_that_refuses_to_stream_gets_the_reply_as_a_message(
        make_runtime: Any) -> None:
    chat = MemoryChat(stream=True)
    assert chat.streamer is not None
    streamer = chat.streamer
    streamer.fail_open = True

    @tool(name="lookup")
    async def looked_up(service: str) -> str:
        """Look a service up, once the stream was refused (a run that ends before its
        first flush opens none: its reply is posted whole anyway)."""
        await asyncio.wait_for(streamer.refused.wait(), 10)
        return f"{service}: green"

    script = [{"text": "Let me look. ", **call("lookup", service="api")},
              {"text": ANSWER, "chunks": 3}]
    async with make_runtime(script, [looked_up], deliverers={"chat": chat}) as (rt, _):
        run = await rt.send("t", "hi", origin=ROOM)
        await rt.idle()
        found = {d.kind: d for d in await rt.records.deliveries(run_id=run.id)}
    stream, reply = found["stream"], found["reply"]
    assert [p.text for p in chat.posted] == [ANSWER]
    assert chat.streamer.messages == {}
    assert isinstance(stream, StreamDelivery) and stream.state == "finished"
    assert reply.remote_id == chat.posted[0].id


@pytest.mark.parametrize("recorded", [True, False], ids=["ids-recorded", "ids-lost"])
async def test_a_stream_cut_off_by_a_crash_is_finished_with_the_answer(
        tmp_path: Path, recorded: bool) -> None:
    """The first process opened the stream and died (with or without the message's id in
    the store); the run is taken up again: it is not streamed a second time, and its
    reply replaces the half-written message's text. One message, the final answer."""
    chat = MemoryChat(stream=True)
    db = tmp_path / "m.db"
    async with SQLiteStore(db) as store:
        # What the dead process left: the run, its stream open on the platform.
        run = await store.create_run(Run(id=new_run_id(1.0), thread_id="t",
                                         text="how did the deploy go?", created_at=1.0,
                                         updated_at=1.0, origin=ROOM))
        stream = StreamDelivery(key="stream-1", run_id=run.id, thread_id="t",
                                channel="chat", target=ROOM.target, created_at=run.created_at)
        await store.commit(Checkpoint("t", None, deliveries=[stream]))
        assert chat.streamer is not None
        (opened,) = await chat.streamer.open_stream(stream, "The deploy we", [])
        if recorded:
            await store.stream_progress("stream-1", "streaming", [opened], at=1.0)
        runtime = Runtime(store, ScriptedProvider([{"text": ANSWER, "chunks": 5}]),
                          deliverers={"chat": chat})
        async with runtime:  # recovery drives the run to its end
            done = await runtime.wait(run.id)
            deliveries = await runtime.records.deliveries(run_id=run.id)
    assert done.state is S.COMPLETED
    assert chat.streamer.visible() == [ANSWER]
    assert not chat.streamer.messages[opened].streaming
    assert {d.kind: d.remote_id for d in deliveries} == {"stream": opened, "reply": opened}


async def test_a_stream_left_open_after_its_reply_was_recorded_is_tidied(
        tmp_path: Path) -> None:
    """Killed after the reply was recorded as shown by its stream, before the stream was
    recorded as finished: the next flush finishes it on the platform (idempotently) and
    records it; nothing is posted."""
    chat = MemoryChat(stream=True)
    assert chat.streamer is not None
    async with SQLiteStore(tmp_path / "m.db") as store:
        runtime = Runtime(store, ScriptedProvider([{"text": ANSWER}]), deliverers={"chat": chat})
        async with runtime:
            run = await runtime.send("t", "hi")  # no target: nothing of its own to deliver
            stream = StreamDelivery(key="stream-1", run_id=run.id, thread_id="t",
                                    channel="chat", target=ROOM.target, created_at=2.0)
            await store.commit(Checkpoint("t", None, deliveries=[stream]))
            (opened,) = await chat.streamer.open_stream(stream, ANSWER, [])
            await store.stream_progress("stream-1", "streaming", [opened], at=3.0)
            await runtime.operator.flush_deliveries()
            (tidied,) = await runtime.records.deliveries(run_id=run.id)
    assert isinstance(tidied, StreamDelivery) and tidied.state == "finished"
    assert tidied.remote_ids == (opened,) and chat.posted == []
    assert chat.streamer.visible() == [ANSWER] and not chat.streamer.messages[opened].streaming


async def test_a_cancelled_run_ends_its_stream_with_the_reason(make_runtime: Any) -> None:
    chat = MemoryChat(stream=True)
    assert chat.streamer is not None
    streamer = chat.streamer
    started = asyncio.Event()

    @tool
    async def slow(service: str) -> str:
        """Take a while, once the stream shows (cancelled before its first flush, a run
        opens none)."""
        await asyncio.wait_for(streamer.opened.wait(), 10)
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return service

    script = [{"text": "Working on it. ", **call("slow", service="api")}, {"text": "never"}]
    async with make_runtime(script, [slow], deliverers={"chat": chat}) as (rt, _):
        run = await rt.submit("t", "go", origin=ROOM)
        await asyncio.wait_for(started.wait(), 10)
        cancelled = await rt.cancel(run.id, by="ops")
        await rt.idle()
    assert cancelled.state is S.CANCELLED
    (message,) = streamer.messages.values()
    assert message.text.startswith("Working on it. \n") and not message.streaming
    assert "ops" in message.text.splitlines()[-1] and chat.posted == []


@asynccontextmanager
async def streamed_apart(tmp_path: Path, chat: MemoryChat) -> AsyncIterator[
        tuple[SQLiteStore, Run, LiveReplies, asyncio.Future[None], asyncio.Task[None]]]:
    """A run answered through a channel that does not stream, and ``LiveReplies`` over
    ``chat`` fed its events by hand; with the send of what the run left unsent as it
    started (``after``), done once ``unsent`` is."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        runtime = Runtime(store, ScriptedProvider([{"text": ANSWER}]),
                          deliverers={"chat": MemoryChat()})  # the run's own: no stream
        async with runtime:
            run = await runtime.send("t", "hi", origin=ROOM)
            await runtime.idle()
            live = LiveReplies(store, {"chat": chat}, clock=lambda: 5.0)
            unsent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            after = asyncio.create_task(awaited(unsent))
            yield store, run, live, unsent, after
            await after


async def awaited(unsent: asyncio.Future[None]) -> None:
    await unsent


async def test_a_run_that_ended_before_its_stream_opened_opens_none(tmp_path: Path) -> None:
    """Its stream waited for what the run left unsent (a resumed run's earlier notice) and
    the run ended meanwhile: no stream is opened after the end, the reply goes out whole
    (chaos finding 28: a stream opened after the end raced the reply another replica sent,
    and the answer showed twice)."""
    chat = MemoryChat(stream=True)
    assert chat.streamer is not None
    async with streamed_apart(tmp_path, chat) as (store, run, live, unsent, after):
        live.on_event(RunStarted(run_id=run.id, thread_id="t"), after=after)
        live.on_event(TextDelta(run_id=run.id, thread_id="t", text=ANSWER))
        live.on_event(RunEnded(run_id=run.id, thread_id="t", kind="run.completed",
                               state=RunState.COMPLETED, reason="answered"))
        unsent.set_result(None)  # what it left unsent is sent: the stream may go on
        assert await live.finish(ReplyDelivery(
            key="reply-1", run_id=run.id, thread_id="t", channel="chat",
            target=ROOM.target, text=ANSWER, created_at=4.0)) is False
        kinds = [d.kind for d in await store.deliveries(run_id=run.id)]
    assert chat.streamer.messages == {}  # nothing streamed: the reply is posted whole
    assert "stream" not in kinds


async def test_a_life_that_left_before_its_stream_began_shows_nothing(tmp_path: Path) -> None:
    """A run's first life here still waited for what the run had left unsent when it lost
    a commit and left; its next life begins: the first shows nothing, ever (not even once
    what it waited for is sent), and the next streams its own answer."""
    chat = MemoryChat(stream=True)
    assert chat.streamer is not None
    async with streamed_apart(tmp_path, chat) as (store, run, live, unsent, after):
        live.on_event(RunStarted(run_id=run.id, thread_id="t"), after=after)
        live.on_event(TextDelta(run_id=run.id, thread_id="t", text="The first li"))
        live.on_event(RunStarted(run_id=run.id, thread_id="t"))  # the next life
        unsent.set_result(None)
        live.on_event(TextDelta(run_id=run.id, thread_id="t", text=ANSWER))
        await asyncio.wait_for(chat.streamer.opened.wait(), 10)
        live.on_event(RunEnded(run_id=run.id, thread_id="t", kind="run.completed",
                               state=RunState.COMPLETED, reason="answered"))
        (reply,) = [d for d in await store.deliveries(run_id=run.id)
                    if isinstance(d, ReplyDelivery)]
        assert await live.finish(reply) is True
        await live.close()
    assert chat.streamer.visible() == [ANSWER]


class Offline(MemoryStreamer):
    """A streamer whose channel is not connected yet: every call raises, as Slack's does
    before its connection is up (``not connected yet``)."""

    offline = True

    async def finish_stream(self, stream: StreamDelivery, *, replace: str | None,
                            note: str | None, key: str, feedback: str | None = None
                            ) -> list[str]:
        if self.offline:
            raise DeliveryError("Slack agent session not set: not connected yet")
        return await super().finish_stream(stream, replace=replace, note=note, key=key,
                                           feedback=feedback)


async def test_a_stream_left_open_does_not_stop_a_start_while_its_channel_is_down(
        tmp_path: Path) -> None:
    """chaos seed 9797: every replica died at start, again and again, with "Slack agent
    session not set: not connected yet". A stream a kill left open is finished by the
    start's sweep of the outbox; `maiden run` sweeps before its channels are up, and the
    channel's refusal ended the start. It stays for a later sweep."""
    chat = MemoryChat(stream=True)
    chat.streamer = streamer = Offline(chat)
    async with SQLiteStore(tmp_path / "m.db") as store:
        run = await store.create_run(Run(id=new_run_id(1.0), thread_id="t", text="hi",
                                         state=RunState.CANCELLED,
                                         origin=Origin(channel="chat", target={"to": "t"})))
        opened = await streamer.open_stream(StreamDelivery(
            key="s", run_id=run.id, thread_id="t", channel="chat", target={"to": "t"},
            created_at=1.0), "partial", [])
        await store.commit(Checkpoint("t", None, deliveries=[StreamDelivery(
            key="s", run_id=run.id, thread_id="t", channel="chat", target={"to": "t"},
            created_at=1.0)]))
        await store.stream_progress("s", "streaming", opened, at=2.0)
        async with Runtime(store, EchoProvider(), deliverers={"chat": chat}) as rt:
            (left,) = await store.deliveries(pending=True)  # the start went on without it
            assert isinstance(left, StreamDelivery) and left.state == "streaming"
            streamer.offline = False
            await rt.operator.flush_deliveries()
        (done,) = await store.deliveries(run_id=run.id)
        assert isinstance(done, StreamDelivery) and done.state == "finished"
        assert not streamer.messages[opened[0]].streaming


class ShowsTheAnswer(MemoryStreamer):
    """Sets ``shown`` once a stream shows ``ANSWER`` whole."""

    def __init__(self, chat: MemoryChat) -> None:
        super().__init__(chat)
        self.shown = asyncio.Event()

    async def append_stream(self, stream: StreamDelivery, text: str,
                            tools: Sequence[ToolUpdate]) -> list[str]:
        ids = await super().append_stream(stream, text, tools)
        if ANSWER in self.messages[ids[-1]].text:
            self.shown.set()
        return ids


class LosesTheEnd(SQLiteStore):
    """Refuses the commit that ends a run, once, as another writer's move would
    (``StaleWrite``), after the run's answer shows in its stream: the run's first life
    leaves and is taken up again later, in the same process."""

    def __init__(self, path: Path, streamer: ShowsTheAnswer) -> None:
        super().__init__(path)
        self.streamer = streamer
        self.lost = asyncio.Event()

    async def commit(self, checkpoint: Checkpoint) -> None:
        if not self.lost.is_set() and any(t.target is S.COMPLETED
                                          for t in checkpoint.transitions):
            await asyncio.wait_for(self.streamer.shown.wait(), 10)
            self.lost.set()
            raise StaleWrite(f"thread {checkpoint.thread_id!r} moved past position "
                             f"{checkpoint.position}")
        await super().commit(checkpoint)


class AskedAgain(ScriptedProvider):
    """The script, but its last turn, asked for a second time, answers ``again``."""

    def __init__(self, turns: list[dict[str, Any]], again: str) -> None:
        super().__init__(turns)
        self.again = ScriptedTurn(text=again, chunks=4)

    async def complete(self, request: Any, on_text: Any = None) -> Any:
        last = len(self.turns) - 1
        if sum(isinstance(e, AssistantTurn) for e in request.entries) == last \
                and last in self.played:
            self.turns[last] = self.again
        return await super().complete(request, on_text)


@pytest.mark.parametrize("again", [ANSWER, "It went out at 09:14; all green."],
                         ids=["same-answer", "another-answer"])
async def test_a_run_taken_up_again_after_losing_its_end_shows_its_answer_once(
        tmp_path: Path, again: str) -> None:
    """chaos seed 9999 (finding 42): a run streamed its whole answer, lost its last commit
    to another writer, and was taken up again in the same process; the model, asked again,
    answered the same, and Slack showed `answer…answer…`: the second life's text was
    appended to the stream the first had opened. The reply replaces what the first life
    showed: one message, the answer of the life that ended the run."""
    chat = MemoryChat(stream=True)
    chat.streamer = streamer = ShowsTheAnswer(chat)

    @tool(name="lookup")
    async def looked_up(service: str) -> str:
        """Look a service up, once the reply shows."""
        await asyncio.wait_for(streamer.opened.wait(), 10)
        return f"{service}: green"

    script = [{"text": "Let me look. ", "chunks": 2, **call("lookup", service="api")},
              {"text": ANSWER, "chunks": 4}]
    model = AskedAgain(script, again)
    store = LosesTheEnd(tmp_path / "m.db", streamer)
    rt = Runtime(store, model, ToolRegistry([looked_up]),
                 deliverers={"chat": chat})
    async with store:
        await rt.start(serve=False)  # the control loop's upkeep is called below
        try:
            run = await rt.submit("t", "how did the deploy go?", origin=ROOM)
            async with asyncio.timeout(20):
                await store.lost.wait()
                await rt.idle()
                assert (await rt.records.get_run(run.id)).state is S.RUNNING  # left
                await rt._upkeep.adopt_orphans()  # as the control loop does now and then
                done = await rt.wait(run.id)
                await rt.idle()
            deliveries = {d.kind: d for d in await rt.records.deliveries(run_id=run.id)}
        finally:
            await rt.close()
    assert done.state is S.COMPLETED and done.reply == again and len(model.calls) == 3
    assert streamer.visible() == [again] and chat.posted == []
    (message,) = streamer.messages.values()
    assert not message.streaming
    stream, reply = deliveries["stream"], deliveries["reply"]
    assert isinstance(stream, StreamDelivery) and stream.state == "finished"
    assert reply.remote_id == message.id
