"""The SQLite store's memories: a row each, searched through an FTS5 index ranked by
``bm25()`` (the schema's ``MEMORIES``; a conversation's search: ``recall.py``), and the
calls that put or deleted them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from ...model.memories import (
    Cover,
    Listing,
    Memory,
    MemoryCall,
    PersonScope,
    ThreadScope,
    confinement,
    kind_prefix,
    scope_key,
    words,
)
from ..base import MEMORY_CALLS_KEPT, MemoryStore
from .core import SQLiteCore
from .memory_words import count_words
from .recall import COVERED, any_of, search

__all__ = ["SQLiteMemories", "erase_memories"]

_IN = "IN (SELECT value FROM json_each(?))"
"""A column's value is one of a JSON array's."""


class SQLiteMemories(SQLiteCore, MemoryStore):
    """The SQLite store's ``MemoryStore``."""

    async def put_memory(self, memory: Memory, call: str | None = None) -> bool:
        return await self._write(_put, memory, call)

    async def get_memory(self, memory_id: str) -> Memory | None:
        rows = await self._fetchall("SELECT data FROM memories WHERE id = ?", (memory_id,))
        return Memory.model_validate_json(rows[0][0]) if rows else None

    async def delete_memory(self, memory_id: str, call: str | None = None) -> bool:
        return await self._write(_delete, memory_id, call)

    async def edit_memory(self, memory_id: str, text: str, by: str, at: float
                          ) -> Memory | None:
        return await self._write(_edit, memory_id, text, by, at)

    async def search_memories(self, query: str, where: Cover, limit: int) -> list[Memory]:
        found = list(dict.fromkeys(words(query)))
        if not found:
            covered = (json.dumps(where.scopes), json.dumps(where.places), where.at)
            return await self._matching(found, COVERED, covered, limit)
        if not where.scopes:
            return []
        rows = await self._read(search, found, where, limit)
        return [Memory.model_validate_json(row) for row in rows]

    async def list_memories(self, listing: Listing, limit: int) -> list[Memory]:
        where, args = _listing(listing)
        return await self._matching(words(listing.query), where, args, limit)

    async def _matching(self, found: list[str], where: str, args: tuple[object, ...],
                        limit: int) -> list[Memory]:
        """The memories ``where`` holds that hold any of the words ``found`` (all, for
        none), newest first."""
        newest = "m.updated_at DESC, m.n DESC"
        if not found:
            rows = await self._fetchall(f"SELECT m.data FROM memories m WHERE {where} "
                                        f"ORDER BY {newest} LIMIT ?", (*args, limit))
        else:
            rows = await self._fetchall(
                "SELECT m.data FROM memories_fts f JOIN memories m ON m.n = f.rowid "
                f"WHERE memories_fts MATCH ? AND {where} ORDER BY {newest} LIMIT ?",
                (f"text : ({any_of(found)})", *args, limit))
        return [Memory.model_validate_json(row[0]) for row in rows]

    async def memories_of_thread(self, thread_id: str) -> list[Memory]:
        rows = await self._fetchall(
            "SELECT data FROM memories WHERE thread_id = ? OR scope = ? ORDER BY n",
            (thread_id, scope_key(ThreadScope(thread_id=thread_id))))
        return [Memory.model_validate_json(row[0]) for row in rows]

    async def erase_person(self, user: str) -> int:
        return await self._write(_erase_person, user)

    async def memory_calls(self) -> list[MemoryCall]:
        rows = await self._fetchall("SELECT data FROM memory_calls ORDER BY n")
        return [MemoryCall.model_validate_json(row[0]) for row in rows]

    async def save_memory_calls(self, calls: Sequence[MemoryCall]) -> None:
        if calls:
            await self._write(_save_calls, list(calls))


def _listing(listing: Listing) -> tuple[str, tuple[object, ...]]:
    """The SQL condition (on ``m``) of a listing's filters, and its arguments."""
    parts, args = ["1 = 1"], []
    if listing.kind is not None:
        parts.append("substr(m.scope, 1, ?) = ?")
        args += [len(kind_prefix(listing.kind)), kind_prefix(listing.kind)]
    if listing.thread_id is not None:
        parts.append("(m.thread_id = ? OR m.scope = ?)")
        args += [listing.thread_id, scope_key(ThreadScope(thread_id=listing.thread_id))]
    if listing.people is not None:
        parts.append(f"(json_extract(m.data, '$.provenance.user') {_IN} OR m.scope {_IN})")
        args += [json.dumps(listing.people),
                 json.dumps([scope_key(PersonScope(user=p)) for p in listing.people])]
    if listing.at is not None:
        parts.append("(m.expires_at IS NULL OR m.expires_at > ?)")
        args.append(listing.at)
    return " AND ".join(parts), tuple(args)


