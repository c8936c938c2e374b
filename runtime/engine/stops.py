"""A person's stop that must outlive a crash: written before it is acknowledged.

A chat platform's stop button (Slack's ``agent_session_stopped``) is acknowledged once
maiden has it; a process killed between that and the run's cancellation must still
cancel the run, not answer it. So the stop is written first, as a note of its own scope
(``maiden:stop:{run id}``, once per request: a platform's retry of the same request finds
its key taken), and the run is cancelled after; a run taken up again by a later process
(recovered, continued, or queued before it started) looks for a stop first and, finding
one, ends ``cancelled`` instead of going on. A run resumed by a person after that is a
later wish than the stop: the resume clears it (``clear_stop``), so the run goes on (else
it would be cancelled again as it is taken up, once per resume).
"""

from __future__ import annotations

from ..model.requests import Note
from ..stores.base import NoteStore
from ..stores.erasure import stop_scope

__all__ = ["clear_stop", "record_stop", "stop_requested"]



async def record_stop(store: NoteStore, run_id: str, *, by: str, key: str, at: float) -> bool:
    """Write a stop of ``run_id`` asked by ``by`` (``key``: the request's identity); False
    if that request was written before (nothing more to do for it)."""
    note = Note(scope=stop_scope(run_id), key="stop", text=by, updated_at=at, written_by=key)
    return await store.put_note(note, key)


async def stop_requested(store: NoteStore, run_id: str) -> str | None:
    """Who asked to stop ``run_id`` (``""``: someone unnamed), or None if nobody did."""
    notes = await store.notes(stop_scope(run_id))
    return notes[0].text if notes else None


async def clear_stop(store: NoteStore, run_id: str) -> None:
    """Forget the stop of ``run_id`` (it is resumed): nothing if there is none."""
    await store.delete_note(stop_scope(run_id), "stop")
