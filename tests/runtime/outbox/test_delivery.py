"""The outbox (``runtime/outbox/delivery.py``): a run's messages go out in their order, even when
a retry of the outbox is posting one of them as the run ends. Against a real SQLite store
and the reference chat channel."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from runtime import Delivery, Origin, ReplyDelivery, Run, RunStarted, RunState, SQLiteStore
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
        outbox = Outbox(store, born=0.0, deliverers={"chat": chat})

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


async def test_what_a_run_left_unsent_as_it_started_goes_out_once_before_its_answer(
        tmp_path: Path) -> None:
    """``RunStarted.unsent``: the outbox sends a notice the run wrote as it started. The run
    ended before that send read the outbox, and its end sends the answer: each goes out once,
    in order, and neither send waits for the other (nor for the answer's stream, which has
    nothing to show before the notice is out)."""
    async with SQLiteStore(tmp_path / "d.db") as store:
        run = await store.create_run(Run(id="0" * 12 + "b" * 20, thread_id="t", text="hi",
                                         state=RunState.COMPLETED,
                                         origin=Origin(channel="chat", target=TARGET,
                                                       user="U1")))
        later = time.time() + 60  # written after the run started here
        notice, answer = (ReplyDelivery(key=key, run_id=run.id, thread_id="t", channel="chat",
                                        target=TARGET, text=key, created_at=at,
                                        answer=key == "answer")
                          for key, at in (("notice", later), ("answer", later + 1)))
        await store.commit(Checkpoint("t", None, deliveries=[notice, answer]))
        chat = MemoryChat(stream=True)
        outbox = Outbox(store, born=0.0, deliverers={"chat": chat})
        outbox.on_event(RunStarted(run_id=run.id, thread_id="t", unsent=True))
        async with asyncio.timeout(10):
            await outbox.send_pending(run)  # the run has ended
            await outbox.close()
        assert [m.text for m in chat.posted] == ["notice", "answer"]
        assert all(d.remote_id for d in await store.deliveries(run_id=run.id))
