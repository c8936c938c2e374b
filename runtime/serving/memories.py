"""The ``memories`` service: what a team's agent remembers, kept where its writer may keep
it and recalled only where it may be seen (``model.memories`` decides both)."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import MemoryRefused
from ..model.memories import (
    MAX_MEMORY_CHARS,
    Here,
    Listing,
    Memory,
    MemoryScope,
    Provenance,
    Writer,
    cover,
    memory_id,
    visible,
    write_refusal,
)
from ..model.recollection import person
from ..stores.base import MemoryStore, RunStore

__all__ = ["MOST_READ", "PEOPLE_RUNS", "Memories"]

MOST_READ = 1_000
"""The most memories one recall reads from the store before it stops looking for more that
are visible (the store's coarse filter lets through few that are not)."""

PEOPLE_RUNS = 200
"""How many of a thread's newest runs name its people (``Memories.people``): one read of
that many runs, whatever the thread's length."""


class Memories:
    """Memories written exactly once per call, and recalled through ``visible``."""

    def __init__(self, store: MemoryStore, clock: Callable[[], float],
                 runs: RunStore | None = None) -> None:
        self._store = store
        self._clock = clock
        self._runs = runs

    def now(self) -> float:
        """The time by this service's clock (what a memory's provenance records)."""
        return self._clock()

    async def people(self, thread_id: str) -> frozenset[str]:
        """The people of a thread (``slack:U123``): the senders of its newest runs (of
        ``PEOPLE_RUNS``), whose person memories its conversation may recall."""
        if self._runs is None:
            return frozenset()
        runs = await self._runs.list_runs(thread_id=thread_id, limit=PEOPLE_RUNS)
        found = (person(r.origin.channel, r.origin.user) for r in runs)
        return frozenset(p for p in found if p is not None)

    async def remember(self, text: str, scope: MemoryScope, source: Provenance,
                       writer: Writer, *, call: str | None = None,
                       expires_at: float | None = None) -> Memory | None:
        """Keep a memory of ``scope`` learned at ``source``; the memory written, or None if
        the call of idempotency key ``call`` already took effect (then nothing changes).
        ``MemoryRefused`` says why when ``writer`` may not write that scope (the table in
        ``model.memories``), or the text is not a short statement."""
        text = text.strip()
        if not text:
            raise MemoryRefused("a memory needs some text")
        if len(text) > MAX_MEMORY_CHARS:
            raise MemoryRefused(f"a memory is a short statement: at most {MAX_MEMORY_CHARS:,} "
                                f"characters, this one has {len(text):,}")
        why = write_refusal(scope, source, writer)
        if why is not None:
            raise MemoryRefused(f"cannot keep this memory: {why}")
        now = self._clock()
        if expires_at is not None and expires_at <= now:
            raise MemoryRefused("a memory cannot expire before it is kept")
        memory = Memory(id=memory_id(call), text=text, scope=scope, provenance=source,
                        expires_at=expires_at, created_at=now, updated_at=now)
        return memory if await self._store.put_memory(memory, call) else None

    async def recall(self, query: str, here: Here, limit: int = 10) -> list[Memory]:
        """At most ``limit`` memories visible ``here`` that hold a word of ``query``, best
        first (the most recent, for a query with no words): the store's search through the
        conversation's coarse filter, then ``visible``, then the limit."""
        if limit <= 0:
            return []
        where = cover(here)
        ask = limit
        while True:
            found = await self._store.search_memories(query, where, ask)
            shown = [memory for memory in found if visible(memory, here)]
            if len(shown) >= limit or len(found) < ask or ask >= MOST_READ:
                return shown[:limit]
            ask = min(ask * 4, MOST_READ)

    async def listing(self, listing: Listing, limit: int = 50) -> list[Memory]:
        """At most ``limit`` memories that ``listing`` keeps, newest first, whatever the
        conversation: for the ones who look after them (the HTTP API, the console, the
        CLI), who judge who may see which (``recollection.concerns``) themselves."""
        return [] if limit <= 0 else await self._store.list_memories(listing, limit)

    async def lookup(self, memory_id: str) -> Memory | None:
        """The memory, whatever the conversation (as ``listing``)."""
        return await self._store.get_memory(memory_id)

    async def erase(self, memory_id: str) -> bool:
        """Remove the memory, whatever the conversation (as ``listing``); False if none."""
        return await self._store.delete_memory(memory_id)

    async def erase_person(self, user: str) -> int:
        """Remove every memory ``user`` (``slack:U123``) said or that is about them, with
        the calls that put them, in one write, whatever the conversation (as ``listing``);
        how many went. What someone asks when a person is to be forgotten."""
        return await self._store.erase_person(user)

    async def rewrite(self, memory_id: str, text: str, by: str) -> Memory | None:
        """Change its text, recording who, whatever the conversation (as ``listing``); the
        memory as edited, or None if there is none."""
        return await self._store.edit_memory(memory_id, _text(text), by, self._clock())

    async def get(self, memory_id: str, here: Here) -> Memory | None:
        """The memory, if it is visible ``here`` (else None, as if there were none)."""
        found = await self._store.get_memory(memory_id)
        return found if found is not None and visible(found, here) else None

    async def forget(self, memory_id: str, here: Here, call: str | None = None) -> bool:
        """Remove a memory visible ``here``; False if there is none (or it is not visible
        here: a conversation removes only what it may see). A ``call`` that already took
        effect changes nothing and gets the answer it got then."""
        found = await self._store.get_memory(memory_id)
        if found is not None and not visible(found, here):
            return False
        return await self._store.delete_memory(memory_id, call)

    async def edit(self, memory_id: str, text: str, by: str, here: Here) -> Memory | None:
        """Change the text of a memory visible ``here``, recording who; the memory as edited,
        or None if there is none visible here."""
        text = _text(text)
        if await self.get(memory_id, here) is None:
            return None
        return await self._store.edit_memory(memory_id, text, by, self._clock())


def _text(text: str) -> str:
    """A memory's new text, stripped; ``MemoryRefused`` if empty or too long."""
    text = text.strip()
    if not text or len(text) > MAX_MEMORY_CHARS:
        raise MemoryRefused(f"a memory is 1 to {MAX_MEMORY_CHARS:,} characters")
    return text
