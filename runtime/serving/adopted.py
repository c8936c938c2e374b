"""The notes of the older ``memory`` tools, made memories once, so the agent keeps seeing them.

Before memories, ``remember`` kept a note under a key, in its thread's scope
(``thread:{id}``, the default) or in the one scope of the whole maiden (``agent``, shared
by every agent whose tools said ``scope = "agent"``). The tools now read memories only, so
each such note becomes one memory, as a runtime starts:

- a thread note, a memory of that thread (``ThreadScope``), learned where the thread is
  (its newest run's channel, place and privacy: a DM's stays in the DM);
- an ``agent`` note, a workspace memory: that scope named no agent, and every agent of
  the maiden that kept notes there saw them (an ``AgentScope`` needs one agent's name,
  which a rename or a second agent would lose).

Its text is ``key: text`` (the older ``recall`` matched a note's key too), cut to a
memory's length; its provenance says ``via = "note"``, and names no one (a note did not
record who said it). The notes stay as they are: other parts keep notes of their own
(a person's stop of a run, who was told of a refusal, an OpenAI client's thread), which
are no one's memory and are left alone.

Once only, and safe to cut anywhere: each note is put under a call key of its own
(``note {scope} {key}``), so its memory's id is that key's and a put re-run after a kill
writes nothing more (nor brings back a memory forgotten since); when every note is
adopted, a note in ``ADOPTED_NOTES`` says so, and later starts read only that.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..errors import StoreError
from ..model.memories import (
    MAX_MEMORY_CHARS,
    Memory,
    MemoryScope,
    Provenance,
    ThreadScope,
    WorkspaceScope,
    memory_id,
)
from ..model.recollection import provenance_of
from ..model.requests import Note
from ..model.runs import Origin
from ..stores.base import Store
from ..stores.erasure import thread_scope

__all__ = ["ADOPTED_NOTES", "NOTE_VIA", "adopt_at_start", "adopt_notes", "note_memory"]

log = logging.getLogger("maiden.memories")

ADOPTED_NOTES = "maiden:notes-adopted"
"""The note scope whose one note says that the store's notes are memories now."""
NOTE_VIA = "note"
"""The provenance's ``via`` of a memory that was a note."""
AGENT_NOTES = "agent"
"""The scope of the older tools' notes shared by the whole maiden."""


async def adopt_at_start(store: Store, clock: Callable[[], float]) -> None:
    """``adopt_notes`` as a runtime starts: a store that cannot be written now (a full
    disk, a server gone) is no reason not to start; the next start goes on from there."""
    try:
        await adopt_notes(store, clock)
    except StoreError as exc:
        log.warning("the older memory tools' notes could not all become memories yet "
                    "(%s); the next start tries again", exc)


async def adopt_notes(store: Store, clock: Callable[[], float]) -> int:
    """Make each note of the older ``memory`` tools a memory, unless done before; how many
    memories were written now."""
    if await store.notes(ADOPTED_NOTES):
        return 0
    written = 0
    for thread in await store.list_threads():
        notes = await store.notes(thread_scope(thread.id))
        if notes:
            runs = await store.list_runs(thread_id=thread.id, limit=1)
            source = _thread_source(thread.id, runs[0].origin if runs else None)
            written += await _adopt(store, notes, ThreadScope(thread_id=thread.id), source)
    # No thread: "" is none (a thread id is never empty), so no erasure takes them.
    written += await _adopt(store, await store.notes(AGENT_NOTES), WorkspaceScope(),
                            Provenance(channel="maiden", thread_id="", via=NOTE_VIA, at=0))
    await store.put_note(Note(scope=ADOPTED_NOTES, key="done", updated_at=clock(),
                              text=f"{written} notes became memories"))
    if written:
        log.info("%d notes of the older memory tools became memories", written)
    return written


async def _adopt(store: Store, notes: list[Note], scope: MemoryScope,
                 source: Provenance) -> int:
    written = 0
    for note in notes:
        call = f"note {note.scope} {note.key}"
        if await store.put_memory(note_memory(note, scope, source, call), call):
            written += 1
    return written


def _thread_source(thread_id: str, origin: Origin | None) -> Provenance:
    """Where a thread's notes were learned: where its runs come from (no one named)."""
    if origin is None:
        return Provenance(thread_id=thread_id, via=NOTE_VIA, at=0)
    return provenance_of(origin, thread_id=thread_id, run_id="", at=0).model_copy(
        update={"user": None, "run_id": None, "via": NOTE_VIA})


def note_memory(note: Note, scope: MemoryScope, source: Provenance, call: str) -> Memory:
    """The memory a note becomes: ``key: text`` (cut to a memory's length), learned at
    ``source`` when the note was last written, its id the call's."""
    text = f"{note.key.strip()}: {note.text.strip()}"
    if len(text) > MAX_MEMORY_CHARS:
        text = text[:MAX_MEMORY_CHARS - 1] + "…"
    at = note.updated_at
    return Memory(id=memory_id(call), text=text, scope=scope,
                  provenance=source.model_copy(update={"at": at}),
                  created_at=at, updated_at=at)
