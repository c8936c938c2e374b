"""The SQLite search's short cuts (``stores/sqlite/recall.py``): the words' counts kept by
every write, and a search by its rarer words that still finds what holding a common word
too makes best, however far down the index alone ranks it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runtime.model.memories import Cover, Memory, Provenance, WorkspaceScope, scope_key
from runtime.stores.sqlite import SQLiteStore

WHERE = Cover(scopes=(scope_key(WorkspaceScope()),), places=(), at=100.0)


def _memory(memory_id: str, text: str, at: float = 1.0) -> Memory:
    return Memory(id=memory_id, text=text, scope=WorkspaceScope(),
                  provenance=Provenance(thread_id="t", at=at), created_at=at, updated_at=at)


def _counts(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT word, memories FROM memory_words"))


async def test_every_write_keeps_the_counts(tmp_path: Path) -> None:
    path = tmp_path / "maiden.db"
    async with SQLiteStore(path, synchronous="off") as store:
        await store.put_memory(_memory("a", "the zebra, the lion"))
        await store.put_memory(_memory("b", "a zebra"))
        assert _counts(path) == {"": 2, "the": 1, "zebra": 2, "lion": 1, "a": 1}
        await store.put_memory(_memory("b", "an okapi"))  # put again: its text replaced
        assert _counts(path) == {"": 2, "the": 1, "zebra": 1, "lion": 1, "an": 1, "okapi": 1}
        await store.edit_memory("a", "the lion", "slack:U1", 2.0)
        assert _counts(path) == {"": 2, "the": 1, "lion": 1, "an": 1, "okapi": 1}
        assert await store.delete_memory("b") is True
        assert await store.delete_memory("b") is False
        assert _counts(path) == {"": 1, "the": 1, "lion": 1}


async def test_a_common_word_lifts_a_match_the_index_ranks_last(tmp_path: Path) -> None:
    # 1,000 memories: "note" in a fifth of them (common), "zebra" in a tenth (rarer).
    kept = [_memory(f"n{i}", f"note {i}") for i in range(200)]
    kept += [_memory(f"f{i}", f"lunch at noon {i}") for i in range(700)]
    kept += [_memory(f"z{i}", f"zebra grazes {i}", at=2.0) for i in range(99)]
    # The longest of those holding "zebra": last by bm25 over "zebra" alone.
    best = _memory("best", "zebra note grazes in the far field today", at=0.5)
    async with SQLiteStore(tmp_path / "maiden.db", synchronous="off") as store:
        for memory in (*kept, best):
            await store.put_memory(memory)
        assert await store.search_memories("zebra note", WHERE, 1) == [best]
        found = await store.search_memories("zebra note", WHERE, 3)
        assert found[0] == best and {m.id[0] for m in found[1:]} == {"z"}
        # Fewer than asked for hold "zebra": then those holding only "note" follow.
        assert len(await store.search_memories("zebra note", WHERE, 120)) == 120
