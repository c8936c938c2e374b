"""The store contract, memories (DESIGN §3): put, get, edit and delete; calls applied once;
search ranked and narrowed by a conversation's cover; expiry; a thread's erasure takes the
memories it sourced; on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

from runtime.model.memories import (
    AgentScope,
    Cover,
    Here,
    Listing,
    Memory,
    MemoryScope,
    PersonScope,
    PlaceScope,
    Provenance,
    ThreadScope,
    WorkspaceScope,
    cover,
)
from runtime.stores.base import Checkpoint
from tests.runtime.stores.contract import AnyStore, S, advance, started
from tests.runtime.stores.test_erasure import traces

ALICE = "slack:UALICE"


def source(thread: str = "t1", *, place: str | None = "C1", private: bool = False) -> Provenance:
    return Provenance(user=ALICE, user_name="Alice", channel="slack", place=place,
                      private=private, thread_id=thread, run_id="r1", message="171.1", at=10.0)


def memory(text: str, scope: MemoryScope | None = None, *, memory_id: str | None = None,
           at: float = 10.0, expires_at: float | None = None,
           said: Provenance | None = None) -> Memory:
    return Memory(id=memory_id or f"m-{uuid4().hex}", text=text,
                  scope=scope or WorkspaceScope(), provenance=said or source(),
                  expires_at=expires_at, created_at=at, updated_at=at)


def here(thread: str = "t1", place: str | None = "C1", *, at: float = 100.0,
         people: frozenset[str] = frozenset({ALICE}), agent: str = "main") -> Here:
    return Here(channel="slack", place=place, thread_id=thread, agent=agent, people=people,
                at=at)


EVERYWHERE = cover(here())


async def test_put_get_edit_delete(store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    kept = memory("The standup is at 9:15, Mon-Thu 日本語 \"quoted\"",
                  PlaceScope(channel="slack", place="C1"), memory_id="m/../1")
    assert await store.get_memory(kept.id) is None
    assert await store.put_memory(kept) is True
    async with new_store() as again:  # a restart, or another process, reads it
        assert await again.get_memory(kept.id) == kept
    edited = await store.edit_memory(kept.id, "The standup is at 9:30", "slack:UBOB", 20.0)
    assert edited == kept.model_copy(update={"text": "The standup is at 9:30",
                                             "edited_by": "slack:UBOB", "updated_at": 20.0})
    assert await store.get_memory(kept.id) == edited
    assert await store.edit_memory("nope", "x", "slack:UBOB", 21.0) is None
    replaced = edited.model_copy(update={"text": "put again, by id"})
    assert await store.put_memory(replaced) is True
    assert await store.get_memory(kept.id) == replaced
    assert await store.delete_memory(kept.id) is True
    assert await store.delete_memory(kept.id) is False
    assert await store.get_memory(kept.id) is None
    assert await store.search_memories("", EVERYWHERE, 10) == []


async def test_a_memory_call_takes_effect_once(
        store: AnyStore, new_store: Callable[[], AnyStore]) -> None:
    first = memory("deploys happen on tuesdays", memory_id="m1")
    assert await store.put_memory(first, "call-a") is True
    assert await store.put_memory(first, "call-a") is False  # re-run: nothing written twice
    assert await store.search_memories("deploys", EVERYWHERE, 10) == [first]
    assert await store.delete_memory("m1", "call-b") is True
    assert await store.put_memory(first, "call-a") is False  # a re-run does not bring it back
    assert await store.get_memory("m1") is None
    assert await store.delete_memory("m1", "call-b") is True  # its first answer
    assert await store.delete_memory("m2", "call-c") is False
    async with new_store() as again:
        assert await again.put_memory(first, "call-a") is False
        assert await again.delete_memory("m1", "call-b") is True
        assert await again.get_memory("m1") is None
    assert await store.put_memory(first) is True  # without a call, nothing is recorded
    assert await store.put_memory(first) is True


async def test_two_runs_of_one_memory_call_apply_it_once(
        new_store: Callable[[], AnyStore]) -> None:
    async with new_store() as one, new_store() as two:
        for round_ in range(5):
            kept = memory("same call twice", memory_id=f"m{round_}")
            put = await asyncio.gather(one.put_memory(kept, f"put-{round_}"),
                                       two.put_memory(kept, f"put-{round_}"))
            assert sorted(put) == [False, True], put
            gone = await asyncio.gather(one.delete_memory(kept.id, f"del-{round_}"),
                                        two.delete_memory(kept.id, f"del-{round_}"))
            assert list(gone) == [True, True], gone  # one removed it; the other, its answer


async def test_search_ranks_the_better_match_first(store: AnyStore) -> None:
    both = memory("the release train leaves friday", at=1.0)
    one = memory("the train to the office is slow", at=3.0)
    other = memory("lunch is at noon", at=2.0)
    for kept in (both, one, other):
        await store.put_memory(kept)
    assert await store.search_memories("release train", EVERYWHERE, 10) == [both, one]
    assert await store.search_memories("Release, TRAIN?", EVERYWHERE, 1) == [both]
    assert await store.search_memories("nothing matches", EVERYWHERE, 10) == []
    # Operators of the engines' query languages are words like any other.
    assert await store.search_memories('train" OR lunch* -"x', EVERYWHERE, 10) != []
    # No words: the most recently updated first.
    assert await store.search_memories("  ", EVERYWHERE, 10) == [one, other, both]
    assert await store.search_memories("", EVERYWHERE, 2) == [one, other]


async def test_search_keeps_to_the_cover(store: AnyStore) -> None:
    planted = {
        "thread": memory("zebra thread", ThreadScope(thread_id="t1")),
        "other thread": memory("zebra other thread", ThreadScope(thread_id="t2")),
        "place": memory("zebra place", PlaceScope(channel="slack", place="C1")),
        "other place": memory("zebra other place", PlaceScope(channel="slack", place="C2")),
        "discord place": memory("zebra discord", PlaceScope(channel="discord", place="C1")),
        "person": memory("zebra alice", PersonScope(user=ALICE)),
        "other person": memory("zebra bob", PersonScope(user="slack:UBOB")),
        "agent": memory("zebra agent", AgentScope(agent="main")),
        "other agent": memory("zebra ops", AgentScope(agent="ops")),
        "workspace": memory("zebra workspace"),
        "dm": memory("zebra dm", said=source("t9", place="D1", private=True)),
        "dm here": memory("zebra dm here", said=source("t1", place="C1", private=True)),
    }
    for kept in planted.values():
        await store.put_memory(kept)
    where = cover(here())
    found = {m.text for m in await store.search_memories("zebra", where, 50)}
    assert found == {planted[k].text for k in ("thread", "place", "person", "agent",
                                               "workspace", "dm here")}
    assert {m.text for m in await store.search_memories("", where, 50)} == found
    nobody = Cover(scopes=(), places=(), at=100.0)
    assert await store.search_memories("zebra", nobody, 50) == []


async def test_the_best_match_in_a_scope_not_covered_is_never_found(store: AnyStore) -> None:
    """The index narrows by scope, the rows decide: a memory the conversation cannot see is
    not found however well it matches, nor one moved out of its scope; one moved into it
    is."""
    question = "which database does the staging cluster use"
    best = memory("the staging cluster database: staging uses database db-7 on the cluster",
                  ThreadScope(thread_id="t2"), at=5.0)
    private = memory("staging cluster database db-7, which staging uses",
                     said=source("t9", place="D1", private=True), at=5.0)
    moved = memory("the staging database", memory_id="m-moved", at=3.0)
    weak = memory("the cluster", at=1.0)
    for kept in (best, private, moved, weak):
        await store.put_memory(kept)
    assert await store.search_memories(question, EVERYWHERE, 1) == [moved]
    assert await store.search_memories(question, EVERYWHERE, 10) == [moved, weak]
    away = moved.model_copy(update={"scope": ThreadScope(thread_id="t2"), "updated_at": 4.0})
    await store.put_memory(away)
    assert await store.search_memories(question, EVERYWHERE, 10) == [weak]
    assert await store.search_memories(question, cover(here("t2")), 10) == [best, away, weak]
    back = best.model_copy(update={"scope": WorkspaceScope(), "updated_at": 6.0})
    await store.put_memory(back)
    assert await store.search_memories(question, EVERYWHERE, 1) == [back]


async def test_a_word_most_memories_hold_still_finds_and_ranks(store: AnyStore) -> None:
    """A word held by many memories (a third here) is a word like any other: a memory holding
    only it is found when nothing better is, and of two holding the rarer word, the one
    holding the common one too comes first."""
    for i in range(30):
        await store.put_memory(memory(f"deploy number {i}", at=float(i)))
    for i in range(60):
        await store.put_memory(memory(f"lunch at noon {i}", at=float(i)))
    plain = memory("a zebra grazes", at=50.0)
    with_it = memory("the zebra deploy grazes", at=40.0)
    for kept in (plain, with_it):
        await store.put_memory(kept)
    assert await store.search_memories("deploy zebra", EVERYWHERE, 2) == [with_it, plain]
    found = await store.search_memories("deploy zebra", EVERYWHERE, 4)
    assert found[:2] == [with_it, plain] and len(found) == 4
    assert {m.text for m in found[2:]} <= {f"deploy number {i}" for i in range(30)}
    assert len(await store.search_memories("deploy", EVERYWHERE, 50)) == 31


async def test_a_listing_filters_newest_first(store: AnyStore) -> None:
    bob = Provenance(user="slack:UBOB", channel="slack", place="C1", thread_id="t2", at=1.0)
    planted = {
        "alice says": memory("zebra workspace", at=1.0),
        "about alice": memory("zebra likes tea", PersonScope(user=ALICE), said=bob, at=2.0),
        "bob says": memory("zebra bob place", PlaceScope(channel="slack", place="C1"),
                           said=bob, at=3.0),
        "for t1": memory("kept for t1", ThreadScope(thread_id="t1"), said=bob, at=4.0),
        "stale": memory("zebra stale", said=bob, at=5.0, expires_at=50.0),
        "tricky": memory('"provenance":{"user":"slack:UALICE",', said=bob, at=6.0),
    }
    for kept in planted.values():
        await store.put_memory(kept)

    async def listed(limit: int = 50, **filters: object) -> list[str]:
        found = await store.list_memories(Listing.model_validate(filters), limit)
        return [k for m in found for k, v in planted.items() if v.id == m.id]

    assert await listed() == ["tricky", "stale", "for t1", "bob says", "about alice",
                              "alice says"]
    assert await listed(2) == ["tricky", "stale"]
    assert await listed(at=100.0, query="zebra") == ["bob says", "about alice", "alice says"]
    assert await listed(people=(ALICE,)) == ["about alice", "alice says"]
    assert await listed(people=(ALICE, "slack:UBOB")) == await listed()
    assert await listed(people=()) == []
    assert await listed(kind="person") == ["about alice"]
    assert await listed(kind="place", query="zebra") == ["bob says"]
    assert await listed(thread_id="t1") == ["for t1", "alice says"]
    assert await listed(people=("slack:UNOBODY",)) == []
    assert await listed(query="nothing matches") == []


async def test_expired_memories_are_not_returned(store: AnyStore) -> None:
    fresh = memory("kiwi until later", expires_at=200.0)
    stale = memory("kiwi gone", expires_at=50.0)
    edge = memory("kiwi at the edge", expires_at=100.0)
    for kept in (fresh, stale, edge):
        await store.put_memory(kept)
    assert await store.search_memories("kiwi", cover(here(at=100.0)), 10) == [fresh]
    assert await store.search_memories("", cover(here(at=100.0)), 10) == [fresh]
    assert await store.search_memories("kiwi", cover(here(at=300.0)), 10) == []
    assert await store.get_memory(stale.id) == stale  # kept: expiry hides it from search


async def test_erasing_a_thread_erases_the_memories_it_sourced(
        store: AnyStore, backend: str, tmp_path: Path,
        new_store: Callable[[], AnyStore]) -> None:
    marker = f"marker{uuid4().hex}"
    gone_id, kept_id = f"erase-{uuid4().hex}", f"keep-{uuid4().hex}"
    for thread_id in (gone_id, kept_id):
        run = await started(store, thread_id)
        ended, step = advance(run, S.COMPLETED)
        await store.commit(Checkpoint(thread_id, None, run=ended, transitions=[step]))
    sourced = memory(f"{marker} learned here", said=source(gone_id), memory_id="m-sourced",
                     at=10.0)
    kept_for = memory(f"{marker} kept for it", ThreadScope(thread_id=gone_id),
                      said=source(kept_id), memory_id="m-for", at=11.0)
    other = memory("learned elsewhere", said=source(kept_id), memory_id="m-other")
    await store.put_memory(sourced, "call-sourced")
    await store.put_memory(kept_for, "call-for")
    await store.put_memory(other, "call-other")
    assert await store.memories_of_thread(gone_id) == [sourced, kept_for]
    assert await store.search_memories(marker, EVERYWHERE, 10) == [sourced]

    erased = await store.delete_thread(gone_id)

    assert erased.memories == 2 and erased.runs == 1
    async with new_store() as again:
        for reader in (store, again):
            assert await reader.memories_of_thread(gone_id) == []
            assert await reader.get_memory("m-sourced") is None
            assert await reader.search_memories(marker, EVERYWHERE, 10) == []
            assert await reader.memories_of_thread(kept_id) == [other]
    # The index's scope column holds the thread's key in hex: none of it is left either.
    needles = [marker, gone_id, "m-sourced", "m-for", gone_id.encode().hex()]
    assert await traces(store, backend, tmp_path, needles) == []
    assert (await store.delete_thread(gone_id)).memories == 0
