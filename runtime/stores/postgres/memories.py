"""The PostgreSQL store's memories: a row each, searched by full-text search (a generated,
GIN-indexed tsvector ranked by ``ts_rank``), and the calls that put or deleted them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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
from .core import PostgresCore
from .sql import encode_text

__all__ = ["PostgresMemories", "erase_memories"]

_COVERED = ("scope = ANY($1) AND (confined IS NULL OR confined = ANY($2)) "
            "AND (expires_at IS NULL OR expires_at > $3)")
"""A ``Cover``'s coarse filter (its arrays encoded: they do not go through the codec)."""


class PostgresMemories(PostgresCore, MemoryStore):
    """The PostgreSQL store's ``MemoryStore``."""

    async def put_memory(self, memory: Memory, call: str | None = None) -> bool:
        async with self._transaction() as conn:
            if call is not None and not await _claim(
                    conn, MemoryCall(call=call, memory_id=memory.id)):
                return False
            await conn.execute(
                "INSERT INTO memories (id, scope, confined, thread_id, expires_at, updated_at, "
                "text, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE "
                "SET scope = excluded.scope, confined = excluded.confined, "
                "thread_id = excluded.thread_id, expires_at = excluded.expires_at, "
                "updated_at = excluded.updated_at, text = excluded.text, data = excluded.data",
                memory.id, scope_key(memory.scope), confinement(memory.provenance),
                memory.provenance.thread_id, memory.expires_at, memory.updated_at,
                memory.text, memory.model_dump_json())
        return True

    async def get_memory(self, memory_id: str) -> Memory | None:
        found = await self._parsed(Memory.model_validate_json,
                                   "SELECT data FROM memories WHERE id = $1", memory_id)
        return found[0] if found else None

    async def delete_memory(self, memory_id: str, call: str | None = None) -> bool:
        async with self._transaction() as conn:
            if call is not None and not await _claim(
                    conn, MemoryCall(call=call, memory_id=memory_id, forget=True)):
                done = await conn.fetchval("SELECT data FROM memory_calls WHERE call = $1", call)
                return MemoryCall.model_validate_json(done).existed
            existed = await conn.fetchval("DELETE FROM memories WHERE id = $1 RETURNING true",
                                          memory_id) is not None
            if call is not None and existed:  # the answer a re-run gets
                await conn.execute("UPDATE memory_calls SET data = $2 WHERE call = $1", call,
                                   MemoryCall(call=call, memory_id=memory_id, forget=True,
                                              existed=True).model_dump_json())
        return existed

    async def edit_memory(self, memory_id: str, text: str, by: str, at: float
                          ) -> Memory | None:
        async with self._transaction() as conn:
            data = await conn.fetchval("SELECT data FROM memories WHERE id = $1 FOR UPDATE",
                                       memory_id)
            if data is None:
                return None
            memory = Memory.model_validate_json(data)
            edited = Memory.model_validate(memory.model_dump() | {
                "text": text, "edited_by": by, "updated_at": at})
            await conn.execute("UPDATE memories SET text = $2, updated_at = $3, data = $4 "
                               "WHERE id = $1", memory_id, edited.text, at,
                               edited.model_dump_json())
        return edited

    async def search_memories(self, query: str, where: Cover, limit: int) -> list[Memory]:
        found = words(query)
        covered = ([encode_text(s) for s in where.scopes],
                   [encode_text(p) for p in where.places], where.at)
        if not found:
            return await self._parsed(
                Memory.model_validate_json,
                f"SELECT data FROM memories WHERE {_COVERED} "
                "ORDER BY updated_at DESC, n DESC LIMIT $4", *covered, limit)
        # Any of the words (as the other stores: the more a memory holds, the higher its
        # rank), each a plain word of \w: no tsquery operator can hide in one.
        return await self._parsed(
            Memory.model_validate_json,
            "SELECT data FROM memories, to_tsquery('english', $4) AS q "
            f"WHERE words @@ q AND {_COVERED} "
            "ORDER BY ts_rank(words, q) DESC, updated_at DESC, n DESC LIMIT $5",
            *covered, " | ".join(found), limit)

    async def list_memories(self, listing: Listing, limit: int) -> list[Memory]:
        where, args = _listing(listing)
        found = words(listing.query)
        if found:
            args.append(" | ".join(found))
            where += f" AND words @@ to_tsquery('english', ${len(args)})"
        args.append(limit)
        return await self._parsed(
            Memory.model_validate_json, f"SELECT data FROM memories WHERE {where} "
            f"ORDER BY updated_at DESC, n DESC LIMIT ${len(args)}", *args)

    async def memories_of_thread(self, thread_id: str) -> list[Memory]:
        return await self._parsed(
            Memory.model_validate_json,
            "SELECT data FROM memories WHERE thread_id = $1 OR scope = $2 ORDER BY n",
            thread_id, scope_key(ThreadScope(thread_id=thread_id)))

    async def erase_person(self, user: str) -> int:
        async with self._transaction() as conn:
            gone = await conn.fetch(
                "DELETE FROM memories WHERE strpos(data, $1) > 0 OR scope = $2 RETURNING id",
                _said_by(user), scope_key(PersonScope(user=user)))
            await _drop_calls(conn, [row["id"] for row in gone])
        return len(gone)

    async def memory_calls(self) -> list[MemoryCall]:
        return await self._parsed(MemoryCall.model_validate_json,
                                  "SELECT data FROM memory_calls ORDER BY n")

    async def save_memory_calls(self, calls: Sequence[MemoryCall]) -> None:
        if not calls:
            return
        async with self._transaction() as conn:
            await conn.executemany("INSERT INTO memory_calls (call, memory_id, data) VALUES "
                                   "($1, $2, $3) ON CONFLICT DO NOTHING",
                                   [(c.call, c.memory_id, c.model_dump_json()) for c in calls])
            await _keep_newest(conn)


