"""A thread's replies go out in the order of its runs (``runtime/outbox/delivery.py``), even when an
older one was left in the outbox: written before its channel was up (after a restart,
``maiden run`` finishes unfinished runs before it opens its channels), or its send failed.
The chaos soak's finding 3, ``slack-replies-out-of-order`` (chaos/README.md). Against a
real SQLite store and the reference chat channel (tests/fakes/chat.py), whose ``posted``
list is what a person sees, in order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from runtime import (
    AgentConfig,
    Delivery,
    DeliveryError,
    Origin,
    ReplyDelivery,
    Run,
    RunState,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    StreamDelivery,
    ToolRegistry,
    ToolUpdate,
)
from runtime.outbox.delivery import ORDER_HOLD_S, Outbox
from runtime.stores.base import Checkpoint
from tests.fakes.chat import MemoryChat, MemoryStreamer, Posted

ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")
OTHER = Origin(channel="chat", target={"room": "r1", "user": "u2"}, user="u2")
"""Another person in the same room, whose target names them (as a Slack stream's names the
person it is for): the same thread's messages all the same."""
SCRIPT = [{"text": "answer one"}, {"text": "answer two"}]
"""Each run of the thread answers with the next turn (the scripted model counts the
thread's assistant turns)."""


class ConnectingChat(MemoryChat):
    """The reference channel, not connected yet while ``offline`` says why (as Slack's and
    Discord's deliverers are while their channel connects): a send fails at once. With
    ``stream``, its streamer too; ``seen`` is what a person sees appear, in order: each
    post, and each stream as it opens."""

    def __init__(self, offline: str | None = "not connected yet", *,
                 stream: bool = False) -> None:
        super().__init__()
        self.offline = offline
        self.seen: list[str] = []
        if stream:
            self.streamer = SeenStreamer(self)

    async def send(self, delivery: Delivery) -> str:
        if self.offline is not None:
            raise DeliveryError(f"not tried: {self.offline}")
        posted = await super().send(delivery)
        self.seen.append(f"post: {delivery.text}")
        return posted


class SeenStreamer(MemoryStreamer):
    """The reference streamer, noting each stream as it opens in its channel's ``seen``;
    opening none while its channel is not connected."""

    chat: ConnectingChat

    async def open_stream(self, stream: StreamDelivery, text: str,
                          tools: Sequence[ToolUpdate]) -> list[str]:
        if self.chat.offline is not None:
            return []  # as Slack's and Discord's: the reply goes out whole once connected
        ids = await super().open_stream(stream, text, tools)
        self.chat.seen.append(f"stream: {text}")
        return ids


