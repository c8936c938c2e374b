"""The PostgreSQL store's core (runtime/stores/postgres/core.py): its pool opened and closed
(a close not held forever by a connection never given back), the server's version, and the
server's errors as the store's."""

from __future__ import annotations

import asyncio
import re

import pytest

from runtime.errors import StoreError, StoreFull
from runtime.stores.postgres import PostgresStore
from runtime.stores.postgres.schema import SCHEMA_VERSION
from runtime.stores.postgres.sql import ERRORS
from tests.postgres import PG_DSN
from tests.runtime.stores.contract import started


async def test_versions(store: PostgresStore) -> None:
    server, version = await store.versions()
    assert re.fullmatch(r"PostgreSQL \d+(\.\d+)*", server), server
    assert version == SCHEMA_VERSION


async def test_open_is_idempotent_and_close_ends_it(store: PostgresStore) -> None:
    await store.open()
    await started(store)
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="not open"):
        await store.thread_length("t")


async def test_a_failed_connection_names_the_server_not_the_password() -> None:
    dsn = "postgresql://maiden:s3cret-pw@127.0.0.1:1/maiden"
    with pytest.raises(StoreError) as caught:
        await PostgresStore(dsn, connect_timeout_s=2).open()
    message = str(caught.value)
    assert message.startswith("cannot open postgres postgresql://maiden:***@127.0.0.1:1/maiden: ")
    assert "s3cret" not in message and "\n" not in message


async def test_the_servers_disk_full_is_store_full(store: PostgresStore) -> None:
    """PostgreSQL refuses a write with ``53100 disk_full`` when its disk has no room (the
    chaos soak's ``disk_full`` on the server's own disk): ``StoreFull``, which ``maiden run``
    waits out at start, as for SQLite. Raised here by the server itself, with that code."""
    with pytest.raises(StoreFull, match="the server's disk is full"):
        await store._value("DO $$ BEGIN RAISE EXCEPTION 'could not extend file' "
                           "USING ERRCODE = 'disk_full'; END $$")


async def test_closing_does_not_wait_forever_for_a_connection_never_given_back(
        schema: str) -> None:
    """chaos: two replicas did not stop within 30 s of SIGTERM during a PostgreSQL cut, the
    last line before the kill their shutdown. asyncpg's ``Pool.close`` waits for every
    connection to be given back (its docs advise a timeout): here one is taken and never
    given back, and the store still closes, in ``CLOSE_S``."""
    from runtime.stores.postgres.core import CLOSE_S

    store = PostgresStore(PG_DSN, schema=schema, pool_size=2)
    await store.open()
    pool = store._pool
    assert pool is not None
    held = await pool.acquire()  # never released
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.wait_for(store.close(), CLOSE_S + 10)
    assert loop.time() - began >= CLOSE_S * 0.9  # it waited, then closed it at once
    assert pool._closed and held is not None


async def test_a_replica_stalled_in_a_transaction_does_not_hold_the_others_for_long(
        schema: str) -> None:
    """chaos, seed 9595: schedule claims on every replica stalled for minutes with the server
    up, until a replica stuck starting was killed. A process stalled mid-transaction (its
    loop starved, stopped, its network half-open) held rows the others wait for. The server
    now ends such a session after ``idle_in_transaction_s``: the lock goes, the others go
    on, and the stalled one finds its transaction gone."""
    async with PostgresStore(PG_DSN, schema=schema, pool_size=2,
                             idle_in_transaction_s=1.0) as stalled, \
            PostgresStore(PG_DSN, schema=schema, pool_size=2) as other:
        assert await other.take_lease("role:x", "other/1@h", 30) is None
        async with stalled._connection() as conn:
            transaction = conn.transaction()
            await transaction.start()
            await conn.execute("SELECT * FROM leases WHERE name = 'role:x' FOR UPDATE")
            # ... and no statement more: the row stays locked while the session lives.
            renewed = await asyncio.wait_for(other.renew_leases("other/1@h", 30), 20)
            assert renewed == ["role:x"]
            with pytest.raises(ERRORS):  # its session ended under it
                await conn.execute("SELECT 1")