def _listing(listing: Listing) -> tuple[str, list[object]]:
    """The SQL condition of a listing's filters, and its arguments ($1, $2, ...)."""
    parts, args = ["true"], []

    def arg(value: object) -> str:
        args.append(value)
        return f"${len(args)}"

    if listing.kind is not None:
        parts.append(f"starts_with(scope, {arg(kind_prefix(listing.kind))})")
    if listing.thread_id is not None:
        parts.append(f"(thread_id = {arg(listing.thread_id)} OR scope = "
                     f"{arg(scope_key(ThreadScope(thread_id=listing.thread_id)))})")
    if listing.people is not None:
        # Its provenance's user as the JSON of ``data`` spells it: outside a string every
        # quote is the JSON's own, so this text is found only there (no cast to jsonb,
        # which refuses a NUL that a text may hold).
        either = [f"strpos(data, {arg(_said_by(p))}) > 0" for p in listing.people]
        keys = [encode_text(scope_key(PersonScope(user=p))) for p in listing.people]
        parts.append(f"({' OR '.join([*either, f'scope = ANY({arg(keys)})'])})")
    if listing.at is not None:
        parts.append(f"(expires_at IS NULL OR expires_at > {arg(listing.at)})")
    return " AND ".join(parts), args


def _said_by(person: str) -> str:
    """The start of a memory's ``data`` provenance when ``person`` said it."""
    return '"provenance":{"user":' + json.dumps(person, ensure_ascii=False) + ","


async def _claim(conn: Any, record: MemoryCall) -> bool:
    """Record the call, in the caller's transaction; False if it is recorded already (a
    transaction recording it at once is waited for: of two re-runs, one applies it)."""
    claimed = await conn.fetchval("INSERT INTO memory_calls (call, memory_id, data) VALUES "
                                  "($1, $2, $3) ON CONFLICT DO NOTHING RETURNING true",
                                  record.call, record.memory_id, record.model_dump_json())
    if claimed:
        await _keep_newest(conn)
    return bool(claimed)


async def _keep_newest(conn: Any) -> None:
    """Drop the oldest calls beyond the newest ``MEMORY_CALLS_KEPT``."""
    await conn.execute("DELETE FROM memory_calls WHERE n <= (SELECT n FROM memory_calls "
                       "ORDER BY n DESC OFFSET $1 LIMIT 1)", MEMORY_CALLS_KEPT)


async def _drop_calls(conn: Any, ids: list[str]) -> None:
    """Remove the calls that put the memories ``ids``, in the caller's transaction."""
    if ids:
        await conn.execute("DELETE FROM memory_calls WHERE memory_id = ANY($1)",
                           [encode_text(i) for i in ids])


async def erase_memories(conn: Any, thread_id: str) -> int:
    """Remove the memories the thread sourced or that are kept for it, and the calls that
    put them, in the caller's transaction (``erase``); how many memories went."""
    gone = await conn.fetch("DELETE FROM memories WHERE thread_id = $1 OR scope = $2 "
                            "RETURNING id", thread_id,
                            scope_key(ThreadScope(thread_id=thread_id)))
    await _drop_calls(conn, [row["id"] for row in gone])
    return len(gone)
