"""The transactions themselves (runtime/stores/sqlite/transact.py), on a plain connection: a
group's writes each in a savepoint of their own, ``BEGIN IMMEDIATE`` against another
connection's lock, the ``synchronous`` level set only where it changes, and the counts."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import StaleWrite, StoreError
from runtime.stores.sqlite.transact import (
    BUSY,
    Level,
    QueuedWrite,
    Target,
    WriteCounts,
    durable_transaction,
    write_group,
    write_here,
)
from tests.runtime.stores.sqlite.writes import insert, stale


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A connection as the store's writer has it: WAL, no busy timeout of SQLite's own."""
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None, timeout=0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x INTEGER)")
    try:
        yield conn
    finally:
        conn.close()


def _target(path: Path, wait_s: float = 0.0) -> Target:
    return Target(path, wait_s, Level("FULL", WriteCounts()))


def _queued(fn: Any, *args: Any) -> QueuedWrite:
    return QueuedWrite(fn, args, {}, True, asyncio.get_running_loop().create_future())




def _broken(db: sqlite3.Connection) -> None:
    db.execute("INSERT INTO missing VALUES (1)")


def _rows(db: sqlite3.Connection) -> list[int]:
    return [x for (x,) in db.execute("SELECT x FROM t ORDER BY x")]


async def test_a_write_of_a_group_that_fails_leaves_the_others_in(
        db: sqlite3.Connection, tmp_path: Path) -> None:
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    group = [_queued(insert, 1), _queued(stale), _queued(_broken), _queued(insert, 2)]
    one, moved, broken, two = write_group(db, _target(tmp_path / "t.db"), group, "FULL")
    db.set_trace_callback(None)
    assert (one, two) == (1, 2)
    assert isinstance(moved, StaleWrite)
    # SQLite's own error, as the store's, naming the database.
    assert isinstance(broken, StoreError) and str(tmp_path / "t.db") in str(broken)
    assert isinstance(broken.__cause__, sqlite3.OperationalError)
    assert _rows(db) == [1, 2]  # the stale write's row was rolled back with it
    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 1


async def test_a_write_alone_that_fails_is_rolled_back_and_raised(
        db: sqlite3.Connection, tmp_path: Path) -> None:
    with pytest.raises(StaleWrite):
        write_group(db, _target(tmp_path / "t.db"), [_queued(stale)], "FULL")
    assert not db.in_transaction and _rows(db) == []


def test_a_durable_transaction_lands_whole_or_not_at_all(db: sqlite3.Connection,
                                                         tmp_path: Path) -> None:
    def both(db: sqlite3.Connection, fail: bool) -> None:
        insert(db, 1)
        if fail:
            raise ValueError("half way")
        insert(db, 2)

    target = _target(tmp_path / "t.db")
    with pytest.raises(ValueError, match="half way"):
        durable_transaction(db, target, "FULL", both, True)
    assert _rows(db) == []
    durable_transaction(db, target, "FULL", both, False)
    assert _rows(db) == [1, 2]
    assert target.level.counts.transactions == 1  # only what was committed is counted


async def test_a_write_here_finding_another_connections_lock_is_busy_and_does_nothing(
        db: sqlite3.Connection, tmp_path: Path) -> None:
    other = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    called: list[int] = []

    def noted(db: sqlite3.Connection) -> int:
        called.append(1)
        return insert(db, 1)

    try:
        other.execute("BEGIN IMMEDIATE")
        assert write_here(db, _target(tmp_path / "t.db"), _queued(noted), "FULL") is BUSY
        assert called == [] and not db.in_transaction
        with pytest.raises(StoreError, match="cannot start a write"):
            durable_transaction(db, _target(tmp_path / "t.db"), "FULL", noted)
        other.execute("COMMIT")
        assert write_here(db, _target(tmp_path / "t.db"), _queued(noted), "FULL") == 1
    finally:
        other.close()
    assert called == [1] and _rows(db) == [1]


def test_the_level_is_set_only_where_it_changes_and_flushing_commits_are_counted(
        db: sqlite3.Connection, tmp_path: Path) -> None:
    target = _target(tmp_path / "t.db")
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    for x, level in enumerate(["FULL", "NORMAL", "NORMAL", "FULL", "EXTRA"]):
        durable_transaction(db, target, level, insert, x)
    db.set_trace_callback(None)
    assert [s for s in statements if s.startswith("PRAGMA")] == [
        "PRAGMA synchronous=NORMAL", "PRAGMA synchronous=FULL", "PRAGMA synchronous=EXTRA"]
    counts = target.level.counts
    assert (counts.transactions, counts.synced, counts.switches) == (5, 3, 3)
    assert int(db.execute("PRAGMA synchronous").fetchone()[0]) == 3  # EXTRA


def test_counts_since_are_the_differences_and_the_longest_of_all() -> None:
    before = WriteCounts(transactions=2, synced=1, here=1, here_s=0.5, here_max_s=0.3,
                         flushed_here_max_s=0.2)
    now = WriteCounts(transactions=5, synced=3, here=4, here_s=1.5, here_max_s=0.4,
                      flushed_here_max_s=0.2, sent_there=2)
    since = now.since(before)
    assert (since.transactions, since.synced, since.here, since.sent_there) == (3, 2, 3, 2)
    assert since.here_s == pytest.approx(1.0)
    assert (since.here_max_s, since.flushed_here_max_s) == (0.4, 0.2)
