"""The transactions themselves, on whichever thread runs them (the connection's, or the
loop's while the connection is idle): ``BEGIN IMMEDIATE`` waiting for another connection's
lock, a group's writes in one transaction with a savepoint each, the ``synchronous`` level
each commit is made with, and the counts of what was done (``WriteCounts``)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from ...errors import StoreError
from .mark import Mark
from .thread import store_error

__all__ = ["BUSY", "FLUSHING", "Level", "QueuedWrite", "Target", "WriteCounts",
           "durable_transaction", "mark_and_checkpoint", "write_group", "write_here"]

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(slots=True)
class WriteCounts:
    """What the writing connection has done since it opened (for ``bench/``: the store's
    own count, not an estimate)."""

    transactions: int = 0
    """Transactions committed."""
    synced: int = 0
    """Disk flushes: commits made with ``synchronous`` FULL or EXTRA, and flushes of the log
    made apart (``WalSync``), each of which may cover several commits."""
    switches: int = 0
    """``PRAGMA synchronous`` changes between them."""
    here: int = 0
    """Writes committed on the event loop's thread..."""
    here_s: float = 0.0
    """...and how long they held it up, in all (less the flushes made within them)..."""
    here_max_s: float = 0.0
    """...and at most..."""
    here_slow: int = 0
    """...and how many of them held it up longer than ``SLOW_S``."""
    sent_there: int = 0
    """Durable writes sent to the connection's thread (``flush="writer"``, or ``"auto"``
    with other work ready)."""
    flushed_here: int = 0
    """Commits made on the loop's thread with their flush of the log (``flush="auto"``)..."""
    flushed_here_max_s: float = 0.0
    """...and the longest of those flushes (the ``COMMIT`` alone, its flush within)."""

    def since(self, before: WriteCounts) -> WriteCounts:
        """What was done after ``before`` was taken (the longest holds: of all)."""
        return WriteCounts(**{f.name: getattr(self, f.name) - getattr(before, f.name)
                              for f in fields(self) if not f.name.endswith("_max_s")},
                           here_max_s=self.here_max_s,
                           flushed_here_max_s=self.flushed_here_max_s)


FLUSHING = ("FULL", "EXTRA")
"""The ``synchronous`` levels whose commit flushes the disk."""


@dataclass(frozen=True, slots=True)
class QueuedWrite:
    """A write waiting for the next group commit."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    durable: bool
    future: asyncio.Future[Any]


BUSY = object()
"""``write_here``'s outcome when another connection holds the write lock."""


class _Busy(StoreError):
    """The write lock is held elsewhere (another process writes)."""


class Level:
    """The connection's ``synchronous`` as last set: it stays until a write needs another
    (a message's non-durable writes come in a row, then the durable one)."""

    __slots__ = ("commit_s", "counts", "now")

    def __init__(self, now: str, counts: WriteCounts) -> None:
        self.now = now
        self.counts = counts
        self.commit_s = 0.0
        """How long the last ``COMMIT`` took (its flush within, if it made one)."""

    def set(self, db: sqlite3.Connection, level: str) -> None:
        if level != self.now:
            db.execute(f"PRAGMA synchronous={level}")
            self.now = level
            self.counts.switches += 1

    def committed(self, took: float) -> None:
        self.commit_s = took
        self.counts.transactions += 1
        if self.now in FLUSHING:
            self.counts.synced += 1


@dataclass(frozen=True, slots=True)
class Target:
    """The database (for messages), how long a write waits for another's lock, and the
    connection's ``synchronous`` level."""

    path: Path
    wait_s: float
    level: Level


def write_here(db: sqlite3.Connection, target: Target, write: QueuedWrite, level: str) -> object:
    """One write on the loop's thread, without waiting for a lock: ``BUSY`` if it is taken."""
    try:
        return write_group(db, target, [write], level)[0]
    except _Busy:
        return BUSY


def mark_and_checkpoint(db: sqlite3.Connection, target: Target, level: str,
                         mark: Mark | None, value: int) -> bool:
    """The mark moved on to ``value`` (committed), then a passive checkpoint; whether it
    copied the whole log into the database."""
    if mark is not None:
        durable_transaction(db, target, level, mark.move, value)
    busy, frames, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return bool(not busy and frames > 0 and frames == copied)


def _begin(db: sqlite3.Connection, target: Target) -> None:
    """``BEGIN IMMEDIATE``, waiting up to ``target.wait_s`` for another connection's lock
    (what SQLite's busy handler would do: sleep and try again, backing off)."""
    deadline, pause = None, 0.001
    while True:
        try:
            db.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.Error as exc:
            busy = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY,
                                                              sqlite3.SQLITE_LOCKED)
            now = time.monotonic()
            deadline = now + target.wait_s if deadline is None else deadline
            if not busy:
                raise store_error(target.path, exc, "cannot start a write") from exc
            if now >= deadline:
                raise _Busy(f"{target.path}: cannot start a write: {exc}") from exc
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, 0.05)


def _transaction(
    db: sqlite3.Connection,
    target: Target,
    fn: Callable[Concatenate[sqlite3.Connection, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    _begin(db, target)
    try:
        result = fn(db, *args, **kwargs)
        began = time.perf_counter()
        db.execute("COMMIT")
        target.level.committed(time.perf_counter() - began)
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return result


def durable_transaction(
    db: sqlite3.Connection,
    target: Target,
    level: str,
    fn: Callable[Concatenate[sqlite3.Connection, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    target.level.set(db, level)
    return _transaction(db, target, fn, *args, **kwargs)


def write_group(db: sqlite3.Connection, target: Target, group: list[QueuedWrite],
                 level: str) -> list[object]:
    """The writes of a group in one transaction, committed with ``synchronous=level``;
    each outcome is a value or an error."""
    target.level.set(db, level)
    return _each_write(db, target, group)


def _each_write(db: sqlite3.Connection, target: Target, group: list[QueuedWrite]
                ) -> list[object]:
    if len(group) == 1:
        return [_transaction(db, target, group[0].fn, *group[0].args, **group[0].kwargs)]
    outcomes: list[object] = []

    def each(db: sqlite3.Connection) -> None:
        for write in group:
            db.execute("SAVEPOINT write")
            try:
                outcomes.append(write.fn(db, *write.args, **write.kwargs))
            except Exception as exc:
                if not db.in_transaction:
                    raise  # SQLite gave up the whole transaction
                db.execute("ROLLBACK TO write")
                outcomes.append(_error(target.path, exc))
            db.execute("RELEASE write")

    _transaction(db, target, each)
    return outcomes


def _error(path: Path, exc: Exception) -> Exception:
    if isinstance(exc, sqlite3.Error):
        error = store_error(path, exc)
        error.__cause__ = exc
        return error
    return exc
