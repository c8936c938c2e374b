"""The outbox (``runtime/outbox/delivery.py``): a run's messages go out in their order, even when
a retry of the outbox is posting one of them as the run ends. Against a real SQLite store
and the reference chat channel."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from chaos.proxy import Proxy
from runtime import (
    Delivery,
    EchoProvider,
    FileSource,
    ModelRequest,
    ModelResponse,
    Origin,
    ReplyDelivery,
    Run,
    RunStarted,
    RunState,
    Runtime,
    SQLiteStore,
)
from runtime.outbox.delivery import Outbox
from runtime.providers.base import TextSink
from runtime.stores.base import Checkpoint
from runtime.stores.postgres import PostgresStore
from tests.fakes.chat import MemoryChat
from tests.logs import Heard
from tests.postgres import cuttable, fresh_schema

TARGET = {"room": "r1"}
CHAT = Origin(channel="chat", target=TARGET, user="U1")


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


class HeldEcho(EchoProvider):
    """The offline model, answering once ``go`` is set."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None
                       ) -> ModelResponse:
        await self.go.wait()
        return await super().complete(request, on_text)


class CuttingChat(MemoryChat):
    """The reference channel; its first post cuts the store off (``proxy.cut()``) as it is
    made, so that neither the post nor its failure can be recorded."""

    def __init__(self, proxy: Proxy) -> None:
        super().__init__()
        self.proxy = proxy

    async def send(self, delivery: Delivery) -> str:
        posted = await super().send(delivery)
        if len(self.posted) == 1:
            self.proxy.cut()
        return posted


async def test_a_notice_posted_as_the_store_was_cut_is_not_posted_again_at_the_runs_end(
        ) -> None:
    """Chaos finding 33 (seed 9191, PostgreSQL): a refused file's notice, sent as its run
    started, was posted while the store was cut; neither the post nor the failure could be
    recorded, so the record was left as the run wrote it, tried by no one. At the run's end
    this process took it for its own never tried, and posted it again without asking the
    channel first: the place was told twice it could not read the file."""
    chat, model = None, HeldEcho()
    async with fresh_schema() as schema, cuttable() as (proxy, dsn), \
            PostgresStore(dsn, schema=schema, pool_size=2) as store:
        chat = CuttingChat(proxy)
        with Heard("maiden.delivery", "could not record why the send failed") as heard:
            async with Runtime(store, model, channels=["slack"],
                               deliverers={"chat": chat}) as rt:
                run = await rt.submit("t", "look", origin=CHAT, fetch=[FileSource(
                    via="chat", url="u/shot.png", name="shot.png", media_type="image/png")])
                async with asyncio.timeout(20):
                    await heard.said.wait()
                    proxy.restore()
                    model.go.set()
                    done = await rt.wait(run.id)
        assert done.state is RunState.COMPLETED
        notices = [m.text for m in chat.posted if "could not read" in m.text]
        assert notices == ["I could not read shot.png: the chat channel is not running here "
                           "to download it."]
        assert [m.kind for m in chat.posted].count("reply") == 2  # the notice, the answer
