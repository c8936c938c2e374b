"""The store contract, leases (DESIGN §3): one holder at a time, by the store's clock, on every
backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tests.stores.contract import AnyStore


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
