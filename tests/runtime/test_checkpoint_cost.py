"""A checkpoint appends rows; it never rewrites the thread (cost independent of length)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from runtime import Checkpoint, Run, SQLiteStore, UserMessage


async def _grow(store: SQLiteStore, thread: str, n: int) -> Run:
    run = await store.create_run(Run(id=thread.ljust(32, "0"), thread_id=thread, text="x"))
    for i in range(n):
        run = run.model_copy(update={"version": run.version + 1})
        await store.commit(Checkpoint(thread_id=thread, position=i, run=run,
                                      entries=[UserMessage(run_id=run.id, text=f"m{i}")]))
    return run


async def _trace_one_commit(store: SQLiteStore, run: Run, position: int) -> list[str]:
    statements: list[str] = []
    await store.db.call(sqlite3.Connection.set_trace_callback, statements.append)
    run = run.model_copy(update={"version": run.version + 1})
    await store.commit(Checkpoint(thread_id=run.thread_id, position=position, run=run,
                                  entries=[UserMessage(run_id=run.id, text="new")]))
    await store.db.call(sqlite3.Connection.set_trace_callback, None)
    # A WAL checkpoint may run meanwhile on the connection's thread, and how a commit is
    # flushed (``PRAGMA synchronous``) depends on what else is being written then (the store's
    # group commit): neither is the thread's length.
    return [re.sub(r"'[^']*'|\b\d+(\.\d+)?\b", "?", s) for s in statements
            if not s.startswith(("PRAGMA wal_checkpoint", "PRAGMA synchronous"))]


async def test_checkpoint_statements_do_not_depend_on_thread_length(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "m.db") as store:
        short = await _grow(store, "short", 1)
        long = await _grow(store, "long", 2000)
        short_sql = await _trace_one_commit(store, short, 1)
        long_sql = await _trace_one_commit(store, long, 2000)
        rows = await store._fetchall("SELECT count(*) FROM entries")
        reads = [s for s in long_sql if s.startswith("SELECT")]
        plans = await store._fetchall("EXPLAIN QUERY PLAN " + reads[0].replace("?", "'long'"))
    assert short_sql == long_sql
    touching_entries = [s for s in long_sql if "entries" in s]
    assert touching_entries and all(s.startswith(("INSERT INTO entries", "SELECT")) for s in
                                    touching_entries), long_sql
    assert not any(s.startswith("DELETE") for s in long_sql), long_sql
    # What it reads (the stale-write check) it finds by a key, never by a scan.
    steps = [row[-1] for row in plans]
    assert not [s for s in steps if s.startswith("SCAN") and s != "SCAN CONSTANT ROW"], steps
    assert any(s.startswith("SEARCH entries USING PRIMARY KEY") for s in steps), steps
    assert rows[0][0] == 1 + 1 + 2000 + 1
