"""The SQLite store's reads of a thread, run on a connection's thread: its entries from a
position on (only the rows since, for a thread held already), its tail and its pages."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from itertools import pairwise
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from ...model.entries import Entry, Notice
from ..rows import parse_entries
from ..tail import Tail
from .core import AWAY, SQLiteCore

__all__ = ["SHORT_THREAD", "SQLiteReads"]

P = ParamSpec("P")
T = TypeVar("T")


class SQLiteReads(SQLiteCore):
    """How the SQLite store reads a thread: at once on the loop's thread when it is held
    already or short (and a connection is idle), else on the reader's; and what it runs
    there to read one."""

    async def _read_thread(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, str, P], T],
        thread_id: str,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(connection, thread_id, ...)``: a small read for a thread held already (only
        the rows since are read)."""
        if thread_id in self._threads:
            return await self._read_small(fn, thread_id, *args, **kwargs)
        # A new or short thread (a fresh DM, a schedule's first run) is a small read too; its
        # length is one seek at the end of its rows.
        found = self._at_once(_if_short, fn, thread_id, *args, **kwargs)
        if found is not AWAY and found is not _LONG:
            return cast(T, found)
        return await self._read(fn, thread_id, *args, **kwargs)

    def _load_from(self, db: sqlite3.Connection, thread_id: str, base: int) -> list[Entry]:
        """The thread's entries from ``base`` on; of those already held, only the rows since
        are read (rows are append-only). What is held after is the same tail."""
        return list(self._held_from(db, thread_id, base))

    def _since(self, db: sqlite3.Connection, thread_id: str, base: int, offset: int
               ) -> list[Entry]:
        """The entries from ``offset`` on of a thread held from ``base`` (at most
        ``offset``): only the rows since what is held are read."""
        return self._held_from(db, thread_id, base)[offset - base:]

    def _held_from(self, db: sqlite3.Connection, thread_id: str, base: int) -> list[Entry]:
        """What is held of the thread from ``base`` on, brought up to date: the cache's own
        list (not to be changed)."""
        held_from, known = self._threads.pop(thread_id)
        if held_from > base or not known:
            held_from, known = base, []
        rows = _rows_since(db, thread_id, held_from + len(known), known[-1] if known else None)
        if rows is None:  # erased since (by any process), and maybe begun anew
            held_from, known = base, []
            rows = _rows_since(db, thread_id, base, None) or []
        if rows:
            known.extend(parse_entries(thread_id, held_from + len(known), rows))
        if base > held_from:
            known = known[base - held_from:]
        self._threads.put(thread_id, base, known)
        return known

    def _load_tail(self, db: sqlite3.Connection, thread_id: str, tokens: int,
                   start: int | None) -> Tail:
        last = db.execute("SELECT tokens FROM entries WHERE thread_id = ? "
                          "ORDER BY seq DESC LIMIT 1", (thread_id,)).fetchone()
        base = 0
        if last is not None and last[0] > tokens:
            # Walks back from the thread's end, over the rows the tail holds anyway.
            found = db.execute("SELECT seq FROM entries WHERE thread_id = ? AND kind = 'user' "
                               "AND tokens <= ? ORDER BY seq DESC LIMIT 1",
                               (thread_id, last[0] - tokens)).fetchone()
            base = 0 if found is None else found[0]
        if start is not None:
            base = min(base, max(start, 0))
        warm = thread_id in self._threads
        loaded = self._load_from(db, thread_id, base)
        # By their own index: the planner would rather walk the thread's rows before base.
        summaries = db.execute("SELECT data FROM entries INDEXED BY entries_summaries "
                               "WHERE thread_id = ? AND kind = 'summary' AND seq < ? "
                               "ORDER BY seq DESC", (thread_id, base)).fetchall()
        newest = parse_entries(thread_id, base, summaries[:1])[0] if summaries else None
        assert newest is None or isinstance(newest, Notice)
        if warm:  # its reader has worked the tokens out already (they are for a cold start)
            return Tail(base, loaded, summaries_before=len(summaries), summary_before=newest)
        # Each entry's tokens, from the running sums (the row before base gives the start).
        rows = [row[0] for row in db.execute(
            "SELECT tokens FROM entries WHERE thread_id = ? AND seq >= ? AND seq < ? "
            "ORDER BY seq", (thread_id, max(base - 1, 0), base + len(loaded)))]
        before, sums = (0, rows) if base == 0 else (rows[0], rows[1:])
        own = [now - then for then, now in pairwise([before, *sums])]
        return Tail(base, loaded, summaries_before=len(summaries), summary_before=newest,
                    tokens=own)

    def _page(self, db: sqlite3.Connection, thread_id: str, offset: int, limit: int | None
              ) -> list[Entry]:
        rows = db.execute("SELECT data FROM entries WHERE thread_id = ? AND seq >= ? "
                          "ORDER BY seq LIMIT ?",
                          (thread_id, offset, -1 if limit is None else limit)).fetchall()
        return parse_entries(thread_id, offset, rows) if rows else []


def _rows_since(db: sqlite3.Connection, thread_id: str, end: int, last: Entry | None
                ) -> list[Any] | None:
    """The thread's rows from ``end`` on, for entries held up to ``end`` whose ``last`` is
    the one before (None: nothing held); None if the thread no longer has that entry there
    (it was erased since). Entries are only ever appended, but a thread may be erased: the
    row before ``end`` is read too, and its run must be ``last``'s (run ids are never
    reused)."""
    if last is None:
        return db.execute("SELECT data FROM entries WHERE thread_id = ? AND seq >= ? "
                          "ORDER BY seq", (thread_id, end)).fetchall()
    rows = db.execute("SELECT data, run_id FROM entries WHERE thread_id = ? AND seq >= ? "
                      "ORDER BY seq", (thread_id, end - 1)).fetchall()
    if not rows or rows[0][1] != last.run_id:
        return None
    return rows[1:]


SHORT_THREAD = 64
"""Rows a thread not held yet may have for its first read to be done on the loop's thread."""
_LONG = object()


def _if_short(
    db: sqlite3.Connection,
    fn: Callable[Concatenate[sqlite3.Connection, str, P], T],
    thread_id: str,
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T | object:
    """``fn(db, thread_id, ...)`` if the thread has at most ``SHORT_THREAD`` rows, else
    ``_LONG`` (read nothing: the caller sends the read to the reader's thread)."""
    last = db.execute("SELECT seq FROM entries WHERE thread_id = ? ORDER BY seq DESC LIMIT 1",
                      (thread_id,)).fetchone()
    if last is not None and last[0] >= SHORT_THREAD:
        return _LONG
    return fn(db, thread_id, *args, **kwargs)
