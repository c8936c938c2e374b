"""The end of a thread, loaded without the rest: what a run needs to go on in O(window).

A ``Tail`` indexes like the whole thread (``len`` is the thread's length, ``tail[i]`` is
entry ``i``) but holds only the entries from ``base`` on; asking for one before ``base``
is an error rather than a silent wrong answer. Summary notices before ``base`` are
described by the store (how many, and the newest), so that what the model is told about
the dropped start of the thread is the same as with the whole thread loaded.

A ``ThreadCache`` keeps the entries of the threads loaded last, each from some entry
on: entries are only ever appended, so what it holds stays true and only the entries
since need reading (the SQL stores' caches; the driver's lists of the threads its runs
left).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from itertools import pairwise
from typing import overload

from ..model.entries import SUMMARY, Entry, Notice, UserMessage
from ..model.tokens import entry_tokens

__all__ = ["Tail", "ThreadCache", "first_loaded", "is_summary", "tail_of"]


class Tail(Sequence[Entry]):
    """Entries ``base`` to the end of a thread, indexed as in the whole thread."""

    __slots__ = ("base", "loaded", "summaries_before", "summary_before", "tokens")

    def __init__(self, base: int, loaded: list[Entry], *, summaries_before: int = 0,
                 summary_before: Notice | None = None, tokens: list[int] | None = None
                 ) -> None:
        self.base = base
        self.loaded = loaded
        self.tokens = tokens or []
        """The estimated tokens of the first loaded entries, if the store keeps them (what
        ``context.entry_tokens`` gives: it need not be worked out again)."""
        self.summaries_before = summaries_before
        """How many summary notices the thread holds before ``base``."""
        self.summary_before = summary_before
        """The newest of them, if any."""

    def __len__(self) -> int:
        return self.base + len(self.loaded)

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if start < self.base and start < stop:
                raise IndexError(f"entries before {self.base} are not loaded")
            return self.loaded[start - self.base:max(stop - self.base, 0):step]
        if index < 0:
            index += len(self)
        if index < self.base:
            raise IndexError(f"entry {index} is not loaded (the tail starts at {self.base})")
        return self.loaded[index - self.base]

    def __iter__(self) -> Iterator[Entry]:
        if self.base:
            raise IndexError(f"entries before {self.base} are not loaded: iterate .loaded")
        return iter(self.loaded)

    def __reversed__(self) -> Iterator[Entry]:
        return reversed(self.loaded)

    def extend(self, entries: Iterable[Entry]) -> None:
        self.loaded.extend(entries)

    def __repr__(self) -> str:
        return f"Tail(base={self.base}, loaded={len(self.loaded)})"


def first_loaded(entries: Sequence[Entry]) -> int:
    """The index of the first entry held: a tail's base, 0 for a whole thread."""
    return entries.base if type(entries) is Tail else 0


def is_summary(entry: Entry) -> bool:
    return isinstance(entry, Notice) and entry.code == SUMMARY


def tail_of(entries: list[Entry], tokens: int, start: int | None = None) -> Tail:
    """``Store.load_tail``'s answer computed from the whole thread (for a store that holds
    it anyway, and as the definition the others are tested against)."""
    sums, total = [], 0
    for entry in entries:
        total += entry_tokens(entry)
        sums.append(total)
    base = next((i for i in range(len(entries) - 1, -1, -1)
                 if isinstance(entries[i], UserMessage) and sums[i] <= total - tokens), 0)
    if start is not None:
        base = min(base, max(start, 0))
    summaries = [e for e in entries[:base] if is_summary(e)]
    newest = summaries[-1] if summaries else None
    assert newest is None or isinstance(newest, Notice)
    return Tail(base, entries[base:], summaries_before=len(summaries), summary_before=newest,
                tokens=[now - then for then, now in pairwise([0, *sums])][base:])


class ThreadCache:
    """Validated entries of the threads loaded last, each from some entry on (a tail, or
    the whole thread from 0), up to ``limit`` entries in all (LRU)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._threads: OrderedDict[str, tuple[int, list[Entry]]] = OrderedDict()
        self._size = 0

    def __contains__(self, thread_id: str) -> bool:
        return thread_id in self._threads

    def start(self, thread_id: str) -> int | None:
        """Where what is held of the thread starts; None for a thread not held."""
        held = self._threads.get(thread_id)
        return None if held is None else held[0]

    def pop(self, thread_id: str) -> tuple[int, list[Entry]]:
        """``(base, entries from base on)``; ``(0, [])`` for a thread not held."""
        base, entries = self._threads.pop(thread_id, (0, []))
        self._size -= len(entries)
        return base, entries

    def put(self, thread_id: str, base: int, entries: list[Entry]) -> None:
        self.pop(thread_id)  # a concurrent load may have put it back meanwhile
        if len(entries) > self.limit:
            return
        self._threads[thread_id] = (base, entries)
        self._grown(len(entries))

    def extend(self, thread_id: str, position: int, entries: Sequence[Entry]) -> None:
        """``entries`` were just committed at ``position``: a thread held up to there holds
        them too (what the next load would read back), any other is left as it is."""
        held = self._threads.get(thread_id)
        if held is None or not entries or held[0] + len(held[1]) != position:
            return
        held[1].extend(entries)
        self._grown(len(entries))

    def _grown(self, by: int) -> None:
        """``by`` more entries are held: over the limit, the least recent threads go."""
        self._size += by
        while self._size > self.limit:
            _, (_, dropped) = self._threads.popitem(last=False)
            self._size -= len(dropped)

    def clear(self) -> None:
        self._threads.clear()
        self._size = 0
