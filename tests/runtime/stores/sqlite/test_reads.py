"""The SQLite store's reads of a thread (runtime/stores/sqlite/reads.py): where each is
made, and what a thread held already is read of again."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from runtime import Checkpoint, UserMessage
from runtime.errors import CorruptStore
from runtime.model.entries import Notice
from runtime.model.runs import Run, RunState
from runtime.stores.sqlite import SHORT_THREAD, SQLiteStore
from tests.runtime.stores.contract import advance, started


async def test_a_short_thread_is_read_at_once_and_a_long_one_on_the_readers_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.db"
    async with SQLiteStore(path) as store:
        for thread, n in (("short", 3), ("long", SHORT_THREAD + 1)):
            run = await store.create_run(Run(id=thread.ljust(32, "0"), thread_id=thread,
                                             text="x"))
            await store.commit(Checkpoint(thread_id=thread, position=0, entries=[
                UserMessage(run_id=run.id, text=f"m{i}") for i in range(n)]))
    async with SQLiteStore(path) as store:  # nothing held: both are first reads
        where: dict[str, int] = {}

        def trace(statement: str) -> None:
            if statement.startswith("SELECT data FROM entries"):
                where[statement] = threading.get_ident()

        assert store._reader is not None
        for conn in (store.db, store._reader):
            await conn.call(sqlite3.Connection.set_trace_callback, trace)
        assert len(await store.load_entries("short")) == 3
        assert len(where) == 1 and set(where.values()) == {threading.get_ident()}
        where.clear()
        assert len(await store.load_entries("long")) == SHORT_THREAD + 1
        assert len(where) == 1 and set(where.values()) != {threading.get_ident()}
        assert len(await store.load_entries("long")) == SHORT_THREAD + 1  # now held: small


async def test_a_thread_held_reads_only_its_new_rows_whoever_wrote_them(tmp_path: Path
                                                                       ) -> None:
    path = tmp_path / "r.db"
    async with SQLiteStore(path) as store:
        run = await started(store, "held")
        assert len(await store.load_entries("held")) == 1  # now held by this store
        async with SQLiteStore(path) as other:  # another process appends
            await other.commit(Checkpoint("held", 1, [Notice(run_id=run.id, code="n",
                                                             text="x")]))
        # The row this store holds is broken now: it is not read again, only the new one.
        with closing(sqlite3.connect(path)) as db, db:
            db.execute("""UPDATE entries SET data = '{"kind": "user"' WHERE seq = 0""")
        assert [e.kind for e in await store.load_entries("held")] == ["user", "notice"]
    async with SQLiteStore(path) as fresh:
        with pytest.raises(CorruptStore, match="unreadable entry at row 0"):
            await fresh.load_entries("held")  # a store that holds nothing reads it all


async def test_a_thread_held_then_erased_and_begun_anew_elsewhere_is_read_anew(
        tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    async with SQLiteStore(path) as store:
        first = await started(store, "t")
        await store.commit(Checkpoint("t", 1, [Notice(run_id=first.id, code="n", text="x")],
                                      run=advance(first, RunState.COMPLETED)[0]))
        assert len(await store.load_entries("t")) == 2  # held
        async with SQLiteStore(path) as other:  # another process erases it, then a message
            await other.delete_thread("t")
            again = await started(other, "t", text="anew")
            await other.commit(Checkpoint("t", 1, [Notice(run_id=again.id, code="n",
                                                          text="y")]))
        entries = await store.load_entries("t")
    assert [(e.run_id, e.kind) for e in entries] == [(again.id, "user"), (again.id, "notice")]
