"""The files store's memories: ``memories/{sha256(id)}.json`` one file per memory, holding it
and the calls that put or deleted it, rewritten whole under its lock (so a call and what it
did land in one atomic write). A deleted memory leaves its calls (a tombstone with no
memory), so that a call re-run after a crash changes nothing more. A search is a plain scan
of every file, scoring the query's words each memory holds: the files store is for a
small team on one machine, where that is a few milliseconds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from ...model.memories import (
    Cover,
    Listing,
    Memory,
    MemoryCall,
    PersonScope,
    ThreadScope,
    confinement,
    listed,
    scope_key,
)
from ...model.memories import words as words_of
from ..base import MEMORY_CALLS_KEPT, MemoryStore
from .core import FilesCore, parse_file
from .names import key_file_name

__all__ = ["FilesMemories", "memory_files_of_thread"]


class FilesMemories(FilesCore, MemoryStore):
    """The files store's ``MemoryStore``."""

    async def put_memory(self, memory: Memory, call: str | None = None) -> bool:
        return await self._disk.io(self._change_memory, memory.id, memory, call)

    async def get_memory(self, memory_id: str) -> Memory | None:
        return await self._disk.io(self._get_memory, memory_id)

    async def delete_memory(self, memory_id: str, call: str | None = None) -> bool:
        return await self._disk.io(self._change_memory, memory_id, None, call)

    async def edit_memory(self, memory_id: str, text: str, by: str, at: float
                          ) -> Memory | None:
        return await self._disk.io(self._edit_memory, memory_id, text, by, at)

    async def search_memories(self, query: str, where: Cover, limit: int) -> list[Memory]:
        return await self._disk.io(self._search_memories, query, where, limit)

    async def list_memories(self, listing: Listing, limit: int) -> list[Memory]:
        return await self._disk.io(self._list_memories, listing, limit)

    async def memories_of_thread(self, thread_id: str) -> list[Memory]:
        return await self._disk.io(self._memories_of_thread, thread_id)

    async def erase_person(self, user: str) -> int:
        return await self._disk.io(self._erase_person, user)

    async def memory_calls(self) -> list[MemoryCall]:
        return await self._disk.io(self._memory_calls)

    async def save_memory_calls(self, calls: Sequence[MemoryCall]) -> None:
        await self._disk.io(self._save_memory_calls, list(calls))

    # -- synchronous work, run in a worker thread

    def _memory_path(self, memory_id: str) -> Path:
        return self._folder("memories") / f"{key_file_name(memory_id)}.json"

    def _filed(self, path: Path) -> _Filed | None:
        return parse_file(path, _Filed) if path.exists() else None

    def _get_memory(self, memory_id: str) -> Memory | None:
        filed = self._filed(self._memory_path(memory_id))
        return None if filed is None else filed.memory

    def _change_memory(self, memory_id: str, memory: Memory | None, call: str | None) -> bool:
        """Put (``memory``) or delete under the memory's lock: a call found among its calls
        is not applied again (a put answers False, a delete what it answered then)."""
        path = self._memory_path(memory_id)
        with self._disk.lock(path.with_suffix(".lock")):
            stored = self._filed(path) or _Filed(id=memory_id)
            done = stored.calls.get(call) if call is not None else None
            if done is not None:
                return done.existed if memory is None else False
            existed = stored.memory is not None
            calls = stored.calls
            if call is not None:
                record = MemoryCall(call=call, memory_id=memory_id, forget=memory is None,
                                    existed=existed and memory is None)
                calls = dict(list((calls | {call: record}).items())[-MEMORY_CALLS_KEPT:])
            if memory is None and not calls:
                self._disk.remove([path])  # nothing to keep of it
            else:
                self._disk.write(path, _Filed(id=memory_id, memory=memory, calls=calls)
                                 .model_dump_json().encode())
        return existed if memory is None else True

    def _edit_memory(self, memory_id: str, text: str, by: str, at: float) -> Memory | None:
        path = self._memory_path(memory_id)
        with self._disk.lock(path.with_suffix(".lock")):
            stored = self._filed(path)
            if stored is None or stored.memory is None:
                return None
            edited = Memory.model_validate(stored.memory.model_dump() | {
                "text": text, "edited_by": by, "updated_at": at})
            self._disk.write(path, stored.model_copy(update={"memory": edited})
                             .model_dump_json().encode())
        return edited

    def _all_memories(self) -> list[Memory]:
        found = []
        for path in sorted(self._folder("memories").glob("*.json")):
            filed = self._filed(path)  # None: deleted meanwhile
            if filed is not None and filed.memory is not None:
                found.append(filed.memory)
        return found

    def _search_memories(self, query: str, where: Cover, limit: int) -> list[Memory]:
        wanted = set(words_of(query))
        scopes, places = set(where.scopes), set(where.places)
        scored: list[tuple[tuple[int, int], Memory]] = []
        for memory in self._all_memories():
            confined = confinement(memory.provenance)
            if scope_key(memory.scope) not in scopes or (
                    confined is not None and confined not in places) or (
                    memory.expires_at is not None and memory.expires_at <= where.at):
                continue
            held = Counter(words_of(memory.text))
            score = (sum(1 for w in wanted if held[w]), sum(held[w] for w in wanted))
            if not wanted or score[0]:
                scored.append((score, memory))
        scored.sort(key=lambda found: (found[0], found[1].updated_at), reverse=True)
        return [memory for _, memory in scored[:limit]]

    def _list_memories(self, listing: Listing, limit: int) -> list[Memory]:
        wanted = set(words_of(listing.query))
        found = [m for m in self._all_memories() if listed(m, listing)
                 and (not wanted or wanted & set(words_of(m.text)))]
        found.sort(key=lambda m: m.updated_at, reverse=True)
        return found[:limit]

    def _erase_person(self, user: str) -> int:
        """Remove each file (its calls with it) whose memory concerns ``user``, checked
        again under its lock (left: it holds nothing). One file at a time, each removal
        durable: a kill part-way leaves the rest to the erasure asked again (a memory is a
        file of its own here, and the store has no write across files)."""
        gone = 0
        for memory in self._all_memories():
            if not _of_person(memory, user):
                continue
            path = self._memory_path(memory.id)
            with self._disk.lock(path.with_suffix(".lock")):
                stored = self._filed(path)
                if stored is None or stored.memory is None or \
                        not _of_person(stored.memory, user):
                    continue
                self._disk.remove([path])
                gone += 1
        return gone

    def _memory_calls(self) -> list[MemoryCall]:
        found: list[MemoryCall] = []
        for path in sorted(self._folder("memories").glob("*.json")):
            filed = self._filed(path)
            if filed is not None:
                found += filed.calls.values()
        return found

    def _save_memory_calls(self, calls: list[MemoryCall]) -> None:
        """Each call into its memory's file, unless recorded already (in any: a call is
        filed with the memory it named then)."""
        recorded = {c.call for c in self._memory_calls()}
        calls = [c for c in calls if c.call not in recorded]
        for memory_id in dict.fromkeys(c.memory_id for c in calls):
            path = self._memory_path(memory_id)
            with self._disk.lock(path.with_suffix(".lock")):
                stored = self._filed(path) or _Filed(id=memory_id)
                added = {c.call: c for c in calls
                         if c.memory_id == memory_id and c.call not in stored.calls}
                kept = dict(list((stored.calls | added).items())[-MEMORY_CALLS_KEPT:])
                self._disk.write(path, stored.model_copy(update={"calls": kept})
                                 .model_dump_json().encode())

    def _memories_of_thread(self, thread_id: str) -> list[Memory]:
        return sorted((m for m in self._all_memories() if _of_thread(m, thread_id)),
                      key=lambda m: m.created_at)



def memory_files_of_thread(folder: Path, thread_id: str) -> list[Path]:
    """The files (with their locks) of the memories in ``folder`` the thread sourced or that
    are kept for it: what ``erase`` removes."""
    gone = []
    for path in sorted(folder.glob("*.json")):
        filed = parse_file(path, _Filed) if path.exists() else None
        if filed is not None and filed.memory is not None and \
                _of_thread(filed.memory, thread_id):
            gone += [path, path.with_suffix(".lock")]
    return gone


def _of_person(memory: Memory, user: str) -> bool:
    return memory.provenance.user == user or \
        scope_key(memory.scope) == scope_key(PersonScope(user=user))


def _of_thread(memory: Memory, thread_id: str) -> bool:
    return memory.provenance.thread_id == thread_id or \
        scope_key(memory.scope) == scope_key(ThreadScope(thread_id=thread_id))


class _Filed(BaseModel):
    id: str
    memory: Memory | None = None
    """None: deleted (its calls kept)."""
    calls: dict[str, MemoryCall] = {}
    """By idempotency key, oldest first (a JSON object keeps its order)."""
