"""Workload 2, the floor: what SQLite itself costs for the rows of workload 1's messages.

``Floor`` is what the rule of issue 49 needs, done the cheapest way SQLite allows: a
message's four entries as JSON rows, committed one by one (accept, turn, result, answer)
through the ``sqlite3`` module on the calling thread, each ``INSERT`` a transaction of its
own (autocommit: one statement a commit) with ``synchronous=NORMAL``, and the log flushed
(``fdatasync``) after the accept and the answer: 4 commits, 2 of them flushed. No thread
hops: a trip to another thread (aiosqlite's) costs more than a commit without its flush,
and a floor that paid it would flatter every ratio against it. Switching ``synchronous`` to
FULL for the two durable commits instead (SQLite's own flush) cost 2-5% more.

``AioFloor`` is the floor the earlier figures were measured against (aiosqlite, two commits
a message, each flushed): its ratio is printed beside, so that they still compare.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import aiosqlite

from runtime.stores.sqlite import Synchronous

from .workload import floor_rows

__all__ = ["THREAD", "AioFloor", "Floor"]

THREAD = "bench:standard"
_TABLE = ("CREATE TABLE IF NOT EXISTS entries (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, "
          "data TEXT NOT NULL, PRIMARY KEY (thread_id, seq)) WITHOUT ROWID")
_INSERT = "INSERT INTO entries VALUES (?, ?, ?)"
_DURABLE = (True, False, False, True)
"""Which of a message's four commits the rule flushes: the accept and the answer."""
_datasync = getattr(os, "fdatasync", os.fsync)  # (macOS has no fdatasync)


class Floor:
    """The rule's floor: four commits a message, the accept and the answer flushed."""

    def __init__(self, path: Path, synchronous: Synchronous) -> None:
        self.path = path
        self.flushes = synchronous in ("full", "extra")
        """Whether durable commits reach the disk (else: ``synchronous`` as given, all)."""
        self.level = "NORMAL" if self.flushes else synchronous.upper()
        self.seq = 0
        self.transactions = 0
        """Commits made (counted as made, not assumed)..."""
        self.synced = 0
        """...and flushes of the log."""
        self._db: sqlite3.Connection | None = None
        self._wal: int | None = None

    def __enter__(self) -> Floor:
        db = sqlite3.connect(self.path, isolation_level=None)  # autocommit
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={self.level}")
        db.execute(_TABLE)
        self._db = db
        return self

    def __exit__(self, *exc: object) -> None:
        if self._wal is not None:
            os.close(self._wal)
        if self._db is not None:
            self._db.close()

    def message(self, i: int) -> None:
        """One message's entries, each its own commit; the accept and the answer flushed."""
        db = self._db
        assert db is not None
        for row, durable in zip(floor_rows(f"run{i:029d}", i), _DURABLE, strict=True):
            db.execute(_INSERT, (THREAD, self.seq, json.dumps(row)))
            self.seq += 1
            self.transactions += 1
            if durable and self.flushes:
                if self._wal is None:  # the log exists once something was written
                    self._wal = os.open(f"{self.path}-wal", os.O_RDONLY)
                _datasync(self._wal)
                self.synced += 1

    def load(self) -> list[object]:
        """The floor's cold load: a new connection, one SELECT, json.loads per row."""
        db = sqlite3.connect(self.path)
        try:
            rows = db.execute("SELECT data FROM entries WHERE thread_id = ? ORDER BY seq",
                              (THREAD,)).fetchall()
        finally:
            db.close()
        return [json.loads(row[0]) for row in rows]


class AioFloor:
    """The earlier floor: the same entries through aiosqlite, two commits a message (user +
    tool call + result, then the answer), each with ``synchronous`` as given."""

    def __init__(self, path: Path, synchronous: Synchronous) -> None:
        self.path = path
        self.synchronous = synchronous
        self.seq = 0
        self._db: aiosqlite.Connection | None = None

    async def __aenter__(self) -> AioFloor:
        db = await aiosqlite.connect(self.path)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
        await db.execute(_TABLE)
        await db.commit()
        self._db = db
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._db is not None:
            await self._db.close()

    async def message(self, i: int) -> None:
        assert self._db is not None
        rows = [(THREAD, self.seq + k, json.dumps(row))
                for k, row in enumerate(floor_rows(f"run{i:029d}", i))]
        self.seq += len(rows)
        await self._db.executemany(_INSERT, rows[:3])
        await self._db.commit()
        await self._db.execute(_INSERT, rows[3])
        await self._db.commit()
