"""The ``notes`` service: what the ``memory`` tools keep in the store, per scope."""

from __future__ import annotations

from collections.abc import Callable

from ..model.requests import Note
from ..stores.base import NoteStore

__all__ = ["Notes"]


class Notes:
    """Notes of a scope (``thread:{id}`` or ``agent``), written exactly once per call."""

    def __init__(self, store: NoteStore, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock

    async def notes(self, scope: str) -> list[Note]:
        """The notes of a scope, by key."""
        return await self._store.notes(scope)

    async def remember(self, scope: str, key: str, text: str,
                       call: str | None = None) -> Note | None:
        """Keep a note (replacing the scope's note of that key); the note written, or None
        if the call of idempotency key ``call`` already took effect in the scope (then
        nothing changes, even if another call rewrote the key since)."""
        note = Note(scope=scope, key=key, text=text, updated_at=self._clock(), written_by=call)
        return note if await self._store.put_note(note, call) else None

    async def forget(self, scope: str, key: str, call: str | None = None) -> bool:
        """Remove a note; False if there was none. A ``call`` (idempotency key) that already
        took effect in the scope changes nothing and gets the answer it got then."""
        return await self._store.delete_note(scope, key, call)
