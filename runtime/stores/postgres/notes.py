"""The PostgreSQL store's notes and the calls that changed them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...model.requests import Note, NoteCall
from ..base import NOTE_CALLS_KEPT, NoteStore
from .core import PostgresCore

__all__ = ["PostgresNotes"]


class PostgresNotes(PostgresCore, NoteStore):
    """The PostgreSQL store's ``NoteStore``."""

    async def notes(self, scope: str) -> list[Note]:
        return await self._parsed(Note.model_validate_json,
                                  "SELECT data FROM notes WHERE scope = $1 ORDER BY key", scope)

    async def put_note(self, note: Note, call: str | None = None) -> bool:
        async with self._transaction() as conn:
            if call is not None and not await _claim_note_call(
                    conn, NoteCall(scope=note.scope, call=call, key=note.key)):
                return False
            await conn.execute("INSERT INTO notes VALUES ($1, $2, $3) ON CONFLICT (scope, key) "
                               "DO UPDATE SET data = excluded.data",
                               note.scope, note.key, note.model_dump_json())
        return True

    async def delete_note(self, scope: str, key: str, call: str | None = None) -> bool:
        async with self._transaction() as conn:
            if call is not None and not await _claim_note_call(
                    conn, NoteCall(scope=scope, call=call, key=key, forget=True)):
                done = await conn.fetchval("SELECT data FROM note_calls WHERE scope = $1 "
                                           "AND call = $2", scope, call)
                return NoteCall.model_validate_json(done).existed
            existed = await conn.fetchval("DELETE FROM notes WHERE scope = $1 AND key = $2 "
                                          "RETURNING true", scope, key) is not None
            if call is not None and existed:  # the answer a re-run gets
                await conn.execute(
                    "UPDATE note_calls SET data = $3 WHERE scope = $1 AND call = $2", scope,
                    call, NoteCall(scope=scope, call=call, key=key, forget=True,
                                   existed=True).model_dump_json())
        return existed

    async def note_calls(self, scope: str) -> list[NoteCall]:
        return await self._parsed(NoteCall.model_validate_json,
                                  "SELECT data FROM note_calls WHERE scope = $1 ORDER BY n",
                                  scope)

    async def save_note_calls(self, calls: Sequence[NoteCall]) -> None:
        if not calls:
            return
        async with self._transaction() as conn:
            await conn.executemany("INSERT INTO note_calls (scope, call, data) VALUES "
                                   "($1, $2, $3) ON CONFLICT DO NOTHING",
                                   [(c.scope, c.call, c.model_dump_json()) for c in calls])
            for scope in dict.fromkeys(c.scope for c in calls):
                await _keep_newest_note_calls(conn, scope)


async def _claim_note_call(conn: Any, record: NoteCall) -> bool:
    """Record the call, in the caller's transaction; False if it is recorded already. A
    transaction recording the same call at once is waited for (ON CONFLICT), so of two
    re-runs together one applies the call and the other finds it applied."""
    claimed = await conn.fetchval("INSERT INTO note_calls (scope, call, data) VALUES "
                                  "($1, $2, $3) ON CONFLICT DO NOTHING RETURNING true",
                                  record.scope, record.call, record.model_dump_json())
    if claimed:
        await _keep_newest_note_calls(conn, record.scope)
    return bool(claimed)


async def _keep_newest_note_calls(conn: Any, scope: str) -> None:
    await conn.execute("DELETE FROM note_calls WHERE scope = $1 AND n <= (SELECT n FROM "
                       "note_calls WHERE scope = $1 ORDER BY n DESC OFFSET $2 LIMIT 1)",
                       scope, NOTE_CALLS_KEPT)
