"""The files store's notes: ``notes/{sha256(scope)}`` one file per scope of notes and the
calls that changed them, rewritten whole under a lock (a scope has at most a few hundred
notes, and keeps its newest ``NOTE_CALLS_KEPT`` calls)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from ...model.requests import Note, NoteCall
from ..base import NOTE_CALLS_KEPT, NoteStore
from .core import FilesCore, parse_file
from .names import key_file_name

__all__ = ["FilesNotes"]


class FilesNotes(FilesCore, NoteStore):
    """The files store's ``NoteStore``."""

    async def notes(self, scope: str) -> list[Note]:
        return await self._disk.io(self._notes, scope)

    async def put_note(self, note: Note, call: str | None = None) -> bool:
        return await self._disk.io(self._change_notes, note.scope, note.key, note, call)

    async def delete_note(self, scope: str, key: str, call: str | None = None) -> bool:
        return await self._disk.io(self._change_notes, scope, key, None, call)

    async def note_calls(self, scope: str) -> list[NoteCall]:
        return await self._disk.io(self._note_calls, scope)

    async def save_note_calls(self, calls: Sequence[NoteCall]) -> None:
        await self._disk.io(self._save_note_calls, list(calls))

    # -- synchronous work, run in a worker thread

    def _notes_path(self, scope: str) -> Path:
        return self._folder("notes") / key_file_name(scope)

    def _notes(self, scope: str) -> list[Note]:
        path = self._notes_path(scope)
        if not path.exists():
            return []
        found = parse_file(path, _Notes).notes
        return [found[key] for key in sorted(found)]

    def _change_notes(self, scope: str, key: str, note: Note | None, call: str | None) -> bool:
        """Put (``note``) or delete under the scope's lock: a call found among the scope's
        is not applied again (a put answers False, a delete what it answered then)."""
        path = self._notes_path(scope)
        with self._disk.lock(path.with_suffix(".lock")):
            stored = parse_file(path, _Notes) if path.exists() else _Notes(scope=scope)
            done = stored.calls.get(call) if call is not None else None
            if done is not None:
                return done.existed if note is None else False
            existed = key in stored.notes
            notes = {k: v for k, v in stored.notes.items() if k != key}
            if note is not None:
                notes[key] = note
            calls = stored.calls
            if call is not None:
                record = NoteCall(scope=scope, call=call, key=key) if note is not None else \
                    NoteCall(scope=scope, call=call, key=key, forget=True, existed=existed)
                calls = _kept(calls | {call: record})
            self._disk.write(path, _Notes(scope=scope, notes=notes, calls=calls)
                            .model_dump_json().encode())
        return existed if note is None else True

    def _note_calls(self, scope: str) -> list[NoteCall]:
        path = self._notes_path(scope)
        return list(parse_file(path, _Notes).calls.values()) if path.exists() else []

    def _save_note_calls(self, calls: list[NoteCall]) -> None:
        for scope in dict.fromkeys(c.scope for c in calls):
            path = self._notes_path(scope)
            with self._disk.lock(path.with_suffix(".lock")):
                stored = parse_file(path, _Notes) if path.exists() else _Notes(scope=scope)
                added = {c.call: c for c in calls
                         if c.scope == scope and c.call not in stored.calls}
                self._disk.write(path, stored.model_copy(
                    update={"calls": _kept(stored.calls | added)}).model_dump_json().encode())


class _Notes(BaseModel):
    scope: str
    notes: dict[str, Note] = {}
    calls: dict[str, NoteCall] = {}
    """By idempotency key, oldest first (a JSON object keeps its order)."""


def _kept(calls: dict[str, NoteCall]) -> dict[str, NoteCall]:
    """The newest ``NOTE_CALLS_KEPT`` calls."""
    return dict(list(calls.items())[-NOTE_CALLS_KEPT:])
