"""The notes of the older ``memory`` tools become memories once (``serving.adopted``), on
every backend: a thread's notes that thread's memories, the ``agent`` notes workspace
memories, other notes left alone; done again (a restart, or a kill before the end) it writes
none twice and brings back none forgotten since."""

from __future__ import annotations

from collections.abc import Callable

from runtime import EchoProvider, Runtime, RuntimeConfig
from runtime.model.memories import (
    MAX_MEMORY_CHARS,
    Listing,
    ThreadScope,
    WorkspaceScope,
    cover,
)
from runtime.model.recollection import source_words
from runtime.model.requests import Note
from runtime.serving.adopted import ADOPTED_NOTES, NOTE_VIA, adopt_notes
from runtime.stores.erasure import stop_scope, thread_scope
from tests.runtime.stores.contract import AnyStore, started
from tests.runtime.stores.test_memories import here


def clock() -> float:
    return 500.0


async def _notes(store: AnyStore) -> None:
    await started(store, "t1")
    await started(store, "t2")  # a thread with no notes
    await store.put_note(Note(scope=thread_scope("t1"), key="standup", text="at 9:15",
                              updated_at=5.0))
    await store.put_note(Note(scope=thread_scope("t1"), key="long", text="x" * 5_000,
                              updated_at=6.0))
    await store.put_note(Note(scope="agent", key="team", text="the team is ops",
                              updated_at=7.0))
    await store.put_note(Note(scope=stop_scope("r1"), key="stop", text="alice"))
    await store.put_note(Note(scope="slack:T1:told", key="U1", text="told"))


async def test_each_note_becomes_one_memory(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    await _notes(store)

    assert await adopt_notes(store, clock) == 3

    found = await store.list_memories(Listing(), 10)
    by_key = {m.text.partition(":")[0]: m for m in found}
    assert sorted(by_key) == ["long", "standup", "team"]
    standup, team, long = by_key["standup"], by_key["team"], by_key["long"]
    assert (standup.text, team.text) == ("standup: at 9:15", "team: the team is ops")
    assert standup.scope == ThreadScope(thread_id="t1")
    assert (standup.provenance.channel, standup.provenance.place, standup.provenance.user,
            standup.provenance.thread_id, standup.provenance.via) == \
        ("slack", None, None, "t1", NOTE_VIA)
    assert standup.created_at == standup.provenance.at == 5.0
    assert team.scope == WorkspaceScope() and team.provenance.via == NOTE_VIA
    assert source_words(team).startswith("note, maiden, ")  # of no thread: none erases it
    assert len(long.text) == MAX_MEMORY_CHARS and long.text.endswith("x…")
    # The agent sees them where it saw the notes: the thread's in it, the agent's anywhere.
    assert {m.text for m in await store.search_memories("standup", cover(here("t1")), 5)} \
        == {"standup: at 9:15"}
    assert await store.search_memories("standup", cover(here("t2")), 5) == []
    assert [m.text for m in await store.search_memories("team", cover(here("t2")), 5)] == \
        ["team: the team is ops"]
    # The notes stay as they were; the record that they were adopted is a note too.
    assert [n.key for n in await store.notes(thread_scope("t1"))] == ["long", "standup"]
    assert len(await store.notes(ADOPTED_NOTES)) == 1
    async with new_store() as again:  # a restart: nothing more
        assert await adopt_notes(again, clock) == 0
        assert sorted(m.id for m in await again.list_memories(Listing(), 10)) == \
            sorted(m.id for m in found)


async def test_cut_short_it_goes_on_without_writing_one_twice(store: AnyStore) -> None:
    """A kill before the record of the end (here: the record removed) leaves some notes
    adopted; done again, it writes each of the others once, and not one forgotten since."""
    await _notes(store)
    assert await adopt_notes(store, clock) == 3
    forgotten = next(m for m in await store.list_memories(Listing(), 10)
                     if m.text.startswith("team:"))
    assert await store.delete_memory(forgotten.id)
    await store.delete_note(ADOPTED_NOTES, "done")
    await store.put_note(Note(scope=thread_scope("t2"), key="late", text="a later note",
                              updated_at=8.0))

    assert await adopt_notes(store, clock) == 1  # only the note never adopted

    texts = sorted(m.text[:16] for m in await store.list_memories(Listing(), 10))
    assert texts == ["late: a later no", "long: xxxxxxxxxx", "standup: at 9:15"]
    assert await store.get_memory(forgotten.id) is None


async def test_a_store_with_no_notes_is_recorded_adopted(store: AnyStore) -> None:
    assert await adopt_notes(store, clock) == 0
    assert [n.text for n in await store.notes(ADOPTED_NOTES)] == ["0 notes became memories"]
    await store.put_note(Note(scope="agent", key="k", text="written by an older replica"))
    assert await adopt_notes(store, clock) == 0
    assert await store.list_memories(Listing(), 10) == []


async def test_a_runtime_starting_makes_them_memories_the_tools_recall(
        store: AnyStore) -> None:
    await _notes(store)
    async with Runtime(store, EchoProvider(), settings=RuntimeConfig(poll_interval_s=0.1)
                       ) as rt:
        found = await rt.kept.memories.recall("standup", here("t1"), 5)
        assert [m.text for m in found] == ["standup: at 9:15"]
    assert len(await store.notes(ADOPTED_NOTES)) == 1
