"""A lease let go of while PostgreSQL was out of reach is given up once it is back (the chaos
soak's finding 8, ``lease-left-after-worker-stopped``, chaos/README.md).

The store renews every lease it has of a holder, so a lease whose release failed (the
connection cut under it) would be renewed with the process's other leases for as long as it
lives: its thread held by a process with nothing to run. The store is cut through the
soak's own TCP proxy (chaos/proxy.py), as the soak cuts it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from runtime.errors import StoreError
from runtime.serving.leases import Leases
from runtime.stores.postgres import PostgresStore
from tests.postgres import PG_DSN, cuttable, fresh_schema

TTL_S = 1.5
WAIT_S = 10.0


async def held(store: PostgresStore) -> set[str]:
    return {lease.name for lease in await store.leases()}


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll the store (another process's view) until ``check()`` is true."""
    async with asyncio.timeout(WAIT_S):
        while not await check():  # noqa: ASYNC110 (another process's view: no event)
            await asyncio.sleep(0.1)


@pytest.mark.parametrize("fails", ["release", "take"])
async def test_a_lease_let_go_of_in_a_store_cut_is_given_up_once_it_is_back(
        fails: str) -> None:
    async with fresh_schema() as schema, cuttable() as (proxy, dsn), \
            PostgresStore(PG_DSN, schema=schema, pool_size=2) as seen, \
            PostgresStore(dsn, schema=schema, pool_size=2) as store:
        leases = Leases(store, "r0", TTL_S)
        try:
            assert await leases.take("role:discord-gateway") is None  # kept all along
            if fails == "release":
                assert await leases.take("thread:t") is None
                proxy.cut()
                with pytest.raises(StoreError):
                    await leases.release("thread:t")
            else:  # taken, but the answer lost: the store has it, the runtime does not
                await store.take_lease("thread:t", leases.holder, TTL_S)
                proxy.cut()
                with pytest.raises(StoreError):
                    await leases.take("thread:t")
            assert not leases.holds("thread:t")
            proxy.restore()

            async def given_up() -> bool:
                return await held(seen) == {"role:discord-gateway"}

            await until(given_up)  # before, it was renewed with the gateway's, for good
            assert leases.holds("role:discord-gateway")
        finally:
            await leases.close()


async def test_a_stray_taken_again_is_kept() -> None:
    """A lease let go of in a cut, then taken again once the store is back, before the
    renewal that would give it up: it is this runtime's, and stays."""
    async with fresh_schema() as schema, cuttable() as (proxy, dsn), \
            PostgresStore(PG_DSN, schema=schema, pool_size=2) as seen, \
            PostgresStore(dsn, schema=schema, pool_size=2) as store:
        leases = Leases(store, "r0", TTL_S)
        try:
            assert await leases.take("thread:t") is None
            proxy.cut()
            with pytest.raises(StoreError):
                await leases.release("thread:t")
            proxy.restore()
            assert await leases.take("thread:t") is None
            await asyncio.sleep(TTL_S)  # a negative over time: two renewals go by
            assert await held(seen) == {"thread:t"} and leases.holds("thread:t")
        finally:
            await leases.close()


async def test_a_lease_lost_in_a_cut_that_the_store_still_has_is_given_up() -> None:
    """A lease reported lost (not renewed in time) that the store has for this runtime all
    the same: its expiry counts from when the server renewed it, after the runtime asked,
    and a renewal may land whose answer the cut lost (here: the store extends it while the
    runtime cannot reach it). Once the store is back, the runtime's other leases' renewal
    would keep it with them for good, its thread held by a live replica that does not know
    it has it; it is given up instead."""
    async with fresh_schema() as schema, cuttable() as (proxy, dsn), \
            PostgresStore(PG_DSN, schema=schema, pool_size=2) as seen, \
            PostgresStore(dsn, schema=schema, pool_size=2) as store:
        lost = asyncio.Event()
        leases = Leases(store, "r0", TTL_S)
        try:
            assert await leases.take("thread:t", lost=lost.set) is None
            proxy.cut()
            # The renewal that landed, its answer lost: the store has the lease for longer.
            assert await seen.take_lease("thread:t", leases.holder, 10 * TTL_S) is None
            async with asyncio.timeout(WAIT_S):
                await lost.wait()
            assert not leases.holds("thread:t")
            proxy.restore()
            # Another lease taken (the runtime's heartbeat takes its own): the renewal goes on.
            assert await leases.take("instance:r0") is None

            async def given_up() -> bool:
                return await held(seen) == {"instance:r0"}

            await until(given_up)  # before, it was renewed with the instance's, for good
            assert leases.holds("instance:r0")
        finally:
            await leases.close()
