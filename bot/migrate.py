"""`maiden migrate --from sqlite:PATH [--to postgres]`: copy one store into another.

What is copied, through the store contract only (so any backend to any backend): every
thread with its entries (in pages), every run as it stands (state, counters, decisions,
pending approval, idempotency key: a schedule slot's claim or a message's key stays
taken) with every state change, the outbox (sent and unsent records, with their message
ids), schedule records, notes (of the older memory tools, and the record that they became
memories) and the note calls applied, memories (same ids, provenance, expiry) and the
memory calls applied (so that a call re-run in the new store still changes nothing more),
people's votes on replies, and files' blobs (first: every message that names one finds
it). Requests between processes and heartbeats are not: they belong to the processes of
the old store; nor are the knowledge folders' passages, which the first index pass on the
new store makes again from the folders (``serving.knowledge``: what it finds unindexed it
indexes).
The source must exist (opening a ``sqlite:`` or ``files:`` path that is not there would
create an empty store, and copy nothing) and the target must be empty; after the copy, the
counts of both are compared and any difference is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from runtime import (
    ADOPTED_NOTES,
    Checkpoint,
    Listing,
    MaidenError,
    Memory,
    Store,
    StoreConfig,
    make_store,
)

__all__ = ["Counts", "copy_store", "count_store", "missing_source", "open_spec"]

PAGE = 2_000
"""Entries per checkpoint written to the target."""
ALL = 2**62
"""As many as there are (a listing's limit)."""


@dataclass
class Counts:
    threads: int = 0
    entries: int = 0
    runs: int = 0
    transitions: int = 0
    deliveries: int = 0
    schedules: int = 0
    notes: int = 0
    note_calls: int = 0
    memories: int = 0
    memory_calls: int = 0
    votes: int = 0
    blobs: int = 0

    def differences(self, other: Counts) -> list[str]:
        return [f"{f.name}: {getattr(self, f.name):,} in the source, "
                f"{getattr(other, f.name):,} in the target"
                for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


def open_spec(spec: str, configured: StoreConfig, base_dir: Path) -> Store:
    """A store from ``sqlite:PATH``, ``files:PATH``, or ``postgres`` (the ``[store]``
    section's ``dsn_env``, ``schema`` and ``pool_size``)."""
    kind, _, path = spec.partition(":")
    if kind == "postgres" and not path:
        return make_store(configured.model_copy(update={"kind": "postgres"}), base_dir)
    if kind in ("sqlite", "files") and path:
        return make_store(StoreConfig(kind=kind, path=path), base_dir)
    raise MaidenError(f"{spec!r} is not a store: use sqlite:PATH, files:PATH or postgres")


def missing_source(spec: str, base_dir: Path) -> str | None:
    """Why ``spec`` cannot be copied from: its ``sqlite:`` file or ``files:`` folder is not
    there (opening it would create an empty one). None if it is there, and for anything
    else (``open_spec`` judges the form; a PostgreSQL schema is opened to be read)."""
    kind, _, path = spec.partition(":")
    if kind not in ("sqlite", "files") or not path:
        return None
    where = base_dir / Path(path).expanduser()  # an absolute path stays as it is
    if where.exists():
        return None
    return f"there is no {'database file' if kind == 'sqlite' else 'store folder'} at {where}"


async def count_store(store: Store) -> Counts:
    counts = Counts()
    threads = await store.list_threads()
    counts.threads = len(threads)
    for thread in threads:
        counts.entries += await store.thread_length(thread.id)
        runs = await store.list_runs(thread_id=thread.id)
        counts.runs += len(runs)
        for run in runs:
            counts.transitions += len(await store.transitions(run.id))
            counts.deliveries += len(await store.deliveries(run_id=run.id))
    for scope in [*(f"thread:{thread.id}" for thread in threads), "agent", ADOPTED_NOTES]:
        counts.notes += len(await store.notes(scope))
        counts.note_calls += len(await store.note_calls(scope))
    counts.memories = len(await _memories(store))
    counts.memory_calls = len(await store.memory_calls())
    counts.schedules = len(await store.schedule_records())
    counts.votes = len(await store.votes())
    counts.blobs = len(await store.blobs())
    return counts


async def copy_store(source: Store, target: Store,
                     progress: Callable[[str], None] = lambda _: None) -> Counts:
    """Copy everything from ``source`` into the empty ``target``; returns what was copied,
    or raises ``MaidenError`` naming what differs."""
    if await target.list_threads(limit=1) or await target.schedule_records():
        raise MaidenError("the target store is not empty: migrate into a new database "
                          "(or schema) only")
    blobs = await source.blobs()
    for blob in blobs:
        await target.put_blob(await source.get_blob(blob.digest), blob.media_type,
                              blob.created_at)
    if blobs:
        progress(f"  {len(blobs):,} files")
    threads = await source.list_threads()
    for number, thread in enumerate(reversed(threads), 1):  # oldest first
        runs = await source.list_runs(thread_id=thread.id)
        if not runs:
            raise MaidenError(f"thread {thread.id!r} has entries but no runs: it cannot be "
                              "written through the store contract")
        for run in runs:
            await target.create_run(run)
        length = await source.thread_length(thread.id)
        for offset in range(0, length, PAGE):
            page = await source.load_entries(thread.id, offset=offset, limit=PAGE)
            await target.commit(Checkpoint(thread_id=thread.id, position=offset,
                                           entries=page))
        steps = [t for run in runs for t in await source.transitions(run.id)]
        outbox = [d for run in runs for d in await source.deliveries(run_id=run.id)]
        if steps or outbox:
            await target.commit(Checkpoint(thread_id=thread.id, position=None,
                                           transitions=steps, deliveries=outbox))
        await _copy_notes(source, target, f"thread:{thread.id}")
        if number % 100 == 0 or number == len(threads):
            progress(f"  {number:,}/{len(threads):,} threads")
    await _copy_notes(source, target, "agent")
    await _copy_notes(source, target, ADOPTED_NOTES)
    await _copy_memories(source, target, progress)
    await target.save_schedules(await source.schedule_records())
    for vote in await source.votes():
        await target.put_vote(vote)
    copied, found = await count_store(source), await count_store(target)
    wrong = copied.differences(found)
    if wrong:
        raise MaidenError("the copy does not match the source: " + "; ".join(wrong))
    return found


async def _copy_notes(source: Store, target: Store, scope: str) -> None:
    for note in await source.notes(scope):
        await target.put_note(note)
    await target.save_note_calls(await source.note_calls(scope))


async def _memories(store: Store) -> list[Memory]:
    """Every memory of ``store``, expired ones too, oldest first."""
    return list(reversed(await store.list_memories(Listing(), ALL)))


async def _copy_memories(source: Store, target: Store,
                         progress: Callable[[str], None]) -> None:
    """Each memory as it is (its id, provenance, expiry, edits), oldest first, then the
    calls that put or deleted them (a ``remember`` re-run finds its call applied)."""
    memories = await _memories(source)
    for memory in memories:
        await target.put_memory(memory)
    await target.save_memory_calls(await source.memory_calls())
    if memories:
        progress(f"  {len(memories):,} memories")
