"""The SQLite store's notes and the calls that changed them (the rows are ``sql``'s)."""

from __future__ import annotations

from collections.abc import Sequence

from ...model.requests import Note, NoteCall
from ..base import NoteStore
from .core import SQLiteCore
from .sql import delete_note_row, put_note_row, record_note_calls

__all__ = ["SQLiteNotes"]


class SQLiteNotes(SQLiteCore, NoteStore):
    """The SQLite store's ``NoteStore``."""

    async def notes(self, scope: str) -> list[Note]:
        rows = await self._fetchall("SELECT data FROM notes WHERE scope = ? ORDER BY key",
                                    (scope,))
        return [Note.model_validate_json(row[0]) for row in rows]

    async def put_note(self, note: Note, call: str | None = None) -> bool:
        return await self._write(put_note_row, note, call)

    async def delete_note(self, scope: str, key: str, call: str | None = None) -> bool:
        return await self._write(delete_note_row, scope, key, call)

    async def note_calls(self, scope: str) -> list[NoteCall]:
        rows = await self._fetchall("SELECT data FROM note_calls WHERE scope = ? "
                                    "ORDER BY rowid", (scope,))
        return [NoteCall.model_validate_json(row[0]) for row in rows]

    async def save_note_calls(self, calls: Sequence[NoteCall]) -> None:
        if calls:
            await self._write(record_note_calls, list(calls))
