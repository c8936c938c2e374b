"""The small writes the SQLite writer's tests hand it (a table ``t`` of one column)."""

from __future__ import annotations

import sqlite3

from runtime.errors import StaleWrite

__all__ = ["insert", "stale"]


def insert(db: sqlite3.Connection, x: int) -> int:
    db.execute("INSERT INTO t VALUES (?)", (x,))
    return x


def stale(db: sqlite3.Connection) -> None:
    """A write that finds the store moved on, after writing a row (rolled back)."""
    db.execute("INSERT INTO t VALUES (-1)")
    raise StaleWrite("moved on")
