"""The store contract, memories beyond one conversation (DESIGN §3): a person forgotten
(every memory they said or that is about them, with its calls, and no trace of it left),
and the calls applied read and recorded again (what ``maiden migrate`` copies); on every
backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

from runtime.model.memories import Listing, MemoryCall, PersonScope, ThreadScope
from tests.runtime.stores.contract import AnyStore
from tests.runtime.stores.test_erasure import traces
from tests.runtime.stores.test_memories import ALICE, EVERYWHERE, memory, source

BOB = "slack:UBOB"


async def test_forgetting_a_person_takes_what_they_said_and_what_is_about_them(
        store: AnyStore, backend: str, tmp_path: Path,
        new_store: Callable[[], AnyStore]) -> None:
    marker = f"marker{uuid4().hex}"
    said = memory(f"{marker} said by alice", memory_id="m-said")  # source(): ALICE's
    about = memory(f"{marker} about alice", PersonScope(user=ALICE), memory_id="m-about",
                   said=source().model_copy(update={"user": BOB}))
    bobs = memory("bob's own", PersonScope(user=BOB), memory_id="m-bob",
                  said=source().model_copy(update={"user": BOB}))
    named = memory(f"{marker} names slack:UALICE in its text only", memory_id="m-text",
                   said=source().model_copy(update={"user": "slack:UALICE2"}))
    for kept in (said, about, bobs, named):
        assert await store.put_memory(kept, f"call-{kept.id}")

    assert await store.erase_person(ALICE) == 2

    async with new_store() as again:
        for reader in (store, again):
            assert await reader.get_memory("m-said") is None
            assert await reader.get_memory("m-about") is None
            assert await reader.list_memories(Listing(people=(ALICE,)), 10) == []
            assert {m.id for m in await reader.list_memories(Listing(), 10)} == \
                {"m-bob", "m-text"}
            assert {c.memory_id for c in await reader.memory_calls()} == {"m-bob", "m-text"}
    # Its calls went with it: nothing of it is left, in a file, a row or an index.
    assert await traces(store, backend, tmp_path, ["m-said", "m-about", "said by alice"]) == []
    assert await store.erase_person(ALICE) == 0  # asked again: nothing more
    assert await store.erase_person("slack:UNOBODY") == 0


async def test_memory_calls_read_and_recorded_again(store: AnyStore) -> None:
    """What ``maiden migrate`` copies: the calls applied, oldest first, so that a call re-run
    in the other store changes nothing; a call recorded already stays as it was."""
    kept = memory("deploys on tuesdays", ThreadScope(thread_id="t1"), memory_id="m1")
    assert await store.put_memory(kept, "put-1")
    assert await store.delete_memory("m1", "del-1") is True
    assert await store.delete_memory("m-none", "del-2") is False
    recorded = await store.memory_calls()
    assert sorted(recorded, key=lambda c: c.call) == [
        MemoryCall(call="del-1", memory_id="m1", forget=True, existed=True),
        MemoryCall(call="del-2", memory_id="m-none", forget=True),
        MemoryCall(call="put-1", memory_id="m1")]

    elsewhere = MemoryCall(call="put-9", memory_id="m9")
    await store.save_memory_calls([MemoryCall(call="put-1", memory_id="other"), elsewhere])
    await store.save_memory_calls([])
    assert sorted(await store.memory_calls(), key=lambda c: c.call) == sorted(
        [*recorded, elsewhere], key=lambda c: c.call)
    nine = memory("a re-run writes nothing", memory_id="m9")
    assert await store.put_memory(nine, "put-9") is False
    assert await store.search_memories("", EVERYWHERE, 10) == []
