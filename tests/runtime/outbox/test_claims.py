"""A reply left in the outbox by a process that is gone is sent by one replica, not by each
whose flush comes round (the chaos soak's finding 10: a Slack answer shown twice). Every
live replica took a dead owner's record as its own, and two of them reconciled (the thread
read back: not there) and posted at once; a replica now sends it only with the thread's
lease (``Leases.sending``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runtime import Delivery, EchoProvider, Origin, Runtime, RuntimeConfig, SQLiteStore
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
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        a = Runtime(store_a, EchoProvider(), settings=settings)
        b = Runtime(store_b, EchoProvider(), settings=settings)
        a.operator.add_deliverer("chat", chat)
        b.operator.add_deliverer("chat", chat)
        await a.start(recover=False, serve=True)
        await b.start(recover=False, serve=True)
        try:
            first = asyncio.create_task(a.operator.flush_deliveries("chat"))
            await asyncio.wait_for(chat.sending.wait(), 10)  # a's post is on its way
            await asyncio.wait_for(b.operator.flush_deliveries("chat"), 10)  # b's flush comes round
            chat.go.set()
            await asyncio.wait_for(first, 10)
        finally:
            await a.close()
            await b.close()
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
    async with SQLiteStore(db) as store_a, SQLiteStore(db) as store_b:
        a = Runtime(store_a, EchoProvider(), settings=settings)
        b = Runtime(store_b, EchoProvider(), settings=settings)
        a.operator.add_deliverer("chat", chat)
        b.operator.add_deliverer("chat", chat)
        await a.start(recover=False, serve=True)
        await b.start(recover=False, serve=True)
        try:
            ended = await a.records.get_run(run.id)
            # As a run's end (or a cancel) sends what it wrote: its own, here.
            own = asyncio.create_task(a._parts.outbox.send_pending(ended))
            await asyncio.wait_for(chat.sending.wait(), 10)  # a's post is on its way
            await asyncio.wait_for(b.operator.flush_deliveries("chat"), 10)  # b's sweep
            chat.go.set()
            await asyncio.wait_for(own, 10)
        finally:
            await a.close()
            await b.close()
    assert [m.text for m in chat.posted] == ["echo: hello"]
