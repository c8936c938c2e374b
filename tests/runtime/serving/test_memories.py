"""The memories service (runtime/serving/memories.py), on SQLite: a scope its writer may not
write is refused with the reason, a call is kept once, and a recall shows only what is
visible where it happens, however many hidden memories rank above."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runtime.errors import MemoryRefused
from runtime.model.memories import (
    Cover,
    Here,
    Memory,
    MemoryScope,
    PersonScope,
    PlaceScope,
    Provenance,
    ThreadScope,
    WorkspaceScope,
    Writer,
    cover,
    kinds,
    place_key,
)
from runtime.serving.memories import Memories
from runtime.stores.sqlite import SQLiteStore

ALICE, BOB = "slack:UALICE", "slack:UBOB"
TALKER = Writer(agent="main", rights=frozenset({"talk"}))
OPS = Writer(agent="main", rights=frozenset({"talk", "operate"}))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "maiden.db") as opened:
        yield opened


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def memories(store: SQLiteStore, clock: Clock) -> Memories:
    return Memories(store, clock)


def said(thread: str = "t1", place: str = "C1", *, private: bool = False,
         user: str = ALICE) -> Provenance:
    return Provenance(user=user, user_name="Alice", channel="slack", place=place,
                      private=private, thread_id=thread, run_id="r1", at=1000.0)


def here(thread: str = "t1", place: str = "C1", *, people: frozenset[str] = frozenset({ALICE}),
         at: float = 1000.0) -> Here:
    return Here(channel="slack", place=place, thread_id=thread, agent="main", people=people,
                at=at)


@pytest.mark.parametrize(("scope", "writer", "says"), [
    (WorkspaceScope(), TALKER, "needs the operate right"),
    (PersonScope(user=BOB), TALKER, "written by that person"),
    (PlaceScope(channel="slack", place="C2"), TALKER, "another place needs operate"),
    (ThreadScope(thread_id="t1"), Writer(agent="main", allowed=kinds(["person"])),
     "does not allow thread memories"),
])
async def test_a_scope_the_writer_may_not_write_is_refused(
        memories: Memories, store: SQLiteStore, scope: MemoryScope, writer: Writer,
        says: str) -> None:
    with pytest.raises(MemoryRefused, match=says):
        await memories.remember("the deploy window is friday", scope, said(), writer)
    assert await store.memories_of_thread("t1") == []


@pytest.mark.parametrize(("text", "says"), [("   ", "needs some text"),
                                            ("x" * 2_001, "at most 2,000 characters")])
async def test_a_text_that_is_no_statement_is_refused(memories: Memories, text: str,
                                                      says: str) -> None:
    with pytest.raises(MemoryRefused, match=says):
        await memories.remember(text, ThreadScope(thread_id="t1"), said(), TALKER)


async def test_a_call_keeps_its_memory_once(memories: Memories, clock: Clock) -> None:
    kept = await memories.remember("  standup at 9:15  ", PlaceScope(channel="slack", place="C1"),
                                   said(), TALKER, call="call-1")
    assert kept is not None and kept.text == "standup at 9:15" and kept.created_at == 1000.0
    clock.now += 5
    again = await memories.remember("standup at 9:15", PlaceScope(channel="slack", place="C1"),
                                    said(), TALKER, call="call-1")
    assert again is None
    assert await memories.recall("standup", here()) == [kept]
    assert await memories.forget(kept.id, here(), call="call-2") is True
    assert await memories.forget(kept.id, here(), call="call-2") is True  # its first answer
    assert await memories.recall("standup", here()) == []


async def test_recall_shows_only_what_is_visible_here(memories: Memories) -> None:
    public = await memories.remember("the wifi password is on the fridge",
                                     WorkspaceScope(), said(), OPS)
    # Learned in Alice's DM: confined to it, though workspace-scoped.
    secret = await memories.remember("the wifi password is hunter2", WorkspaceScope(),
                                     said("t-dm", "D1", private=True), OPS)
    mine = await memories.remember("alice's wifi works best in room 2",
                                   PersonScope(user=ALICE), said(), TALKER)
    assert await memories.recall("wifi password", here()) == [public, mine]
    assert await memories.recall("wifi password", here("t-dm", "D1")) == [secret, public, mine]
    assert await memories.recall("wifi", here(people=frozenset({BOB}))) == [public]
    assert public is not None and secret is not None
    assert await memories.get(secret.id, here()) is None
    assert await memories.forget(secret.id, here()) is False  # not visible: not removed
    assert await memories.get(secret.id, here("t-dm", "D1")) == secret


class Coarse(SQLiteStore):
    """A store whose coarse filter is coarser than it need be (the contract allows it): it
    lets another place's memories through too."""

    async def search_memories(self, query: str, where: Cover, limit: int) -> list[Memory]:
        wider = where.model_copy(update={"scopes": (*where.scopes, place_key("slack", "C2"))})
        return await super().search_memories(query, wider, limit)


async def test_recall_looks_past_hidden_memories_that_rank_first(
        tmp_path: Path, clock: Clock) -> None:
    async with Coarse(tmp_path / "coarse.db") as store:
        memories = Memories(store, clock)
        for n in range(30):  # the better matches, of a place not here
            await memories.remember(f"pager rota pager rota {n}",
                                    PlaceScope(channel="slack", place="C2"),
                                    said(place="C2"), TALKER)
        shown = await memories.remember("pager", WorkspaceScope(), said(), OPS)
        assert len(await store.search_memories("pager rota", cover(here()), 31)) == 31
        assert await memories.recall("pager rota", here(), limit=1) == [shown]
        assert await memories.recall("pager rota", here(), limit=5) == [shown]


async def test_edit_keeps_who_edited(memories: Memories, clock: Clock) -> None:
    kept = await memories.remember("lunch at noon", ThreadScope(thread_id="t1"), said(), TALKER)
    assert kept is not None
    clock.now = 1200.0
    edited = await memories.edit(kept.id, "lunch at one", BOB, here())
    assert edited is not None and (edited.text, edited.edited_by, edited.updated_at) == (
        "lunch at one", BOB, 1200.0)
    assert await memories.edit(kept.id, "lunch at two", BOB, here("t2")) is None  # not here
    assert await memories.recall("lunch", here()) == [edited]
