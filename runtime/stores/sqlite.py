"""The default store: SQLite through aiosqlite, one row per entry.

A checkpoint is one ``BEGIN IMMEDIATE`` transaction that appends the new entry
rows and updates the run; its cost does not depend on the thread's length. The
stale-write check is a conditional ``UPDATE`` on the thread's length and the
run's version, so two writers (two processes included) can never interleave.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from ..entries import Entry, ToolResult
from ..errors import CorruptStore, NotFound, StaleWrite, StoreError
from ..runs import Delivery, Run, RunState, Transition
from .base import ENTRIES, Checkpoint, ThreadInfo, check_thread_id

__all__ = ["SQLiteStore"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    length INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool_call_id TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS entries_tool_result
    ON entries (run_id, tool_call_id) WHERE tool_call_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    state TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    idempotency_key TEXT UNIQUE,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread_id, created_at);
CREATE INDEX IF NOT EXISTS runs_state ON runs (state, created_at);
CREATE TABLE IF NOT EXISTS transitions (
    run_id TEXT NOT NULL,
    at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS transitions_run ON transitions (run_id);
CREATE TABLE IF NOT EXISTS deliveries (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    remote_id TEXT,
    created_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_run ON deliveries (run_id);
"""

Synchronous = Literal["off", "normal", "full", "extra"]


