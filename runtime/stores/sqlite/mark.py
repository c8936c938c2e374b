"""This process's mark in the database: a row of ``meta`` written at open, moved on before
each WAL checkpoint, deleted at close.

A copy of the file put over the open one (``cp backup.db data/maiden.db``) is told by what
it holds (``SQLiteCore._verify``): a copy from before the open lacks the row; one taken
since holds an older value than what this process's checkpoints have copied into the file
since. The value is a count, written in the small transaction committed just before each
checkpoint (one per ``GroupCommit.checkpoint_every`` commits, not flushed by itself: the
checkpoint flushes the log before it copies it). It is ``copied`` only once a checkpoint
reported every frame of the log in the file: one held back by a reader may have left the
file with an older value, and the values in between are all this process's own.
"""

from __future__ import annotations

import secrets
import sqlite3

__all__ = ["Mark"]


class Mark:
    """The ``meta`` row's key, and the values the file may hold: from ``copied`` (the last
    one a whole checkpoint put in the file) to ``written`` (the last one handed in)."""

    __slots__ = ("copied", "key", "written")

    def __init__(self) -> None:
        self.key = f"open {secrets.token_hex(8)}"
        self.written = 0
        self.copied = 0

    def put(self, db: sqlite3.Connection) -> None:
        """Write the row (at open, in the migration's transaction)."""
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (self.key, str(self.copied)))

    def take_back(self, db: sqlite3.Connection) -> None:
        """Delete the row (at close; a killed process leaves its row behind: a few bytes)."""
        db.execute("DELETE FROM meta WHERE key = ?", (self.key,))

    def next(self) -> int:
        """The value the next checkpoint writes, taken from now on (a look made between
        its commit, on the writer's thread, and the loop hearing of it finds it)."""
        self.written += 1
        return self.written

    def move(self, db: sqlite3.Connection, value: int) -> None:
        """Write ``value`` (in a transaction of its own, just before a checkpoint)."""
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (str(value), self.key))

    def checkpointed(self, value: int) -> None:
        """A checkpoint copied the whole log, ``value`` in it, into the file."""
        self.copied = max(self.copied, value)

    def behind(self, found: str) -> bool:
        """Whether the file's value is older than one a whole checkpoint put in it."""
        try:
            return int(found) < self.copied
        except ValueError:
            return True
