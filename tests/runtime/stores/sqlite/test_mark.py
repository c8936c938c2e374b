"""This process's mark in the database (runtime/stores/sqlite/mark.py): the ``meta`` row it
writes at open, moves before each checkpoint and takes back at close, and which of the
values a file may hold are older than what a whole checkpoint put in it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from runtime.stores.sqlite.mark import Mark


@pytest.fixture
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    try:
        yield conn
    finally:
        conn.close()


def _value(db: sqlite3.Connection, mark: Mark) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (mark.key,)).fetchone()
    return None if row is None else str(row[0])


def test_the_row_is_put_moved_and_taken_back(db: sqlite3.Connection) -> None:
    mark, other = Mark(), Mark()
    assert mark.key != other.key  # each open its own row
    other.put(db)
    mark.put(db)
    assert _value(db, mark) == "0"
    mark.move(db, mark.next())
    mark.move(db, mark.next())
    assert _value(db, mark) == "2" and mark.written == 2
    mark.take_back(db)
    assert _value(db, mark) is None and _value(db, other) == "0"  # the other's row stays


def test_a_value_is_behind_only_if_older_than_what_a_whole_checkpoint_copied() -> None:
    mark = Mark()
    for _ in range(5):
        mark.next()
    assert not mark.behind("0")  # nothing copied yet: any value may be the file's
    mark.checkpointed(3)
    mark.checkpointed(2)  # a checkpoint never takes the mark back
    assert mark.copied == 3
    assert mark.behind("2")
    assert not mark.behind("3") and not mark.behind("5")  # up to what was written
    assert mark.behind("not a number")
