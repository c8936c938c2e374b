"""What runs on the SQLite connection's thread: the schema and the plain sqlite3 functions
each store operation is made of (one round trip each), and the entries cache."""

from __future__ import annotations

import gc
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..entries import Entry, ToolResult
from ..errors import CorruptStore, NotFound, StaleWrite
from ..runs import DELIVERY, Delivery, Run

__all__ = ["SCHEMA", "SCHEMA_VERSION", "CheckpointRows", "ThreadCache", "commit_rows",
           "create_run_row", "entry_row", "fetchall", "no_cycle_collection", "parse_run",
           "scalar", "update_pending_row"]

SCHEMA_VERSION = 1

SCHEMA = """
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
CREATE INDEX IF NOT EXISTS runs_thread_state ON runs (thread_id, state);
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
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    handled INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_pending ON requests (handled, id);
CREATE TABLE IF NOT EXISTS instances (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schedules (name TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (scope, key)
);
"""
# runs_thread_state: a thread's worker asks for its unfinished runs around every run;
# through runs_thread alone that query read every run the thread ever had.


@dataclass(frozen=True, slots=True)
class CheckpointRows:
    """A checkpoint turned into SQL parameters, ready for the connection's thread."""

    thread_id: str
    position: int | None
    count: int
    now: float | None
    entries: list[tuple[Any, ...]]
    run: tuple[Any, ...] | None
    transitions: list[tuple[Any, ...]]
    deliveries: list[tuple[Any, ...]]


def commit_rows(db: sqlite3.Connection, cp: CheckpointRows) -> None:
    if cp.position is not None:
        cursor = db.execute(
            "UPDATE threads SET length = length + ?, updated_at = coalesce(?, updated_at) "
            "WHERE id = ? AND length = ?", (cp.count, cp.now, cp.thread_id, cp.position))
        if cursor.rowcount != 1:
            raise StaleWrite(f"thread {cp.thread_id!r} moved past position {cp.position}")
        try:
            db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)", cp.entries)
        except sqlite3.IntegrityError as exc:
            raise StaleWrite(f"a result for that tool call is already recorded: {exc}") from exc
    if cp.run is not None:
        cursor = db.execute(
            "UPDATE runs SET state = ?, version = ?, data = ? WHERE id = ? AND version = ?",
            cp.run)
        if cursor.rowcount != 1:
            raise StaleWrite(f"run {cp.run[3]} is not at version {cp.run[4]}")
    if cp.transitions:
        db.executemany("INSERT INTO transitions VALUES (?, ?, ?)", cp.transitions)
    if cp.deliveries:
        db.executemany("INSERT OR IGNORE INTO deliveries VALUES (?, ?, ?, ?, ?)", cp.deliveries)


def create_run_row(db: sqlite3.Connection, row: tuple[Any, ...]) -> str | None:
    """Insert the run (and its thread); return the data of a run that holds its key."""
    _, thread_id, _, _, created_at, key, _ = row
    if key is not None:
        existing: str | None = scalar(db, "SELECT data FROM runs WHERE idempotency_key = ?",
                                       (key,))
        if existing is not None:
            return existing
    db.execute("INSERT OR IGNORE INTO threads VALUES (?, 0, ?, ?)",
               (thread_id, created_at, created_at))
    db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)", row)
    return None


def update_pending_row(db: sqlite3.Connection, key: str,
                       change: Callable[[Delivery], dict[str, Any]]) -> None:
    """Change a delivery not sent yet (``change`` says how); a sent one is left alone."""
    data = scalar(db, "SELECT data FROM deliveries WHERE key = ?", (key,))
    if data is None:
        raise NotFound(f"no delivery {key!r}")
    delivery = DELIVERY.validate_json(data)
    if delivery.remote_id is not None:
        return
    delivery = delivery.model_copy(update=change(delivery))
    db.execute("UPDATE deliveries SET remote_id = ?, data = ? WHERE key = ?",
               (delivery.remote_id, delivery.model_dump_json(), key))


def fetchall(db: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    return db.execute(sql, params).fetchall()


def scalar(db: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    row = db.execute(sql, params).fetchone()
    return None if row is None else row[0]


def entry_row(thread_id: str, seq: int, entry: Entry) -> tuple[Any, ...]:
    call_id = entry.tool_call_id if isinstance(entry, ToolResult) else None
    return (thread_id, seq, entry.run_id, entry.kind, call_id, entry.model_dump_json())


def parse_run(data: str) -> Run:
    try:
        return Run.model_validate_json(data)
    except ValueError as exc:
        raise CorruptStore(f"unreadable run row: {exc}") from exc


@contextmanager
def no_cycle_collection(pause: bool) -> Iterator[None]:
    """Hold the cycle collector off while a long thread is validated.

    The validation allocates tens of thousands of objects, none of them garbage, and
    the collector would otherwise scan the young heap for every 700 of them and the
    whole heap every few hundred thousand: that doubled a cold load of 10,000 entries.
    """
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class ThreadCache:
    """Validated entries of the threads loaded last, up to ``limit`` entries in all (LRU)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._threads: OrderedDict[str, list[Entry]] = OrderedDict()
        self._size = 0

    def pop(self, thread_id: str) -> list[Entry]:
        entries = self._threads.pop(thread_id, [])
        self._size -= len(entries)
        return entries

    def put(self, thread_id: str, entries: list[Entry]) -> None:
        if len(entries) > self.limit:
            return
        self._threads[thread_id] = entries
        self._size += len(entries)
        while self._size > self.limit:
            _, dropped = self._threads.popitem(last=False)
            self._size -= len(dropped)

    def clear(self) -> None:
        self._threads.clear()
        self._size = 0