class SQLiteStore:
    """SQLite-backed ``Store``; use as ``async with SQLiteStore(path) as store``."""

    def __init__(
        self, path: str | Path, *, synchronous: Synchronous = "full", busy_timeout_s: float = 10.0
    ) -> None:
        self.path = Path(path)
        self.synchronous = synchronous
        self.busy_timeout_s = busy_timeout_s
        self._db: aiosqlite.Connection | None = None
        # One connection, one transaction at a time: statements of concurrent tasks
        # must not interleave inside another task's transaction.
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> SQLiteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._db is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = await aiosqlite.connect(self.path, timeout=self.busy_timeout_s,
                                         isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
            await db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
            await db.execute("BEGIN IMMEDIATE")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                await db.execute(statement)
            version = await _scalar(db, "SELECT value FROM meta WHERE key = 'schema_version'")
            if version is None:
                await db.execute("INSERT INTO meta VALUES ('schema_version', ?)",
                                 (str(SCHEMA_VERSION),))
            elif int(version) != SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema version {version}; "
                                 f"this maiden reads version {SCHEMA_VERSION}")
            await db.execute("COMMIT")
        except BaseException:
            await db.close()
            raise
        self._db = db

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StoreError("the store is not open")
        return self._db

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            db = self.db
            try:
                await db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot start a write: {exc}") from exc
            try:
                yield db
                await db.execute("COMMIT")
            except BaseException as exc:
                await db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"{self.path}: {exc}") from exc
                raise

    async def create_run(self, run: Run) -> Run:
        check_thread_id(run.thread_id)
        async with self._transaction() as db:
            if run.idempotency_key is not None:
                existing = await _scalar(
                    db, "SELECT data FROM runs WHERE idempotency_key = ?", (run.idempotency_key,))
                if existing is not None:
                    return _run(existing)
            await db.execute(
                "INSERT OR IGNORE INTO threads VALUES (?, 0, ?, ?)",
                (run.thread_id, run.created_at, run.created_at))
            await db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run.id, run.thread_id, run.state, run.version, run.created_at,
                 run.idempotency_key, run.model_dump_json()))
        return run

    async def commit(self, checkpoint: Checkpoint) -> None:
        cp = checkpoint
        async with self._transaction() as db:
            now = cp.run.updated_at if cp.run is not None else None
            if cp.position is not None:
                cursor = await db.execute(
                    "UPDATE threads SET length = length + ?, updated_at = coalesce(?, updated_at) "
                    "WHERE id = ? AND length = ?",
                    (len(cp.entries), now, cp.thread_id, cp.position))
                if cursor.rowcount != 1:
                    raise StaleWrite(f"thread {cp.thread_id!r} moved past position {cp.position}")
                rows = [_entry_row(cp.thread_id, cp.position + i, entry)
                        for i, entry in enumerate(cp.entries)]
                try:
                    await db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)", rows)
                except sqlite3.IntegrityError as exc:
                    raise StaleWrite(f"a result for that tool call is already recorded: {exc}") \
                        from exc
            elif cp.entries:
                raise StoreError("a checkpoint with entries needs a position")
            if cp.run is not None:
                cursor = await db.execute(
                    "UPDATE runs SET state = ?, version = ?, data = ? WHERE id = ? AND version = ?",
                    (cp.run.state, cp.run.version, cp.run.model_dump_json(), cp.run.id,
                     cp.run.version - 1))
                if cursor.rowcount != 1:
                    raise StaleWrite(f"run {cp.run.id} is not at version {cp.run.version - 1}")
            if cp.transitions:
                await db.executemany(
                    "INSERT INTO transitions VALUES (?, ?, ?)",
                    [(t.run_id, t.at, t.model_dump_json()) for t in cp.transitions])
            if cp.deliveries:
                await db.executemany(
                    "INSERT OR IGNORE INTO deliveries VALUES (?, ?, ?, ?, ?)",
                    [(d.key, d.run_id, d.remote_id, d.created_at, d.model_dump_json())
                     for d in cp.deliveries])

    async def load_entries(self, thread_id: str) -> list[Entry]:
        check_thread_id(thread_id)
        rows = await self._fetchall(
            "SELECT data FROM entries WHERE thread_id = ? ORDER BY seq", (thread_id,))
        if not rows:
            return []
        try:
            # One validation call for the whole thread: far cheaper than one per row.
            return ENTRIES.validate_json("[" + ",".join(row[0] for row in rows) + "]")
        except ValueError as exc:
            raise CorruptStore(f"thread {thread_id!r} has an unreadable entry: {exc}") from exc

    async def get_run(self, run_id: str) -> Run:
        rows = await self._fetchall("SELECT data FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise NotFound(f"no run {run_id!r}")
        return _run(rows[0][0])

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        where, params = [], []
        if thread_id is not None:
            where.append("thread_id = ?")
            params.append(thread_id)
        if states is not None:
            where.append(f"state IN ({','.join('?' * len(states))})")
            params.extend(states)
        sql = "SELECT data FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = await self._fetchall(sql, params)
        return [_run(row[0]) for row in reversed(rows)]

    async def list_threads(self) -> list[ThreadInfo]:
        rows = await self._fetchall(
            "SELECT t.id, t.length, t.created_at, t.updated_at, "
            "  (SELECT count(*) FROM runs r WHERE r.thread_id = t.id), "
            "  (SELECT r.state FROM runs r WHERE r.thread_id = t.id "
            "   ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1) "
            "FROM threads t ORDER BY t.updated_at DESC, t.id")
        return [ThreadInfo(id=r[0], length=r[1], created_at=r[2], updated_at=r[3], runs=r[4],
                           last_state=RunState(r[5]) if r[5] else None) for r in rows]

    async def transitions(self, run_id: str) -> list[Transition]:
        rows = await self._fetchall(
            "SELECT data FROM transitions WHERE run_id = ? ORDER BY rowid", (run_id,))
        return [Transition.model_validate_json(row[0]) for row in rows]

    async def deliveries(
        self, *, run_id: str | None = None, pending: bool | None = None
    ) -> list[Delivery]:
        where, params = [], []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        if pending is not None:
            where.append("remote_id IS NULL" if pending else "remote_id IS NOT NULL")
        sql = "SELECT data FROM deliveries"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = await self._fetchall(sql + " ORDER BY created_at, rowid", params)
        return [Delivery.model_validate_json(row[0]) for row in rows]

    async def mark_delivered(self, key: str, remote_id: str, at: float) -> None:
        async with self._transaction() as db:
            data = await _scalar(db, "SELECT data FROM deliveries WHERE key = ?", (key,))
            if data is None:
                raise NotFound(f"no delivery {key!r}")
            delivery = Delivery.model_validate_json(data)
            if delivery.remote_id is not None:
                return
            delivery = delivery.model_copy(update={"remote_id": remote_id, "delivered_at": at})
            await db.execute("UPDATE deliveries SET remote_id = ?, data = ? WHERE key = ?",
                             (remote_id, delivery.model_dump_json(), key))

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        async with self._lock:
            try:
                async with self.db.execute(sql, params) as cursor:
                    return list(await cursor.fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: {exc}") from exc


async def _scalar(db: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    async with db.execute(sql, params) as cursor:
        row = await cursor.fetchone()
    return None if row is None else row[0]


def _entry_row(thread_id: str, seq: int, entry: Entry) -> tuple[Any, ...]:
    call_id = entry.tool_call_id if isinstance(entry, ToolResult) else None
    return (thread_id, seq, entry.run_id, entry.kind, call_id, entry.model_dump_json())


def _run(data: str) -> Run:
    try:
        return Run.model_validate_json(data)
    except ValueError as exc:
        raise CorruptStore(f"unreadable run row: {exc}") from exc
