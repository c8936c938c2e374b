"""The store contract, notes (DESIGN §3): notes by scope and note calls applied once, on every
backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runtime.model.requests import Note, NoteCall
from runtime.stores.base import NOTE_CALLS_KEPT
from tests.runtime.stores.contract import AnyStore


async def test_notes_by_scope(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    a = Note(scope="thread:t1", key="standup", text="9:15", updated_at=1.0)
    b = Note(scope="thread:t1", key="deploy", text="fridays: never", updated_at=2.0)
    other = Note(scope="agent", key="standup", text="shared", updated_at=3.0)
    assert await store.notes("thread:t1") == []
    for note in (a, b, other):
        await store.put_note(note)
    changed = a.model_copy(update={"text": "9:30", "updated_at": 4.0})
    await store.put_note(changed)  # replaced, by scope and key
    async with new_store() as again:
        assert await again.notes("thread:t1") == [b, changed]
        assert await again.notes("agent") == [other]
    assert await store.delete_note("thread:t1", "deploy") is True
    assert await store.delete_note("thread:t1", "deploy") is False
    assert await store.notes("thread:t1") == [changed]
    hostile = Note(scope="thread:../../x", key="../k", text="t")
    await store.put_note(hostile)
    assert await store.notes("thread:../../x") == [hostile]


async def test_a_note_call_takes_effect_once(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    first = Note(scope="agent", key="k", text="v1", updated_at=1.0, written_by="call-a")
    other = Note(scope="agent", key="k", text="v2", updated_at=2.0, written_by="call-b")
    assert await store.put_note(first, "call-a") is True
    assert await store.put_note(other, "call-b") is True  # another thread, in between
    assert await store.put_note(first, "call-a") is False  # call a re-run: nothing changes
    assert await store.notes("agent") == [other]
    assert await store.delete_note("agent", "k", "call-c") is True
    assert await store.put_note(first, "call-d") is True
    assert await store.delete_note("agent", "k", "call-c") is True  # its first answer
    assert await store.delete_note("agent", "gone", "call-e") is False
    assert await store.delete_note("agent", "gone", "call-e") is False
    assert await store.notes("agent") == [first]
    async with new_store() as again:  # another process, or a restart, knows them
        assert await again.put_note(other, "call-b") is False
        assert await again.note_calls("agent") == [
            NoteCall(scope="agent", call="call-a", key="k"),
            NoteCall(scope="agent", call="call-b", key="k"),
            NoteCall(scope="agent", call="call-c", key="k", forget=True, existed=True),
            NoteCall(scope="agent", call="call-d", key="k"),
            NoteCall(scope="agent", call="call-e", key="gone", forget=True)]
    # Calls are applied per scope; without one, nothing is recorded.
    assert await store.put_note(first.model_copy(update={"scope": "thread:t"}), "call-a")
    assert await store.put_note(first.model_copy(update={"scope": "thread:u"})) is True
    assert await store.delete_note("thread:u", "k") is True
    assert [c.call for c in await store.note_calls("thread:t")] == ["call-a"]
    assert await store.note_calls("thread:u") == []


async def test_two_runs_of_one_note_call_apply_it_once(
        new_store: Callable[[], AnyStore]) -> None:
    async with new_store() as one, new_store() as two:
        for round_ in range(10):
            note = Note(scope="agent", key=f"k{round_}", text="v")
            put = await asyncio.gather(one.put_note(note, f"put-{round_}"),
                                       two.put_note(note, f"put-{round_}"))
            assert sorted(put) == [False, True], put
            gone = await asyncio.gather(one.delete_note("agent", note.key, f"del-{round_}"),
                                        two.delete_note("agent", note.key, f"del-{round_}"))
            assert list(gone) == [True, True], gone  # one removed it; the other, its answer
        assert len(await one.note_calls("agent")) == 20


async def test_the_newest_note_calls_are_kept(store: AnyStore) -> None:
    calls = [NoteCall(scope="agent", call=f"c{i}", key="k") for i in range(NOTE_CALLS_KEPT)]
    await store.save_note_calls(calls)
    await store.save_note_calls([calls[0].model_copy(update={"key": "changed"})])
    assert await store.note_calls("agent") == calls  # one recorded already is left as it is
    assert await store.note_calls("thread:t") == []
    assert await store.put_note(Note(scope="agent", key="k", text="v"), "c0") is False
    assert await store.put_note(Note(scope="agent", key="k", text="v"), "new") is True
    kept = await store.note_calls("agent")
    assert len(kept) == NOTE_CALLS_KEPT and [c.call for c in kept[:2]] == ["c1", "c2"]
    assert kept[-1].call == "new"
    # The oldest went: a re-run of it now (far past any crash's window) applies again.
    assert await store.put_note(Note(scope="agent", key="k", text="v"), "c0") is True


def test_a_note_written_before_its_writer_was_kept_still_reads() -> None:
    old = Note.model_validate_json('{"scope": "agent", "key": "k", "text": "t", '
                                   '"updated_at": 1.0}')
    assert old.written_by is None
