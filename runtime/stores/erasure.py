"""Erasing a thread: what of a store is a thread's, and the one write that removes it.

A thread's own data is its entries; its runs, with their state changes; the outbox records
of those runs; the votes on them; the notes scoped to it (``thread_scope``: its memory) and
to its runs (``stop_scope``: a person's stop of one); the memories it sourced or that are
kept for it (``MemoryStore.memories_of_thread``), with the calls that put them; the
control requests about its runs; its lease, once expired; and the files (blobs) it names
that no other thread names.
``ThreadEraser.delete_thread`` removes all of it in one durable write, or nothing, and
leaves nothing of the thread behind. The names are made here, for the store and for the
runtime that writes them (``leases``, ``stops``, the ``memory`` tools).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Erased", "ThreadEraser", "named_digests", "stop_scope", "thread_lease",
           "thread_scope"]


def thread_scope(thread_id: str) -> str:
    """The scope of a thread's own notes (the ``memory`` tools' ``scope = "thread"``)."""
    return f"thread:{thread_id}"


def stop_scope(run_id: str) -> str:
    """The scope of the note that records a person's stop of a run (``stops``)."""
    return f"maiden:stop:{run_id}"


def thread_lease(thread_id: str) -> str:
    """The name of the lease a process holds while it drives the thread (``leases``)."""
    return f"thread:{thread_id}"


@dataclass(frozen=True, slots=True)
class Erased:
    """What ``delete_thread`` removed; all zero when there was no such thread (never
    written, or erased already)."""

    thread_id: str
    entries: int = 0
    runs: int = 0
    deliveries: int = 0
    votes: int = 0
    notes: int = 0
    blobs: int = 0
    memories: int = 0

    @property
    def existed(self) -> bool:
        """Whether there was a thread to erase (every thread has a run)."""
        return bool(self.runs or self.entries)


class ThreadEraser(Protocol):
    """Erasing a thread and everything of it (the module's docstring says what that is)."""

    async def delete_thread(self, thread_id: str) -> Erased:
        """Remove the thread's data in one durable write: all of it, or nothing. A thread
        with a run that has not ended is not touched (``StaleWrite``: cancel it first). A
        thread never written is no error: nothing is removed (``Erased.existed`` False).
        A blob is kept while any other thread's entry, run or outbox record names it (one
        stored for another thread's message at that very moment, and not yet named by it,
        is not known to be wanted: its entry may then name a file that is gone)."""


_DIGEST_FIELD = re.compile(r'"digest":"([0-9a-f]{64})"')
"""A file's ``digest`` field in stored JSON (compact, as pydantic writes it). A quote inside
a string is escaped (``\\"``), so text a person wrote never matches: only a field does."""


def named_digests(texts: Iterable[str]) -> set[str]:
    """The blobs the stored JSON ``texts`` name (every ``"digest"`` field of 64 hex)."""
    return {digest for text in texts for digest in _DIGEST_FIELD.findall(text)}