# -- on the connection's thread


def _put(db: sqlite3.Connection, memory: Memory, call: str | None) -> bool:
    if call is not None:
        if _call(db, call) is not None:
            return False
        _record(db, MemoryCall(call=call, memory_id=memory.id))
    was = db.execute("SELECT text FROM memories WHERE id = ?", (memory.id,)).fetchone()
    db.execute("INSERT INTO memories (id, scope, confined, thread_id, expires_at, updated_at, "
               "text, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
               "scope = excluded.scope, confined = excluded.confined, "
               "thread_id = excluded.thread_id, expires_at = excluded.expires_at, "
               "updated_at = excluded.updated_at, text = excluded.text, data = excluded.data",
               (memory.id, scope_key(memory.scope), confinement(memory.provenance),
                memory.provenance.thread_id, memory.expires_at, memory.updated_at,
                memory.text, memory.model_dump_json()))
    count_words(db, None if was is None else was[0], memory.text)
    return True


def _delete(db: sqlite3.Connection, memory_id: str, call: str | None) -> bool:
    done = None if call is None else _call(db, call)
    if done is not None:
        return done.existed
    gone = db.execute("DELETE FROM memories WHERE id = ? RETURNING text",
                      (memory_id,)).fetchone()
    existed = gone is not None
    if existed:
        count_words(db, gone[0], None)
    if call is not None:
        _record(db, MemoryCall(call=call, memory_id=memory_id, forget=True, existed=existed))
    return existed


def _edit(db: sqlite3.Connection, memory_id: str, text: str, by: str, at: float
          ) -> Memory | None:
    row = db.execute("SELECT data FROM memories WHERE id = ?", (memory_id,)).fetchone()
    if row is None:
        return None
    memory = Memory.model_validate_json(row[0])
    edited = Memory.model_validate(memory.model_dump() | {
        "text": text, "edited_by": by, "updated_at": at})  # validated: a text too long
    db.execute("UPDATE memories SET text = ?, updated_at = ?, data = ? WHERE id = ?",
               (edited.text, at, edited.model_dump_json(), memory_id))
    count_words(db, memory.text, edited.text)
    return edited


def _call(db: sqlite3.Connection, call: str) -> MemoryCall | None:
    row = db.execute("SELECT data FROM memory_calls WHERE call = ?", (call,)).fetchone()
    return None if row is None else MemoryCall.model_validate_json(row[0])


def _record(db: sqlite3.Connection, record: MemoryCall) -> None:
    """Record a call, then drop the oldest beyond the newest ``MEMORY_CALLS_KEPT``."""
    db.execute("INSERT INTO memory_calls (call, memory_id, data) VALUES (?, ?, ?)",
               (record.call, record.memory_id, record.model_dump_json()))
    db.execute("DELETE FROM memory_calls WHERE n <= (SELECT n FROM memory_calls "
               "ORDER BY n DESC LIMIT 1 OFFSET ?)", (MEMORY_CALLS_KEPT,))


def _save_calls(db: sqlite3.Connection, calls: list[MemoryCall]) -> None:
    for record in calls:
        if _call(db, record.call) is None:
            _record(db, record)


def _erase_person(db: sqlite3.Connection, user: str) -> int:
    """``erase_person`` in one transaction (``_write``'s)."""
    ids = [row[0] for row in db.execute(
        "SELECT id FROM memories WHERE json_extract(data, '$.provenance.user') = ? "
        "OR scope = ?", (user, scope_key(PersonScope(user=user))))]
    return _erase_ids(db, ids)


def erase_memories(db: sqlite3.Connection, thread_id: str) -> int:
    """Remove the memories the thread sourced or that are kept for it, and the calls that
    put them, in the caller's transaction (``erase``); how many memories went."""
    ids = [row[0] for row in db.execute(
        "SELECT id FROM memories WHERE thread_id = ? OR scope = ?",
        (thread_id, scope_key(ThreadScope(thread_id=thread_id))))]
    return _erase_ids(db, ids)


def _erase_ids(db: sqlite3.Connection, ids: list[str]) -> int:
    """Remove the memories ``ids`` and the calls that put them; how many went. The
    full-text index is merged whole after, so that no word of theirs is left in its older
    segments, and a word none of the others holds loses its count (``count_words``)."""
    if not ids:
        return 0
    listed = json.dumps(ids)
    for (text,) in db.execute(f"SELECT text FROM memories WHERE id {_IN}",
                              (listed,)).fetchall():
        count_words(db, text, None)
    db.execute(f"DELETE FROM memory_calls WHERE memory_id {_IN}", (listed,))
    gone = db.execute(f"DELETE FROM memories WHERE id {_IN}", (listed,)).rowcount
    db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
    return int(gone)
