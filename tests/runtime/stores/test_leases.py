"""The store contract, leases (DESIGN §3): one holder at a time, by the store's clock, on every
backend; and the threads' news between processes, where the store can tell it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runtime.model.requests import thread_key
from runtime.stores.base import Checkpoint
from tests.runtime.stores.contract import AnyStore, S, advance, started


async def test_leases(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    assert await store.take_lease("thread:t1", "a", 30) is None
    assert await store.take_lease("thread:t1", "a", 30) is None  # its own: renewed
    async with new_store() as other:  # another process cannot take it, and sees who has it
        assert await other.take_lease("thread:t1", "b", 30) == "a"
        assert await other.take_lease("thread:t2", "b", 30) is None
        assert [(x.name, x.holder) for x in await other.leases()] == \
            [("thread:t1", "a"), ("thread:t2", "b")]
        # A holder known to be dead loses it at once.
        assert await other.take_lease("thread:t1", "b", 30, steal_from="a") is None
        assert await store.take_lease("thread:t1", "a", 30) == "b"
        assert await other.renew_leases("b", 30) == ["thread:t1", "thread:t2"]
        assert await store.renew_leases("a", 30) == []
        await other.release_leases("b", ["thread:t1"])
        assert await store.take_lease("thread:t1", "a", 30) is None
        await store.release_leases("c", ["thread:t1", "thread:t2"])  # not c's: kept
        assert [x.holder for x in await other.leases()] == ["a", "b"]
        await other.release_leases("b")
        assert [x.name for x in await store.leases()] == ["thread:t1"]
        assert 0 < (await store.leases())[0].expires_in <= 30


async def test_a_lease_expires_by_the_stores_clock(store: AnyStore) -> None:
    assert await store.take_lease("discord:gateway", "a", 0.2) is None
    assert await store.take_lease("discord:gateway", "b", 30) == "a"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while await store.take_lease("discord:gateway", "b", 30) is not None:
        assert loop.time() < deadline, "the lease never expired"
        await asyncio.sleep(0.05)
    assert await store.renew_leases("a", 30) == []  # expired, and taken: not renewed
    assert [(x.name, x.holder) for x in await store.leases()] == [("discord:gateway", "b")]


async def test_two_takers_of_one_lease_one_wins(new_store: Callable[[], AnyStore]) -> None:
    async with new_store() as one, new_store() as two:
        for round_ in range(10):
            name = f"thread:race-{round_}"
            got = await asyncio.gather(one.take_lease(name, "a", 30),
                                       two.take_lease(name, "b", 30))
            assert sorted(map(str, got)) in (["None", "a"], ["None", "b"]), got


async def test_the_threads_news(store: AnyStore, backend: str,
                                new_store: Callable[[], AnyStore]) -> None:
    """PostgreSQL tells every listener, in any process, of a thread asked for and of a run
    that stops being driven (its checkpoint, once committed); the others cannot tell, and
    their readers poll."""
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    stop = await store.listen_threads(lambda news, key: heard.put_nowait((news, key)))
    try:
        async with new_store() as other:
            await other.ask_for_thread("a/b\u2028" + "x" * 10_000)
            running = await started(other, "t1")
            await other.commit(Checkpoint("t1", None, run=running.model_copy(
                update={"version": running.version + 1})))  # still driven: no news
            ended, step = advance(running.model_copy(update={"version": running.version + 1}),
                                  S.COMPLETED, "answered")
            await other.commit(Checkpoint("t1", None, run=ended, transitions=[step]))
        if backend != "postgres":
            assert heard.empty()
            return
        async with asyncio.timeout(10):
            assert await heard.get() == ("asked", thread_key("a/b\u2028" + "x" * 10_000))
            assert await heard.get() == ("ended", thread_key("t1"))
        assert heard.empty()
    finally:
        await stop()
    await stop()  # stopping twice is fine
