"""The PostgreSQL store's own guarantees (the contract suite covers the rest): migrations
under an advisory lock, non-durable commits, schema names, unreadable rows and keys too
long, ids and orderings, arrivals on two replicas at once (its pool, open and close:
``postgres/test_core.py``; its listening connection: ``postgres/test_listen.py``)."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest

from runtime.errors import CorruptStore, StoreError
from runtime.model.entries import Notice, Usage, UserMessage
from runtime.model.memories import Cover, Memory, Provenance, WorkspaceScope, scope_key
from runtime.model.runs import Origin, Run, RunState, new_run_id
from runtime.stores.base import Checkpoint, SpendAsk, SpendScope
from runtime.stores.postgres import PostgresStore
from runtime.stores.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from runtime.stores.postgres.sql import CHECKPOINT, checkpoint_args, list_runs_sql
from runtime.stores.rows import run_json
from runtime.stores.sqlite import SQLiteStore
from tests.postgres import PG_DSN, fresh_schema, in_schema

S = RunState


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    async with fresh_schema() as name:
        yield name


@pytest.fixture
async def store(schema: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(PG_DSN, schema=schema, pool_size=2) as opened:
        yield opened


def _run(thread_id: str = "t", *, at: float = 100.0) -> Run:
    return Run(id=secrets.token_hex(8), thread_id=thread_id, text="hi", created_at=at,
               updated_at=at, origin=Origin(channel="http"))


async def _started(store: PostgresStore | SQLiteStore, thread_id: str = "t",
                   at: float = 100.0) -> Run:
    run = await store.create_run(_run(thread_id, at=at))
    await store.commit(Checkpoint(thread_id, 0, [UserMessage(run_id=run.id, text="hello")]))
    return run


# -- migrations


async def test_a_version_5_schema_gains_the_spend_columns_filled_from_its_runs(
        schema: str) -> None:
    day = 1_764_806_400.0
    runs = [Run(id=new_run_id(day + n), thread_id=f"t{n}", text="x", created_at=day + n,
                updated_at=day + n, agent="eng" if n == 2 else "",
                origin=Origin(channel="slack", target={"channel": "C1"}, user="U1"),
                usage=Usage(input_tokens=n, cache_read_tokens=1), cost_usd=n / 100)
           for n in (1, 2)]
    conn = await asyncpg.connect(PG_DSN)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(f'SET search_path TO "{schema}"')
        for version, statements in MIGRATIONS:
            if version <= 5:
                for statement in statements:
                    await conn.execute(statement)
        await conn.execute("INSERT INTO meta VALUES ('schema_version', '5')")
        for run in runs:
            await conn.execute("INSERT INTO runs (id, thread_id, state, active, version, "
                               "created_at, data) VALUES ($1, $2, 'queued', true, 0, $3, $4)",
                               run.id, run.thread_id, run.created_at, run_json(run))
    finally:
        await conn.close()
    async with PostgresStore(PG_DSN, schema=schema, pool_size=1) as store:
        assert store.applied == [6, 7, 8, 9]  # the one-call checkpoint, memories, knowledge
        assert await store.list_runs() == runs
        asks: list[tuple[SpendScope, str, int, float]] = [
            ("user", "U1", 2 + 3, 0.03), ("agent", "eng", 3, 0.02), ("place", "slack", 5, 0.03)]
        for scope, key, tokens, cost in asks:
            ((spent_tokens, spent_cost),) = (await store.spent([SpendAsk(day, scope, (key,))])).sums
            assert spent_tokens == tokens and spent_cost == pytest.approx(cost)


async def test_a_version_7_schema_gains_memories(schema: str) -> None:
    run = _run()
    conn = await asyncpg.connect(PG_DSN)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(f'SET search_path TO "{schema}"')
        for version, statements in MIGRATIONS:
            if version <= 7:
                for statement in statements:
                    await conn.execute(statement)
        await conn.execute("INSERT INTO meta VALUES ('schema_version', '7')")
        await conn.execute("INSERT INTO runs (id, thread_id, state, active, version, "
                           "created_at, data) VALUES ($1, $2, 'queued', true, 0, $3, $4)",
                           run.id, run.thread_id, run.created_at, run_json(run))
    finally:
        await conn.close()
    kept = Memory(id="m1", text="the build runs nightly", scope=WorkspaceScope(),
                  provenance=Provenance(thread_id="t", at=1.0), created_at=1.0, updated_at=1.0)
    async with PostgresStore(PG_DSN, schema=schema, pool_size=1) as store:
        assert store.applied == [8, 9]
        assert await store.list_runs() == [run]
        assert await store.put_memory(kept, "call-1") is True
        where = Cover(scopes=(scope_key(WorkspaceScope()),), places=(), at=2.0)
        assert await store.search_memories("nightly builds", where, 5) == [kept]
    indexes = await in_schema(schema, "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 "
                              "AND indexname = 'memories_words'", schema)
    assert "USING gin (words)" in indexes[0]["indexdef"]


async def test_stores_opening_a_fresh_schema_at_once_migrate_it_once(schema: str) -> None:
    stores = [PostgresStore(PG_DSN, schema=schema, pool_size=1) for _ in range(4)]
    try:
        async with asyncio.timeout(20):
            await asyncio.gather(*(s.open() for s in stores))
        assert sorted(s.applied for s in stores) == [[], [], [], [v for v, _ in MIGRATIONS]]
        run = await stores[0].create_run(_run())
        assert await stores[3].get_run(run.id) == run
    finally:
        for s in stores:
            await s.close()
    async with PostgresStore(PG_DSN, schema=schema) as again:
        assert again.applied == []
        assert (await again.versions())[1] == SCHEMA_VERSION
    rows = await in_schema(schema, "SELECT key, value FROM meta")
    assert [tuple(r) for r in rows] == [("schema_version", str(SCHEMA_VERSION))]


async def test_a_newer_schema_is_refused(store: PostgresStore, schema: str) -> None:
    await store.close()
    await in_schema(schema, "UPDATE meta SET value = $1", str(SCHEMA_VERSION + 1))
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}.*newer"):
        await PostgresStore(PG_DSN, schema=schema).open()


# -- schema names and connection strings


@pytest.mark.parametrize("name", ["Maiden", "a-b", "1abc", "", "x" * 64, "é", 'maiden"',
                                  "maiden; DROP SCHEMA public CASCADE", "maiden.runs",
                                  "pg_catalog", "pg_temp", "information_schema"])
def test_a_hostile_schema_name_is_refused(name: str) -> None:
    with pytest.raises(StoreError, match=re.escape(repr(name))):
        PostgresStore(PG_DSN, schema=name)


@pytest.mark.parametrize("name", ["maiden", "_x", "m2", "x" * 63])
def test_plain_schema_names_are_accepted(name: str) -> None:
    assert PostgresStore(PG_DSN, schema=name).schema == name


# -- commits


async def test_a_non_durable_commit_is_committed_in_order(
    store: PostgresStore, schema: str
) -> None:
    """A checkpoint is one call of ``maiden_checkpoint``: a lazy one commits with
    synchronous_commit off (for its own transaction only), a durable one with it on."""
    run = await _started(store)
    lazy = Checkpoint("t", 1, [Notice(run_id=run.id, code="n", text="lazy")], durable=False)
    durable = Checkpoint("t", 2, [Notice(run_id=run.id, code="n", text="durable")])
    levels = [(await in_schema(schema, CHECKPOINT, *checkpoint_args(cp)))[0][0]
              for cp in (lazy, durable)]
    assert levels == ["off", "on"]
    await store.commit(Checkpoint("t", 3, [Notice(run_id=run.id, code="n", text="again")],
                                  durable=False))
    async with PostgresStore(PG_DSN, schema=schema) as other:  # another process sees all
        texts = [e.text for e in await other.load_entries("t")
                 if isinstance(e, UserMessage | Notice)]
    assert texts == ["hello", "lazy", "durable", "again"]


async def test_an_unreadable_entry_names_its_thread_and_row(
    store: PostgresStore, schema: str
) -> None:
    run = await _started(store, "a thread")
    await store.commit(Checkpoint("a thread", 1, [Notice(run_id=run.id, code="n", text="x"),
                                                  UserMessage(run_id=run.id, text="again")]))
    await in_schema(schema, """UPDATE entries SET data = '{"kind": "user"' WHERE seq = 1""")
    expected = re.escape("thread 'a thread' has an unreadable entry at row 1")
    with pytest.raises(CorruptStore, match=expected):
        await store.load_entries("a thread")
    with pytest.raises(CorruptStore, match=expected):
        await store.load_tail("a thread", 0, start=0)
    assert len(await store.load_entries("a thread", offset=2)) == 1
    await in_schema(schema, "UPDATE runs SET data = 'nope'")
    with pytest.raises(CorruptStore, match="unreadable run row"):
        await store.get_run(run.id)


async def test_a_key_too_long_for_an_index_is_a_store_error(store: PostgresStore) -> None:
    # Index entries hold at most ~2,700 bytes (compressed): SQLite's keys have no limit.
    thread_id = secrets.token_urlsafe(6_000)
    with pytest.raises(StoreError, match="too large"):
        await store.create_run(_run(thread_id))
    assert await store.list_threads() == []


# -- ids and orderings


async def test_ids_sort_as_in_sqlite(store: PostgresStore, tmp_path: Path) -> None:
    # (Ids with a NUL or another control character are refused by every store now.)
    ids = ["b", "a", "a\u2028", "a\u2028\u2029", "\u2028", "", "é", "Z", "a b", "日本"]
    async with SQLiteStore(tmp_path / "maiden.db") as sqlite:
        for s in (store, sqlite):
            for thread_id in ids:
                await _started(s, thread_id)
        assert [t.id for t in await store.list_threads()] == \
            [t.id for t in await sqlite.list_threads()]
    for thread_id in ids:
        (entry,) = await store.load_entries(thread_id)
        assert isinstance(entry, UserMessage) and entry.run_id in {
            r.id for r in await store.list_runs(thread_id=thread_id)}


@pytest.mark.parametrize("thread_id", [None, "t"])
async def test_listing_active_runs_reads_the_partial_index(
    store: PostgresStore, schema: str, thread_id: str | None
) -> None:
    await _started(store)
    sql, params = list_runs_sql(thread_id, [S.QUEUED, S.RUNNING], 10)
    conn = await asyncpg.connect(PG_DSN, server_settings={"search_path": schema,
                                                          "enable_seqscan": "off"})
    try:
        plan = "\n".join(row[0] for row in await conn.fetch("EXPLAIN " + sql, *params))
    finally:
        await conn.close()
    assert "runs_active" in plan, plan


async def test_a_thread_held_reads_only_its_new_rows_whoever_wrote_them(
    store: PostgresStore, schema: str
) -> None:
    run = await _started(store, "held")
    assert len(await store.load_entries("held")) == 1  # now held by this store
    async with PostgresStore(PG_DSN, schema=schema, pool_size=1) as replica:
        await replica.commit(Checkpoint("held", 1, [Notice(run_id=run.id, code="n", text="x")]))
    # The row this store holds is broken now: it is not read again, only the new one is.
    await in_schema(schema, """UPDATE entries SET data = '{"kind": "user"' WHERE seq = 0""")
    entries = await store.load_entries("held")
    assert [e.kind for e in entries] == ["user", "notice"]
    async with PostgresStore(PG_DSN, schema=schema, pool_size=1) as fresh:
        with pytest.raises(CorruptStore, match="unreadable entry at row 0"):
            await fresh.load_entries("held")  # a store that holds nothing reads it all


# -- arrivals on two replicas at once


async def _waiting_for(schema: str, xid: str) -> None:
    """Until a statement waits for the transaction ``xid`` to end (the server's view)."""
    async with asyncio.timeout(10):
        waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted AND transactionid::text = $1"
        while not (await in_schema(schema, waiting, xid))[0][0]:  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_a_threads_runs_become_visible_in_the_order_of_their_stamps(
        schema: str) -> None:
    """The chaos soak's finding 7 (``concurrent-arrivals-out-of-order``, chaos/README.md):
    replica A stamps a run first, replica B a moment later, and A's insert is slowed (here:
    its idempotency key waits on another transaction that inserts the same key, then rolls
    back). A worker reading the thread meanwhile must never see B's run without A's: it
    would drive B's first. Either A's run is there first, or it is stamped after B's."""
    async with PostgresStore(PG_DSN, schema=schema, pool_size=2) as a, \
            PostgresStore(PG_DSN, schema=schema, pool_size=2) as b:
        first = _run(at=100.0).model_copy(update={"idempotency_key": "slack:1"})
        second = _run(at=100.001)
        blocker = await asyncpg.connect(PG_DSN, server_settings={"search_path": schema})
        try:
            holding = blocker.transaction()
            await holding.start()
            await blocker.execute(
                "INSERT INTO runs (id, thread_id, state, active, version, created_at, "
                "idempotency_key, data) VALUES ('x', 'elsewhere', 'queued', true, 1, 1, "
                "'slack:1', '{}')")
            xid = str(await blocker.fetchval("SELECT pg_current_xact_id()"))
            made_a = asyncio.create_task(a.create_run(first))
            await _waiting_for(schema, xid)
            made_b = asyncio.create_task(b.create_run(second))
            # B's run is written, or waits for A's to be: either way, what a worker sees now.
            done, _ = await asyncio.wait([made_b], timeout=1.0)
            seen = [r.id for r in await a.list_runs(thread_id="t")]
            await holding.rollback()
            ran_a, ran_b = await asyncio.gather(made_a, made_b)
        finally:
            await blocker.close()
        final = [r.id for r in sorted(await a.list_runs(thread_id="t"),
                                      key=lambda r: r.created_at)]
        assert seen == final[:len(seen)], f"a worker saw {seen}, stamped order {final}"
        assert ran_a.created_at < ran_b.created_at and final == [first.id, second.id]
        assert not done  # B waited for A's run to be written
