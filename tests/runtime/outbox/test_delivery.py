"""The outbox (``runtime/outbox/delivery.py``): a run's messages go out in their order, even when
a retry of the outbox is posting one of them as the run ends. Against a real SQLite store
and the reference chat channel."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runtime import Delivery, Origin, ReplyDelivery, Run, RunState, SQLiteStore
from runtime.outbox.delivery import Outbox
from runtime.stores.base import Checkpoint
from tests.fakes.chat import MemoryChat

TARGET = {"room": "r1"}


class SlowChat(MemoryChat):
    """The reference channel, holding its first send until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.sending = asyncio.Event()
        self.go = asyncio.Event()

    async def send(self, delivery: Delivery) -> str:
        if not self.sending.is_set():
            self.sending.set()
            await self.go.wait()
        return await super().send(delivery)


async def test_a_runs_answer_waits_for_its_notice_that_a_retry_is_posting(
        tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "d.db") as store:
        run = await store.create_run(Run(id="0" * 12 + "a" * 20, thread_id="t", text="hi",
                                         state=RunState.COMPLETED,
                                         origin=Origin(channel="chat", target=TARGET)))
        notice, answer = (ReplyDelivery(key=key, run_id=run.id, thread_id="t", channel="chat",
                                        target=TARGET, text=key, created_at=at,
                                        answer=key == "answer")
                          for key, at in (("notice", 1.0), ("answer", 2.0)))
        await store.commit(Checkpoint("t", None, deliveries=[notice, answer]))
        chat = SlowChat()
        outbox = Outbox(store, born=0.0)
        outbox.add("chat", chat)

        async def elsewhere(run_id: str) -> bool:
            return False

        retry = asyncio.create_task(outbox.flush(elsewhere))  # posting the notice, slowly
        async with asyncio.timeout(10):
            await chat.sending.wait()
            ended = asyncio.create_task(outbox.send_pending(run))  # the run has ended
            # It waits for the notice: nothing is posted meanwhile (a bound, not a wait for
            # something to happen: posting the answer first took a few milliseconds).
            done, _ = await asyncio.wait([ended], timeout=0.3)
            assert not done and chat.posted == []
            chat.go.set()
            await asyncio.gather(retry, ended)
        assert [m.text for m in chat.posted] == ["notice", "answer"]
        assert [d.remote_id for d in await store.deliveries(run_id=run.id)] == ["m1", "m2"]