@asynccontextmanager
async def serving(tmp_path: Path, script: Sequence[dict[str, Any]] = SCRIPT,
                  chat: MemoryChat | None = None) -> AsyncIterator[Runtime]:
    """A runtime that does not sweep its outbox now and then (``start(serve=False)``), built
    with ``chat``'s deliverer, if any: what is posted is what the run's end, or a channel
    coming up, sends."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        rt = Runtime(store, ScriptedProvider(script), ToolRegistry(), agent=AgentConfig(),
                     deliverers={"chat": chat} if chat is not None else None)
        await rt.start(serve=False)
        try:
            yield rt
        finally:
            await rt.close()  # waits for what it started in the background


async def test_replies_left_in_the_outbox_before_the_channel_was_up_go_out_first(
        tmp_path: Path) -> None:
    """slack-replies-out-of-order: the first run ends before the channel is up (its
    deliverer still connecting, as Slack's is during `maiden run`'s recovery): its reply
    stays in the outbox. The channel connects and the thread's next run is answered at
    once: the first reply goes out before it."""
    chat = ConnectingChat()
    async with serving(tmp_path, chat=chat) as rt:
        first = await rt.send("t", "one", origin=ROOM)
        await rt.idle()  # its worker is done with it: its send failed fast, nothing posted
        assert first.state is RunState.COMPLETED and chat.posted == []
        chat.offline = None  # connected; no sweep of the outbox has come yet
        second = await rt.send("t", "two", origin=OTHER)
        await rt.idle()
        sent = {d.run_id: d.remote_id for d in await rt.records.deliveries()}
    assert [p.text for p in chat.posted] == ["answer one", "answer two"]
    assert sent == {first.id: "m1", second.id: "m2"}


async def test_a_reply_is_not_streamed_ahead_of_the_threads_older_ones(
        tmp_path: Path) -> None:
    """The same, where the channel shows replies as they are written: the next run's
    answer would appear (its stream opening as the model writes) before the first reply,
    which its end sends. It is not streamed while an older one waits: posted whole, after
    it. (The soak's seed 500 showed this once the first cause was fixed.)"""
    chat = ConnectingChat(stream=True)
    async with serving(tmp_path, [{"text": "answer one"}, {"text": "answer two", "chunks": 3},
                                  {"text": "answer three"}], chat=chat) as rt:
        await rt.send("t", "one", origin=ROOM)
        await rt.idle()
        chat.offline = None
        await rt.send("t", "two", origin=OTHER)
        await rt.idle()
        # The thread's next run, nothing waiting any more: streamed (or, on a machine so
        # loaded that the run ends before its stream's first flush, posted whole: a run
        # that ended first opens no stream, chaos finding 28); after them either way.
        await rt.send("t", "three", origin=ROOM)
        await rt.idle()
    assert chat.seen[:2] == ["post: answer one", "post: answer two"]
    assert chat.seen[2:] in (["stream: answer three"], ["post: answer three"])


async def test_a_reply_whose_send_failed_goes_out_before_the_next_runs(
        tmp_path: Path) -> None:
    """The first reply's send fails (the connection dropped before it reached the
    channel): the next run's end sends it again first, then its own."""
    chat = MemoryChat()
    async with serving(tmp_path, chat=chat) as rt:
        chat.fail = "before"
        await rt.send("t", "one", origin=ROOM)
        await rt.idle()
        assert chat.posted == []
        await rt.send("t", "two", origin=ROOM)
        await rt.idle()
    assert [p.text for p in chat.posted] == ["answer one", "answer two"]


async def test_a_channel_up_late_gets_what_waited_for_it_at_once_in_order(
        tmp_path: Path) -> None:
    """Two replies of a thread and one of another wait in the outbox (their channel not
    connected yet): once it is, what its channel asks for (``flush_deliveries``, as
    ``channels.retry.Reach`` does on connecting) goes out at once, each thread's in order,
    without waiting for the outbox's sweep; the thread's next run is answered after them."""
    chat = ConnectingChat()
    async with serving(tmp_path, [{"text": "answer one"}, {"text": "answer two"},
                                  {"text": "answer three"}], chat=chat) as rt:
        await rt.send("t", "one", origin=ROOM)
        await rt.send("t", "two", origin=ROOM)
        await rt.send("u", "elsewhere", origin=ROOM)
        await rt.idle()
        assert chat.posted == []
        chat.offline = None
        await rt.operator.flush_deliveries("chat")
        await rt.send("t", "three", origin=ROOM)
        await rt.idle()
    texts = [p.text for p in chat.posted]
    assert sorted(texts) == ["answer one", "answer one", "answer three", "answer two"]
    assert [t for t in texts if t != "answer one"] == ["answer two", "answer three"]
    assert texts.index("answer one") < texts.index("answer two")


async def test_a_deliverer_built_in_gets_what_waited_when_start_sends_it(
        tmp_path: Path) -> None:
    """A runtime built with a deliverer (as the crash drills' are) sends it what waited when
    ``start`` does, after recovery: not twice."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        rt = Runtime(store, ScriptedProvider(SCRIPT), ToolRegistry())
        await rt.start(serve=False)
        await rt.send("t", "one", origin=ROOM)
        await rt.close()
        chat = MemoryChat()
        again = Runtime(store, ScriptedProvider(SCRIPT), ToolRegistry(),
                        deliverers={"chat": chat})
        async with again:
            await again.idle()
    assert [p.text for p in chat.posted] == ["answer one"]


# -- the outbox on its own: who sends a thread's older records, and how long order holds


def _reply(run: Run, key: str, at: float) -> ReplyDelivery:
    return ReplyDelivery(key=key, run_id=run.id, thread_id=run.thread_id, channel="chat",
                         target=dict(ROOM.target), text=key, created_at=at)


async def _two_replies(store: SQLiteStore, first_at: float) -> tuple[Run, Run]:
    """Two completed runs of thread ``t`` whose replies are in the outbox, not sent."""
    runs = []
    for n, at in ((1, first_at), (2, first_at + 1)):
        run = await store.create_run(Run(id=f"{n:012x}" + "a" * 20, thread_id="t",
                                         text=str(n), state=RunState.COMPLETED,
                                         origin=ROOM, owner="other" if n == 1 else "me"))
        await store.commit(Checkpoint("t", None, deliveries=[_reply(run, f"k{n}", at)]))
        runs.append(run)
    return runs[0], runs[1]


def _owned_by(owner: str) -> Callable[[], Callable[[str], Any]]:
    """``Outbox``'s ``elsewhere``: another live process owns run 1 (made ``owner``)."""
    def check() -> Callable[[str], Any]:
        async def elsewhere(run_id: str) -> bool:
            return run_id.startswith("000000000001") and owner == "alive"
        return elsewhere
    return check


async def test_a_reply_waits_behind_an_older_one_another_live_process_owns(
        tmp_path: Path) -> None:
    """Run 1's reply is its owner's to send (another live process, which may be sending it
    now): the next run's end does not send it, and leaves its own behind it, for the sweep
    once the owner has sent run 1's. Exactly once, in order."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        now = 1000.0
        _, two = await _two_replies(store, first_at=now - 5)
        chat = MemoryChat()
        outbox = Outbox(store, born=0.0, clock=lambda: now, elsewhere=_owned_by("alive"),
                        deliverers={"chat": chat})
        await outbox.send_pending(two)
        assert chat.posted == []
        await outbox.flush()  # the sweep, while run 1's owner has not sent it yet
        assert chat.posted == []
        # Its owner sends it.
        chat.posted.append(Posted(id="m0", key="k1", kind="reply", text="k1"))
        await store.mark_delivered("k1", "m0", at=now)
        await outbox.flush()
    assert [p.key for p in chat.posted] == ["k1", "k2"]


async def test_order_holds_for_a_while_only_behind_a_reply_that_cannot_go(
        tmp_path: Path) -> None:
    """A reply that cannot go (another live process owns it and does not send it) holds the
    thread's later ones back for ``ORDER_HOLD_S`` only: a message stuck for good must not
    silence the conversation."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        now = 1000.0
        _, two = await _two_replies(store, first_at=now - ORDER_HOLD_S - 1)
        chat = MemoryChat()
        outbox = Outbox(store, born=0.0, clock=lambda: now, elsewhere=_owned_by("alive"),
                        deliverers={"chat": chat})
        await outbox.send_pending(two)
    assert [p.key for p in chat.posted] == ["k2"]


async def test_an_older_reply_whose_owner_is_gone_is_sent_first_reconciled(
        tmp_path: Path) -> None:
    """Run 1's owner is gone (crashed after writing its reply; it may have posted it): the
    next run's end sends it first, asking the channel first, so it is not posted twice."""
    async with SQLiteStore(tmp_path / "m.db") as store:
        _, two = await _two_replies(store, first_at=10.0)
        chat = MemoryChat()
        # Posted, its id never recorded.
        chat.posted.append(Posted(id="m0", key="k1", kind="reply", text="k1"))
        outbox = Outbox(store, born=0.0, clock=lambda: 20.0, elsewhere=_owned_by("gone"),
                        deliverers={"chat": chat})
        await outbox.send_pending(two)
        sent = {d.key: d.remote_id for d in await store.deliveries()}
    assert [p.key for p in chat.posted] == ["k1", "k2"]
    assert sent == {"k1": "m0", "k2": "m2"}


async def test_replies_go_out_in_the_order_their_runs_arrived_whatever_the_writers_clock(
        tmp_path: Path) -> None:
    """chaos (the 30-minute run on 663d525): two answers of a Discord thread swapped. The
    second run's replica had its clock 3.3 s behind: its reply's record was stamped before
    the first's, which waited in the outbox, so it went first. Here one runtime's clock goes
    back 5 s between the two runs (as a replica's behind another's): the thread's runs are
    stamped in the order they arrived, and the replies go out in that order."""
    now = [1_000_000.0]
    chat = ConnectingChat()
    async with SQLiteStore(tmp_path / "m.db") as store:
        rt = Runtime(store, ScriptedProvider(SCRIPT), ToolRegistry(), agent=AgentConfig(),
                     clock=lambda: now[0], deliverers={"chat": chat})
        await rt.start(serve=False)
        try:
            first = await rt.send("t", "one", origin=ROOM)  # not connected yet: it waits
            await rt.idle()
            now[0] -= 5.0  # this writer's clock, behind the one that wrote the first
            second = await rt.send("t", "two", origin=OTHER)
            await rt.idle()
            records = {d.run_id: d for d in await rt.records.deliveries(pending=True)}
            assert records[second.id].created_at < records[first.id].created_at
            chat.offline = None  # up: what waited goes out, in order
            await rt.operator.flush_deliveries("chat")
        finally:
            await rt.close()
    assert second.created_at >= first.created_at
    assert [p.text for p in chat.posted] == ["answer one", "answer two"]
