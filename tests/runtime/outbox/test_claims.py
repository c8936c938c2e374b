"""A reply left in the outbox by a process that is gone is sent by one replica, not by each
whose flush comes round (the chaos soak's finding 10: a Slack answer shown twice). Every
live replica took a dead owner's record as its own, and two of them reconciled (the thread
read back: not there) and posted at once; a replica now sends it only with the thread's
lease (``Leases.sending``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from runtime import Delivery, EchoProvider, Origin, Runtime, RuntimeConfig, SQLiteStore
from runtime.stores.erasure import thread_lease
from tests.fakes.chat import MemoryChat

ROOM = Origin(channel="chat", target={"room": "r1"}, user="u1")


class HeldChat(MemoryChat):
    """A chat both replicas post to; the first send waits until ``go`` is set (a post on
    its way while the other replica's flush comes round)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()
        self.sending = asyncio.Event()

    async def send(self, delivery: Delivery) -> str:
        if not self.sending.is_set():
            self.sending.set()
            await self.go.wait()
        return await super().send(delivery)


@asynccontextmanager
async def two_replicas(db: Path, chat: MemoryChat, settings: RuntimeConfig
                       ) -> AsyncIterator[tuple[Runtime, Runtime]]:
    """Two serving runtimes on the store at ``db``, each posting to ``chat``."""
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        a = Runtime(store_a, EchoProvider(), settings=settings, deliverers={"chat": chat})
        b = Runtime(store_b, EchoProvider(), settings=settings, deliverers={"chat": chat})
        await a.start(recover=False, serve=True)
        await b.start(recover=False, serve=True)
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()


async def test_a_dead_owners_reply_is_sent_once_by_two_replicas_flushing_at_once(
        tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    chat = HeldChat()
    settings = RuntimeConfig(poll_interval_s=0.05, lease_linger_s=0)
    async with SQLiteStore(db) as gone_store, \
            Runtime(gone_store, EchoProvider(), settings=settings) as gone:
        # Its channel never came up here: the reply stays in the outbox; then it stops.
        run = await gone.send("t", "hello", origin=ROOM)
        assert [d.remote_id for d in await gone.records.deliveries(run_id=run.id)] == [None]
    async with two_replicas(db, chat, settings) as (a, b):
        first = asyncio.create_task(a.operator.flush_deliveries("chat"))
        await asyncio.wait_for(chat.sending.wait(), 10)  # a's post is on its way
        await asyncio.wait_for(b.operator.flush_deliveries("chat"), 10)  # b's flush comes round
        chat.go.set()
        await asyncio.wait_for(first, 10)
    assert [m.text for m in chat.posted] == ["echo: hello"]


async def test_a_runs_own_send_and_another_replicas_sweep_post_it_once(tmp_path: Path) -> None:
    """chaos finding 23 (the CI soak, seed 52: a queued Slack run stopped, its closing line
    shown twice): the process that ended a run sends its records as its own, without the
    thread's lease; a run that never started there has no owner, so another replica's sweep
    took the record as nobody's, claimed it with the lease, and posted it too. Its own send
    now takes the lease as well (held already at a run's end)."""
    db = tmp_path / "m.db"
    chat = HeldChat()
    settings = RuntimeConfig(poll_interval_s=0.05, lease_linger_s=0)
    async with SQLiteStore(db) as first_store, \
            Runtime(first_store, EchoProvider(), settings=settings) as first:
        run = await first.send("t", "hello", origin=ROOM)  # no channel yet: it waits
    async with two_replicas(db, chat, settings) as (a, b):
        ended = await a.records.get_run(run.id)
        # As a run's end (or a cancel) sends what it wrote: its own, here.
        own = asyncio.create_task(a._parts.outbox.send_pending(ended))
        await asyncio.wait_for(chat.sending.wait(), 10)  # a's post is on its way
        await asyncio.wait_for(b.operator.flush_deliveries("chat"), 10)  # b's sweep
        chat.go.set()
        await asyncio.wait_for(own, 10)
    assert [m.text for m in chat.posted] == ["echo: hello"]


async def test_an_owner_whose_lease_was_taken_over_does_not_post_what_the_other_posts(
        tmp_path: Path) -> None:
    """chaos finding 23 (seed 5252, the machine overloaded: a Discord answer posted twice):
    a's process starved past its lease, so b took the thread and sent a's reply; a, going
    on, still believed the lease its own (its memory says so until the renewal fails) and
    sent the reply too. The store's claim on the record, taken just before each send, lets
    one of them post it."""
    db = tmp_path / "m.db"
    chat = HeldChat()
    settings = RuntimeConfig(poll_interval_s=0.05, lease_linger_s=0, lease_ttl_s=60)
    async with SQLiteStore(db) as first_store, \
            Runtime(first_store, EchoProvider(), settings=settings) as first:
        run = await first.send("t", "hello", origin=ROOM)  # no channel yet: it waits
    async with two_replicas(db, chat, settings) as (a, b):
        name = thread_lease("t")
        assert await a._parts.leases.take(name) is None  # a holds the thread
        # a starves; its lease runs out in the store and b takes the thread over.
        assert await b._parts.store.take_lease(name, b._parts.leases.holder, 60,
                                                steal_from=a._parts.leases.holder) is None
        sweep = asyncio.create_task(b.operator.flush_deliveries("chat"))
        await asyncio.wait_for(chat.sending.wait(), 10)  # b's post is on its way
        assert a._parts.leases.holds(name)  # a does not know yet
        ended = await a.records.get_run(run.id)
        await asyncio.wait_for(a._parts.outbox.send_pending(ended), 10)  # a goes on
        chat.go.set()
        await asyncio.wait_for(sweep, 10)
    assert [m.text for m in chat.posted] == ["echo: hello"]
    [sent] = [d async for d in _deliveries(db, run.id)]
    assert sent.sender == b._parts.leases.holder


async def _deliveries(db: Path, run_id: str) -> AsyncIterator[Delivery]:
    async with SQLiteStore(db) as store:
        for delivery in await store.deliveries(run_id=run_id):
            yield delivery
