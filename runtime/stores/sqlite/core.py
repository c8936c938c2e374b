"""The SQLite store's core, which every role of it is built on: its two connections and
how work gets to them.

Why the store runs ``sqlite3`` on threads of its own (``SQLiteThread``) rather
than through aiosqlite: every trip from the event loop to a connection's thread
and back costs two wake-ups, aiosqlite's public API makes one trip per statement,
and a checkpoint is several statements. Here every operation is one plain
``sqlite3`` function run on the connection's thread in a single trip, so a
checkpoint costs one wake-up of the event loop, not one per statement.
Checkpoints that arrive together share a transaction and its fsync
(``GroupCommit``); reads go through a second connection.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing, suppress
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, cast

from ...errors import StoreError
from ..base import Opens
from ..identity import FileIdentity, Unsure
from ..tail import ThreadCache
from .commit import FlushWay, GroupCommit, WriteCounts
from .mark import Mark
from .schema import migrate
from .sql import fetchall
from .thread import SQLiteThread

__all__ = ["AWAY", "SQLiteCore", "Synchronous"]

Synchronous = Literal["off", "normal", "full", "extra"]

P = ParamSpec("P")
T = TypeVar("T")

AWAY = object()
"""What ``SQLiteCore._at_once`` returns when no connection is idle."""


class SQLiteCore(Opens):
    """The connections, ``open`` and ``close``, and the ways to run a function on one: the
    writer's group commit or a transaction of its own, the reader's thread, or at once."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous = "full",
        busy_timeout_s: float = 10.0,
        cached_entries: int = 200_000,
        flush: FlushWay = "auto",
    ) -> None:
        self.path = Path(path)
        self.flush = flush
        """Where a durable write waits for the disk (``FlushWay``). maiden uses ``auto``,
        the way bench workload 4 measured best on a quick disk and on a slow one; the
        others are fixed ways for the bench to compare it with (no config key sets them)."""
        self.synchronous = synchronous
        self.busy_timeout_s = busy_timeout_s
        # Every write goes through one connection. Each trip to its thread is a whole
        # transaction, so no other task's statements can land inside one.
        self._writer: GroupCommit | None = None
        # Reads go through a second connection (WAL lets it read while the first one
        # writes and fsyncs): a busy store does not make every read wait for a disk flush.
        self._reader: SQLiteThread | None = None
        # Touched only by functions running on the reader's connection (on its thread, or on
        # the loop's while it is idle), one at a time.
        self._threads = ThreadCache(cached_entries)
        path = self.path.absolute()
        self._identity = FileIdentity(path, "the database file", watched=path,
                                      verify=self._verify)
        self._store_id: str | None = None
        """The database's identity (``schema``), read at open."""
        # A copy of the file from before the open lacks this process's mark, even one with
        # the same identity (a backup of this store); one taken since holds an old value.
        self._mark = Mark()

    async def open(self) -> None:
        if self._writer is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        conn = await SQLiteThread.open(self.path, busy_timeout_s=self.busy_timeout_s,
                                       name="maiden-sqlite-writer")
        try:
            journal = await conn.call(self._configure)
        except BaseException:
            await conn.close()
            raise
        writer = self._writer = GroupCommit(
            conn, synchronous=self.synchronous, busy_timeout_s=self.busy_timeout_s,
            flush=self.flush, wal=Path(f"{self.path}-wal") if journal == "wal" else None,
            lost=self._identity.lose, mark=self._mark)
        try:
            self._store_id = await writer.transaction(self._migrate)
            # The identity and the mark into the file itself, not just the log: a copy of
            # the file put over it loses them there, where ``_verify`` reads them.
            await writer.checkpoint()
            self._reader = await SQLiteThread.open(
                self.path, busy_timeout_s=self.busy_timeout_s, name="maiden-sqlite-reader")
            await self._reader.call(_configure_reader, int(self.busy_timeout_s * 1000))
            self._identity.pin()
        except BaseException:
            await self.close()
            raise

    def write_counts(self) -> WriteCounts:
        """The transactions the writing connection committed since the store opened, how
        many with a disk flush, and its ``synchronous`` changes (a copy)."""
        if self._writer is None:
            return WriteCounts()
        return dataclasses.replace(self._writer.counts)

    async def close(self) -> None:
        """Let writes already handed in land, then close both connections (and threads)."""
        writer, reader = self._writer, self._reader
        try:
            if writer is not None:  # the store stays open for writes handed in meanwhile
                if self._store_id is not None and self._identity.lost is None:
                    with suppress(StoreError):  # else left behind, as a killed process's is
                        await writer.transaction(self._mark.take_back)
                await writer.close()
        finally:
            self._writer = self._reader = None
            if reader is not None:
                await reader.close()
            self._threads.clear()

    @property
    def db(self) -> SQLiteThread:
        """The writing connection."""
        return self._write_side().conn

    def _write_side(self) -> GroupCommit:
        if self._writer is None:
            raise StoreError("the store is not open")
        return self._writer

    async def _grouped(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, ...)`` in the next group commit (see ``GroupCommit``)."""
        return await self._write_side().write(fn, *args, **kwargs)

    async def _write(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, ...)`` in one ``BEGIN IMMEDIATE`` transaction of its own."""
        return await self._write_side().transaction(fn, *args, **kwargs)

    async def _read(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, ...)`` on the reading connection's thread, in one trip."""
        if self._reader is None:
            raise StoreError("the store is not open")
        return await self._reader.call(fn, *args, **kwargs)

    async def _read_small(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """As ``_read``, for a read of a few rows by an index: done at once on the loop's
        thread when the reader is idle (the trip would cost more than the read)."""
        found = self._at_once(fn, *args, **kwargs)
        if found is not AWAY:
            return cast(T, found)
        return await self._read(fn, *args, **kwargs)

    def _at_once(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T | object:
        """``fn(connection, ...)`` now, on the loop's thread, through an idle connection, or
        ``AWAY`` if neither is. The writer's first: its page cache survives its own commits,
        where the reader's is dropped whenever the database has changed since its last read."""
        writer = self._writer
        if writer is not None and writer.conn.idle:
            try:
                return writer.conn.here(fn, *args, **kwargs)
            except StoreError:
                pass  # busy (the writer never waits for a lock here): ask the reader
        reader = self._reader
        if reader is not None and reader.idle:
            return reader.here(fn, *args, **kwargs)
        return AWAY

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self._read(fetchall, sql, params)

    # -- synchronous work, on the connection's thread

    def _configure(self, db: sqlite3.Connection) -> str:
        """Set the connection up; the journal mode it got (``wal``, unless the file system
        cannot share memory between processes)."""
        journal = str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
        db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
        db.execute("PRAGMA wal_autocheckpoint=0")  # GroupCommit runs them, on the thread
        db.execute("PRAGMA busy_timeout=0")  # GroupCommit waits for the lock itself
        return journal

    def _migrate(self, db: sqlite3.Connection) -> str:
        store_id = migrate(db, self.path)
        self._mark.put(db)
        return store_id

    def _verify(self) -> str | None:
        """Why the file no longer holds the database this process opened, or None: read
        when the file was written since it was last verified (``FileIdentity``), on the
        loop's thread, through a connection of its own (the open ones' page caches answer
        from memory: SQLite watches the log for changes, not the file). An open and two
        reads by key: once per WAL checkpoint, not per message. The mark's value (``Mark``)
        read through the log is the last one committed; the file's own shows where the log
        holds no newer one (after a whole checkpoint)."""
        try:
            with closing(sqlite3.connect(f"{self._identity.path.as_uri()}?mode=ro", uri=True,
                                         timeout=0.2)) as db:
                found = db.execute("SELECT id FROM identity").fetchone()
                marked = db.execute("SELECT value FROM meta WHERE key = ?",
                                    (self._mark.key,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise Unsure from exc
            return f"it is no longer a maiden database: {exc}"
        except sqlite3.DatabaseError as exc:
            return f"it is no longer a maiden database: {exc}"
        if found is None or found[0] != self._store_id:
            return (f"it holds another store, identity {found[0] if found else None}, "
                    f"not {self._store_id}")
        if marked is None:
            return ("it holds a copy of this store from before this process opened it: "
                    "what was written since is not in it")
        if self._mark.behind(str(marked[0])):
            return ("it holds an older copy of this store, taken while this process had it "
                    "open: what was written since is not in it")
        return None


def _configure_reader(db: sqlite3.Connection, busy_timeout_ms: int) -> None:
    db.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    db.execute("PRAGMA query_only=1")
