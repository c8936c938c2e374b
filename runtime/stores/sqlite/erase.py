"""The SQLite store's erasure of a thread (``erasure``): one ``BEGIN IMMEDIATE`` transaction,
synced like every durable write, with ``secure_delete`` on so that the freed pages are
overwritten rather than left holding what was erased."""

from __future__ import annotations

import json
import sqlite3
import time

from ...errors import StaleWrite
from ...model.runs import TERMINAL, RunState
from ..base import check_thread_id
from ..erasure import Erased, ThreadEraser, named_digests, stop_scope, thread_lease, thread_scope
from .core import SQLiteCore
from .memories import erase_memories

__all__ = ["SQLiteErasure"]

_OF_RUNS = "IN (SELECT value FROM json_each(?))"
"""A column's value is one of a JSON array's (the thread's run ids, or its scopes)."""


class SQLiteErasure(SQLiteCore, ThreadEraser):
    """The SQLite store's ``ThreadEraser``."""

    async def delete_thread(self, thread_id: str) -> Erased:
        check_thread_id(thread_id)
        self._identity.check_lost()
        erased = await self._write(_erase, thread_id, time.time())
        # What the reader holds of the thread goes too (it validates what it holds anyway:
        # another process may erase it).
        await self._read(self._forget, thread_id)
        return erased

    def _forget(self, db: sqlite3.Connection, thread_id: str) -> None:
        self._threads.pop(thread_id)


def _erase(db: sqlite3.Connection, thread_id: str, now: float) -> Erased:
    runs = db.execute("SELECT id, state, data FROM runs WHERE thread_id = ?",
                      (thread_id,)).fetchall()
    going = [run_id for run_id, state, _ in runs if RunState(state) not in TERMINAL]
    if going:
        raise StaleWrite(f"thread {thread_id!r} has a run that has not ended ({going[0]}): "
                         "cancel it first")
    ids = json.dumps([run_id for run_id, _, _ in runs])
    scopes = json.dumps([thread_scope(thread_id), *(stop_scope(r[0]) for r in runs)])
    texts = [data for _, _, data in runs]
    texts += [row[0] for row in db.execute(
        "SELECT data FROM entries WHERE thread_id = ? AND instr(data, '\"digest\":\"') > 0",
        (thread_id,))]
    texts += [row[0] for row in db.execute(
        f"SELECT data FROM deliveries WHERE run_id {_OF_RUNS}", (ids,))]
    secure = db.execute("PRAGMA secure_delete").fetchone()[0]
    db.execute("PRAGMA secure_delete = 1")
    try:
        deliveries = db.execute(f"DELETE FROM deliveries WHERE run_id {_OF_RUNS}",
                                (ids,)).rowcount
        votes = db.execute(f"DELETE FROM feedback WHERE run_id {_OF_RUNS}", (ids,)).rowcount
        db.execute(f"DELETE FROM requests WHERE json_extract(data, '$.run_id') {_OF_RUNS}",
                   (ids,))
        notes = db.execute(f"DELETE FROM notes WHERE scope {_OF_RUNS}", (scopes,)).rowcount
        db.execute(f"DELETE FROM note_calls WHERE scope {_OF_RUNS}", (scopes,))
        memories = erase_memories(db, thread_id)
        entries = db.execute("DELETE FROM entries WHERE thread_id = ?", (thread_id,)).rowcount
        db.execute("DELETE FROM runs WHERE thread_id = ?", (thread_id,))
        db.execute("DELETE FROM threads WHERE id = ?", (thread_id,))
        # A live holder's lease is its own to give up (it lingers for a moment at most).
        db.execute("DELETE FROM leases WHERE name = ? AND expires_at <= ?",
                   (thread_lease(thread_id), now))
        blobs = sum(db.execute("DELETE FROM blobs WHERE digest = ?", (digest,)).rowcount
                    for digest in sorted(named_digests(texts)) if not _named(db, digest))
    finally:
        db.execute(f"PRAGMA secure_delete = {int(secure)}")
    return Erased(thread_id, entries=entries, runs=len(runs), deliveries=deliveries,
                  votes=votes, notes=notes, blobs=blobs, memories=memories)


def _named(db: sqlite3.Connection, digest: str) -> bool:
    """Whether anything left names the blob (the erased thread's rows are gone already).
    Every table is read through: an erasure is rare, and this is only for its files."""
    field = f'"digest":"{digest}"'
    return any(db.execute(f"SELECT 1 FROM {table} WHERE instr(data, ?) > 0 LIMIT 1",
                          (field,)).fetchone() is not None
               for table in ("entries", "runs", "deliveries"))
